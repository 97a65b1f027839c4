"""A replay seeking back resumes from a checkpoint, and judges as a fresh start would."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormdeck.advisors.engine import Engine
from stormdeck.collectors.model import Snapshot
from stormdeck.collectors.recording import Recording
from stormdeck.tui.feed import Frame, ReplayFeed
from tests.captured import history, with_cluster, with_daemon
from tests.unit.test_recording import record


def incident(s: Snapshot, i: int) -> Snapshot:
    s = with_daemon(s, "osd.1", up=not (40 <= i < 44 or 50 <= i < 53 or 160 <= i < 170),
                    commit_latency=0.2 if 100 <= i < 220 else 0.002)
    if 120 <= i < 150:
        s = with_cluster(s, num_pgs=65, pg_states={"peering": 60, "active+clean": 5},
                         pg_flags={"peering": 60, "active": 5})
    return s


def shown(frame: Frame) -> tuple:
    return (frame.snapshot.time,
            [(f.rule, f.target, f.state, f.summary, f.first_seen) for f in frame.findings],
            [(e.time, e.text) for e in frame.events])


@pytest.fixture
def tape(tmp_path: Path) -> Path:
    record(tmp_path / "r.sdrec", history(300, step=1.0, edit=incident))
    return tmp_path / "r.sdrec"


def test_seeking_back_from_a_checkpoint_shows_what_a_fresh_start_shows(tape: Path) -> None:
    feed = ReplayFeed(Recording(tape), Engine, scrollback=30)
    feed.CHECKPOINT_EVERY = 20
    feed._run = lambda: None  # type: ignore[method-assign]  # seeks only, no playing
    frames: list[Frame] = []
    judged = []
    produce = feed._produce

    def counted(emit: bool) -> bool:
        judged.append(1)
        return produce(emit)
    feed._produce = counted  # type: ignore[method-assign]
    feed.start(frames.append)
    feed.seek(feed.recording.end)
    assert feed._checkpoints, "judging made checkpoints"
    for back in (150, 137, 61):  # each beyond the 30 frames of look-back
        when = feed.recording.start + back
        judged.clear()
        feed.seek(when)
        assert len(judged) <= feed.CHECKPOINT_EVERY, "resumed, not judged from the start"
        fresh: list[Frame] = []
        other = ReplayFeed(Recording(tape), Engine, start=when)
        other._run = lambda: None  # type: ignore[method-assign]
        other.start(fresh.append)
        assert shown(frames[-1]) == shown(fresh[-1])
        other.stop()
    feed.stop()
