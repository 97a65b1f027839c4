"""The Curve source on Curve's real wire formats, served from 127.0.0.1 (tests/curve_wire.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from stormdeck.collectors.curve import (
    CurveError,
    CurveSource,
    bvar_name,
    conf_value,
    parse_chunkserver_status,
    parse_cli_chunkservers,
    parse_copysets_status,
    parse_ops_chunkserver_list,
    parse_prometheus_text,
    parse_raft_stat,
    parse_vars,
)
from stormdeck.collectors.hub import Hub

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
    assert parse_copysets_status("Copysets not healthy!\ntotal copysets: 300, unhealthy "
                                 "copysets: 12, unhealthy_ratio: 4%\n") == (False, 300, 12)
    with pytest.raises(CurveError):
        parse_copysets_status("Segmentation fault")
    cli = json.dumps({"error": {"code": 0, "message": "success"}, "result": [
        {"id": "1", "type": "nvme", "ip": "10.0.0.1", "port": "8200", "rwStatus": "READWRITE",
         "diskState": "DISKNORMAL", "copysetNum": "100", "mountpoint": "local:///d",
         "diskCapacity": "39 GiB", "diskUsed": "39 GiB", "unhealthyCopyset": "0 %",
         "extAddr": ""},
        {"id": "2", "type": "nvme", "ip": "10.0.0.2", "port": "8200", "copysetNum": "100",
         "unhealthyCopyset": "100 %"}]})
    rows = parse_cli_chunkservers(cli)
    assert [(r.addr, r.online, r.copysets) for r in rows] == \
        [("10.0.0.1:8200", True, 100), ("10.0.0.2:8200", False, 100)]
    with pytest.raises(CurveError, match="mds"):
        parse_cli_chunkservers('{"error": {"code": 1, "message": "mds not reachable"}}')


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
    with CurveWire(slow_seconds=3) as wire:
        slow = wire.chunkservers[1]
        slow.mode = "slow"
        src = source_for(wire, timeout=0.5)
        start = time.monotonic()
        part = src.poll()
        took = time.monotonic() - start
    assert took < 2.0, took
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
        tool, log = _stand_in(tmp_path, "curve_ops_tool", {
            c: wire.ops_tool_output(c)
            for c in ("chunkserver-list", "copysets-status", "chunkserver-status")})
        src = CurveSource(mds=[m.addr for m in wire.mds],
                          ops_tool=[str(tool), "-confPath=/etc/curve/tools.conf"])
        part = src.poll()
    assert log.read_text().splitlines() == [
        "chunkserver-list -checkHealth=false -confPath=/etc/curve/tools.conf",
        "copysets-status -confPath=/etc/curve/tools.conf",
        "chunkserver-status -confPath=/etc/curve/tools.conf"]
    assert len(part.daemons) == 6 and not part.errors
    d = part.daemons[wire.chunkservers[3].addr]
    assert d.curve_id == 4 and d.leaders_mds == d.leaders == 17
    assert d.leaders_heartbeat == 17 and d.online is True
    assert part.curve is not None and part.curve.copysets_total == 100
    assert (part.curve.chunkservers_online, part.curve.chunkservers_offline) == (6, 0)


def test_discovery_through_the_curve_cli(tmp_path: Path) -> None:
    with CurveWire(chunkservers=3, copysets=30) as wire:
        rows = [{"id": str(c.id), "type": "nvme", "ip": "127.0.0.1", "port": str(c.port),
                 "rwStatus": "READWRITE", "diskState": "DISKNORMAL",
                 "copysetNum": str(c.copysets), "unhealthyCopyset": "0 %"}
                for c in wire.chunkservers]
        cli, log = _stand_in(tmp_path, "curve", {"chunkserver": json.dumps(
            {"error": {"code": 0, "message": "success"}, "result": rows})})
        part = CurveSource(mds=[wire.mds[0].addr], curve_cli=[str(cli)]).poll()
    assert log.read_text().strip() == "bs list chunkserver --format json"
    assert sorted(d.curve_id for d in part.daemons.values()) == [1, 2, 3]


def test_a_failing_tool_is_an_error_not_a_crash(tmp_path: Path) -> None:
    with CurveWire(chunkservers=2, copysets=10) as wire:
        tool, _ = _stand_in(tmp_path, "curve_ops_tool", {})
        part = CurveSource(mds=[wire.mds[0].addr], chunkservers=list(wire.addrs()),
                           ops_tool=[str(tool)]).poll()
        assert any("unknown command" in e for e in part.errors)
        assert len(part.daemons) == 2
        missing = CurveSource(chunkservers=list(wire.addrs()),
                              ops_tool=[str(tmp_path / "nope")]).poll()
        assert any("is not installed" in e for e in missing.errors)


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
