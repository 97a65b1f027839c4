"""The console on the recorded lab storm (assets/demo.sdrec): play, pause, step, seek, triage."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.session import RecordedJournal
from stormdeck.collectors.recording import Recording
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import ReplayFeed
from stormdeck.tui.views import Triage
from tests.unit.test_tui import waited

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "assets" / "demo.sdrec"


def console(speed: float = 1.0, start: float | None = None,
            paused: bool = False) -> tuple[StormdeckApp, ReplayFeed]:
    """The replay console; `paused`: held from the start, so that no frame plays between
    the start and the test's keys, however slow the host."""
    feed = ReplayFeed(Recording(DEMO), Engine, speed=speed, start=start)
    feed.paused = paused
    return StormdeckApp(feed, journal=RecordedJournal(DEMO), read_only=True), feed


class Looks(threading.Event):
    """The replay player's wake-up event, counting the looks it takes while it is held
    (it waits on it in its paused branch only): once the count moves after "p", nothing
    it judged before is still on its way, whatever the speed of the host."""

    def __init__(self) -> None:
        super().__init__()
        self.looks = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.looks += 1
        return super().wait(timeout)


@pytest.mark.asyncio
async def test_the_replay_plays_pauses_and_steps() -> None:
    app, feed = console(speed=16)
    feed._wake = wake = Looks()
    newest = lambda: feed.frames()[-1].snapshot.time  # noqa: E731
    async with app.run_test() as pilot:
        await pilot.pause()
        first = app.frame.snapshot.time
        await waited(pilot, lambda: app.frame.snapshot.time > first)
        assert app.frame.snapshot.time > first  # it plays
        assert "REPLAY" in app.status_line(app.frame).plain
        looks = wake.looks
        await pilot.press("p")
        await waited(pilot, lambda: wake.looks > looks)  # the player has stopped
        await waited(pilot, lambda: app.frame.snapshot.time == newest())
        held = app.frame.snapshot.time
        looks = wake.looks
        await waited(pilot, lambda: wake.looks >= looks + 2)  # held through two looks
        assert app.frame.snapshot.time == held == newest()  # paused
        await pilot.press("right_square_bracket")
        await waited(pilot, lambda: app.frame.snapshot.time != held)
        assert app.frame.snapshot.time == pytest.approx(held + 1, abs=0.2)
        await pilot.press("left_square_bracket", "left_square_bracket")
        await waited(pilot, lambda: app.frame.snapshot.time < held)
        assert app.frame.snapshot.time == pytest.approx(held - 1, abs=0.2)


@pytest.mark.asyncio
async def test_seeking_judges_the_storm_as_it_was_and_triage_shows_it() -> None:
    rec = Recording(DEMO)
    app, feed = console(speed=1, paused=True)
    async with app.run_test(size=(160, 60)) as pilot:
        await pilot.press("g")
        await pilot.press(*"+100", "enter")  # from the start: past osd.1's restart
        await waited(pilot, lambda: app.frame.snapshot.time > rec.start + 50)
        assert app.frame.snapshot.time == pytest.approx(rec.start + 100, abs=1.5)
        await pilot.press("8")
        await pilot.pause()
        text = app.query_one(Triage).render_frame(app.frame).plain
        assert "osd.1 down" in text and "osd.1 up" in text
        assert "pool lab-storm created (256 PGs)" in text
        # Back to the start: judged afresh, the later events are not there yet.
        feed.seek(rec.start)
        await waited(pilot, lambda: app.frame.snapshot.time < rec.start + 50)
        assert app.frame.snapshot.time == pytest.approx(rec.start, abs=0.01)
        assert "osd.1 down" not in app.query_one(Triage).render_frame(app.frame).plain


def test_the_demo_falls_back_to_the_recording_without_ceph() -> None:
    env = {**os.environ, "STORMDECK_NO_CEPH": "1"}
    res = subprocess.run([str(ROOT / "dev"), "demo"], capture_output=True, text=True,
                         env=env, timeout=300, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    assert "replaying the lab storm" in res.stderr
    assert "# Incident report" in res.stdout and "osd.1 down" in res.stdout


def test_the_live_feed_records_and_collects_while_the_operator_looks_back(
        tmp_path: Path) -> None:
    import time

    from stormdeck.collectors.recording import Recorder
    from stormdeck.tui.feed import Feed
    from tests.captured import CannedCeph, lab_outputs

    shown = []
    feed = Feed([CannedCeph(lab_outputs())], Engine(), interval=0.25,
                recorder=Recorder(tmp_path / "live.sdrec"))
    feed.start(shown.append)
    try:
        deadline = time.monotonic() + 10
        while len(shown) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        feed.step(-2)
        held = shown[-1]
        assert held.position.endswith("s back") and held is not feed.frames()[-1]
        kept = len(feed.frames())
        deadline = time.monotonic() + 30
        while len(feed.frames()) <= kept and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(feed.frames()) > kept  # collection goes on
        assert shown[-1].snapshot.time == held.snapshot.time  # the view stays
    finally:
        feed.stop()
    # Stopped, so that no frame can arrive between the follow and the look at it.
    feed.follow()
    assert shown[-1].snapshot.time == feed.frames()[-1].snapshot.time
    assert not shown[-1].position
    rec = Recording(tmp_path / "live.sdrec")
    assert len(rec) == len(feed.frames()) and rec.torn is None


@pytest.mark.asyncio
async def test_r_writes_an_incident_report_of_the_session(tmp_path: Path,
                                                          monkeypatch) -> None:
    from stormdeck.tui.feed import StaticFeed
    from tests.unit.test_tui import frames, incident

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    app = StormdeckApp(StaticFeed(frames(incident)))
    async with app.run_test() as pilot:
        await pilot.press("R")
        await pilot.pause()
    (md,) = (tmp_path / "stormdeck" / "reports").glob("*.md")
    text = md.read_text()
    assert "osd.1 down" in text and "raised OSD_DOWN" in text
    assert md.with_suffix(".json").exists()
