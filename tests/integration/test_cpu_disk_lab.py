"""The CPU and disk rules and validate's evidence on the real labs: a quota that holds an OSD
back is seen throttled, unpinned OSDs and loop devices draw nothing, cephadm's OSDs are
seen in their units, and live load is judged against the capacity validate measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.advisors import validated
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Severity
from stormdeck.advisors.settings import load_settings
from stormdeck.advisors.validate.checks import device_of
from stormdeck.advisors.validated import ValidatedStore
from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.host.disks import whole_disk
from stormdeck.collectors.host.processes import fsid_from_conf, short_hostname
from stormdeck.collectors.host.source import HostSource
from stormdeck.collectors.hub import History, Hub
from tests.conftest import LabCluster, eventually

pytestmark = pytest.mark.integration

CPU_DISK_RULES = ("ceph.osd.cores_beyond_knee", "ceph.osd.iops_per_core",
                  "ceph.osd.op_threads_vs_cores", "ceph.osd.cpu_throttled",
                  "disk.write_cache_on", "disk.at_hardware_limit")


def disks_under(path: Path) -> list[str]:
    """The whole disks under the filesystem holding `path` (the lab's loop files), found
    apart from the host source: st_dev through /sys/dev/block, then partitions, dm slaves."""
    st = os.stat(path)
    link = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    assert link.exists(), f"{path} is on no block device: the lab's loops have no disk under"
    return whole_disk(Path(os.path.realpath(link)).name)


def quick(*rules: str, seconds: float = 10.0, **params: float) -> dict:
    """The shipped settings with some rules' for-windows shortened, for a test's patience."""
    settings = load_settings()
    for rule in rules:
        s = settings[rule]
        settings[rule] = replace(s, for_seconds=seconds, warmup_samples=2, params={
            **s.params, "window_seconds": seconds, **params})
    return settings


def judge_for(lab: LabCluster, engine: Engine, seconds: float, until=None) -> list:
    """Poll the lab (librados and this host) once a second and judge, for `seconds` or
    until `until(findings)` is true; the last findings."""
    hub = Hub([CephSource(conffile=str(lab.conf)), HostSource(ceph_conf=str(lab.conf))],
              interval=1.0)
    history = History()
    hub.start()
    found: list = []
    try:
        assert hub.wait_polls(1, timeout=30)

        def step():
            nonlocal found
            history.append(hub.snapshot())
            found = engine.evaluate(history)
            return until(found) if until else False

        try:
            eventually(step, seconds, interval=1.0)
        except AssertionError:
            if until:
                raise
    finally:
        hub.stop()
    return found


def test_a_quota_that_holds_an_osd_back_is_seen_throttled(lab_cluster: LabCluster) -> None:
    """osd.0 in a cgroup of 0.2 cores under 16 writes in flight: its quota cuts most
    periods short (cgroup v1 here). osd.1 and osd.2 have no quota: nothing to see."""
    state = json.loads((lab_cluster.dir / "lab.json").read_text())
    pid = state["procs"]["osd.0"]["pid"]
    cpu = Path("/sys/fs/cgroup/cpu")
    group = cpu / f"stormdeck-throttle-{os.getpid()}"
    group.mkdir()
    try:
        (group / "cpu.cfs_period_us").write_text("100000")
        (group / "cpu.cfs_quota_us").write_text("20000")
        (group / "cgroup.procs").write_text(str(pid))
        assert lab_cluster.cli("lab", "load", "--threads", "16").rc == 0
        engine = Engine(quick(*CPU_DISK_RULES), mutes=None)

        def throttled(found: list) -> list:
            return [f for f in found if f.rule == "ceph.osd.cpu_throttled"
                    and f.state == "firing"]

        found = judge_for(lab_cluster, engine, 90, throttled)
    finally:
        lab_cluster.cli("lab", "load", "--stop")
        (cpu / "cgroup.procs").write_text(str(pid))
        group.rmdir()
    (f,) = throttled(found)
    assert f.target == "osd.0" and f.severity == Severity.WARNING
    assert "quota of 0.2 cores" in f.summary
    # A bare process in no unit: the advice is its cpuset or container limit.
    assert "taskset" in f.procedure[0] and "--cpus=4" in f.procedure[0]
    # The healthy OSDs, on the same host at the same time: no quota, nothing throttled,
    # and unpinned (the host's 2 CPUs are no allowance anyone gave them).
    others = [x for x in found if x.target in ("osd.1", "osd.2")
              and x.rule in CPU_DISK_RULES]
    assert not others, others


def test_cpu_and_disk_rules_are_quiet_on_each_releases_lab_under_load(
        release_cluster: LabCluster) -> None:
    """Pacific's and Reef's OSDs run unpinned; Tentacle's as cephadm does, each in the
    cgroup of its unit ceph-FSID@osd.N.service with a 1.5-core quota: the host source says
    which, and none of these rules warns or proposes a change under load.

    Quiet, since the disk under the loop files carries the OSDs: one thing is true to say,
    as information and nothing more. That disk (vda, virtio) has its volatile write cache on
    and nobody measured what it costs: disk.write_cache_on says to measure, on that disk
    alone, with no change. Its limit is not reached (about 45% busy here while the two
    CPUs run the OSDs): disk.at_hardware_limit says nothing, on it or on the loops."""
    lab = release_cluster
    fsid = fsid_from_conf(str(lab.conf))
    src = HostSource(ceph_conf=str(lab.conf))
    src.poll()
    assert lab.cli("lab", "load", "--threads", "16").rc == 0
    try:
        daemons = eventually(lambda: {k: d for k, d in src.poll().daemons.items()
                                      if d.cpu_throttled is not None}, 20, interval=1.0)
        for name, d in daemons.items():
            if lab.osd_cpu_limit is None:
                assert d.cpu_limit_explicit is False and d.unit is None, d
            else:
                assert d.cpu_limit_explicit is True, d
                assert d.unit == f"ceph-{fsid}@{name}.service", d
                assert 0.0 <= d.cpu_throttled <= 1.0, d  # type: ignore[operator]
        engine = Engine(quick(*CPU_DISK_RULES[:3], "disk.write_cache_on",
                              "disk.at_hardware_limit"), mutes=None)
        found = judge_for(lab, engine, 15)
    finally:
        lab.cli("lab", "load", "--stop")
    under = set(disks_under(lab.dir))
    said = [f for f in found if f.rule in CPU_DISK_RULES and f.rule != "ceph.osd.cpu_throttled"]
    info = [f for f in said if f.rule == "disk.write_cache_on" and f.severity == Severity.INFO
            and f.target.split(":/dev/")[1] in under and not f.changes
            and "not measured yet" in f.summary and f.state == "firing"]
    loud = [f for f in said if f not in info]
    assert not loud, [(f.rule, f.target, f.summary, f.evidence) for f in loud]
    cache = Path(f"/sys/block/{sorted(under)[0]}/queue/write_cache").read_text().strip()
    assert len(info) == (len(under) if cache == "write back" else 0), info


def test_live_load_against_the_capacity_validate_measured(lab_cluster: LabCluster,
                                                          tmp_path: Path) -> None:
    """validate --quick measures the curve (2 bench clients, the OSDs' caches dropped
    before the reads) and the write cache with flushes counted, and keeps both; then the
    idle lab is within its capacity and the lab under load is not."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    # The lab's loop files are on the disk under tmp_path: it holds the OSDs, and validate
    # runs fio there only when told so by the device's name.
    res = subprocess.run([sys.executable, "-m", "stormdeck", "validate", "--headless",
                          "--quick", "--json", "-c", str(lab_cluster.conf), "--scratch-dir",
                          str(tmp_path), "--confirm", str(device_of(tmp_path)),
                          "--skip", "settings", "--skip", "peering"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode in (0, 1, 2), res.stderr
    report = json.loads(res.stdout)
    (curve,) = [s for s in report["steps"] if s["id"] == "curve"]
    assert curve["status"] == "done", curve
    for v in curve["verdicts"]:
        assert v["data"]["caches_dropped"] is True, v["evidence"]
        assert v["data"]["clients"] == 2 and v["data"]["pgs"] == 32
    points = curve["verdicts"][0]["evidence"]
    assert len(points) >= 6, points

    path = tmp_path / "state" / "stormdeck" / "validate" / validated.FILE
    kept = validated.load(path)
    fsid = fsid_from_conf(str(lab_cluster.conf))
    caps = kept.capacity_of(fsid)
    assert set(caps) == {"write", "read"} and caps["write"].max_iops > 0 and caps["write"].quick
    (cache,) = kept.caches.values()
    assert cache.disk.startswith(f"{short_hostname()}:/dev/")
    # This kernel (5.5+) counts flushes apart: the check saw how many fio's syncs sent.
    assert cache.flushes_per_write is not None and cache.verdict in ("pass", "fail")

    rule = "ceph.cluster.load_vs_validated"
    idle = judge_for(lab_cluster, Engine(quick(rule, seconds=5.0), mutes=None,
                                         validated=ValidatedStore(path)), 8)
    assert not [f for f in idle if f.rule == rule and f.state == "firing"]
    # The load generator's 16 writes in flight against a curve that went to 32: past the
    # 70% point when the shared machine lets it; 40% of the capacity at least.
    assert lab_cluster.cli("lab", "load", "--threads", "16").rc == 0
    try:
        engine = Engine(quick(rule, seconds=5.0, max_share=0.4), mutes=None,
                        validated=ValidatedStore(path))
        busy = judge_for(lab_cluster, engine, 60, lambda found: [
            f for f in found if f.rule == rule and f.state == "firing"])
    finally:
        lab_cluster.cli("lab", "load", "--stop")
    (f,) = [f for f in busy if f.rule == rule and f.state == "firing"]
    assert f.severity == Severity.WARNING and "write IOPS of" in f.summary
    assert "quick" in f.summary
