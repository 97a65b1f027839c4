"""The console on the recorded lab storm (assets/demo.sdrec): play, pause, step, seek, triage."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from advisors.engine import Engine
from advisors.session import RecordedJournal
from collectors.recording import Recording
from tui.app import StormdeckApp
from tui.feed import ReplayFeed
from tui.views import Triage

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "assets" / "demo.sdrec"


def console(speed: float = 1.0, start: float | None = None) -> tuple[StormdeckApp, ReplayFeed]:
    feed = ReplayFeed(Recording(DEMO), Engine, speed=speed, start=start)
    return StormdeckApp(feed, journal=RecordedJournal(DEMO), read_only=True), feed


@pytest.mark.asyncio
async def test_the_replay_plays_pauses_and_steps() -> None:
    app, _ = console(speed=16)
    async with app.run_test() as pilot:
        await pilot.pause(0.5)
        first = app.frame.snapshot.time
        await pilot.pause(0.5)
        assert app.frame.snapshot.time > first  # it plays
        assert "REPLAY" in app.status_line(app.frame).plain
        await pilot.press("p")
        await pilot.pause(0.2)
        held = app.frame.snapshot.time
        await pilot.pause(0.4)
        assert app.frame.snapshot.time == held  # paused
        await pilot.press("right_square_bracket")
        await pilot.pause(0.1)
        assert app.frame.snapshot.time == pytest.approx(held + 1, abs=0.2)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await pilot.pause(0.1)
        assert app.frame.snapshot.time == pytest.approx(held - 1, abs=0.2)


@pytest.mark.asyncio
async def test_seeking_judges_the_storm_as_it_was_and_triage_shows_it() -> None:
    rec = Recording(DEMO)
    app, feed = console(speed=1)
    async with app.run_test(size=(160, 60)) as pilot:
        await pilot.press("p")
        await pilot.press("g")
        await pilot.press(*"+100", "enter")  # from the start: past osd.1's restart
        await pilot.pause(0.5)
        assert app.frame.snapshot.time == pytest.approx(rec.start + 100, abs=1.5)
        await pilot.press("8")
        await pilot.pause(0.2)
        text = app.query_one(Triage).render_frame(app.frame).plain
        assert "osd.1 down" in text and "osd.1 up" in text
        assert "pool lab-storm created (256 PGs)" in text
        # Back to the start: judged afresh, the later events are not there yet.
        feed.seek(rec.start)
        await pilot.pause(0.3)
        assert app.frame.snapshot.time == pytest.approx(rec.start, abs=0.01)
        assert "osd.1 down" not in app.query_one(Triage).render_frame(app.frame).plain


def test_the_demo_falls_back_to_the_recording_without_ceph() -> None:
    env = {**os.environ, "STORMDECK_NO_CEPH": "1"}
    res = subprocess.run([str(ROOT / "dev"), "demo"], capture_output=True, text=True,
                         env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert "replaying the lab storm" in res.stderr
    assert "# Incident report" in res.stdout and "osd.1 down" in res.stdout
