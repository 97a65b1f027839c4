"""The lab is a real Ceph cluster: librados sees pools, config and peering storms in it."""

from __future__ import annotations

import errno
import json
import urllib.parse
import urllib.request

import pytest

from stormdeck.lab.state import STORM_POOL
from tests.conftest import LabCluster, ceph_json, eventually

pytestmark = pytest.mark.integration


def test_pool_created_through_librados_reaches_active_clean(lab_cluster: LabCluster) -> None:
    cluster = lab_cluster.rados()
    try:
        ceph_json(cluster, "osd pool create", pool="itest", pg_num=32, pgp_num=32)
        cluster.wait_for_latest_osdmap()
        assert "itest" in cluster.list_pools()

        def pool_clean() -> bool:
            pgs = ceph_json(cluster, "pg ls-by-pool", target="mgr", poolstr="itest")["pg_stats"]
            return len(pgs) == 32 and all(p["state"] == "active+clean" for p in pgs)

        eventually(pool_clean, 120)
        ioctx = cluster.open_ioctx("itest")
        ioctx.write_full("hello", b"stormdeck")
        assert ioctx.read("hello") == b"stormdeck"
        ioctx.close()
    finally:
        ceph_json(cluster, "osd pool rm", pool="itest", pool2="itest",
                  yes_i_really_really_mean_it=True)
        cluster.shutdown()


def test_config_set_get_round_trip(lab_cluster: LabCluster) -> None:
    cluster = lab_cluster.rados()
    try:
        ceph_json(cluster, "config set", who="osd", name="osd_scrub_sleep", value="0.1")
        got = ceph_json(cluster, "config get", who="osd.0", key="osd_scrub_sleep")
        assert float(got) == pytest.approx(0.1)
        log = ceph_json(cluster, "config log", num=5)
        # The history names the change "section/option" with the normalised value.
        assert any(c["name"] == "osd/osd_scrub_sleep" and float(c["new_value"]) == 0.1
                   for entry in log for c in entry["changes"])
    finally:
        ceph_json(cluster, "config rm", who="osd", name="osd_scrub_sleep")
        assert float(ceph_json(cluster, "config get", who="osd.0", key="osd_scrub_sleep")) == 0
        cluster.shutdown()


def test_storm_of_new_pgs_leaves_active_clean_and_comes_back(lab_cluster: LabCluster) -> None:
    cluster = lab_cluster.rados()
    try:
        res = lab_cluster.cli("lab", "storm", "--pgs", "128", "--no-wait")
        assert res.rc == 0, res.err
        seen: set[str] = set()

        def clean_again() -> bool:
            # The storm pool's own PGs: other pools of the session lab may be scrubbing
            # or still settling from earlier tests.
            ret, out, err = cluster.mgr_command(json.dumps(
                {"prefix": "pg ls-by-pool", "poolstr": STORM_POOL, "format": "json"}), b"",
                timeout=30)
            if ret == -errno.ENOENT:  # the mgr has not heard of the new pool yet
                return False
            assert ret == 0, err
            pgs = json.loads(out)["pg_stats"]
            seen.update(p["state"] for p in pgs)
            return len(pgs) == 128 and all(
                {"active", "clean"} <= set(p["state"].split("+")) for p in pgs)

        eventually(clean_again, 180, interval=0.2)
        assert seen - {"active+clean"}, "never saw a PG outside active+clean"
    finally:
        cluster.shutdown()


def test_storm_restart_osd_takes_it_down_and_up(release_cluster: LabCluster) -> None:
    lab_cluster = release_cluster
    cluster = lab_cluster.rados()
    try:
        def osd1() -> dict:
            return next(o for o in ceph_json(cluster, "osd dump")["osds"] if o["osd"] == 1)

        before = osd1()
        assert before["up"] == 1
        res = lab_cluster.cli("lab", "storm", "--restart-osd", "1", "--timeout", "180")
        assert res.rc == 0, res.err
        assert "active+clean" in res.out
        after = osd1()
        # A new up_from epoch and a down_at past the old one: the map saw both.
        assert after["up"] == 1
        assert after["up_from"] > before["up_from"]
        assert after["down_at"] > before["up_from"]
    finally:
        cluster.shutdown()


def test_storm_restart_unknown_osd_is_one_sentence(lab_cluster: LabCluster) -> None:
    res = lab_cluster.cli("lab", "storm", "--restart-osd", "99")
    assert res.rc == 3
    assert "no osd.99" in res.err and "Traceback" not in res.err


def test_load_runs_real_writes_and_stops(release_cluster: LabCluster) -> None:
    lab_cluster = release_cluster
    cluster = lab_cluster.rados()
    try:
        res = lab_cluster.cli("lab", "load", "--threads", "8")
        assert res.rc == 0, res.err
        again = lab_cluster.cli("lab", "load")
        assert again.rc == 3 and "already running" in again.err

        def writing() -> bool:
            pools = ceph_json(cluster, "osd pool stats", pool_name="lab-bench")
            return pools[0].get("client_io_rate", {}).get("write_op_per_sec", 0) > 0

        eventually(writing, 60, interval=1)
    finally:
        stop = lab_cluster.cli("lab", "load", "--stop")
        cluster.shutdown()
    assert stop.rc == 0 and "stopped" in stop.out
    status = json.loads(lab_cluster.cli("lab", "status", "--json").out)
    assert "load" not in {d["name"] for d in status["daemons"]}


def test_status_reports_every_daemon_and_health(release_cluster: LabCluster) -> None:
    lab_cluster = release_cluster
    res = lab_cluster.cli("lab", "status", "--json")
    assert res.rc == 0, res.err
    status = json.loads(res.out)
    names = {d["name"] for d in status["daemons"] if d["alive"]}
    assert {"mon.a", "mgr.x", "osd.0", "osd.1", "osd.2", "prometheus", "node-exporter"} <= names
    devices = [d["device"] for d in status["daemons"] if d["name"].startswith("osd.")]
    assert all(dev and dev.startswith("/dev/loop") for dev in devices)
    assert status["health"] in {"HEALTH_OK", "HEALTH_WARN"}
    assert status["osds"] == {"up": 3, "total": 3}
    assert status["release"] == lab_cluster.release
    assert status["ceph"].endswith(" " + lab_cluster.release)
    assert status["cephadm"] is (lab_cluster.osd_cpu_limit is not None)
    human = lab_cluster.cli("lab", "status")
    assert f"release     {lab_cluster.release} (ceph " in human.out


def test_prometheus_scrapes_the_lab_mgr(lab_cluster: LabCluster) -> None:
    query = urllib.parse.urlencode({"query": 'up{job="ceph"}'})
    url = f"http://127.0.0.1:{lab_cluster.prometheus_port}/api/v1/query?{query}"

    def ceph_up() -> bool:
        with urllib.request.urlopen(url, timeout=5) as resp:
            result = json.load(resp)["data"]["result"]
        return bool(result) and result[0]["value"][1] == "1"

    eventually(ceph_up, 60, interval=1)
    with urllib.request.urlopen(f"http://127.0.0.1:{lab_cluster.mgr_port}/metrics",
                                timeout=10) as resp:
        assert b"ceph_osd_up" in resp.read()


def test_second_up_on_a_running_lab_is_refused(lab_cluster: LabCluster) -> None:
    res = lab_cluster.cli("lab", "up")
    assert res.rc == 3
    assert "already running" in res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
