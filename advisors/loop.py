"""The one data loop (collect, merge, keep, judge, record) that the console, `record`,
`check --for` and validate all run; no screen in it.

The hub's merge is pure: it returns a Snapshot. This loop is what appends it
to the History and hands it to the Session (engine, timeline, recorder), so
each snapshot is kept once and judged once, whoever asked for it.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from stormdeck.advisors.session import Session, Step
from stormdeck.collectors.hub import History, Hub
from stormdeck.collectors.model import Snapshot

# A replay (or report) starting or seeking at snapshot N judges again from this many
# snapshots before it, so that rules with windows and for-durations (the longest:
# a 300 s window and a 300 s for-duration) see what they saw live, with room to spare.
REPLAY_RUNUP = 900

# Ten minutes of History at 10,000 OSDs are millions of objects that live for minutes
# and die by reference counting, never in cycles. Python's full collections scan them
# all (0.6 s each, every few seconds there: 12% of a core). So after each tick the loop
# moves what is alive into the permanent generation, and once per GC_EVERY ticks takes
# it all out for one full collection (cyclic garbage among frozen objects is freed then).
GC_EVERY = 300


class Loop:
    """A Hub, the History it fills and a Session that judges each snapshot."""

    def __init__(self, sources: Sequence[Any], engine: Any = None, interval: float = 1.0,
                 timeout: float = 10.0, keep: int = 600, recorder: Any = None,
                 journal: Any = None, session: Session | None = None) -> None:
        self.hub = Hub(sources, interval=interval, timeout=timeout)
        self.history = History(keep)
        self.session = session if session is not None else \
            (Session(engine, recorder=recorder, journal=journal) if engine is not None else None)
        self.interval = interval
        self.ticks = 0
        self.missed = 0  # ticks that came later than a whole interval after they were due
        self.tick_seconds: float | None = None  # CPU-bound wall time of the last tick

    @property
    def engine(self) -> Any:
        return self.session.engine if self.session is not None else None

    def start(self, first_polls: int = 1) -> None:
        """Start the sources and wait until each has answered `first_polls` times (or hung)."""
        self.hub.start()
        self.hub.wait_polls(first_polls, timeout=self.hub.longest_poll * first_polls
                            + self.interval + 1)

    def collect(self) -> Snapshot:
        """Merge what the sources hold now, and keep it in the History."""
        snap = self.hub.snapshot()
        self.history.append(snap)
        return snap

    def tick(self) -> Step:
        """One turn: collect, keep, judge, record."""
        if self.session is None:
            raise ValueError("a loop without an engine only collects")
        started = time.perf_counter()
        snap = self.collect()
        step = self.session.step(snap, self.history)
        self.ticks += 1
        if self.ticks % GC_EVERY == 0:
            gc.unfreeze()
            gc.collect()
        gc.freeze()  # cheap: the young generations are moved, not scanned
        self.tick_seconds = time.perf_counter() - started
        return step

    def run(self, on_step: Callable[[Step], None] | None = None,
            stop: threading.Event | Callable[[], bool] | None = None,
            duration: float | None = None) -> None:
        """Tick every `interval` seconds until `stop` is set or `duration` has passed.

        Ticks keep to a fixed schedule (not interval after the last one ended), so a
        slow tick does not drift the clock; one that ends past the next slot skips it
        and counts as missed.
        """
        def stopped() -> bool:
            if stop is None:
                return False
            return stop.is_set() if isinstance(stop, threading.Event) else bool(stop())

        began = time.monotonic()
        due = began
        while not stopped():
            step = self.tick()
            if on_step is not None:
                on_step(step)
            now = time.monotonic()
            if duration is not None and now - began >= duration:
                return
            due += self.interval
            if now > due + self.interval:
                late = int((now - due) / self.interval)
                self.missed += late
                due += late * self.interval
            self.hub.tick_due(due)  # the sources time their polls to end before it
            wait = max(0.0, due - now)
            if isinstance(stop, threading.Event):
                if stop.wait(wait):
                    return
            else:
                time.sleep(wait)

    def set_interval(self, seconds: float) -> None:
        self.interval = seconds
        self.hub.set_interval(seconds)

    def stop(self) -> None:
        self.hub.stop()
        if self.session is not None:
            self.session.close()
        gc.unfreeze()


def collect_once(sources: Sequence[Any], polls: int = 1, timeout: float = 10.0) -> Snapshot:
    """One Snapshot after every source answered `polls` times (2 when rates must be real)."""
    loop = Loop(sources, interval=1.0, timeout=timeout, keep=1)
    loop.start(first_polls=polls)
    try:
        return loop.collect()
    finally:
        loop.stop()
