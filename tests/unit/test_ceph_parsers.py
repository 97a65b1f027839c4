"""Ceph parsers on outputs captured from the lab (Pacific 16.2.15) and on newer releases' shapes."""

from __future__ import annotations

import json
import math

import pytest

from stormdeck.collectors.ceph.parse import (
    count_primaries,
    flag_names,
    parse_config_dump,
    parse_config_help,
    parse_config_log,
    parse_health,
    parse_log_last,
    parse_osd_df,
    parse_osd_dump,
    parse_osd_metadata,
    parse_osd_perf,
    parse_osd_status,
    parse_pools,
    parse_stamp,
    parse_status,
    parse_versions,
)
from stormdeck.collectors.ceph.source import CephSource, _Cached
from tests.conftest import DATA

PAC = DATA / "pacific"


def load(name: str):
    return json.loads((PAC / name).read_text())


def test_status_clean() -> None:
    s = parse_status(load("status.json"))
    assert s["health"] == "HEALTH_OK"
    assert s["num_pgs"] == 97 and s["pg_states"] == {"active+clean": 97}
    assert s["pg_flags"] == {"active": 97, "clean": 97}
    assert (s["num_osds"], s["num_up_osds"], s["num_in_osds"]) == (3, 3, 3)
    assert s["client_write_iops"] == 1554 and s["client_read_iops"] == 0
    assert s["client_write_bps"] == 6367734


def test_status_during_an_osd_restart() -> None:
    s = parse_status(load("status_storm.json"))
    assert s["health"] == "HEALTH_WARN"
    assert s["num_up_osds"] == 2 and s["num_osds"] == 3


def test_status_of_an_older_release_nests_osdmap() -> None:
    s = parse_status({"osdmap": {"osdmap": {"epoch": 7, "num_osds": 2, "num_up_osds": 1,
                                            "num_in_osds": 2}}, "pgmap": {}})
    assert (s["osdmap_epoch"], s["num_up_osds"]) == (7, 1)
    assert s["client_read_iops"] == 0.0  # Ceph omits zero rates


def test_health_with_an_osd_down() -> None:
    checks, slow, daemons = parse_health(load("health_detail_storm.json"))
    assert [c.code for c in checks] == ["OSD_DOWN"]
    assert checks[0].count == 1 and checks[0].severity == "HEALTH_WARN"
    assert checks[0].detail == ("osd.2 (root=default,host=vm) is down",)
    assert (slow, daemons) == (0, ())


@pytest.mark.parametrize(("message", "count", "daemons"), [
    # Summary forms written by the monitor (src/mon/HealthMonitor.cc).
    ("12 slow ops, oldest one blocked for 174 sec, daemons [osd.2,osd.3] have slow ops.",
     12, ("osd.2", "osd.3")),
    ("1 slow ops, oldest one blocked for 31 sec, osd.7 has slow ops", 1, ("osd.7",)),
    ("1597 slow ops, oldest one blocked for 16139 sec, daemons "
     "[osd.0,osd.10,osd.13,osd.19,osd.22,osd.27,osd.29,osd.3,osd.35,osd.36]... have slow ops.",
     1597, ("osd.0", "osd.10", "osd.13", "osd.19", "osd.22", "osd.27", "osd.29", "osd.3",
            "osd.35", "osd.36")),
    ("10 slow ops, oldest one blocked for 3193 sec, daemons [mon.a,mon.b] have slow ops.",
     10, ("mon.a", "mon.b")),
])
def test_health_slow_ops(message: str, count: int, daemons: tuple[str, ...]) -> None:
    d = {"status": "HEALTH_WARN", "checks": {"SLOW_OPS": {
        "severity": "HEALTH_WARN", "summary": {"message": message, "count": count},
        "detail": [], "muted": False}}}
    checks, slow, found = parse_health(d)
    assert slow == count and found == daemons
    assert checks[0].code == "SLOW_OPS"


def test_osd_perf_in_seconds() -> None:
    perf = parse_osd_perf(load("osd_perf.json"))
    assert perf == {2: (0.003, 0.003), 1: (0.004, 0.004), 0: (0.004, 0.004)}
    # Before the osdstats wrapper, and ms only.
    assert parse_osd_perf({"osd_perf_infos": [{"id": 5, "perf_stats": {
        "commit_latency_ms": 12, "apply_latency_ms": 3}}]}) == {5: (0.012, 0.003)}


def test_osd_status_pacific_table() -> None:
    io = parse_osd_status((PAC / "osd_status_table.txt").read_bytes())
    assert sorted(io) == [0, 1, 2]
    assert io[0].write_iops == 404 and io[0].read_iops == 0
    assert io[0].write_bps == 1619 * 1024  # "1619k": format_bytes is binary
    assert io[2].host == "vm" and io[2].state == "exists,up"


def test_osd_status_table_units() -> None:
    table = (b"ID  HOST   USED  AVAIL  WR OPS  WR DATA  RD OPS  RD DATA  STATE\n"
             b" 7  node-1  1.2T  2.3T  12.5k  3.5M  1000  0  exists,up\n"
             b" 8  node-2  0  0  0  0  0  0  autoout,exists\n")
    io = parse_osd_status(table)
    assert io[7].write_iops == 12500 and io[7].write_bps == 3.5 * (1 << 20)
    assert io[7].read_iops == 1000 and io[8].state == "autoout,exists"


def test_osd_status_json_of_newer_releases() -> None:
    # The keys the status module writes from Quincy on, spaces and all.
    raw = json.dumps({"OSDs": [{"id": 3, "host name": "n1", "kb used": 1, "kb available": 2,
                                "write ops rate": 120, "write byte rate": 4096,
                                "read ops rate": 30, "read byte rate": 8192,
                                "state": ["exists", "up"]}]}).encode()
    io = parse_osd_status(raw)[3]
    assert (io.host, io.write_iops, io.read_iops, io.write_bps, io.read_bps, io.state) == \
        ("n1", 120, 30, 4096, 8192, "exists,up")


@pytest.mark.parametrize("raw", [b"", b"garbage", b"{", b'{"OSDs": [{"id": "x"}]}',
                                 b"ID HOST\n 1 h 2 3 four 5 6 7 up\n"])
def test_osd_status_malformed(raw: bytes) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        parse_osd_status(raw)


def test_osd_df() -> None:
    df = parse_osd_df(load("osd_df.json"))
    assert df[0].pgs == 34 and df[0].device_class == "hdd"
    assert df[0].up is True and df[0].in_ is True
    assert 0 < df[0].utilization < 1


def test_osd_metadata_maps_devices_and_host() -> None:
    meta = parse_osd_metadata(load("osd_metadata.json"))
    assert meta[0].devices == ("loop0",) and meta[0].host == "vm"
    assert meta[1].objectstore == "bluestore" and meta[1].rotational is True
    assert meta[2].release == "pacific" and meta[2].version == "16.2.15"


def test_primaries_sum_to_the_pg_count() -> None:
    raw = (PAC / "pg_dump_pgs_brief.json").read_bytes()
    prim = count_primaries(raw)
    counts, total = prim.by_osd, prim.total
    as_json = json.loads(raw)["pg_stats"]
    assert total == len(as_json)
    assert sum(counts.values()) == total
    assert counts[0] == sum(1 for p in as_json if p["acting_primary"] == 0)
    # Per pool: the pool id is the pgid's prefix.
    for pool, per_osd in prim.by_pool.items():
        assert sum(per_osd.values()) == sum(1 for p in as_json
                                            if p["pgid"].split(".")[0] == str(pool))


def test_primaries_from_a_bare_list_and_unmapped_pgs() -> None:
    raw = json.dumps([{"pgid": "1.0", "state": "active", "acting_primary": 4},
                      {"pgid": "1.1", "state": "unknown", "acting_primary": -1}]).encode()
    prim = count_primaries(raw)
    assert (prim.by_osd, prim.by_pool, prim.total) == ({4: 1}, {1: {4: 1}}, 2)
    overall = count_primaries(raw, per_pool=False)
    assert (overall.by_osd, overall.by_pool, overall.total) == ({4: 1}, {}, 2)


@pytest.mark.parametrize("raw", [b"", b"not json", b'{"pg_stats": [{"pgid": "1.0"',
                                 b'[{"pgid": "1.0", "state": "x"}]',
                                 b'{"pg_stats":[{"pgid":"1.0","acting_primary":3}, {"pgid"'])
def test_primaries_malformed(raw: bytes) -> None:
    with pytest.raises(ValueError):
        count_primaries(raw)


def test_osd_dump_flags_and_up_in() -> None:
    d = parse_osd_dump(load("osd_dump.json"))
    assert d["osds"] == {0: (True, True), 1: (True, True), 2: (True, True)}
    assert "sortbitwise" in d["flags"]
    assert parse_osd_dump({"flags": "noout,noscrub", "osds": []})["flags"] == \
        ("noout", "noscrub")


def test_pools_replicated_from_capture() -> None:
    pools = parse_pools(load("osd_pool_ls_detail.json"), {})
    by_name = {p.name: p for p in pools}
    assert by_name["x"].pg_num == 64 and by_name["x"].type == "replicated"
    assert by_name["x"].size == 1 and by_name["x"].read_balance_score is None
    assert by_name["device_health_metrics"].applications == ("mgr_devicehealth",)


def test_pools_erasure_and_read_balance_of_newer_releases() -> None:
    rows = [{"pool_id": 4, "pool_name": "ec", "type": 3, "size": 3, "min_size": 2,
             "pg_num": 32, "erasure_code_profile": "k2m1", "stripe_width": 8192,
             "flags_names": "hashpspool,ec_overwrites,ec_optimizations"},
            {"pool_id": 5, "pool_name": "rbd", "type": 1, "size": 3, "min_size": 2,
             "pg_num": 100, "read_balance": {"score_acting": "inf", "score_stable": 1.0}},
            {"pool_id": 6, "pool_name": "nan", "type": 1, "size": 3, "min_size": 2,
             "pg_num": 8, "read_balance": {"score_acting": "NaN"}}]
    ec, rbd, nan = parse_pools(rows, {"k2m1": {"k": "2", "m": "1", "plugin": "jerasure"}})
    assert (ec.type, ec.ec_k, ec.ec_m, ec.stripe_unit) == ("erasure", 2, 1, 4096)
    assert ec.ec_optimizations
    assert rbd.read_balance_score == math.inf and not rbd.ec_optimizations
    assert nan.read_balance_score is not None and math.isnan(nan.read_balance_score)
    su = parse_pools(rows[:1], {"k2m1": {"k": "2", "m": "1", "stripe_unit": "16K"}})[0]
    assert su.stripe_unit == 16384


def test_versions() -> None:
    assert parse_versions(load("versions.json")) == ("pacific", "16.2.15", False)
    mixed = {"overall": {
        "ceph version 17.2.7 (b12291d110049b2f35e32e0de30d70e9a4c060d2) quincy (stable)": 3,
        "ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)": 2}}
    assert parse_versions(mixed) == ("pacific", "16.2.15", True)
    assert parse_versions({}) == (None, None, False)


def test_config_dump_and_help() -> None:
    dump = parse_config_dump(load("config_dump.json"))
    assert dump["mgr/prometheus/server_addr"] == {"mgr": "127.0.0.1"}
    masked = parse_config_dump([{"section": "osd", "name": "osd_memory_target",
                                 "value": "4294967296", "mask": "class:ssd"}])
    assert masked == {"osd_memory_target": {"osd/class:ssd": "4294967296"}}
    opt = parse_config_help("osd_scrub_sleep", load("config_help_osd_scrub_sleep.json"))
    assert opt.exists and opt.runtime is True and opt.default == "0" and opt.type == "float"
    assert parse_config_help("filestore_op_threads", None).exists is False


def test_a_failing_command_keeps_its_last_good_value() -> None:
    src = CephSource(conffile="/nonexistent")
    errors: list[str] = []
    assert src._run("osd df", 0, 1.0, lambda: {"good": 1}, errors) == {"good": 1}

    def broken() -> None:
        json.loads("{torn")

    assert src._run("osd df", 0, 2.0, broken, errors) == {"good": 1}
    assert errors and "osd df: unexpected output" in errors[0]
    assert isinstance(src._cache["osd df"], _Cached) and src._cache["osd df"].error
    # Not due yet: a slow command is not re-run every poll.
    calls = []
    src._run("slow", 10.0, 5.0, lambda: calls.append(1), errors)
    src._run("slow", 10.0, 6.0, lambda: calls.append(1), errors)
    assert len(calls) == 1


def test_osdmap_derived_commands_follow_the_epoch() -> None:
    src = CephSource(conffile="/nonexistent")
    calls: list[float] = []
    fetch = lambda: calls.append(1)  # noqa: E731
    src._run("pgs_brief", 300, 100.0, fetch, [], epoch=5)
    src._run("pgs_brief", 300, 105.0, fetch, [], epoch=5)  # same map: nothing to fetch
    src._run("pgs_brief", 300, 105.0, fetch, [], epoch=6)  # new map, but under 10 s
    assert len(calls) == 1
    src._run("pgs_brief", 300, 111.0, fetch, [], epoch=6)
    assert len(calls) == 2
    src._run("pgs_brief", 300, 412.0, fetch, [], epoch=6)  # and at least every 300 s
    assert len(calls) == 3


def test_config_log_is_one_change_per_option_oldest_first() -> None:
    changes = parse_config_log(json.loads((PAC / "config_log.json").read_text()))
    assert [c.version for c in changes] == sorted(c.version for c in changes)
    sleep = [c for c in changes if c.name == "osd/osd_scrub_sleep"]
    assert (sleep[0].old, sleep[0].new) == (None, "0.100000")  # set
    assert (sleep[1].old, sleep[1].new) == ("0.100000", None)  # removed
    assert sleep[0].stamp == pytest.approx(parse_stamp("2026-11-22T03:09:32.902586+0000"))
    assert parse_stamp("0.000000") is None


def test_the_cluster_log_tail_outlives_the_monitors_summary() -> None:
    """The monitors keep 50 entries of any level; the mgr's [DBG] pgmap lines push the
    others out in 100 s. The source keeps its own tail of what is not [DBG]."""
    from tests.captured import CannedCeph, lab_outputs

    rows = json.loads((PAC / "log_last.json").read_text())
    assert {r["priority"] for r in rows} == {"[DBG]", "[WRN]"}
    entries = parse_log_last(rows)
    assert [e.stamp for e in entries] == sorted(e.stamp for e in entries)
    src = CannedCeph(lab_outputs())
    first = src.poll().cluster
    assert first is not None
    assert [e.priority for e in first.log] == ["[WRN]"]
    assert "OSDMAP_FLAGS" in first.log[0].message
    # Later the summary holds only [DBG] lines: the warning stays in the tail.
    src.outputs["log last"] = json.dumps([r for r in rows if r["priority"] == "[DBG]"]).encode()
    later = src.poll().cluster
    assert later is not None and later.log == first.log
    noisy = [{**rows[0], "seq": 10_000 + i, "priority": "[INF]", "message": f"m{i}",
              "stamp": f"2030-01-01T00:00:{i:02d}.000000+0000"} for i in range(40)]
    src.outputs["log last"] = json.dumps(noisy).encode()
    tail = src.poll().cluster.log  # type: ignore[union-attr]
    assert len(tail) == CephSource.LOG_LINES and tail[-1].message == "m39"


def test_the_fast_osd_maker_makes_the_daemon_init_would() -> None:
    """CephSource makes OSD Daemons without Daemon.__init__'s per-field lookups: the
    record it makes is the one __init__ makes, frozen, with every other field's default."""
    import dataclasses

    import pytest

    from stormdeck.collectors.ceph.source import _make_osd
    from stormdeck.collectors.model import Daemon

    kw = dict(id="osd.7", host="stor-1", devices=("nvme0n1",), up=True, in_=False,
              objectstore="bluestore", device_class="ssd", read_iops=1.5, write_iops=None,
              read_bps=3.0, write_bps=4.0, commit_latency=0.002, apply_latency=None, pgs=101,
              primary_pgs=33, utilization=0.5, has_slow_ops=None, down_since=None)
    made, init = _make_osd(**kw), Daemon(kind="osd", **kw)
    assert type(made) is Daemon and made == init and hash(made) == hash(init)
    assert [getattr(made, f.name) for f in dataclasses.fields(Daemon)] == \
        [getattr(init, f.name) for f in dataclasses.fields(Daemon)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.up = False  # type: ignore[misc]


def test_a_new_osdmap_epoch_with_nothing_moved_keeps_the_same_pools() -> None:
    """Each epoch refetches the PG dump and the pools; equal pools are the previous objects,
    so the History holds one copy of each pool's per-OSD counts, not one per epoch."""
    from tests.captured import CannedCeph, lab_outputs

    outputs = lab_outputs()
    src = CannedCeph(outputs)
    src.clock = lambda: 1000.0
    first = src.poll().cluster
    assert first is not None and first.pools
    assert any(p.pgs_by_osd for p in first.pools)
    status, dump = json.loads(outputs["status"]), json.loads(outputs["osd dump"])
    epoch = status["osdmap"]["epoch"] + 1
    status["osdmap"]["epoch"], dump["epoch"] = epoch, epoch
    src.outputs.update({"status": json.dumps(status).encode(),
                        "osd dump": json.dumps(dump).encode()})
    src.clock = lambda: 2000.0  # past every cadence: everything fetched anew
    second = src.poll().cluster
    assert second is not None and second.osdmap_epoch == epoch
    assert second.pools is first.pools
    # A pool that did change is new.
    pools = json.loads(outputs["osd pool ls"])
    pools[0]["pg_num_target"] = pools[0].get("pg_num_target", 1) * 2
    src.outputs["osd pool ls"] = json.dumps(pools).encode()
    status["osdmap"]["epoch"] = dump["epoch"] = epoch + 1
    src.outputs.update({"status": json.dumps(status).encode(),
                        "osd dump": json.dumps(dump).encode()})
    src.clock = lambda: 3000.0
    third = src.poll().cluster
    assert third is not None and third.pools is not first.pools


def test_an_osd_down_carries_when_the_monitors_marked_it_down() -> None:
    """osd dump's osd_xinfo down_stamp, for the OSDs down now: the overview's 'since'."""
    from tests.captured import CannedCeph, lab_outputs

    dump = load("osd_dump.json")
    assert parse_osd_dump(dump)["down_since"] == {}  # all up; "0.000000" is never down
    for o in dump["osds"]:
        if o["osd"] == 2:
            o["up"] = 0
    for x in dump["osd_xinfo"]:
        x["down_stamp"] = "2026-11-22T05:36:52.009888+0000"  # osd.0 and 1: an old one
    assert parse_osd_dump(dump)["down_since"] == {2: parse_stamp(
        "2026-11-22T05:36:52.009888+0000")}
    outputs = lab_outputs()
    outputs["osd dump"] = json.dumps(dump).encode()
    d = CannedCeph(outputs).poll().daemons
    assert d["osd.2"].up is False and d["osd.2"].down_since == parse_stamp(
        "2026-11-22T05:36:52.009888+0000")
    assert d["osd.0"].up is True and d["osd.0"].down_since is None


def test_the_oldest_slow_op_is_read_from_the_summary() -> None:
    from stormdeck.collectors.ceph.parse import parse_health_slow

    d = {"checks": {"SLOW_OPS": {"severity": "HEALTH_WARN", "summary": {
        "message": "3 slow ops, oldest one blocked for 35 sec, daemons [osd.0,osd.2] have "
                   "slow ops.", "count": 3}}}}
    _, slow, daemons, oldest = parse_health_slow(d)
    assert slow == 3 and daemons == ("osd.0", "osd.2") and oldest == 35.0
    assert parse_health_slow(load("health_detail.json"))[3] is None


def test_flags_are_names_from_either_shape_and_nothing_else() -> None:
    assert flag_names("noout,noscrub,") == ["noout", "noscrub"]  # Pacific's osd dump
    assert flag_names(["noout", "noscrub"]) == ["noout", "noscrub"]  # flags_set
    # Found by the property test: a list holding a list made the source raise TypeError
    # (unhashable) where a bad answer must become one sentence or nothing.
    assert flag_names([[None], "noout", 3]) == ["noout"]
    assert flag_names(None) == [] and flag_names({"noout": 1}) == []
