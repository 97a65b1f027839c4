"""The only mgr dead, from the mons' replies captured on the Pacific lab while it was
(tests/data/pacific/mgr_down/: `status`, `health detail`, `mgr stat`, `mgr dump`, the
cluster log; log_last_back.json once the mgr was started again): the source asks the mgr
nothing, names it from the mons' log, and the rule, the overview and the timeline say so."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from stormdeck.advisors.rules.mgr import MgrDown
from stormdeck.advisors.timeline import Timeline
from stormdeck.collectors.ceph.mgr import mgr_dropped, parse_mgr_stat
from stormdeck.collectors.ceph.parse import parse_log_last
from stormdeck.collectors.hub import Hub, merge
from stormdeck.collectors.model import MgrState, Partial, Snapshot, SourceHealth
from stormdeck.tui.feed import Frame
from stormdeck.tui.views.overview import Overview
from tests.captured import PAC, CannedCeph, lab_outputs, run
from tests.clock import zone

DOWN = PAC / "mgr_down"
# The cluster log's line for the drop, as captured: 2026-12-04T04:02:27.367364+0000.
DROPPED_AT = 1796356947.367364


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    with zone("UTC"):
        yield


def log(name: str) -> tuple:
    return parse_log_last(json.loads((DOWN / name).read_bytes()))


def test_the_mons_log_names_the_mgr_they_dropped_until_one_is_active_again() -> None:
    assert mgr_dropped(log("log_last.json")) == ("x", DROPPED_AT)
    assert mgr_dropped(log("log_last_back.json")) is None
    assert parse_mgr_stat(json.loads((DOWN / "mgr_stat.json").read_bytes())) == (
        False, None, 0)
    assert parse_mgr_stat(json.loads((PAC / "mgr_stat.json").read_bytes())) == (
        True, "x", 0)


class Asked(CannedCeph):
    """The real CephSource over captured replies, keeping what it sent to whom."""

    def __init__(self, outputs: dict[str, bytes]) -> None:
        super().__init__(outputs)
        self.sent: list[tuple[str, str]] = []
        self.now = DROPPED_AT + 15
        self.wall = self.clock = lambda: self.now  # each poll's commands due by its time

    def _send(self, target: str, cmd: dict[str, Any], timeout: float) -> bytes:
        self.sent.append((target, cmd["prefix"]))
        return super()._send(target, cmd, timeout)


def down_outputs() -> dict[str, bytes]:
    out = lab_outputs(load=False)
    for prefix, name in (("status", "status.json"), ("health", "health_detail.json"),
                         ("mgr stat", "mgr_stat.json"), ("mgr dump", "mgr_dump.json"),
                         ("log last", "log_last.json")):
        out[prefix] = (DOWN / name).read_bytes()
    return out


def test_no_mgr_command_while_the_mgr_map_has_none_and_the_mons_view_stays() -> None:
    src = Asked(down_outputs())
    p = src.poll()
    assert not [prefix for target, prefix in src.sent if target == "mgr"], src.sent
    c = p.cluster
    assert c is not None and c.mgr == MgrState(
        active="x", available=False, standbys=0, down_since=DROPPED_AT, silent=None,
        answered_at=None)
    assert [h.code for h in c.checks] == ["MGR_DOWN"]
    assert (c.num_osds, c.num_up_osds, c.num_in_osds) == (3, 3, 3)
    # One line for every part the mgr did not give, not one per command.
    assert p.errors == ("mgr parts not read (osd perf, osd status, osd df, pg dump, "
                        "osd pool autoscale-status): no active mgr in the mgr map",)


def test_the_mgr_back_ends_the_outage_and_dates_what_it_gave() -> None:
    src = Asked(lab_outputs(load=False))
    first = src.poll().cluster
    assert first is not None and first.mgr is not None and first.mgr.serving
    answered = first.mgr.answered_at
    assert answered == src.now
    src.outputs.update(down_outputs())
    src.now += 5
    down = src.poll().cluster
    assert down is not None and down.mgr is not None
    # Seen serving at the poll before: the outage starts no earlier than the mons' drop.
    assert down.mgr.down_since == DROPPED_AT and down.mgr.answered_at == answered
    src.outputs.update(lab_outputs(load=False))
    src.outputs["log last"] = (DOWN / "log_last_back.json").read_bytes()
    src.now += 60
    back = src.poll().cluster
    assert back is not None and back.mgr is not None
    assert back.mgr.serving and back.mgr.down_since is None and \
        back.mgr.answered_at == src.now


def down_snapshots(n: int = 3) -> list[Snapshot]:
    src = Asked(down_outputs())
    out = []
    for i in range(n):
        src.now = DROPPED_AT + 10 * (i + 1)
        p = src.poll()
        health = {"ceph": SourceHealth("ceph", False, src.now, error=p.errors[0])}
        out.append(merge([p], health, now=src.now))
    return out


def test_the_rule_names_the_dead_mgr_and_takes_in_mgr_down() -> None:
    findings = {f.rule: f for f in run(down_snapshots()) if f.state == "firing"}
    f = findings["ceph.mgr.down"]
    assert f.target == "mgr.x"
    assert f.summary.startswith("mgr.x down since 04:02:27 (30 s): no active mgr in the "
                                "mgr map, no standby;"), f.summary
    # Ceph's own check folds into it: one finding for one problem.
    assert not any(f.rule == "ceph.health.check" and f.target == "MGR_DOWN"
                   for f in findings.values())


def test_a_mgr_that_answers_is_no_finding() -> None:
    src = Asked(lab_outputs(load=False))
    snaps = [merge([src.poll()], {"ceph": SourceHealth("ceph", True, src.now)},
                   now=src.now)]
    assert not [f for f in run(snaps, rules=(MgrDown,)) if f.state == "firing"]


def test_the_overview_names_the_mgr_like_a_down_osd() -> None:
    snap = down_snapshots(1)[0]
    c = snap.cluster
    assert c is not None and c.mgr is not None
    dated = replace(snap, cluster=replace(c, mgr=replace(c.mgr, answered_at=DROPPED_AT - 31)))
    view = Overview()
    view.settings = None
    lines = view.render_frame(Frame(dated, (), (dated,))).plain.splitlines()
    at = next(i for i, ln in enumerate(lines) if "mgr.x" in ln)
    assert lines[at] == "  down  mgr.x since 04:02:27 (10 s), none active in the mgr map"
    assert lines[at + 1] == "        PGs, latency and fill below are from 04:01:56"
    assert lines[at + 2].startswith("pgs ")  # above the figures it dates
    assert all(len(ln) <= 80 for ln in lines[at:at + 2])


def test_the_timeline_tells_the_mgr_stopping_handing_over_and_serving() -> None:
    base = down_snapshots(1)[0]
    c = base.cluster
    assert c is not None
    states = [MgrState(active="x", available=True, standbys=1, answered_at=1.0),
              MgrState(active="x", available=True, standbys=1, down_since=5.0,
                       silent="osd perf", answered_at=1.0),
              MgrState(active="y", available=True, standbys=0, answered_at=40.0)]
    tl = Timeline()
    texts = []
    for i, m in enumerate(states):
        texts += [e.text for e in tl.add(replace(base, time=10.0 * (i + 1),
                                                 cluster=replace(c, mgr=m)))]
    assert "mgr.x stopped serving: `osd perf` unanswered" in texts
    assert "mgr.y active (was mgr.x)" in texts
    assert "mgr.y serving again after 25 s" in texts


class Hangs:
    """A source whose second poll waits until released (a frozen mon, say)."""

    name = "ceph"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.polls = 0

    def poll(self) -> Partial:
        self.polls += 1
        if self.polls > 1:
            self.release.wait(30)
        return Partial(source=self.name, time=time.time())

    def close(self) -> None:
        self.release.set()


def test_a_poll_under_way_past_its_due_time_is_stale_before_the_timeout() -> None:
    src = Hangs()
    hub = Hub([src], interval=0.2, timeout=60.0)
    hub.start()
    try:
        assert hub.wait_polls(1, 5)
        deadline = time.monotonic() + 30
        while src.polls < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        # Due within (0.2 + its own time) x 1.5 + 0.5 s; the hub's hang verdict is at 60 s,
        # so waiting up to half that tells the two apart on a host of any speed.
        deadline = time.monotonic() + 30
        while not hub.health()["ceph"].stale and time.monotonic() < deadline:
            time.sleep(0.05)
        h = hub.health()["ceph"]
        assert h.stale and not h.ok and h.error is not None and "no answer for" in h.error
    finally:
        src.release.set()
        hub.stop()


@pytest.mark.asyncio
async def test_the_header_says_mgr_down_on_every_view_at_80x24() -> None:
    from stormdeck.tui.app import StormdeckApp
    from stormdeck.tui.feed import StaticFeed
    from tests.unit.test_tui_habits import frames, header, screen_text

    def down(s: Snapshot, i: int) -> Snapshot:
        if i < 3 or s.cluster is None:
            return s
        return replace(s, cluster=replace(s.cluster, mgr=MgrState(
            active="x", available=False, standbys=0, down_since=s.time - 5,
            answered_at=s.time - 40)))

    app = StormdeckApp(StaticFeed(frames(edit=down)), cluster_name="lab")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        for key in ("1", "2", "8"):  # the overview, the daemons, triage
            await pilot.press(key)
            await pilot.pause()
            assert "mgr DOWN" in header(app) and "mgr DOWN" in screen_text(app), key


def test_mgr_down_an_error_in_ceph_is_critical_here() -> None:
    def worse(s: Snapshot) -> Snapshot:
        c = s.cluster
        assert c is not None
        return replace(s, cluster=replace(c, checks=tuple(
            replace(h, severity="HEALTH_ERR") for h in c.checks)))

    snaps = [worse(s) for s in down_snapshots()]
    (f,) = [f for f in run(snaps) if f.rule == "ceph.mgr.down"]
    assert f.severity.name == "CRITICAL" and f.state == "firing"


def test_snapshot_text_names_the_dead_mgr() -> None:
    from stormdeck.cli_snapshot import render_text

    text = render_text(down_snapshots(1)[0])
    assert "mgr x down since 04:02:27: none active in the mgr map; PG states, latency and " \
        "fill not read" in text, text


def test_the_header_says_partial_not_error_while_the_mons_answer_and_the_mgr_does_not(
        ) -> None:
    """Beside "mgr DOWN", the Ceph source answered: its word is "partial" (yellow), not
    "error", which is kept for a poll that failed as a whole."""
    from stormdeck.collectors.model import SourceHealth
    from stormdeck.tui.app import source_state

    now = 1_800_000_000.0
    answered = SourceHealth("ceph", ok=False, last_success=now - 1.0,
                            error="mgr parts not read (osd perf): no active mgr in the mgr map")
    assert source_state(answered, now, 5.0) == ("yellow", "partial")
    # A failed poll marks the source stale: the header says so by its age.
    failed = replace(answered, stale=True)
    assert source_state(failed, now, 5.0) == ("bold reverse red", "STALE 1s")
    never = SourceHealth("ceph", ok=False, error="no answer for 10 s")
    assert source_state(never, now, 5.0) == ("bold red", "ERROR")
