"""The console's data thread: the hub polls, the engine judges, immutable frames go to the screen.

The screen never waits on the network: it receives a Frame (a Snapshot, the
findings judged on it, a window of history for sparklines) and only renders.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from advisors.model import Finding
from collectors.model import Snapshot


@dataclass(frozen=True, slots=True)
class Frame:
    snapshot: Snapshot
    findings: tuple[Finding, ...]
    history: tuple[Snapshot, ...]  # oldest first, the latest last: for sparklines
    paused: bool = False


class Feed:
    """Live frames: a Hub and an Engine in a thread of their own."""

    def __init__(self, sources: Sequence[Any], engine: Any, interval: float = 1.0,
                 timeout: float = 10.0, keep: int = 120) -> None:
        from collectors.hub import Hub

        self.hub = Hub(sources, interval=interval, timeout=timeout)
        self.engine = engine
        self.interval = interval
        self.keep = keep
        self.paused = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_frame: Callable[[Frame], None]) -> None:
        self.hub.start()
        self._thread = threading.Thread(target=self._run, args=(on_frame,), name="feed",
                                        daemon=True)
        self._thread.start()

    def _run(self, on_frame: Callable[[Frame], None]) -> None:
        self.hub.wait_polls(1, timeout=self.hub.longest_poll + 1)
        while not self._stop.is_set():
            started = time.monotonic()
            if not self.paused:
                snap = self.hub.snapshot()
                findings = tuple(self.engine.evaluate(self.hub.history))
                history = tuple(self.hub.history)[-self.keep:]
                on_frame(Frame(snap, findings, history))
            self._stop.wait(max(0.05, self.interval - (time.monotonic() - started)))

    def set_interval(self, seconds: float) -> float:
        self.interval = min(60.0, max(0.25, seconds))
        self.hub.set_interval(self.interval)
        return self.interval

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.hub.stop()


class StaticFeed:
    """Frames given in advance (tests, screenshots): the same interface, no thread."""

    def __init__(self, frames: Sequence[Frame]) -> None:
        self.frames = list(frames)
        self.interval = 1.0
        self.paused = False

    def start(self, on_frame: Callable[[Frame], None]) -> None:
        for frame in self.frames:
            on_frame(frame)

    def set_interval(self, seconds: float) -> float:
        self.interval = min(60.0, max(0.25, seconds))
        return self.interval

    def stop(self) -> None:
        pass
