"""No figure from a daemon that is not up is shown as current, and when it went down is said
from the console's own timeline (issue 42): Curve chunkservers as OSDs, in the overview,
the daemons and latency tables and the findings' evidence."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import ClassVar

import pytest

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Check, Evidence, RuleSettings, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.advisors.timeline import events_of
from stormdeck.collectors.model import Cluster, CurveCluster, Daemon, Snapshot, SourceHealth
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import Frame, StaticFeed
from stormdeck.tui.views.findings import finding_detail
from stormdeck.tui.views.overview import Overview
from tests.clock import ManualClock, zone

CS = "10.0.0.3:8200"
STEP = 5.0


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    with zone("UTC"):
        yield


def hhmmss(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t))


def ticks(states: Iterable[dict[str, Daemon]]) -> list[Snapshot]:
    """One snapshot per poll, STEP seconds apart on a ManualClock's wall time."""
    clock = ManualClock()
    out = []
    for daemons in states:
        t = clock.wall()
        out.append(Snapshot(time=t, cluster=Cluster(), daemons=daemons, disks={},
                            sources={"curve": SourceHealth("curve", True, t)},
                            curve=CurveCluster()))
        clock.advance(STEP)
    return out


def chunkserver(online: bool) -> dict[str, Daemon]:
    return {CS: Daemon(id=CS, kind="chunkserver", host="10.0.0.3", online=online,
                       raft_append_latency=0.004, write_iops=900.0, cores_used=1.5)}


def frame(snaps: list[Snapshot], events: bool = True) -> Frame:
    return Frame(snaps[-1], (), tuple(snaps), events=tuple(events_of(snaps)) if events else ())


def overview_line(f: Frame, word: str) -> str:
    view = Overview()
    view.settings = None
    text = view.render_frame(f).plain
    return next(ln for ln in text.splitlines() if ln.strip().startswith(word))


def test_a_chunkserver_seen_going_offline_is_offline_since_that_tick() -> None:
    snaps = ticks([chunkserver(True)] * 3 + [chunkserver(False)] * 4)
    line = overview_line(frame(snaps), "offline")
    assert f"offline {CS} on 10.0.0.3 since {hhmmss(snaps[3].time)} (15 s)" in line, line


def test_a_chunkserver_offline_since_before_the_history_says_so() -> None:
    snaps = ticks([chunkserver(False)] * 4)
    line = overview_line(frame(snaps), "offline")
    assert f"since before {hhmmss(snaps[0].time)}" in line, line
    # Online at one tick, then absent, then offline: the run starts after the gap.
    snaps = ticks([chunkserver(True), {}, chunkserver(False), chunkserver(False)])
    line = overview_line(frame(snaps, events=False), "offline")
    assert f"since before {hhmmss(snaps[2].time)}" in line, line


def osd(up: bool, stamp: float | None = None, **kw: object) -> dict[str, Daemon]:
    return {"osd.1": Daemon(id="osd.1", kind="osd", host="vm", up=up, in_=True,
                            down_since=None if up else stamp, **kw)}  # type: ignore[arg-type]


def test_a_stale_down_stamp_is_not_believed_over_the_timeline_for_any_kind() -> None:
    """The factored path: an OSD's stamp an hour older than the tick that saw it up
    loses to the tick that saw it go down; a stamp the timeline allows stands."""
    clock = ManualClock()
    went = clock.wall() + 3 * STEP
    old = ticks([osd(True)] * 3 + [osd(False, went - 3600)] * 2)
    assert f"since {hhmmss(went)} " in overview_line(frame(old), "down")
    fair = ticks([osd(True)] * 3 + [osd(False, went - 2)] * 2)
    assert f"since {hhmmss(went - 2)} " in overview_line(frame(fair), "down")


@pytest.mark.asyncio
async def test_the_tables_show_no_current_figure_of_a_down_daemon() -> None:
    from stormdeck.tui.views import DaemonTable, LatencyTable

    down = {**osd(False, commit_latency=0.014, apply_latency=0.01, cores_used=2.0,
                  cores_allowed=4.0, write_iops=500.0),
            "osd.2": Daemon(id="osd.2", kind="osd", host="vm", up=False, pid=4242,
                            cores_used=3.0, cores_allowed=4.0),
            **chunkserver(False)}
    snaps = ticks([down])
    app = StormdeckApp(StaticFeed([frame(snaps)]), cluster_name="lab")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        await pilot.pause()
        table = app.query_one(DaemonTable)
        cells = {k: [c.plain for c in table.row_cells(k)] for k in table.keys}
        # No live process read: its cores are a rate from before it died.
        assert cells["osd.1"][2] == "down" and "2.00" not in " ".join(cells["osd.1"])
        assert cells["osd.1"][3] == "-" and cells["osd.1"][5] == "down"
        # A hung OSD's process read on this host now: its CPU is current.
        assert "3.00/4" in cells["osd.2"][2]
        assert cells[CS][5] == "offline" and cells[CS][3] == "-"
        await pilot.press("4")
        await pilot.pause()
        lat = app.query_one(LatencyTable)
        rows = {k: [c.plain for c in lat.row_cells(k)] for k in lat.keys}
        assert rows["osd.1"][2:6] == ["-", "-", "-", "down"], rows["osd.1"]
        assert rows[CS][2:6] == ["-", "-", "-", "offline"], rows[CS]


class DaemonFigures(Rule):
    """Fires on every daemon with what it quotes of it, as the CPU or latency rules do."""

    id = "test.daemon_figures"
    title = "a daemon's figures"
    source = "osd-cpu-cluster-knee"
    explanation = "test"
    reads: ClassVar[tuple[str, ...]] = ("daemons",)

    def check(self, ctx: Context) -> Iterable[Check]:
        for d in ctx.latest.daemons.values():
            yield Check(target=d.id, fire=True, clear=False, severity=Severity.WARNING,
                        summary="busy", evidence=(
                            ctx.evidence("cores used", ctx.daemon_values(d.id, "cores_used"),
                                         "cores"),
                            ctx.evidence("osd_memory_target", [4 * 2.0**30], "B"),
                            ctx.evidence("times marked down", [1.0], "times")))


def judged(snaps: list[Snapshot]) -> list:
    engine = Engine({DaemonFigures.id: RuleSettings()}, rules=[DaemonFigures])
    findings: list = []
    for i in range(len(snaps)):
        findings = engine.evaluate(snaps[:i + 1])
    return findings


def test_evidence_of_a_down_daemon_is_marked_from_before_it_went_down() -> None:
    busy = {"cores_used": 2.5}
    snaps = ticks([osd(True, **busy)] * 3 + [osd(False, **busy)] * 2)
    (f,) = judged(snaps)
    cores, target, times = f.evidence
    assert cores.down_since == snaps[3].time and not cores.down_bound
    # A setting and a count are current still.
    assert target.down_since is None and times.down_since is None
    text = finding_detail(f).plain
    line = next(ln for ln in text.splitlines() if "cores used" in ln)
    assert line.startswith("  cores used: last 2.5, min 2.5") and line.endswith(
        f" cores over 15 s (before it went down at {hhmmss(snaps[3].time)})"), line
    assert "osd_memory_target: now 4294967296.0" in text
    # Down from the History's start: a bound. Up: nothing marked.
    (f,) = judged(ticks([chunkserver(False)] * 3))
    assert f.evidence[0].down_bound and "went down, before" in finding_detail(f).plain
    (f,) = judged(ticks([osd(True, **busy)] * 3))
    assert all(e.down_since is None for e in f.evidence)
    assert "now 2.5" in finding_detail(f).plain


def test_check_prints_the_down_mark_too() -> None:
    from stormdeck.cli_check import render

    snaps = ticks([osd(True, cores_used=2.5)] * 2 + [osd(False, cores_used=2.5)])
    findings = judged(snaps)
    text = render(findings, {}, snaps[-1])
    assert "cores used: last 2.5, min 2.5" in text and \
        f"(before it went down at {hhmmss(snaps[-1].time)})" in text, text
    assert replace(findings[0].evidence[0], down_since=None).down_note() == ""


def test_evidence_json_carries_when_the_daemon_went_down() -> None:
    from stormdeck.cli_check import finding_json

    snaps = ticks([osd(True, cores_used=2.5)] * 2 + [osd(False, cores_used=2.5)])
    (f,) = judged(snaps)
    ev = finding_json(f)["evidence"][0]
    assert ev["down_since"] == snaps[-1].time and ev["down_bound"] is False
    assert Evidence("cores used", 0.0, 1.0).down_note() == ""
