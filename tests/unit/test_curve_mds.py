"""Curve from the leader MDS alone (issue 32), on the wire stand-in's real formats."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from stormdeck.advisors import journal as journal_mod
from stormdeck.advisors.apply import journal_path
from stormdeck.advisors.curve_schedule import own_schedule_times
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.rules.base import Context
from stormdeck.advisors.rules.leaders import CurveLeaderFlapping, CurveLeaderSpread
from stormdeck.advisors.session import Session
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.curve.parse import (
    CurveError,
    parse_mds_chunkservers,
    parse_mds_logical_pools,
)
from stormdeck.collectors.curve.source import CurveSource
from stormdeck.collectors.hub import merge
from stormdeck.collectors.model import Snapshot, SourceHealth
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import Frame, StaticFeed
from stormdeck.tui.views import DaemonTable, Leaders
from tests.clock import ManualClock
from tests.conftest import run_cli
from tests.curve_wire import POOL, CurveWire

LEADERS = [24, 18, 16, 16, 14, 12]  # a 6-chunkserver pool, 100 copysets


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def mds_only(wire: CurveWire, **kw: object) -> CurveSource:
    """A source of the MDS alone, on the wire's clock where the test steps one."""
    src = CurveSource(mds=[m.addr for m in wire.mds], **kw)
    if isinstance(wire.clock, ManualClock):
        src.clock, src.wall = wire.clock.clock, wire.clock.wall
    return src


def snap_at(src: CurveSource, t: float) -> Snapshot:
    return merge([src.poll()], {"curve": SourceHealth("curve", True, t)}, now=t)


# ---- every chunkserver the MDS names is a row -------------------------------------------


def test_snapshot_json_with_only_the_mds_shows_every_chunkserver() -> None:
    with CurveWire(leaders=LEADERS) as wire:
        res = run_cli("snapshot", "--json", "--curve-mds",
                      ",".join(m.addr for m in wire.mds), timeout=60)
        css = {c.id: c for c in wire.chunkservers}
    assert res.rc == 0, res.err
    doc = json.loads(res.out)
    rows = {k: d for k, d in doc["daemons"].items() if d["kind"] == "chunkserver"}
    assert sorted(rows) == [f"chunkserver.{i}" for i in range(1, 7)]
    for d in rows.values():
        c = css[d["curve_id"]]
        assert d["leaders"] == c.leaders and d["leaders_from"] == "mds"
        assert d["leaders_mds"] == d["leaders_heartbeat"] == c.leaders
        assert d["copysets"] == c.copysets and d["write_iops"] == 850.0
        assert d["read_iops"] == 120.0 and d["host"] is None
    assert sorted(d["leaders"] for d in rows.values()) == sorted(LEADERS)
    (pool,) = doc["curve"]["pools"]
    assert pool["name"] == POOL and pool["leader_range"] == 12.0


def test_an_address_learned_later_joins_its_row_by_id(tmp_path: Path) -> None:
    with CurveWire(leaders=LEADERS) as wire:
        tool = tmp_path / "bin" / "curve_ops_tool"  # not there yet: the listing fails
        src = mds_only(wire, ops_tool=[str(tool)])
        src.TOOL_EVERY = 0
        first = src.poll()
        assert sorted(first.daemons) == [f"chunkserver.{i}" for i in range(1, 7)]
        wire.tool_script(tool.parent)
        later = src.poll()
        by_id = {c.id: c for c in wire.chunkservers}
        src.close()
    # Each chunkserver once, now by its address, with the MDS's id and counts joined.
    assert sorted(later.daemons) == sorted(c.addr for c in wire.chunkservers)
    ids = sorted(d.curve_id for d in later.daemons.values())
    assert ids == [1, 2, 3, 4, 5, 6]
    for d in later.daemons.values():
        assert d.leaders_from == "chunkserver" and d.leaders_mds == by_id[d.curve_id].leaders
        assert d.id == by_id[d.curve_id].addr


def test_given_addresses_join_the_mds_rows_through_its_topology_service() -> None:
    with CurveWire(leaders=LEADERS, topology_service=True) as wire:
        src = CurveSource(mds=[m.addr for m in wire.mds],
                          chunkservers=[wire.chunkservers[0].addr])
        part = src.poll()
        calls = list(wire.topology_calls)
        src.close()
    # --curve-chunkserver's one address and the five the MDS's service lists: six rows.
    assert sorted(part.daemons) == sorted(c.addr for c in wire.chunkservers)
    assert {d.curve_id for d in part.daemons.values()} == {1, 2, 3, 4, 5, 6}
    assert calls == ["ListPhysicalPool", "ListLogicalPool", "GetChunkServerInCluster"]
    assert part.curve is not None and part.curve.pools[0].pool_id == 1


def test_unknown_ids_beside_given_addresses_make_no_second_row() -> None:
    with CurveWire(leaders=LEADERS) as wire:  # the MDS's main port is closed to us
        src = CurveSource(mds=[m.addr for m in wire.mds],
                          chunkservers=[c.addr for c in wire.chunkservers[:4]])
        part = src.poll()
        src.close()
    assert sorted(part.daemons) == sorted(c.addr for c in wire.chunkservers[:4])
    assert any("at least 2 of the chunkservers the MDS names have no row" in e
               for e in part.errors), part.errors


def test_the_topology_services_json_reads_and_a_refusal_is_said() -> None:
    with CurveWire(topology_service=True) as wire:
        status, text = wire.topology("GetChunkServerInCluster", {})
        (c, *_) = parse_mds_chunkservers(text)
        assert status == 200 and (c.id, c.ip, c.online) == (1, "127.0.0.1", True)
        _, text = wire.topology("ListLogicalPool", {"physicalPoolID": 1})
        assert [(p.id, p.name) for p in parse_mds_logical_pools(text)] == [(1, POOL)]
    with pytest.raises(CurveError, match="statusCode -1"):
        parse_mds_logical_pools('{"statusCode": -1}')


# ---- the pool's id, from what the MDS serves -----------------------------------------------


def spread_check(src: CurveSource):
    history = [snap_at(src, src.wall())]
    settings = load_settings()[CurveLeaderSpread.id]
    (check,) = CurveLeaderSpread().check(Context(history[-1], history, settings.params))
    return check


def test_the_schedule_targets_the_one_pool_by_the_id_the_mds_serves() -> None:
    with CurveWire(leaders=LEADERS, topology_service=True, clock=ManualClock()) as wire:
        check = spread_check(mds_only(wire))
    assert check.target == POOL and check.fire
    assert "(id 1): leadernum range 12" in check.summary
    (change,) = check.changes
    assert change.command.endswith("-logical_pool_id=1 -scheduleAll=false")
    assert "its id from the MDS's topology service at 127.0.0.1:" in change.note


def test_with_its_main_port_closed_the_id_comes_from_the_schedulers_operators() -> None:
    with CurveWire(leaders=LEADERS, heartbeat=30.0, clock=ManualClock()) as wire:
        src = mds_only(wire)
        assert spread_check(src).target == "all-pools"
        wire.leader_schedule(1, rapid=False)  # one TransferLeader operator, in flight
        check = spread_check(src)
    assert check.target == POOL and check.changes[0].arg("pool_id") == "1"
    assert "its id from the operators its MDS scheduler shows in flight" in \
        check.changes[0].note


def test_where_no_id_can_be_had_the_finding_says_why() -> None:
    with CurveWire(leaders=LEADERS, clock=ManualClock()) as wire:
        check = spread_check(mds_only(wire))
    assert check.target == "all-pools"
    assert "the MDS names its pools' series by name, not id" in check.summary
    assert "topology service did not answer (connection refused)" in check.summary


# ---- elections from the MDS's counts ---------------------------------------------------------


def engine_over(wire: CurveWire, src: CurveSource, polls: int, every: float,
                between: Callable[[int], None]) -> tuple[list[tuple[float, str]], str]:
    """The engine with its shipped settings, the polls `every` seconds apart on the wire's
    clock, which the source reads too: stepped, never slept."""
    clock = wire.clock
    assert isinstance(clock, ManualClock), "the wire must run on the test's clock"
    engine = Engine(rules=[CurveLeaderFlapping])
    history: list[Snapshot] = []
    states, summary = [], ""
    t0 = src.wall()
    for i in range(polls):
        t = src.wall()
        history.append(snap_at(src, t))
        found = [f for f in engine.evaluate(history) if f.rule == CurveLeaderFlapping.id]
        states.append((t - t0, found[0].state if found else "quiet"))
        if found:
            summary = found[0].summary
        between(i)
        clock.advance(every)
    return states, summary


@pytest.mark.parametrize("refresh", [1, 10], ids=["every-poll", "every-mds-refresh"])
def test_leaders_moving_with_no_transfer_fire_from_the_mds_alone(refresh: int) -> None:
    """`check --for 65` polls each second; the MDS refreshes its counts every 10 s."""
    with CurveWire(leaders=LEADERS, clock=ManualClock()) as wire:
        src = mds_only(wire)

        def elect(i: int) -> None:
            if (i + 1) % refresh == 0:
                wire.elect(8)

        states, summary = engine_over(wire, src, polls=66, every=1.0, between=elect)
        src.close()
    firing = [t for t, state in states if state == "firing"]
    assert firing and firing[0] <= 65.0, states
    assert "from the MDS's counts, no raft pages read" in summary
    assert "with no transfer about" in summary


def test_a_balanced_pool_and_the_mds_schedulers_transfers_do_not_fire() -> None:
    with CurveWire(leaders=CurveWire.spread(100, 6), clock=ManualClock()) as wire:
        states, _ = engine_over(wire, mds_only(wire), polls=66, every=1.0,
                                between=lambda i: None)
    assert all(state == "quiet" for _, state in states), states
    # The periodic scheduler, a transfer a round; each lands a heartbeat (10 s) later, and
    # the MDS shows its operator until then.
    with CurveWire(leaders=LEADERS, heartbeat=10.0, clock=ManualClock()) as wire:
        def scheduler(i: int) -> None:
            if i % 10 == 0:
                wire.leader_schedule(1, rapid=False)

        states, _ = engine_over(wire, mds_only(wire), polls=66, every=1.0, between=scheduler)
        assert wire.transfers_done >= 4
    assert all(state == "quiet" for _, state in states), states


def test_the_rule_judges_the_schedules_the_snapshot_carries_not_todays_journal(
        state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay must be judged by what was known when it was recorded."""
    change = Change("curve_leader_schedule", POOL, "rapid-leader-schedule", "range 12",
                    "range <= 5", "curve_ops_tool rapid-leader-schedule -logical_pool_id=1 "
                    "-scheduleAll=false", runtime=True, reversible=False,
                    args=(("pool_id", "1"),))
    clock = ManualClock()
    with CurveWire(leaders=LEADERS, clock=clock) as wire:
        src = mds_only(wire, schedules=own_schedule_times)
        t0 = src.wall()
        history = []
        for _ in range(12):
            history.append(snap_at(src, src.wall()))
            wire.elect(8)
            clock.advance(1.0)
        src.close()
    params = load_settings()[CurveLeaderFlapping.id].params

    def judged() -> bool:
        (check,) = CurveLeaderFlapping().check(Context(history[-1], history, params))
        return check.fire

    assert judged(), "leaders moving with nothing to explain them"
    # A schedule journaled since (or by a later session), dated as if it had run when the
    # polls began so that its window covers every one, changes nothing in what was seen.
    monkeypatch.setattr(journal_mod, "time", SimpleNamespace(time=lambda: t0,
                                                             strftime=journal_mod.time.strftime))
    journal = Journal(journal_path())
    journal.end(journal.intent(change, None), "applied", "leadernum range 12 -> 1")
    assert own_schedule_times(), "the journal now holds a schedule"
    assert judged(), "the live journal must not explain moves recorded before it"


@pytest.mark.asyncio
async def test_the_console_shows_the_mds_rows_and_their_leaders() -> None:
    clock = ManualClock()
    with CurveWire(leaders=LEADERS, clock=clock) as wire:
        src = mds_only(wire)
        session = Session(Engine(load_settings()))
        snaps: list[Snapshot] = []
        frames = []
        for _ in range(3):
            snaps.append(snap_at(src, src.wall()))
            step = session.step(snaps[-1], snaps)
            frames.append(Frame(step.snapshot, step.findings, tuple(snaps),
                                events=step.events))
            wire.elect(4)
            clock.advance(1.0)
        src.close()
    last = frames[-1].snapshot
    app = StormdeckApp(StaticFeed(frames))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        assert sorted(app.query_one(DaemonTable).keys) == [f"chunkserver.{i}"
                                                           for i in range(1, 7)]
        await pilot.press("3")
        text = app.query_one(Leaders).render_frame(app.frame).plain
    for i in range(1, 7):
        d = last.daemons[f"chunkserver.{i}"]
        assert f"chunkserver.{i}" in text and f" {d.leaders}" in text
    assert f"Curve pool {POOL}: leadernum range" in text
    # No raft page was read: the view says so instead of a false "0 of them elections".
    assert "no raft pages read" in text and "elections;" not in text
