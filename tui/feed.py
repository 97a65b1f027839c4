"""The console's data thread: the hub polls (or a recording plays), the engine judges,
immutable frames go to the screen.

The screen never waits on the network: it receives a Frame (a Snapshot, the
findings judged on it, a window of history, the incident's events) and only
renders. Frames already shown are kept, so the operator can look back while
collection goes on (atop's twin mode); a replay moves through its recording
with the same keys.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from stormdeck.advisors.findings import Finding
from stormdeck.advisors.loop import REPLAY_RUNUP
from stormdeck.advisors.timeline import Event
from stormdeck.collectors.hub import is_late
from stormdeck.collectors.model import Snapshot
from stormdeck.collectors.registry import part_sources


@dataclass(frozen=True, slots=True)
class Frame:
    snapshot: Snapshot
    findings: tuple[Finding, ...]
    history: tuple[Snapshot, ...]  # oldest first, the latest last: for sparklines
    events: tuple[Event, ...] = ()  # the newest, oldest first
    position: str = ""  # where in time this frame is, when not the newest live one


def clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


# Which sources each part of a Snapshot comes from is part_sources(), read from each
# source's declaration (collectors/registry.py) at every call, so a source registered
# later is marked too; merged, the first that has a value wins, so a stale one's old value
# can stand in a part another source keeps fresh.


def poll_interval(frame: Frame) -> float:
    """The time between snapshots, as the frame's history shows it (live or replayed)."""
    times = [x.time for x in frame.history[-6:]]
    gaps = sorted(b - a for a, b in itertools.pairwise(times) if b > a)
    return gaps[len(gaps) // 2] if gaps else 1.0


def stale_sources(frame: Frame) -> dict[str, float]:
    """Sources whose figures in this frame are not current: name -> their age in seconds.

    A source is stale once it has missed a poll (is_late, the header's test too): sooner
    than the hub's own verdict (a failed poll, or one hung past the timeout), which
    counts as well. In a replay the recorded times say the same.
    """
    s = frame.snapshot
    if not s.sources:
        return {}
    interval = poll_interval(frame)
    out = {}
    for name, h in s.sources.items():
        if h.last_success is None:
            continue  # nothing from it is shown: there is nothing to mark
        if is_late(h, s.time, interval):
            out[name] = max(0.0, s.time - h.last_success)
    return out


def stale_part(frame: Frame, part: str, stale: dict[str, float] | None = None) -> float | None:
    """How old the figures of `part` ("cluster", "osd", "disks", ...) may be when a source
    that feeds it is stale; None when every source feeding it is current."""
    stale = stale_sources(frame) if stale is None else stale
    ages = [stale[n] for n in part_sources().get(part, ()) if n in stale]
    return max(ages) if ages else None




class Scrollback:
    """Frames already made, for looking back; `offset` frames back from the newest is shown."""

    def __init__(self, keep: int) -> None:
        self.past: deque[Frame] = deque(maxlen=keep)
        self.offset = 0
        self.paused = False
        self._lock = threading.RLock()
        self._emit: Callable[[Frame], None] | None = None

    def _arrive(self, frame: Frame) -> None:
        with self._lock:
            self.past.append(frame)
            if self.offset or self.paused:
                # Keep showing the same frame while newer ones pile up behind it.
                self.offset = min(self.offset + 1, len(self.past) - 1)
                return
        if self._emit is not None:
            self._emit(frame)

    def _show(self) -> None:
        with self._lock:
            if not self.past:
                return
            frame = self.past[-1 - self.offset]
        where = self.position()
        if where:
            frame = replace(frame, position=where)
        if self._emit is not None:
            self._emit(frame)

    def step(self, n: int) -> None:
        """n frames forward (n > 0) or back (n < 0) through what was already seen."""
        with self._lock:
            self.offset = max(0, min(len(self.past) - 1, self.offset - n))
        self._show()

    def jump(self, seconds: float) -> None:
        """Move by `seconds` of frame time, forward or back."""
        with self._lock:
            if not self.past:
                return
            target = self.past[-1 - self.offset].snapshot.time + seconds
            times = [f.snapshot.time for f in self.past]
        best = min(range(len(times)), key=lambda i: abs(times[i] - target))
        with self._lock:
            self.offset = len(times) - 1 - best
        self._show()

    def follow(self) -> None:
        with self._lock:
            self.offset = 0
            self.paused = False
        self._show()

    def toggle_pause(self) -> bool:
        with self._lock:
            self.paused = not self.paused
            if not self.paused:
                self.offset = 0
        if not self.paused:
            self._show()
        return self.paused

    def frames(self) -> list[Frame]:
        with self._lock:
            return list(self.past)

    def position(self) -> str:
        with self._lock:
            if not self.offset or not self.past:
                return ""
            frame, newest = self.past[-1 - self.offset], self.past[-1]
        back = newest.snapshot.time - frame.snapshot.time
        return f"{clock(frame.snapshot.time)}, {back:.0f} s back"


class Feed(Scrollback):
    """Live frames: the data loop (advisors/loop.py) in a thread of its own.

    The look-back keeps as many frames as the loop's History keeps snapshots (600, ten
    minutes at 1 s), so it holds no snapshot the History does not hold already.
    """

    def __init__(self, sources: Sequence[Any], engine: Any, interval: float = 1.0,
                 timeout: float = 10.0, keep: int = 120, recorder: Any = None,
                 journal: Any = None, scrollback: int = 600) -> None:
        from stormdeck.advisors.loop import Loop

        super().__init__(scrollback)
        self.loop = Loop(sources, engine, interval=interval, timeout=timeout, keep=scrollback,
                         recorder=recorder, journal=journal)
        self.hub = self.loop.hub
        self.engine = engine
        self.session = self.loop.session
        self.interval = interval
        self.keep = keep
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_frame: Callable[[Frame], None]) -> None:
        if self._thread is not None:
            # Two data threads would tick one loop twice a second, each judging the
            # other's snapshots: a feed has one.
            raise RuntimeError("this feed has started already")
        self._emit = on_frame
        self._thread = threading.Thread(target=self._run, name="feed", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.loop.start()
        # Collection goes on while paused or looking back: the past stays whole.
        self.loop.run(lambda step: self._arrive(Frame(
            step.snapshot, step.findings, self.loop.history.last(self.keep),
            events=step.events)), stop=self._stop)

    def set_interval(self, seconds: float) -> float:
        self.interval = min(60.0, max(0.25, seconds))
        self.loop.set_interval(self.interval)
        return self.interval

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.loop.stop()


class ReplayFeed(Scrollback):
    """Frames from a recording, judged afresh by the engine, at a chosen speed.

    Its look-back keeps every frame of the run-up it judged (REPLAY_RUNUP + 1: a
    quarter of an hour at 1 s), so seeking back within that is only showing. Every
    CHECKPOINT_EVERY snapshots judged, the judging state (engine, timeline and
    the history behind it) is kept: seeking back to a time judged before resumes from
    the checkpoint before it and judges at most that many snapshots, instead of the
    whole run-up. Only a time never judged costs the run-up.
    """

    CHECKPOINT_EVERY = 60
    # Kept, the newest made: an hour at 1 s. They hold the snapshots behind them, which
    # share what did not change and are packed past the newest 130 (~50 KB a move at
    # 1,000 OSDs).
    CHECKPOINTS = 60

    def __init__(self, recording: Any, engine_factory: Callable[[], Any], speed: float = 1.0,
                 keep: int = 120, scrollback: int = REPLAY_RUNUP + 1,
                 start: float | None = None) -> None:
        super().__init__(scrollback)
        self.recording = recording
        self.engine_factory = engine_factory
        self.engine = engine_factory()
        self.speed = speed
        self.keep = keep
        self.interval = 1.0
        self.next_index = 0  # the next snapshot to judge
        self.ended = False
        self._start_at = recording.snapshot_at(start) if start is not None else 0
        self._steps: Any = None
        self.session: Any = None
        self._checkpoints: dict[int, tuple[tuple[Snapshot, ...], Any]] = {}
        self._run_from = 0  # where the current run began judging
        self._play = threading.Lock()  # one judge at a time: the player or a key
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, on_frame: Callable[[Frame], None]) -> None:
        self._emit = on_frame
        self._restart(max(0, self._start_at - REPLAY_RUNUP))
        self._advance_to(self._start_at)
        self._thread = threading.Thread(target=self._run, name="replay", daemon=True)
        self._thread.start()

    def _restart(self, index: int, resume: int | None = None) -> None:
        """Judge afresh from snapshot `index`, or go on from the checkpoint at `resume`."""
        from stormdeck.advisors.session import Session, replay

        with self._play, self._lock:
            self.past.clear()
            self.offset = 0
            self.engine = self.engine_factory()
            self.session = Session(self.engine)
            history: tuple[Snapshot, ...] = ()
            self._run_from = index
            if resume is not None:
                history, state = self._checkpoints[resume]
                self.session.restore(state)
                index = resume + 1
                self._run_from = 0  # what follows a whole checkpoint is whole too
            self._steps = replay(self.recording, self.engine, index, session=self.session,
                                 history=history)
            self.next_index = index
            self.ended = False

    def _checkpoint(self, i: int, history: tuple[Snapshot, ...]) -> None:
        # Only a state judged with its whole run-up behind it stands for a restart.
        if i % self.CHECKPOINT_EVERY or i in self._checkpoints or \
                (self._run_from and i - self._run_from < REPLAY_RUNUP):
            return
        self._checkpoints[i] = (history, self.session.checkpoint())
        while len(self._checkpoints) > self.CHECKPOINTS:
            del self._checkpoints[next(iter(self._checkpoints))]  # the oldest made

    def _produce(self, emit: bool) -> bool:
        with self._play:
            try:
                i, step, history = next(self._steps)
            except StopIteration:
                self.ended = True
                return False
            self._checkpoint(i, history)
            self.next_index = i + 1
            frame = Frame(step.snapshot, step.findings, history[-self.keep:],
                          events=step.events)
            with self._lock:
                self.past.append(frame)
                self.offset = 0
        if emit:
            self._show()
        return True

    def _advance_to(self, index: int) -> None:
        """Judge every snapshot up to `index` (so windows fill), showing only the last."""
        while self.next_index <= index and self._produce(emit=False):
            pass
        self._show()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.paused or self.offset or self.ended:
                self._wake.wait(0.2)
                self._wake.clear()
                continue
            before = self.past[-1].snapshot.time if self.past else None
            if not self._produce(emit=True):
                continue
            gap = self.past[-1].snapshot.time - before if before is not None else 1.0
            self._stop.wait(min(5.0, max(0.02, gap / self.speed)))

    def position(self) -> str:
        with self._lock:
            frame = self.past[-1 - self.offset] if self.past else None
        if frame is None:
            return "replay"
        t, start, end = frame.snapshot.time, self.recording.start, self.recording.end
        where = "end" if self.ended and not self.offset else f"x{self.speed:g}"
        return (f"REPLAY {clock(t)}  {t - start:.0f}/{end - start:.0f} s  {where}")

    def step(self, n: int) -> None:
        self.paused = True
        if n > 0 and self.offset == 0:
            for _ in range(n):
                if not self._produce(emit=False):
                    break
            self._show()
            return
        super().step(n)

    def jump(self, seconds: float) -> None:
        with self._lock:
            current = self.past[-1 - self.offset].snapshot.time if self.past else \
                self.recording.start
        self.seek(current + seconds)

    def seek(self, when: float) -> None:
        """Show the recording at `when` (epoch seconds), judged as it was then."""
        target = self.recording.snapshot_at(when)
        with self._lock:
            times = [f.snapshot.time for f in self.past]
            newest = self.next_index - 1
        oldest = newest - len(times) + 1
        if oldest <= target <= newest:
            with self._lock:
                self.offset = newest - target
            self._show()
        elif target > newest:
            self._advance_to(target)
        else:
            # From the nearest checkpoint before the target when that is shorter
            # than the run-up; else judge the whole run-up again.
            at = [k for k in self._checkpoints if target - REPLAY_RUNUP < k <= target]
            if at:
                self._restart(0, resume=max(at))
            else:
                self._restart(max(0, target - REPLAY_RUNUP))
            self._advance_to(target)
        self._wake.set()

    def toggle_pause(self) -> bool:
        self.paused = not self.paused
        self._wake.set()
        return self.paused

    def follow(self) -> None:
        with self._lock:
            self.offset = 0
        self.paused = False
        self._show()
        self._wake.set()

    def set_interval(self, seconds: float) -> float:
        """In a replay, + and - change the speed."""
        self.speed = min(64.0, max(0.25, self.interval / seconds * self.speed))
        self._wake.set()
        return self.interval

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.recording.close()


class StaticFeed(Scrollback):
    """Frames given in advance (tests, screenshots): the same interface, no thread."""

    def __init__(self, frames: Sequence[Frame]) -> None:
        super().__init__(len(frames) or 1)
        self.initial = list(frames)
        self.interval = 1.0

    def start(self, on_frame: Callable[[Frame], None]) -> None:
        self._emit = on_frame
        for frame in self.initial:
            self._arrive(frame)

    def set_interval(self, seconds: float) -> float:
        self.interval = min(60.0, max(0.25, seconds))
        return self.interval

    def stop(self) -> None:
        pass
