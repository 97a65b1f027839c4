"""Curve's leader rules on the wire stand-in over time: per-pool schedules, elections."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from stormdeck.advisors import journal as journal_mod
from stormdeck.advisors.actuators.curve import (
    ALL_POOLS,
    command_for,
    pool_id_of,
    run_leader_schedule,
)
from stormdeck.advisors.actuators.table import actuator
from stormdeck.advisors.apply import journal_path
from stormdeck.advisors.curve_schedule import own_schedule_times
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Change, Check
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.rules.base import Context
from stormdeck.advisors.rules.leaders import CurveLeaderFlapping, CurveLeaderSpread
from stormdeck.advisors.settings import load_settings
from stormdeck.base.errors import UserError
from stormdeck.collectors.curve.source import CurveSource
from stormdeck.collectors.hub import merge
from stormdeck.collectors.model import Snapshot, SourceHealth
from tests.clock import ManualClock
from tests.conftest import run_cli
from tests.curve_wire import CurveWire

TWO_POOLS = [("pool_a", 6, 100, [24, 18, 16, 16, 14, 12]),
             ("pool_b", 6, 100, [10, 14, 16, 16, 20, 24])]


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test its own journal: the rules read stormdeck's own schedules from it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def snap(src: CurveSource) -> Snapshot:
    t = src.wall()
    return merge([src.poll()], {"curve": SourceHealth("curve", True, t)}, now=t)


def on_clock(src: CurveSource, clock: ManualClock) -> CurveSource:
    """The source reads the test's clock, the one the wire lands its transfers by."""
    src.clock, src.wall = clock.clock, clock.wall
    return src


def judge(rule: type, history: list[Snapshot], **params: object) -> list[Check]:
    settings = load_settings()[rule.id]
    return list(rule().check(Context(history[-1], history, {**settings.params, **params})))


def by_target(checks: list[Check]) -> dict[str, Check]:
    return {c.target: c for c in checks}


# ---- the leader spread: one finding and one change per pool --------------------------------


def test_each_imbalanced_pool_gets_its_own_schedule(tmp_path: Path) -> None:
    with CurveWire(pools=TWO_POOLS) as wire:
        src = CurveSource(mds=[m.addr for m in wire.mds],
                          ops_tool=[str(wire.tool_script(tmp_path))])
        checks = by_target(judge(CurveLeaderSpread, [snap(src)]))
    assert set(checks) == {"pool_a", "pool_b"}
    for name, pool_id, spread in (("pool_a", 1, 12), ("pool_b", 2, 14)):
        c = checks[name]
        assert c.fire and f"(id {pool_id}): leadernum range {spread} " in c.summary
        (change,) = c.changes
        assert change.command == (f"curve_ops_tool rapid-leader-schedule "
                                  f"-logical_pool_id={pool_id} -scheduleAll=false")
        assert actuator(change.kind).width(change) == "pool" and change.target == name
        assert f"--logicalpoolid {pool_id}" in change.note
        assert "(its id from curve_ops_tool logical-pool-list)" in change.note
        assert pool_id_of(change) == pool_id


def test_without_pool_ids_one_finding_for_all_pools_says_so(tmp_path: Path) -> None:
    with CurveWire(pools=TWO_POOLS) as wire:
        src = CurveSource(mds=[m.addr for m in wire.mds])  # the MDS alone: names, no ids
        (check,) = judge(CurveLeaderSpread, [snap(src)])
    assert check.target == ALL_POOLS and check.fire
    assert "pool_a (range 12), pool_b (range 14)" in check.summary
    assert "ids could not be read" in check.summary
    (change,) = check.changes
    assert change.command == "curve_ops_tool rapid-leader-schedule -scheduleAll=true"
    assert actuator(change.kind).width(change) == "cluster"
    assert "EVERY logical pool" in change.note
    assert pool_id_of(change) is None


@pytest.mark.parametrize("trouble", ["offline", "unhealthy", "cli_unhealthy", "tool_failed",
                                     "elections"])
def test_no_schedule_while_the_cluster_is_unhealthy(tmp_path: Path, trouble: str) -> None:
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        tool = wire.tool_script(tmp_path)
        if trouble == "offline":
            wire.refuse(wire.chunkservers[5])
        elif trouble in ("unhealthy", "cli_unhealthy"):
            wire.unhealthy_copysets = 3
        elif trouble == "tool_failed":
            broken = tmp_path / "broken"
            broken.write_text(f'#!/bin/sh\n[ "$1" = copysets-status ] && exit 1\n'
                              f'exec {tool} "$@"\n')
            broken.chmod(0o755)
            tool = broken
        src = CurveSource(mds=[m.addr for m in wire.mds], chunkservers=list(wire.addrs()),
                          ops_tool=[str(tool)])
        if trouble == "cli_unhealthy":  # a deployment with the Go CLI alone
            src = CurveSource(mds=[m.addr for m in wire.mds], chunkservers=list(wire.addrs()),
                              curve_cli=[str(wire.tool_script(tmp_path / "cli", "curve"))])
        src.RAFT_EVERY = 0
        history = [snap(src)]
        if trouble == "elections":
            for _ in range(3):
                wire.elect(3)
                history.append(snap(src))
        (check,) = judge(CurveLeaderSpread, history)
    assert check.fire and check.changes == (), check.summary
    why = {"offline": "1 chunkserver is offline",
           "unhealthy": "3 of 100 copysets are unhealthy",
           "cli_unhealthy": "3 of 100 copysets are unhealthy",
           "tool_failed": "copysets-status did not answer",
           "elections": "leaders are changing by elections"}[trouble]
    assert why in check.summary and check.procedure and why in check.procedure[0]


def test_two_pools_two_schedules_each_verified_on_its_own_pool(tmp_path: Path) -> None:
    """The issue's done-when: plan and apply, as an operator would, once per pool."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    with CurveWire(pools=TWO_POOLS, heartbeat=0.2) as wire:
        tool = wire.tool_script(tmp_path / "bin")
        where = ["--curve-mds", ",".join(m.addr for m in wire.mds),
                 "--curve-ops-tool", str(tool), "--no-host"]
        outs = []
        for name in ("pool_a", "pool_b"):
            plan = tmp_path / f"{name}.json"
            res = run_cli("plan", "curve.leaders.spread", "--target", name, "-o", str(plan),
                          "--for", "1", *where, env=env, timeout=120)
            assert res.rc == 0, res.err
            assert json.loads(plan.read_text())["changes"][0]["target"] == name
            before = {p.name: p.leader_range for p in wire.pools}
            res = run_cli("apply", str(plan), "--yes", "--curve-tool", str(tool),
                          "--heartbeat", "0.3", *where, env=env, timeout=120)
            assert res.rc == 0, res.err
            outs.append(res.out)
            after = {p.name: p.leader_range for p in wire.pools}
            other = "pool_b" if name == "pool_a" else "pool_a"
            assert after[name] <= 1 and after[other] == before[other], (before, after)
        schedules = [c for c in wire.tool_calls if c[:2] == ("ops", "rapid-leader-schedule")]
    assert schedules == [("ops", "rapid-leader-schedule", f"-logical_pool_id={i}",
                          "-scheduleAll=false") for i in (1, 2)]
    assert "applied:" in outs[0] and "leadernum range 12 -> 1" in outs[0]
    assert "applied:" in outs[1] and "leadernum range 14 -> 1" in outs[1]
    entries = Journal(tmp_path / "state" / "stormdeck" / "journal.jsonl").entries()
    assert [(e.change.target, e.status) for e in entries] == [("pool_a", "applied"),
                                                              ("pool_b", "applied")]


def test_the_go_cli_runs_the_schedule_where_curve_ops_tool_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock()
    with CurveWire(pools=TWO_POOLS, heartbeat=0.1, clock=clock) as wire:
        wire.tool_script(tmp_path / "bin", "curve")
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
        change = Change("curve_leader_schedule", "pool_b", "rapid-leader-schedule",
                        "range 14", "range <= 5",
                        "curve_ops_tool rapid-leader-schedule -logical_pool_id=2 "
                        "-scheduleAll=false", runtime=True, reversible=False,
                        args=(("pool_id", "2"),))
        assert command_for(change)[1:] == ["bs", "update", "leader-schedule",
                                           "--logicalpoolid", "2", "--format", "json"]
        ran = run_leader_schedule(change)
        assert ran.endswith("bs update leader-schedule --logicalpoolid 2 --format json")
        clock.advance(0.5)  # past both heartbeats its transfers wait for
        wire._tick()
        assert wire.pool(2).leader_range <= 1 and wire.pool(1).leader_range == 12
        with pytest.raises(UserError, match="invalid logical pool id"):
            run_leader_schedule(replace(change, args=(("pool_id", "9"),)))
        monkeypatch.setenv("PATH", "/usr/bin:/bin")
        with pytest.raises(UserError, match="neither curve_ops_tool nor the Go CLI"):
            run_leader_schedule(change)


# ---- flapping: elections fire it, transfers do not -----------------------------------------


def watch(wire: CurveWire, polls: int, every: float = 0.25, between=None) -> list[Snapshot]:
    """Poll the wire as the console would, the raft pages every poll, `polls` times
    `every` seconds apart on the wire's clock (a ManualClock: stepped here, not slept)."""
    clock = wire.clock
    assert isinstance(clock, ManualClock), "the wire must run on the test's clock"
    src = on_clock(CurveSource(mds=[m.addr for m in wire.mds],
                               chunkservers=list(wire.addrs()), schedules=own_schedule_times),
                   clock)
    src.RAFT_EVERY = 0
    out = []
    try:
        for _ in range(polls):
            out.append(snap(src))
            if between is not None:
                between()
            clock.advance(every)
    finally:
        src.close()
    return out


def test_flapping_fires_on_elections() -> None:
    with CurveWire(clock=ManualClock()) as wire:
        history = watch(wire, 8, between=lambda: wire.elect(2))
    (check,) = judge(CurveLeaderFlapping, history)
    assert check.fire and not check.clear
    elections = next(e for e in check.evidence if e.metric == "raft elections")
    assert elections.now is not None and elections.now >= 10, check.summary
    assert "CANDIDATE in" in check.summary and "bthreads up to 36% busy" in check.summary


def test_flapping_stays_quiet_through_the_mds_schedulers_transfers() -> None:
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12], heartbeat=0.3,
                   clock=ManualClock()) as wire:
        # The MDS's periodic leader scheduler: one transfer a round, each raising a term.
        history = watch(wire, 12, between=lambda: wire.leader_schedule(1, rapid=False))
        done = wire.transfers_done
    assert done >= 3
    (check,) = judge(CurveLeaderFlapping, history)
    transfers = next(e for e in check.evidence if e.metric == "term rises from transfers")
    assert not check.fire and transfers.now is not None and transfers.now >= 3 * done - 3, \
        check.summary
    assert "0 raft elections" in check.summary


def test_flapping_stays_quiet_through_stormdecks_own_schedule(
        state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Transfers quicker than a poll: the MDS never shows their operators, the journal does."""
    clock = ManualClock()
    # The journal dates its entries on the same clock the snapshots are stamped by.
    monkeypatch.setattr(journal_mod, "time", SimpleNamespace(time=clock.wall,
                                                             strftime=time.strftime))
    change = Change("curve_leader_schedule", "default_logical_pool", "rapid-leader-schedule",
                    "range 12", "range <= 5", "curve_ops_tool rapid-leader-schedule "
                    "-logical_pool_id=1 -scheduleAll=false", runtime=True, reversible=False,
                    args=(("pool_id", "1"),))

    def run(journaled: bool) -> Check:
        with CurveWire(leaders=[24, 18, 16, 16, 14, 12], heartbeat=0.02, clock=clock) as wire:
            journal = Journal(journal_path())
            entry = journal.intent(change, None) if journaled else None
            ran = []

            def schedule() -> None:
                if not ran:
                    ran.append(wire.leader_schedule(1))

            history = watch(wire, 5, every=0.3, between=schedule)
            if entry is not None:
                journal.end(entry, "applied", "leadernum range 12 -> 1")
            assert wire.transfers_done >= 6 and wire.leader_range <= 1
            assert not any(s.curve and s.curve.transfer_copysets for s in history)
        (check,) = judge(CurveLeaderFlapping, history)
        return check

    assert run(journaled=False).fire, "unexplained, these rises would be elections"
    quiet = run(journaled=True)
    assert not quiet.fire and "0 raft elections" in quiet.summary


def engine_over(wire: CurveWire, polls: int, every: float, between) -> list[tuple[float, str]]:
    """The engine with its shipped settings over a stretch of Curve time, polls `every`
    seconds apart on the wire's clock, stepped: the source's own periods (a raft page every
    10 s, transfers remembered 30 s) run on it unscaled."""
    clock = wire.clock
    assert isinstance(clock, ManualClock), "the wire must run on the test's clock"
    src = on_clock(CurveSource(mds=[m.addr for m in wire.mds], chunkservers=list(wire.addrs())),
                   clock)
    engine = Engine(rules=[CurveLeaderFlapping])
    history: list[Snapshot] = []
    states = []
    t0 = src.wall()
    try:
        for i in range(polls):
            history.append(snap(src))
            found = [f for f in engine.evaluate(history) if f.rule == CurveLeaderFlapping.id]
            states.append((history[-1].time - t0, found[0].state if found else "quiet"))
            between(i)
            clock.advance(every)
    finally:
        src.close()
    return states


def test_elections_every_few_seconds_fire_within_65_s() -> None:
    """The issue's stand-in: terms rising every few seconds while leaders move."""
    with CurveWire(clock=ManualClock()) as wire:
        states = engine_over(wire, polls=34, every=2.0, between=lambda i: wire.elect(3))
    firing = [t for t, state in states if state == "firing"]
    assert firing and firing[0] <= 65.0, states


def test_the_mds_scheduler_every_30_s_and_a_rapid_schedule_never_fire() -> None:
    # A transfer lands a heartbeat (10 s) after its operator.
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12], heartbeat=10.0, clock=ManualClock()) as wire:
        def scheduler(i: int) -> None:
            if i % 15 == 0:
                wire.leader_schedule(1, rapid=False)  # the periodic scheduler's round
            elif i == 20:
                wire.leader_schedule(1)  # a rapid schedule: a burst of transfers

        states = engine_over(wire, polls=45, every=2.0, between=scheduler)
        assert wire.transfers_done >= 5 and wire.leader_range <= 1
    assert all(state == "quiet" for _, state in states), states
