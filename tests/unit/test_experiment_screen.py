"""The console's experiment screen: a run's windows as they pass, the stop key, and the
report drawn (SVG snapshot at the SSH size), from a result the statistics computed."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import pytest

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.experiment import stats
from stormdeck.advisors.experiment.figures import FIGURES, LOAD
from stormdeck.advisors.experiment.runner import Result, Settings, WindowRun
from stormdeck.advisors.experiment.text import measure_line, report_lines
from stormdeck.advisors.plan import Plan
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import StaticFeed
from stormdeck.tui.views.experiment import ExperimentScreen
from stormdeck.tui.views.findings import FindingsView
from tests.clock import zone
from tests.unit.test_tui import frames


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    with zone("UTC"):
        yield


def result() -> Result:
    """debug_osd 20/20 as the lab saw it: write latency 58% up, IOPS a third down."""
    rnd = random.Random(7)
    order = stats.schedule(4)

    def windows(a: float, b: float) -> list[stats.Window]:
        return [stats.Window(arm, tuple((b if arm == stats.B else a) * rnd.uniform(0.9, 1.1)
                                        for _ in range(4))) for arm in order]

    lat = stats.compare("write latency", windows(0.0053, 0.0083), False)
    iops = stats.compare("write IOPS", windows(2560, 1660), True)
    reads = stats.compare("read latency", windows(0.002, 0.002), False)
    plan = Plan(id="exp-6a93135c", created=0.0, rule="experiment", target="osd",
                summary="", source="experiment", fsid=None,
                changes=(change("ceph_config", "osd", "debug_osd", "1/5", "20/20"),))
    return Result("exp-6a93135c", plan, Settings(window=4, settle=1), ("osd.0", "osd.1"),
                  tuple(WindowRun(a, 0.0, 4) for a in order), (lat, iops, reads), None, None,
                  ("read IOPS: zero in every second of window 1",),
                  ("d937792257", "4204801bdf", "12b1cf2dbd", "cf37cf0601"), False,
                  {f.name: f for f in (*FIGURES, LOAD)})


def test_the_report_says_each_verdict_and_where_the_change_stands() -> None:
    lines = report_lines(result())
    assert lines[0] == "experiment exp-6a93135c: ceph config set osd debug_osd 20/20"
    assert "worse" in lines[1] and "write latency" in lines[1]
    assert "no effect, smallest it could see" in lines[3]
    assert lines[-1].startswith("  undone: the cluster is as it was")
    measured = {"experiment": "exp-1", "load_moved": None, "figures": [
        {"figure": "write latency", "ratio": 1.58, "ci_low": 1.46, "ci_high": 1.71,
         "verdict": "worse"}, {"figure": "broken"}]}
    assert measure_line(measured) == \
        "measured by exp-1: write latency +58% (95%: +46% to +71%) worse"


def test_a_before_after_report_says_so_and_how_the_undo_lands() -> None:
    """A change that moves data, or one that takes a restart, was measured once: the
    report says it, how long the cluster took to settle, and what the undo does."""
    from dataclasses import replace

    r = replace(result(), before_after="pg_num on rbd moves data", settled_seconds=41.6,
                entries=("a1", "u1"))
    lines = report_lines(r)
    assert lines[1] == ("  before and after, not alternated: pg_num on rbd moves data; "
                        "settled 42 s after it was made, and a drift of the load over that "
                        "time is in the ratios")
    assert lines[-1] == "  undone: its data moves back now (journal a1, u1)"
    lines = report_lines(replace(r, before_after="osd_op_num_shards on osd takes effect "
                                                 "only when the OSDs restart"))
    assert lines[-1].startswith("  undone in the configuration: the OSDs run with the "
                                "change until they restart again")
    assert r.as_dict()["method"] == "before/after" and result().as_dict()["method"] == \
        "alternated"


def test_the_experiment_screen_snapshot(snap_compare) -> None:
    app = StormdeckApp(StaticFeed(frames()), cluster_name="lab")

    async def run_before(pilot) -> None:
        screen = ExperimentScreen("experiment exp-6a93135c: ceph config set osd debug_osd "
                                  "20/20")
        await pilot.app.push_screen(screen)
        screen.finished(report_lines(result()))

    assert snap_compare(app, run_before=run_before, terminal_size=(80, 24))


@pytest.mark.asyncio
async def test_c_stops_a_running_experiment_and_esc_leaves_it_running() -> None:
    app = StormdeckApp(StaticFeed(frames()), cluster_name="lab")
    stop = threading.Event()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = ExperimentScreen("experiment exp-1: ceph osd set noscrub", stop=stop)
        await app.push_screen(screen)
        screen.progress("window 2 of 8: with the change")
        await pilot.pause()
        body = str(screen.query_one("#experiment-body").render())
        assert "window 2 of 8" in body and "c: stop it" in body
        await pilot.press("c")
        assert stop.is_set()
        assert "stopping" in str(screen.query_one("#experiment-body").render())
        await pilot.press("escape")
        assert app.screen is not screen
        screen.progress("window 3 of 8")  # the run reports on, unseen: no error
        # e on the findings view brings a running experiment's screen back (one at a time).
        await pilot.press("6")
        app.query_one(FindingsView).running = screen
        await pilot.press("e")
        await pilot.pause()
        assert app.screen is screen
        assert "window 3 of 8" in str(screen.query_one("#experiment-body").render())
