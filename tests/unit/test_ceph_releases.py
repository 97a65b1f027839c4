"""Every Ceph parser on outputs captured from each release's lab (tests/data/<release>/, made
with tests/capture_release.py: see the README there), and the full CephSource poll on them.

Same lab shape on each (three BlueStore OSDs on loop devices, pools .mgr and lab-bench of
32 PGs, captured quiet and under `lab load`), so the figures below differ only where the
release does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from stormdeck.collectors.ceph.parse import (
    count_primaries,
    mgr_modules_problem,
    parse_config_dump,
    parse_config_help,
    parse_config_log,
    parse_health,
    parse_log_last,
    parse_mgr_modules,
    parse_osd_df,
    parse_osd_dump,
    parse_osd_metadata,
    parse_osd_perf,
    parse_osd_status,
    parse_pools,
    parse_status,
    parse_versions,
)
from tests.capture_release import STATIC
from tests.captured import CannedCeph
from tests.conftest import DATA

RELEASES = {
    "reef": {"version": "18.2.7", "epoch": 20, "devices": ("loop0", "loop1", "loop2"),
             "scrub_load_threshold": "0.5"},
    # Squid raised osd_scrub_load_threshold's default from 0.5 to 10.
    "tentacle": {"version": "20.2.4", "epoch": 15, "devices": ("loop2", "loop4", "loop5"),
                 "scrub_load_threshold": "10"},
}


def load(release: str, name: str) -> Any:
    return json.loads((DATA / release / name).read_text())


def raw(release: str, name: str) -> bytes:
    return (DATA / release / name).read_bytes()


@pytest.fixture(params=sorted(RELEASES))
def release(request: pytest.FixtureRequest) -> str:
    return request.param


def test_status_quiet_and_under_load(release: str) -> None:
    quiet, busy = parse_status(load(release, "status.json")), \
        parse_status(load(release, "status_load.json"))
    for s in (quiet, busy):
        assert s["health"] == "HEALTH_OK"
        assert s["num_pgs"] == 33 and s["pg_states"] == {"active+clean": 33}
        assert (s["num_osds"], s["num_up_osds"], s["num_in_osds"]) == (3, 3, 3)
        assert s["osdmap_epoch"] == RELEASES[release]["epoch"]
    assert busy["client_write_iops"] > 3000 > quiet["client_write_iops"]
    assert busy["client_read_iops"] == 0.0


def test_health_detail(release: str) -> None:
    assert parse_health(load(release, "health_detail.json")) == ((), 0, ())


def test_osd_perf_in_seconds(release: str) -> None:
    quiet = parse_osd_perf(load(release, "osd_perf.json"))
    busy = parse_osd_perf(load(release, "osd_perf_load.json"))
    assert sorted(quiet) == sorted(busy) == [0, 1, 2]
    assert all(c == a == 0.0 for c, a in quiet.values())
    assert all(0.0 < c < 0.02 and c == a for c, a in busy.values())


def test_osd_perf_without_commit_and_apply_reads_op_latency(release: str) -> None:
    """ceph/ceph#68492 (open) replaces commit/apply_latency with the mgr's op latencies."""
    doc = load(release, "osd_perf_load.json")
    for info in doc["osdstats"]["osd_perf_infos"]:
        info["perf_stats"] = {"op_latency_ms": 4.0, "op_r_latency_ms": 0.5,
                              "op_w_latency_ms": 6.0, "kv_sync_lat_ms": 1.0}
    assert set(parse_osd_perf(doc).values()) == {(0.006, 0.004)}
    for info in doc["osdstats"]["osd_perf_infos"]:
        info["perf_stats"] = {"op_latency_ms": 4.0}
    assert set(parse_osd_perf(doc).values()) == {(0.004, 0.004)}
    old = load(release, "osd_perf_load.json")  # both present: the long-standing ones win
    for info in old["osdstats"]["osd_perf_infos"]:
        info["perf_stats"]["op_latency_ms"] = 99.0
    assert parse_osd_perf(old) == parse_osd_perf(load(release, "osd_perf_load.json"))


def test_osd_status_table_under_load(release: str) -> None:
    io = parse_osd_status(raw(release, "osd_status_table_load.txt"))
    assert sorted(io) == [0, 1, 2]
    assert all(o.host == "vm" and o.write_iops > 500 and o.read_iops == 0 for o in io.values())
    assert all(o.state == "exists,up" for o in io.values())
    quiet = parse_osd_status(raw(release, "osd_status_table.txt"))
    assert all(o.write_iops < 1000 for o in quiet.values())


def test_osd_df_dump_metadata_and_primaries_agree(release: str) -> None:
    df = parse_osd_df(load(release, "osd_df.json"))
    dump = parse_osd_dump(load(release, "osd_dump.json"))
    meta = parse_osd_metadata(load(release, "osd_metadata.json"))
    prim = count_primaries(raw(release, "pg_dump_pgs_brief.json"), True)
    assert sorted(df) == sorted(dump["osds"]) == sorted(meta) == [0, 1, 2]
    assert sum(u.pgs for u in df.values()) == 33  # size 1: one copy per PG
    assert all(u.device_class == "hdd" and u.up and 0 < u.utilization < 0.5
               for u in df.values())
    assert dump["epoch"] == RELEASES[release]["epoch"]
    assert "sortbitwise" in dump["flags"] and set(dump["osds"].values()) == {(True, True)}
    assert list(dump["ec_profiles"]) == ["default"]
    assert tuple(m.devices[0] for _, m in sorted(meta.items())) == RELEASES[release]["devices"]
    assert {m.objectstore for m in meta.values()} == {"bluestore"}
    assert sum(prim.by_osd.values()) == 33
    assert {o: u.pgs for o, u in df.items()} == prim.by_osd
    assert prim.by_pool[1] == {1: 1} and sum(prim.by_pool[2].values()) == 32


def test_pools(release: str) -> None:
    dump = parse_osd_dump(load(release, "osd_dump.json"))
    pools = parse_pools(load(release, "osd_pool_ls_detail.json"), dump["ec_profiles"])
    assert [(p.id, p.name) for p in pools] == [(1, ".mgr"), (2, "lab-bench")]
    assert pools[1].read_balance_score == pytest.approx(1.13, abs=0.01)


def test_config_dump_log_and_help(release: str) -> None:
    dump = parse_config_dump(load(release, "config_dump.json"))
    assert dump["mgr/prometheus/server_addr"] == {"mgr": "127.0.0.1"}
    changes = parse_config_log(load(release, "config_log.json"))
    assert [c.new for c in changes][:1] == ["127.0.0.1"]
    helps = json.loads((DATA / release / "config_help_watched.json").read_text())
    opts = {n: parse_config_help(n, h) for n, h in helps.items()}
    assert opts["osd_scrub_load_threshold"].default == RELEASES[release]["scrub_load_threshold"]
    assert opts["osd_scrub_sleep"].default == "0"


def test_versions_and_log(release: str) -> None:
    assert parse_versions(load(release, "versions.json")) == \
        (release, RELEASES[release]["version"], False)
    log = parse_log_last(load(release, "log_last.json"))
    assert len(log) == 50 and all(e.channel == "cluster" for e in log)
    assert any(e.message.startswith("pgmap v") for e in log)


def test_mgr_modules_that_cannot_run(release: str) -> None:
    # influx cannot run (no influxdb library) but nobody enabled it: no news.
    assert parse_mgr_modules(load(release, "mgr_dump.json")) == ()
    assert mgr_modules_problem(()) is None


def test_reefs_mgr_with_a_pyo3_bcrypt_names_what_is_missing() -> None:
    failed = parse_mgr_modules(load("reef", "mgr_pyo3_bcrypt/mgr_dump.json"))
    names = [n for n, _ in failed]
    assert names == ["balancer", "crash", "devicehealth", "orchestrator", "pg_autoscaler",
                     "progress", "prometheus", "rbd_support", "status", "telemetry", "volumes"]
    sentence = mgr_modules_problem(failed)
    assert sentence == ("mgr modules cannot run: " + ", ".join(names) + ": PyO3 modules do not "
                        "yet support subinterpreters, see https://github.com/PyO3/pyo3/issues/576")
    # Its health stays OK: nothing but the mgr dump says so.
    assert load("reef", "mgr_pyo3_bcrypt/health_detail.json")["status"] == "HEALTH_OK"


def canned(release: str, load_: bool = True) -> CannedCeph:
    r = lambda name: raw(release, name)  # noqa: E731
    outputs = {
        "status": r("status_load.json" if load_ else "status.json"),
        "health": r("health_detail.json"),
        "osd perf": r("osd_perf_load.json" if load_ else "osd_perf.json"),
        "osd status": r("osd_status_table_load.txt" if load_ else "osd_status_table.txt"),
        "osd df": r("osd_df.json"), "osd dump": r("osd_dump.json"),
        "pg dump": r("pg_dump_pgs_brief.json"), "osd pool ls": r("osd_pool_ls_detail.json"),
        "config dump": r("config_dump.json"), "osd metadata": r("osd_metadata.json"),
        "versions": r("versions.json"), "log last": r("log_last.json"),
        "config log": r("config_log.json"), "mgr dump": r("mgr_dump.json"),
        "df": r("df.json"), **{prefix: r(name) for prefix, name in STATIC.items()},
    }
    return CannedCeph(outputs, json.loads(r("config_help_watched.json")))


def test_the_whole_poll_on_each_release(release: str) -> None:
    p = canned(release).poll()
    assert p.errors == ()
    c = p.cluster
    assert (c.release, c.version, c.versions_mixed) == (release, RELEASES[release]["version"],
                                                       False)
    assert sorted(p.daemons) == ["osd.0", "osd.1", "osd.2"]
    for d in p.daemons.values():
        assert d.up and d.in_ and d.host == "vm" and d.objectstore == "bluestore"
        assert d.write_iops and d.commit_latency and d.primary_pgs == d.pgs


def test_a_mgr_without_modules_is_the_sources_warning() -> None:
    src = canned("reef")
    src.outputs["mgr dump"] = raw("reef", "mgr_pyo3_bcrypt/mgr_dump.json")
    (problem,) = src.poll().errors
    assert problem.startswith("mgr modules cannot run: balancer, crash,")
    assert "prometheus" in problem and "PyO3" in problem


def test_osd_dump_and_pools_give_what_the_pool_rules_judge(release: str) -> None:
    """require_min_compat_client, primary affinities other than 1, pg_num_target, the
    autoscale mode and the EC profile's code (issue 19's pool and EC rules)."""
    dump = parse_osd_dump(load(release, "osd_dump.json"))
    assert dump["require_min_compat_client"] == "luminous"
    assert dump["primary_affinity"] == {}  # every OSD at 1
    edited = load(release, "osd_dump.json")
    edited["osds"][1]["primary_affinity"] = 0.25
    assert parse_osd_dump(edited)["primary_affinity"] == {"osd.1": 0.25}
    rows = load(release, "osd_pool_ls_detail.json")
    pools = {p.name: p for p in parse_pools(rows, dump["ec_profiles"])}
    assert (pools["lab-bench"].pg_num_target, pools["lab-bench"].autoscale_mode) == (32, "off")
    # An EC pool on the release's default profile: Tentacle's default plugin is isa.
    ec = {**rows[-1], "pool_id": 9, "pool_name": "ec", "type": 3,
          "erasure_code_profile": "default", "stripe_width": 8192}
    (p,) = [x for x in parse_pools([ec], dump["ec_profiles"])]
    plugin = "isa" if release == "tentacle" else "jerasure"
    assert (p.ec_plugin, p.ec_technique, p.ec_k, p.ec_m, p.stripe_unit) == \
        (plugin, "reed_sol_van", 2, 2, 4096)
