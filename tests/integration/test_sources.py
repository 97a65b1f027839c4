"""The Ceph, host and Prometheus sources against the real lab: load, pinning, storms, agreement."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.host.source import HostSource
from stormdeck.collectors.model import Partial
from stormdeck.collectors.prometheus.source import PrometheusSource
from tests.conftest import LabCluster, eventually, run_cli

pytestmark = pytest.mark.integration


def osd_pids(lab: LabCluster) -> dict[str, int]:
    state = json.loads((lab.dir / "lab.json").read_text())
    return {n: p["pid"] for n, p in state["procs"].items() if n.startswith("osd.")}


def host_window(src: HostSource, seconds: float) -> Partial:
    """Two polls `seconds` apart: the second carries rates over that window."""
    src.poll()
    time.sleep(seconds)
    return src.poll()


def test_snapshot_command_on_the_lab(release_cluster: LabCluster) -> None:
    lab_cluster = release_cluster
    res = run_cli("snapshot", "-c", str(lab_cluster.conf), "--json")
    assert res.rc == 0, res.err
    snap = json.loads(res.out)
    assert snap["sources"]["ceph"]["ok"] and snap["sources"]["host"]["ok"]
    osds = snap["daemons"]
    assert sorted(osds) == ["osd.0", "osd.1", "osd.2"]
    for name, d in osds.items():
        assert d["up"] and d["in"] and d["host"]
        assert d["devices"] and d["devices"][0].startswith("loop"), d
        assert d["cores_allowed"] >= 1 and d["cores_used"] is not None
        assert d["threads"] > 10 and d["rss_bytes"] > 0
        disk = snap["disks"][f"{d['host']}:/dev/{d['devices'][0]}"]
        assert name in disk["daemons"] and disk["virtual"] and disk["transport"] == "loop"
    cluster = snap["cluster"]
    assert sum(d["primary_pgs"] for d in osds.values()) == cluster["num_pgs"]
    major = {"pacific": "16.2.", "reef": "18.2.", "tentacle": "20.2."}[lab_cluster.release]
    assert cluster["release"] == lab_cluster.release and cluster["version"].startswith(major)
    assert cluster["config"]["osd_scrub_sleep"]["exists"] is True
    human = run_cli("snapshot", "-c", str(lab_cluster.conf))
    assert human.rc == 0 and "osd.2" in human.out and "loop" in human.out


def test_load_raises_cores_disk_and_latency_then_falls(release_cluster: LabCluster) -> None:
    lab_cluster = release_cluster
    host = HostSource(ceph_conf=str(lab_cluster.conf))
    ceph = CephSource(conffile=str(lab_cluster.conf))
    try:
        idle = host_window(host, 2.0)
        idle_cores = sum(d.cores_used or 0 for d in idle.daemons.values())
        assert lab_cluster.cli("lab", "load", "--threads", "16").rc == 0
        # The load starts on its own time (rados bench, in a chroot on Reef and Tentacle):
        # a 2 s window is taken again until it shows what is asserted below, for up to
        # 30 s; 6 s then one window once caught osd.2's disk before its first write
        # (Tentacle, a fresh clone's run).
        windows: list[Partial] = []

        def under_load() -> bool:
            w = host_window(host, 2.0)
            windows.append(w)
            cores = sum(d.cores_used or 0 for d in w.daemons.values())
            disks = [w.disks.get(f"{d.host}:/dev/{d.devices[0]}") for d in w.daemons.values()
                     if d.devices]
            return cores > max(idle_cores * 1.3, idle_cores + 0.05) and bool(disks) and all(
                k is not None and (k.write_iops or 0) > 10 and (k.util or 0) > 0
                for k in disks)

        time.sleep(6)
        with contextlib.suppress(AssertionError):  # the asserts below say what was missing
            eventually(under_load, 30, interval=0)
        loaded = windows[-1]
        busy_cores = sum(d.cores_used or 0 for d in loaded.daemons.values())
        # Clearly up, though not by a fixed amount: on a 2-core machine others share, the
        # OSDs get what CPU there is (0.18 -> 0.27 seen at a load average of 10).
        assert busy_cores > max(idle_cores * 1.3, idle_cores + 0.05), (idle_cores, busy_cores)
        for d in loaded.daemons.values():
            disk = loaded.disks[f"{d.host}:/dev/{d.devices[0]}"]  # type: ignore[index]
            assert disk.write_iops and disk.write_iops > 10, disk
            assert disk.util and disk.util > 0, disk
            assert disk.daemons == (d.id,)

        def ceph_sees_load() -> bool:
            p = ceph.poll()
            return (any((d.commit_latency or 0) > 0 for d in p.daemons.values())
                    and sum(d.write_iops or 0 for d in p.daemons.values()) > 10
                    and (p.cluster is not None and (p.cluster.client_write_iops or 0) > 10))

        eventually(ceph_sees_load, 30, interval=1)
        # BlueStore reports its apply latency from its commit latency's counter, the
        # fact the fleet source leaves ceph_osd_apply_latency_ms unasked on (docs/fleet.md).
        seen = [(d.id, d.commit_latency, d.apply_latency) for d in ceph.poll().daemons.values()
                if d.kind == "osd"]
        assert seen and all(c == a for _, c, a in seen), seen
    finally:
        stop = lab_cluster.cli("lab", "load", "--stop")
        ceph.close()
    assert stop.rc == 0
    time.sleep(3)
    after = host_window(host, 2.0)
    after_cores = sum(d.cores_used or 0 for d in after.daemons.values())
    assert after_cores < busy_cores * 0.6, (busy_cores, after_cores)


def _cpu_cgroup_v1() -> Path | None:
    root = Path("/sys/fs/cgroup/cpu")
    return root if (root / "cpu.cfs_quota_us").exists() else None


def test_pinned_and_quota_limited_osd_report_cores_allowed(lab_cluster: LabCluster) -> None:
    pid = osd_pids(lab_cluster)["osd.0"]
    cpus = os.cpu_count() or 1
    host = HostSource(ceph_conf=str(lab_cluster.conf))
    subprocess.run(["taskset", "-a", "-p", "-c", "0", str(pid)], check=True,
                   capture_output=True)
    try:
        assert host.poll().daemons["osd.0"].cores_allowed == 1.0
        assert host.poll().daemons["osd.1"].cores_allowed == float(cpus)
    finally:
        subprocess.run(["taskset", "-a", "-p", "-c", f"0-{cpus - 1}", str(pid)], check=True,
                       capture_output=True)
    assert host.poll().daemons["osd.0"].cores_allowed == float(cpus)

    # A CPU quota half a core wide, as systemd's CPUQuota=50% would set.
    v1 = _cpu_cgroup_v1()
    if v1 is not None:
        group = v1 / f"stormdeck-test-{os.getpid()}"
        group.mkdir()
        try:
            (group / "cpu.cfs_period_us").write_text("100000")
            (group / "cpu.cfs_quota_us").write_text("50000")
            (group / "cgroup.procs").write_text(str(pid))
            assert host.poll().daemons["osd.0"].cores_allowed == 0.5
        finally:
            (v1 / "cgroup.procs").write_text(str(pid))
            group.rmdir()
    else:
        root = Path("/sys/fs/cgroup")
        group = root / f"stormdeck-test-{os.getpid()}"
        group.mkdir()
        try:
            (group / "cpu.max").write_text("50000 100000")
            (group / "cgroup.procs").write_text(str(pid))
            assert host.poll().daemons["osd.0"].cores_allowed == 0.5
        finally:
            (root / "cgroup.procs").write_text(str(pid))
            group.rmdir()
    assert host.poll().daemons["osd.0"].cores_allowed == float(cpus)


def test_storm_seen_and_cleared_with_primaries_summing_up(lab_cluster: LabCluster) -> None:
    src = CephSource(conffile=str(lab_cluster.conf))
    seen: set[str] = set()
    storm = subprocess.Popen(
        [sys.executable, "-m", "stormdeck", "lab", "storm", "--pgs", "256", "--no-wait",
         "--dir", str(lab_cluster.dir)], cwd=Path(__file__).parents[2],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def cleared() -> bool:
            p = src.poll()
            assert p.cluster is not None
            seen.update(s for s in p.cluster.pg_states if s != "active+clean")
            return storm.poll() is not None and bool(seen) and p.cluster.pgs_not_clean == 0

        eventually(cleared, 180, interval=0.1)
        assert storm.wait() == 0, storm.stderr.read() if storm.stderr else ""
    finally:
        src.close()
    assert seen & {"unknown", "creating", "peering", "activating", "creating+peering",
                   "creating+activating", "activating+undersized", "peering+undersized"} or seen
    # A fresh source runs every command now, the PG dump too.
    fresh = CephSource(conffile=str(lab_cluster.conf))
    try:
        p = fresh.poll()
    finally:
        fresh.close()
    assert p.cluster is not None and not p.errors, p.errors
    assert p.cluster.pgs_not_clean == 0
    assert sum(d.primary_pgs or 0 for d in p.daemons.values()) == p.cluster.num_pgs


def test_prometheus_agrees_with_librados(release_cluster: LabCluster) -> None:
    lab_cluster = release_cluster
    prom = PrometheusSource(f"http://127.0.0.1:{lab_cluster.prometheus_port}")
    ceph = CephSource(conffile=str(lab_cluster.conf))
    try:
        def agree() -> bool:
            a, b = ceph.poll(), prom.poll()
            assert a.cluster is not None and b.cluster is not None
            if set(a.daemons) != set(b.daemons):
                return False
            for name, x in a.daemons.items():
                y = b.daemons[name]
                # What does not move must match at once...
                assert (x.host, x.devices, x.device_class, x.objectstore) == \
                    (y.host, y.devices, y.device_class, y.objectstore), name
                assert y.commit_latency is not None and y.apply_latency is not None
            # ...what moves (PG counts after a storm) must match once Prometheus
            # has scraped the mgr again, and the OSDs have refreshed their counters.
            ca, cb = a.cluster, b.cluster
            pairs: dict[str, Any] = {
                n: ((x.up, x.in_), (b.daemons[n].up, b.daemons[n].in_))
                for n, x in a.daemons.items()}
            # osd df counts PGs mapped to an OSD; the exporter's numpg counts PGs
            # instantiated on it, strays awaiting removal too. The OSD deletes a stray's
            # objects slowly (osd_delete_sleep_hdd, 5 s, on the lab's rotational loops),
            # so after earlier tests' pools strays last minutes: Reef's osd.2 held 94 for
            # 89 mapped for the whole 90 s (fresh clone run 10). More instantiated than
            # mapped, by up to a fifth, is that; fewer, beyond 2, is a disagreement.
            pairs |= {f"{n} pgs": (x.pgs, b.daemons[n].pgs) for n, x in a.daemons.items()
                      if not -2 <= (b.daemons[n].pgs or 0) - (x.pgs or 0)
                      <= max(2, (x.pgs or 0) // 5)}
            pairs |= {
                "num_pgs": (ca.num_pgs, cb.num_pgs), "health": (ca.health, cb.health),
                "not clean": (ca.pgs_not_clean, cb.pgs_not_clean),
                "flags": (ca.osd_flags, cb.osd_flags),
                "pools": ({(p.name, p.pg_num, p.size) for p in ca.pools},
                          {(p.name, p.pg_num, p.size) for p in cb.pools}),
                # Pools' fill: the mgr exports df's own figures.
                "fill": ({(p.name, p.max_avail_bytes is not None,
                           round(p.used_ratio or 0, 2)) for p in ca.pools},
                         {(p.name, p.max_avail_bytes is not None,
                           round(p.used_ratio or 0, 2)) for p in cb.pools})}
            differ.clear()
            differ.update({k: v for k, v in pairs.items() if v[0] != v[1]})
            return not differ

        differ: dict[str, Any] = {}
        try:
            eventually(agree, 90, interval=2)
        except AssertionError:
            raise AssertionError(f"librados and Prometheus still differ: {differ}") from None
        # Prometheus scrapes every 5 s; right after a storm it may lag one scrape, and on a
        # lab just started a disk's utilisation needs two scrapes of node_exporter (a rate).
        def disks_known() -> list[Any]:
            loops = [d for d in prom.poll().disks.values() if d.daemons]
            return loops if all(disk.util is not None for disk in loops) else []

        loops = eventually(disks_known, 30, interval=2)
        assert {d for disk in loops for d in disk.daemons} == {"osd.0", "osd.1", "osd.2"}
        # The lab's Prometheus evaluates stormdeck's recording rules, and they are read
        # (op latencies and awaits only where an OSD or disk had ops in the window).
        # On a lab just started they have not been evaluated yet, and a source probes for
        # them once a minute: a new source probes at its first poll.
        def recorded() -> bool:
            fresh = PrometheusSource(f"http://127.0.0.1:{lab_cluster.prometheus_port}")
            try:
                fresh.poll()
                return fresh.mode.startswith("recording rules")
            finally:
                fresh.close()

        eventually(recorded, 30, interval=2)
    finally:
        ceph.close()
        prom.close()
