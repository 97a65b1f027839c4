"""The Curve source on Curve's real wire formats, served from 127.0.0.1 (tests/curve_wire.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from stormdeck.advisors.actuators.curve import schedule_argv, schedule_refusal
from stormdeck.collectors.curve.metrics import (
    mds_pools,
    mds_transfers,
    raft_group,
)
from stormdeck.collectors.curve.parse import (
    CLI_CHUNKSERVER_HEADER,
    ChunkserverInfo,
    CurveError,
    LogicalPoolInfo,
    bvar_name,
    conf_value,
    parse_chunkserver_status,
    parse_cli_chunkservers,
    parse_cli_copysets_status,
    parse_cli_logical_pools,
    parse_copysets_status,
    parse_ops_chunkserver_list,
    parse_ops_logical_pools,
    parse_prometheus_text,
    parse_raft_stat,
    parse_vars,
)
from stormdeck.collectors.curve.source import CurveSource
from stormdeck.collectors.hub import Hub
from tests.clock import ManualClock
from tests.curve_wire import CLI_CHUNKSERVER_HEADER as WIRE_HEADER
from tests.curve_wire import POOL, CurveWire


@pytest.mark.parametrize(("raw", "mangled"), [
    ("logicalPool", "logical_pool"), ("10.0.0.1:8200", "10_0_0_1_8200"),
    ("readIOPS", "read_iops"), ("3_leaderCount_from_heartbeat", "3_leader_count_from_heartbeat"),
    ("topology_metric_chunkserver_Id_", "topology_metric_chunkserver_id_"),
    ("pool-1", "pool_1"), ("default_logical_pool", "default_logical_pool"),
])
def test_bvar_name_mangles_as_brpc(raw: str, mangled: str) -> None:
    assert bvar_name(raw) == mangled


def test_parse_vars_quoted_json_and_numbers() -> None:
    text = ('topology_metric_logical_pool_default_logical_pool_leadernum_range : 1.000\n'
            'mds_status : "leader"\n'
            'chunkserver_10_0_0_1_8200_config_copyset_election_timeout_ms : '
            '"{"conf_name":"copyset.election_timeout_ms","conf_value":"1000"}"\n'
            'bthread_worker_count : 18\n'
            'rpc_server_8200_connection_count : [1,2]\n'
            'not a var line\n')
    v = parse_vars(text)
    assert v["topology_metric_logical_pool_default_logical_pool_leadernum_range"] == 1.0
    assert v["mds_status"] == "leader" and v["bthread_worker_count"] == 18.0
    assert conf_value(v["chunkserver_10_0_0_1_8200_config_copyset_election_timeout_ms"]) == "1000"
    assert v["rpc_server_8200_connection_count"] == "[1,2]"
    with pytest.raises(CurveError):
        parse_vars("<html>\u2603 Service Unavailable</html>")
    assert parse_vars("") == {}


def test_parse_prometheus_text() -> None:
    text = ('# HELP process_cpu_usage process_cpu_usage\n# TYPE process_cpu_usage gauge\n'
            'process_cpu_usage 3.42\n'
            'chunkserver_1_2_3_4_8200_config_copyset_election_timeout_ms'
            '{conf_name="copyset.election_timeout_ms",conf_value="1000"} 0\n'
            'rpc_server_8200_braft_raft_service_append_entries{quantile="0.99"} 1500\n'
            'x{a="q\\"uote\\\\d"} 1 1700000000000\n'
            'bad{unterminated="x} 1\n')
    v = parse_prometheus_text(text)
    assert v["process_cpu_usage"] == 3.42
    assert conf_value(v["chunkserver_1_2_3_4_8200_config_copyset_election_timeout_ms"]) == "1000"
    assert v['rpc_server_8200_braft_raft_service_append_entries{quantile="0.99"}'] == 1500
    assert "bad" not in v
    with pytest.raises(CurveError):
        parse_prometheus_text("garbage garbage\n")


def test_parse_raft_stat() -> None:
    text = ("[4294967297]\r\npeer_id: 10.0.0.1:8200:0\r\nstate: LEADER\r\nreadonly: 0\r\n"
            "term: 7\r\nconf_index: 2\r\npeers: 10.0.0.1:8200:0 10.0.0.2:8200:0\r\n"
            "changing_conf: NO    stage: STAGE_NONE\r\n\r\n"
            "[4294967298]\r\npeer_id: 10.0.0.1:8200:0\r\nstate: FOLLOWER\r\nterm: 3\r\n"
            "leader: 10.0.0.2:8200:0\r\n\r\n")
    nodes = parse_raft_stat(text)
    assert nodes["4294967297"].state == "LEADER" and nodes["4294967297"].term == 7
    assert nodes["4294967298"].leader == "10.0.0.2:8200:0"
    with pytest.raises(CurveError):
        parse_raft_stat("nothing like it")


def test_parse_tools() -> None:
    with CurveWire(chunkservers=3, copysets=30) as wire:
        wire.chunkservers[2].mode = "refuse"
        listed = parse_ops_chunkserver_list(wire.ops_tool_output("chunkserver-list"))
        assert [c.id for c in listed] == [1, 2, 3]
        assert listed[0].addr == wire.chunkservers[0].addr and listed[0].online is True
        assert listed[2].online is False and listed[0].copysets == 30
        assert parse_chunkserver_status(wire.ops_tool_output("chunkserver-status")) == (3, 2, 1)
        rows = parse_cli_chunkservers(wire.cli(["bs", "list", "chunkserver", "-f", "json"])[1])
        assert sorted((r.id, r.online) for r in rows) == [(1, True), (2, True), (3, False)]
    with pytest.raises(CurveError):
        parse_copysets_status("Segmentation fault")
    with pytest.raises(CurveError, match="mds not reachable"):
        parse_cli_chunkservers('{"error": {"code": 30001, "message": "mds not reachable"}, '
                               '"result": null}')
    with pytest.raises(CurveError, match="not JSON"):
        parse_cli_chunkservers("Error: rpc timeout")


# ---- the fixtures of tests/data/curve/, field by field ------------------------------------

DATA = Path(__file__).parents[1] / "data" / "curve"


def fixture(name: str) -> str:
    return (DATA / name).read_text()


def test_every_fixture_has_its_provenance() -> None:
    readme = fixture("README.md")
    names = sorted(f.name for f in DATA.iterdir() if f.name != "README.md")
    assert names and all(f"`{n}`" in readme for n in names), names


def test_fixture_ops_chunkserver_list_issue2036() -> None:
    rows = parse_ops_chunkserver_list(fixture("ops_chunkserver_list.issue2036.txt"))
    assert rows == [
        ChunkserverInfo(id=54, ip="***.***.***.***", port=8217, online=True, disk_type="nvme",
                        rw_status="READWRITE", disk_state="DISKNORMAL", copysets=100),
        ChunkserverInfo(id=5, ip="***.***.***.***", port=8209, online=True, disk_type="nvme",
                        rw_status="READWRITE", disk_state="DISKNORMAL", copysets=100)]


def test_fixture_cli_list_chunkserver_rows_are_arrays_in_header_order() -> None:
    rows = parse_cli_chunkservers(fixture("cli_list_chunkserver.json"))
    assert rows == [
        ChunkserverInfo(id=i, ip="127.0.0.1", port=port, online=True, disk_type="nvme",
                        rw_status="READWRITE", disk_state="DISKNORMAL", copysets=100)
        for i, port in ((1, 8201), (2, 8202), (3, 8200))]
    doc = json.loads(fixture("cli_list_chunkserver.json"))
    assert all(isinstance(r, list) and len(r) == len(CLI_CHUNKSERVER_HEADER)
               for r in doc["result"]), "the fixture keeps Curve's shape"
    assert tuple(CLI_CHUNKSERVER_HEADER) == tuple(WIRE_HEADER)


def test_fixture_cli_list_logical_pool() -> None:
    assert parse_cli_logical_pools(fixture("cli_list_logical_pool.json")) == [
        LogicalPoolInfo(1, "pool1")]


def test_fixture_ops_logical_pool_list() -> None:
    assert parse_ops_logical_pools(fixture("ops_logical_pool_list.txt")) == [
        LogicalPoolInfo(1, "pool1")]
    assert parse_ops_logical_pools("curve logical pool list: \ntotal: 0\n") == []
    with pytest.raises(CurveError):
        parse_ops_logical_pools("ListLogicalPoolsInCluster fail!\n")


def test_fixture_cli_status_copyset() -> None:
    assert parse_cli_copysets_status(fixture("cli_status_copyset.json")) == (True, 100, 0)
    with pytest.raises(CurveError, match="no totals"):
        parse_cli_copysets_status('{"error": null, "result": []}')


def test_fixture_copysets_status_unhealthy() -> None:
    assert parse_copysets_status(fixture("ops_copysets_status_unhealthy.txt")) == \
        (False, 400, 12)


def test_fixture_mds_vars_tuning_guide() -> None:
    (pool,) = mds_pools(parse_vars(fixture("mds_vars_tuning_guide.txt")))
    assert pool.name == "default_logical_pool" and pool.leader_range == 1.0
    assert pool.pool_id is None, "the MDS's metrics name pools, never their ids"


def test_fixture_mds_scheduler_operators() -> None:
    v = parse_vars(fixture("mds_scheduler_operators.vars.txt"))
    assert v["mds_scheduler_metric_transfer_leader_num"] == 1.0
    # Only the TransferLeader operator: copyset 100 of pool 1 is raft group 1 << 32 | 100.
    assert mds_transfers(v) == {"4294967396"} == {raft_group(1, 100)}


def test_fixture_raft_stat_from_curves_own_test() -> None:
    (lead,) = parse_raft_stat(fixture("raft_stat.leader.copyset_check_core_test.txt")).values()
    (follow,) = parse_raft_stat(
        fixture("raft_stat.follower.copyset_check_core_test.txt")).values()
    assert (lead.group, lead.state, lead.term, lead.leader) == \
        ("4294967396", "LEADER", None, None)
    assert (follow.group, follow.state, follow.leader) == \
        ("4294967396", "FOLLOWER", "127.0.0.1:9192:0")
    assert int(lead.group) >> 32 == 1 and int(lead.group) & 0xFFFFFFFF == 100


def test_fixture_leader_schedule_results() -> None:
    go = ["curve"]
    assert schedule_refusal(go, 0, fixture("cli_leader_schedule_ok.json"), "") is None
    assert schedule_refusal(go, 0, fixture("cli_leader_schedule_invalid_pool.json"), "") == \
        "curve bs update leader-schedule: invalid logical pool id"
    ops = ["curve_ops_tool"]
    assert schedule_refusal(ops, 0, "", "") is None, "it prints nothing on success"
    assert schedule_refusal(ops, 255, fixture("ops_rapid_leader_schedule_fail.txt"), "") == \
        "RapidLeaderSchedule pool 2 fail"
    assert schedule_refusal(ops, 1, "", "") == "rapid-leader-schedule: exit status 1"
    # glog chatter of a failover is not the tool's "fail".
    assert schedule_refusal(ops, 0, "", "I1129 copyset 4294967396 leader failover done") is None
    assert schedule_refusal(ops, 0, "", "E1129 schedule failed: mds busy") == \
        "E1129 schedule failed: mds busy"


def test_schedule_commands_are_curves_own() -> None:
    assert schedule_argv(["curve_ops_tool", "-confPath=/etc/curve/tools.conf"], 2) == [
        "curve_ops_tool", "rapid-leader-schedule", "-logical_pool_id=2", "-scheduleAll=false",
        "-confPath=/etc/curve/tools.conf"]
    assert schedule_argv(["curve_ops_tool"], None) == [
        "curve_ops_tool", "rapid-leader-schedule", "-scheduleAll=true"]
    assert schedule_argv(["/usr/bin/curve"], 2) == [
        "/usr/bin/curve", "bs", "update", "leader-schedule", "--logicalpoolid", "2",
        "--format", "json"]
    assert schedule_argv(["curve"], None)[4] == "--all"
    with pytest.raises(CurveError):
        schedule_argv(["curve"], 0)  # tools-v2 refuses 0: "set flag all" instead


def source_for(wire: CurveWire, **kw: object) -> CurveSource:
    return CurveSource(mds=[m.addr for m in wire.mds], chunkservers=list(wire.addrs()),
                       **kw)  # type: ignore[arg-type]


def test_balanced_cluster() -> None:
    with CurveWire() as wire:
        part = source_for(wire).poll()
    curve = part.curve
    assert curve is not None and curve.leader_mds == wire.mds[0].addr
    assert {m.role for m in curve.mds} == {"leader", "follower"}
    (pool,) = curve.pools
    assert pool.name == POOL and pool.leader_range == 1 and pool.chunkservers == 6
    assert curve.version == "1.2.5+2c4861ca" and curve.endpoint_errors == {}
    assert len(part.daemons) == 6
    d = part.daemons[wire.chunkservers[0].addr]
    assert d.kind == "chunkserver" and d.leaders == 17 and d.host == "127.0.0.1"
    assert d.raft_append_latency == pytest.approx(410e-6)
    assert d.raft_append_latency_p99 == pytest.approx(1230e-6)
    assert d.raft_send_latency == pytest.approx(900e-6)
    assert d.write_latency == pytest.approx(1820e-6) and d.write_iops == 850
    assert d.cores_used == 3.42 and d.bthread_usage == 6.5 and d.bthread_workers == 18
    assert d.config == {"copyset.election_timeout_ms": "1000",
                        "copyset.enable_odsync_when_open_chunkfile": "false"}
    assert d.leader_delta is None and d.term_rises is None, "one poll sees no change"


def test_imbalanced_cluster() -> None:
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        part = source_for(wire).poll()
    assert part.curve is not None and part.curve.pools[0].leader_range == 12
    assert part.curve.pools[0].leader_max == 24 and part.curve.pools[0].leader_min == 12
    assert sorted(d.leaders for d in part.daemons.values()) == [12, 14, 16, 16, 18, 24]


def test_flapping_leaders_and_rising_terms() -> None:
    with CurveWire() as wire:
        src = source_for(wire)
        src.RAFT_EVERY = 0
        src.poll()
        wire.flapping = True
        second = src.poll()
    deltas = [d.leader_delta for d in second.daemons.values()]
    # Leaders also move while one poll reads the chunkservers one by one, as in a
    # real election storm, so the deltas need not cancel out.
    assert any(x for x in deltas), deltas
    assert sum(d.term_rises or 0 for d in second.daemons.values()) > 0


def test_a_refusing_chunkserver_is_an_error_for_it_alone() -> None:
    with CurveWire() as wire:
        bad = wire.chunkservers[2]
        wire.refuse(bad)
        part = source_for(wire).poll()
    assert part.curve is not None
    assert part.curve.endpoint_errors == {bad.addr: "connection refused"}
    assert part.errors == ("1 of 6 chunkservers did not answer",)
    assert part.daemons[bad.addr].leaders is None
    assert all(d.leaders for a, d in part.daemons.items() if a != bad.addr)


def test_a_slow_chunkserver_times_out_without_delaying_the_rest() -> None:
    # The slow one would hold a poll that waited for it 30 s; one that keeps to its timeout
    # is done in well under a third of that, however busy the host.
    with CurveWire(slow_seconds=30) as wire:
        slow = wire.chunkservers[1]
        slow.mode = "slow"
        src = source_for(wire, timeout=0.5)
        start = time.monotonic()
        part = src.poll()
        took = time.monotonic() - start
    assert took < 10.0, took
    assert part.curve is not None and part.curve.endpoint_errors[slow.addr] == "no answer in 0.5 s"
    assert sum(1 for d in part.daemons.values() if d.leaders) == 5


def test_garbage_is_an_error_for_that_endpoint() -> None:
    with CurveWire() as wire:
        wire.chunkservers[4].mode = "garbage"
        part = source_for(wire).poll()
    assert part.curve is not None
    assert part.curve.endpoint_errors == {wire.chunkservers[4].addr: "not brpc /vars text"}


def test_without_vars_the_prometheus_endpoint_serves() -> None:
    with CurveWire() as wire:
        cs = wire.chunkservers[0]
        cs.mode = "no_vars"  # /vars and /metrics 404; only newer brpc's /brpc_metrics answers
        part = source_for(wire).poll()
    d = part.daemons[cs.addr]
    assert d.leaders == 17 and d.raft_append_latency == pytest.approx(410e-6)
    assert d.config is not None and d.config["copyset.election_timeout_ms"] == "1000"


def test_no_leader_mds_and_nothing_at_all() -> None:
    with CurveWire() as wire:
        src = CurveSource(mds=[wire.mds[1].addr], chunkservers=list(wire.addrs()))
        part = src.poll()
        assert "no MDS says it is the leader" in part.errors
        assert part.curve is not None and part.curve.pools == ()
        assert len(part.daemons) == 6
        for cs in wire.chunkservers:
            wire.refuse(cs)
        with pytest.raises(CurveError, match="no Curve endpoint answered"):
            CurveSource(chunkservers=list(wire.addrs())).poll()


def _stand_in(tmp_path: Path, name: str, outputs: dict[str, str]) -> tuple[Path, Path]:
    """A script on disk that answers like the real tool and records its argv."""
    log = tmp_path / f"{name}.argv"
    for key, text in outputs.items():
        (tmp_path / f"{name}.{key}").write_text(text)
    script = tmp_path / name
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\n'
                      f'for a in "$@"; do f="{tmp_path}/{name}.$a"; '
                      f'[ -f "$f" ] && exec cat "$f"; done\n'
                      'echo "unknown command" >&2; exit 1\n')
    script.chmod(0o755)
    return script, log


def test_discovery_through_curve_ops_tool(tmp_path: Path) -> None:
    with CurveWire() as wire:
        tool = wire.tool_script(tmp_path)
        src = CurveSource(mds=[m.addr for m in wire.mds],
                          ops_tool=[str(tool), "-confPath=/etc/curve/tools.conf"])
        part = src.poll()
        calls = list(wire.tool_calls)
    assert calls == [("ops", c, *f, "-confPath=/etc/curve/tools.conf") for c, *f in (
        ("chunkserver-list", "-checkHealth=false"), ("logical-pool-list",),
        ("copysets-status",), ("chunkserver-status",))]
    assert len(part.daemons) == 6 and not part.errors
    d = part.daemons[wire.chunkservers[3].addr]
    assert d.curve_id == 4 and d.leaders_mds == d.leaders == 17
    assert d.leaders_heartbeat == 17 and d.online is True
    assert part.curve is not None and part.curve.copysets_total == 100
    assert (part.curve.chunkservers_online, part.curve.chunkservers_offline) == (6, 0)
    assert [(p.name, p.pool_id) for p in part.curve.pools] == [(POOL, 1)]


def test_discovery_through_the_curve_cli(tmp_path: Path) -> None:
    pools = [("pool1", 3, 30, None), ("pool_b", 3, 30, None)]
    with CurveWire(pools=pools) as wire:
        wire.refuse(wire.chunkservers[4])
        cli = wire.tool_script(tmp_path, "curve")
        part = CurveSource(mds=[wire.mds[0].addr], curve_cli=[str(cli)]).poll()
        calls = list(wire.tool_calls)
    assert calls == [("cli", "bs", "list", "chunkserver", "--format", "json"),
                     ("cli", "bs", "list", "logical-pool", "--format", "json"),
                     ("cli", "bs", "status", "copyset", "--format", "json")]
    assert sorted(d.curve_id for d in part.daemons.values()) == [1, 2, 3, 4, 5, 6]
    assert part.curve is not None
    assert [(p.name, p.pool_id) for p in part.curve.pools] == [("pool1", 1), ("pool_b", 2)]
    assert (part.curve.chunkservers_online, part.curve.chunkservers_offline) == (5, 1)
    assert (part.curve.copysets_total, part.curve.copysets_unhealthy) == (60, 0)
    assert part.daemons[wire.chunkservers[4].addr].online is False


def test_a_non_zero_exit_with_output_is_data_and_each_call_stands_alone(
        tmp_path: Path) -> None:
    with CurveWire() as wire:
        wire.unhealthy_copysets = 7  # copysets-status exits 255, as CopysetCheck returns -1
        wire.refuse(wire.chunkservers[5])  # chunkserver-status exits 255 too
        tool = wire.tool_script(tmp_path)
        part = CurveSource(mds=[m.addr for m in wire.mds], ops_tool=[str(tool)]).poll()
    cv = part.curve
    assert cv is not None and cv.tool_errors == {}
    assert (cv.copysets_total, cv.copysets_unhealthy) == (100, 7)
    assert (cv.chunkservers_online, cv.chunkservers_offline) == (5, 1)


def test_a_failed_call_leaves_its_values_unknown_not_the_last_good_ones(
        tmp_path: Path) -> None:
    with CurveWire() as wire:
        tool = wire.tool_script(tmp_path)
        src = CurveSource(mds=[m.addr for m in wire.mds], ops_tool=[str(tool)])
        first = src.poll()
        assert first.curve is not None and first.curve.copysets_total == 100
        # copysets-status now crashes (no output), chunkserver-status still answers.
        broken = tmp_path / "broken"
        broken.write_text(f'#!/bin/sh\n[ "$1" = copysets-status ] && exit 139\n'
                          f'exec {tool} "$@"\n')
        broken.chmod(0o755)
        src.ops_tool = [str(broken)]
        src.TOOL_EVERY = 0
        second = src.poll()
    cv = second.curve
    assert cv is not None
    assert cv.copysets_total is None and cv.copysets_unhealthy is None
    assert cv.tool_errors == {"copysets-status": "copysets-status failed: exit status 139"}
    assert (cv.chunkservers_online, cv.chunkservers_offline) == (6, 0), "read on its own"
    assert any("copysets-status failed" in e and "unknown" in e for e in second.errors)


def test_a_failing_tool_is_an_error_not_a_crash(tmp_path: Path) -> None:
    with CurveWire(chunkservers=2, copysets=10) as wire:
        tool, _ = _stand_in(tmp_path, "curve_ops_tool", {})
        part = CurveSource(mds=[wire.mds[0].addr], chunkservers=list(wire.addrs()),
                           ops_tool=[str(tool)]).poll()
        assert any("unknown command" in e for e in part.errors)
        assert part.curve is not None and set(part.curve.tool_errors) == {
            "chunkserver-list", "logical-pool-list", "copysets-status", "chunkserver-status"}
        assert len(part.daemons) == 2
        missing = CurveSource(chunkservers=list(wire.addrs()),
                              ops_tool=[str(tmp_path / "nope")]).poll()
        assert any("is not installed" in e for e in missing.errors)


def test_one_pools_id_read_from_its_raft_groups_and_not_guessed_for_two() -> None:
    with CurveWire() as wire:
        part = source_for(wire).poll()
    assert part.curve is not None and part.curve.pools[0].pool_id == 1
    with CurveWire(pools=[("pool1", 3, 30, None), ("pool_b", 3, 30, None)]) as wire:
        part = source_for(wire).poll()
    assert part.curve is not None
    assert [p.pool_id for p in part.curve.pools] == [None, None], \
        "two pools: which group is whose is not in the metrics"


def test_transfers_are_told_from_elections() -> None:
    clock = ManualClock()
    with CurveWire(heartbeat=0.3, clock=clock) as wire:
        src = source_for(wire)
        src.clock, src.wall = clock.clock, clock.wall
        src.RAFT_EVERY = 0
        src.poll()
        cs = wire.pools[0].copysets[0]
        wire.transfer(cs, cs.peers[1])  # the MDS's scheduler: an operator, then the move
        seen = src.poll()
        assert seen.curve is not None and seen.curve.transfer_copysets == (str(cs.group),)
        clock.advance(0.4)  # a heartbeat on: the move has landed
        moved = src.poll()
        assert cs.leader is cs.peers[1]
        assert sum(d.term_rises or 0 for d in moved.daemons.values()) == 3, "three peers"
        assert sum(d.elections or 0 for d in moved.daemons.values()) == 0
        wire.elect(4)  # no operator behind these
        stormy = src.poll()
    assert sum(d.elections or 0 for d in stormy.daemons.values()) == 12
    assert sum(d.candidates or 0 for d in stormy.daemons.values()) == 2


def test_the_hub_keeps_curve_beside_other_sources() -> None:
    with CurveWire() as wire:
        hub = Hub([source_for(wire)], interval=0.2)
        hub.start()
        try:
            assert hub.wait_polls(1, timeout=10)
            snap = hub.snapshot()
        finally:
            hub.stop()
    assert snap.curve is not None and snap.curve.pools[0].leader_range == 1
    assert snap.sources["curve"].ok and len(snap.daemons) == 6


def test_raft_pages_are_spread_over_polls() -> None:
    src = CurveSource(chunkservers=[f"127.0.0.1:{p}" for p in range(20000, 20100)])
    first = src._raft_due(list(src.chunkservers), now=100.0)
    assert len(first) == 10, "a tenth of the chunkservers a poll"
    for a in first:
        src._mem.raft_at[a] = 100.0
    second = src._raft_due(list(src.chunkservers), now=101.0)
    assert len(second) == 10 and not first & second, "the never-read ones come next"
    small = CurveSource(chunkservers=[f"127.0.0.1:{p}" for p in range(20000, 20006)])
    assert len(small._raft_due(list(small.chunkservers), now=1.0)) == 6


# ---- prometheus_client reads brpc's Prometheus text ------------------------------------


def test_prometheus_text_read_by_prometheus_client_gives_every_bvar() -> None:
    """brpc's /metrics of a chunkserver (tests/curve_wire.py writes it as brpc's
    prometheus_metrics_service.cpp does): every numeric bvar, the config bvars as their
    labels, the summary's quantile, sum and count; string bvars are not in it."""
    with CurveWire(chunkservers=3, copysets=30) as wire:
        cs = wire.chunkservers[0]
        text = cs.prometheus()
        leader = wire.mds_vars(wire.mds[0])
    v = parse_prometheus_text(text)
    expected: dict[str, object] = {}
    for name, value in cs.vars().items():
        if isinstance(value, str):
            expected[name] = dict(json.loads(value))
        else:
            expected[name] = float(value)  # type: ignore[arg-type]
    svc = f"rpc_server_{cs.port}_braft_raft_service_append_entries"
    expected |= {f'{svc}{{quantile="0.99"}}': 1500.0, f"{svc}_sum": 12345000.0,
                 f"{svc}_count": 10000.0}
    assert v == expected
    assert all(type(x) is float for x in v.values() if not isinstance(x, dict))
    from tests.curve_wire import prometheus_text
    mds = parse_prometheus_text(prometheus_text(leader))
    assert mds["topology_metric_logical_pool_default_logical_pool_leadernum_range"] == \
        leader["topology_metric_logical_pool_default_logical_pool_leadernum_range"]
    assert "mds_status" not in mds, "brpc leaves string bvars out of its Prometheus text"


def test_a_line_brpc_writes_that_is_not_a_sample_loses_only_itself() -> None:
    # brpc writes any bvar whose text is not quoted as `name <text>`: a vector bvar
    # becomes a line no Prometheus parser reads; the rest of the page still counts.
    text = ("# HELP process_cpu_usage\n# TYPE process_cpu_usage gauge\n"
            "process_cpu_usage 3.42\n"
            "# HELP rpc_server_8200_connection_count\n"
            "# TYPE rpc_server_8200_connection_count gauge\n"
            "rpc_server_8200_connection_count [1,2]\n"
            "# HELP bthread_worker_count\n# TYPE bthread_worker_count gauge\n"
            "bthread_worker_count 18\n")
    assert parse_prometheus_text(text) == {"process_cpu_usage": 3.42,
                                           "bthread_worker_count": 18.0}


# ---- keep-alive: connections opened once, not once a request ---------------------------


def test_a_poll_cycle_reuses_each_endpoints_connection() -> None:
    with CurveWire(chunkservers=40, copysets=400) as wire:
        src = source_for(wire, concurrency=8)
        endpoints = len(wire.mds) + 40
        try:
            src.poll()
            first = wire.stats()
            for _ in range(3):
                part = src.poll()
            later = wire.stats()
        finally:
            src.close()
    assert part.curve is not None and not part.curve.endpoint_errors
    # Each endpoint once (its /vars, /raft_stat and the MDS's two pages share it) ...
    assert first["connections"] <= endpoints < first["requests"], first
    # ... and not again: three more cycles, over a hundred requests, no new connection.
    assert later["requests"] - first["requests"] >= 3 * endpoints
    assert later["connections"] == first["connections"], (first, later)


def test_connections_the_server_dropped_are_opened_again_without_an_error() -> None:
    with CurveWire() as wire:
        src = source_for(wire)
        try:
            src.poll()
            before = wire.stats()["connections"]
            wire.drop_connections()  # returns once every socket is closed
            part = src.poll()
        finally:
            src.close()
        assert part.curve is not None and part.curve.endpoint_errors == {}
        assert wire.stats()["connections"] > before
    assert all(d.leaders for d in part.daemons.values())


def test_a_chunkserver_that_stops_after_a_poll_is_refused_for_it_alone() -> None:
    with CurveWire() as wire:
        src = source_for(wire)
        try:
            src.poll()
            bad = wire.chunkservers[3]
            wire.refuse(bad)  # its kept connection goes with it
            part = src.poll()
        finally:
            src.close()
    assert part.curve is not None
    assert part.curve.endpoint_errors == {bad.addr: "connection refused"}
    assert part.errors == ("1 of 6 chunkservers did not answer",)
