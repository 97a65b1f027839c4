"""The exporter on the lab, scraped by the lab's real Prometheus: the fleet view through PromQL
alone shows what the local host source sees, and follows a CPU limit."""

from __future__ import annotations

import json
import os
import urllib.request

import pytest

from stormdeck.advisors.validate.measure import set_affinity
from stormdeck.collectors.host.source import HostSource
from tests.conftest import LabCluster, eventually, free_ports, run_cli

pytestmark = pytest.mark.integration


def state(lab: LabCluster) -> dict:
    return json.loads((lab.dir / "lab.json").read_text())


def fleet_snapshot(lab: LabCluster) -> dict:
    """Prometheus only: no librados, no host source, no ceph.conf."""
    env = {k: v for k, v in os.environ.items() if k != "CEPH_CONF"}
    res = run_cli("snapshot", "--json", "--no-host", "--prometheus",
                  f"http://127.0.0.1:{lab.prometheus_port}", env=env)
    assert res.rc == 0, res.err
    return json.loads(res.out)


def test_the_exporter_serves_every_lab_osd(release_cluster: LabCluster) -> None:
    lab_cluster = release_cluster
    port = state(lab_cluster)["ports"]["exporter"]
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for osd in ("osd.0", "osd.1", "osd.2"):
        assert f'stormdeck_daemon_cores_allowed{{ceph_daemon="{osd}"' in text
        assert f'stormdeck_daemon_cpu_seconds_total{{ceph_daemon="{osd}"' in text
    from prometheus_client.parser import text_string_to_metric_families

    from stormdeck import __version__
    from stormdeck.collectors.host.processes import fsid_from_conf

    families = {f.name: f for f in text_string_to_metric_families(text)}
    # The lab's own loop device: other labs on this host may hold loop0 (or none does).
    loop = state(lab_cluster)["procs"]["osd.0"]["device"].removeprefix("/dev/")
    assert loop in {s.labels["device"] for s in families["stormdeck_device_write_cache_on"].samples}
    assert "stormdeck_host_tuned_profile_info" in text
    # Prometheus naming, a build_info, and the lab's fsid as ceph-mixin's `cluster`.
    fsid = fsid_from_conf(str(lab_cluster.conf))
    assert "stormdeck_exporter_scrape_duration_seconds" in families
    (build,) = families["stormdeck_build_info"].samples
    assert build.labels["version"] == __version__
    throttled = {s.labels["ceph_daemon"]: s
                 for s in families["stormdeck_daemon_cpu_throttled_seconds"].samples}
    assert set(throttled) == {"osd.0", "osd.1", "osd.2"}
    assert all(s.labels["cluster"] == fsid and s.value >= 0 for s in throttled.values())


# Bare OSDs (Pacific) and cephadm-shaped ones (Tentacle) are the two shapes this follows
# (the suite's time is bounded).
@pytest.mark.releases('pacific', 'tentacle')
def test_the_fleet_view_matches_the_host_source_and_follows_a_cpu_limit(
        release_cluster: LabCluster) -> None:
    lab_cluster = release_cluster
    lab = lab_cluster
    local = HostSource(ceph_conf=str(lab.conf))
    local.poll()
    mine = {d.id: d for d in local.poll().daemons.values()}

    def fleet_ready() -> dict | None:
        snap = fleet_snapshot(lab)
        osds = {k: v for k, v in snap["daemons"].items() if k.startswith("osd.")}
        ok = len(osds) == 3 and all(v["cores_used"] is not None and v["cores_allowed"]
                                    for v in osds.values())
        return osds if ok else None

    fleet = eventually(fleet_ready, timeout=90, interval=3)
    for osd, d in mine.items():
        assert fleet[osd]["cores_allowed"] == d.cores_allowed

    def cores_agree() -> bool:
        # Rates over different windows (Prometheus 2 min, the host source the 3 s since its
        # last poll): one OSD's burst (a scrub, a PG's stats) can part them for a moment.
        now = {d.id: d for d in local.poll().daemons.values()}
        osds = fleet_ready() or {}
        return all(o in now and o in osds
                   and abs(osds[o]["cores_used"] - (now[o].cores_used or 0.0)) < 0.3
                   for o in mine)

    eventually(cores_agree, timeout=60, interval=3)
    for osd, d in mine.items():
        assert fleet[osd]["threads"] == pytest.approx(d.threads, abs=5)
        assert fleet[osd]["host"] == d.host
    snap = fleet_snapshot(lab)
    (host,) = snap["hosts"].values()
    assert host["tuned_profile"] is not None  # "" when tuned is not installed
    loop0 = next(v for v in snap["disks"].values() if v["name"] == "loop0")
    assert loop0["transport"] == "loop" and loop0["virtual"] is True
    assert loop0["write_cache"] in ("write back", "write through")
    pid = int(state(lab)["procs"]["osd.1"]["pid"])
    before = os.sched_getaffinity(pid)
    # A cephadm-shaped OSD's own cgroup caps it below its affinity.
    full = min(float(len(before)), lab.osd_cpu_limit or float(len(before)))
    assert mine["osd.1"].cores_allowed == full
    set_affinity(pid, {min(before)})
    try:
        eventually(lambda: fleet_snapshot(lab)["daemons"]["osd.1"]["cores_allowed"] == 1.0,
                   timeout=60, interval=3)
    finally:
        set_affinity(pid, before)
    eventually(lambda: fleet_snapshot(lab)["daemons"]["osd.1"]["cores_allowed"] == full,
               timeout=60, interval=3)


def test_exporter_bad_input_gets_one_sentence() -> None:
    import socket

    (port,) = free_ports(1)
    with socket.socket() as held:
        held.bind(("127.0.0.1", port))
        held.listen()
        for args, words in ((("--listen", "nowhere"), "give ADDRESS:PORT"),
                            (("--listen", f"127.0.0.1:{port}"), "cannot listen"),
                            (("-c", "/nonexistent.conf"), "no such file: /nonexistent.conf")):
            res = run_cli("exporter", *args, timeout=30)
            assert res.rc == 3 and words in res.err, (args, res)
            assert len(res.err.strip().splitlines()) == 1
