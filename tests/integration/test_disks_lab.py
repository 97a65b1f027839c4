"""The disk rules on the lab, on the disk under the lab's loop files: the OSDs of each
release's lab reach it through their loop devices; validate's fio measures a write cache
planted on a loop of its own and that disk's, and a disk kept full is found at its
hardware limit, once, there and not on the loops.

The two fio cases run on the host's (Pacific) lab only. What they judge is this host's disk,
the same one under every release's loops; what differs by release is how an OSD reaches
it, tested on each. Each fio case costs one to two minutes of the suite's 40 and keeps the
shared disk full meanwhile."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from stormdeck.advisors import validated
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Severity
from stormdeck.advisors.validate.checks import device_of
from stormdeck.advisors.validated import ValidatedStore
from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.host.processes import short_hostname
from stormdeck.collectors.host.source import HostSource
from stormdeck.collectors.hub import History, Hub
from tests.conftest import LabCluster, eventually
from tests.integration.test_cpu_disk_lab import disks_under, judge_for, quick

pytestmark = pytest.mark.integration

WC, LIMIT = "disk.write_cache_on", "disk.at_hardware_limit"


def lab_loops(lab: LabCluster) -> dict[str, str]:
    """osd.N -> the loop device the lab attached for it (lab.json)."""
    procs = json.loads((lab.dir / "lab.json").read_text())["procs"]
    return {name: Path(p["device"]).name for name, p in procs.items()
            if name.startswith("osd.") and p.get("device")}


def test_the_disk_under_each_releases_loops_carries_its_osds(
        release_cluster: LabCluster) -> None:
    """Each OSD holds its loop device (what `ceph osd metadata` names), the loop names the
    disk under its file, and that disk lists every OSD of the lab: alone from this host,
    and merged with librados's view."""
    lab = release_cluster
    loops = lab_loops(lab)
    under = tuple(disks_under(lab.dir))
    assert len(loops) == 3, loops
    host = short_hostname()
    src = HostSource(ceph_conf=str(lab.conf), watch=False)
    def all_osds():
        p = src.poll()
        return p if set(loops) <= set(p.daemons) else None

    try:
        part = eventually(all_osds, 30, interval=1.0)
    finally:
        src.close()
    for osd, loop in loops.items():
        assert part.daemons[osd].devices == (loop,), part.daemons[osd]
        disk = part.disks[f"{host}:/dev/{loop}"]
        assert disk.virtual and disk.daemons == (osd,) and disk.backing == under, disk
    for name in under:
        disk = part.disks[f"{host}:/dev/{name}"]
        assert not disk.virtual and disk.backing == ()
        # Other people's labs on this host are other clusters: not counted here.
        assert set(disk.daemons) == set(loops), disk

    hub = Hub([CephSource(conffile=str(lab.conf)), HostSource(ceph_conf=str(lab.conf))],
              interval=1.0)
    hub.start()
    try:
        assert hub.wait_polls(2, timeout=60)
        snap = hub.snapshot()
    finally:
        hub.stop()
    for osd, loop in loops.items():
        assert snap.daemons[osd].devices == (loop,)  # as ceph osd metadata says
    for name in under:
        assert set(snap.disks[f"{host}:/dev/{name}"].daemons) == set(loops)


@contextmanager
def loop_of_its_own(directory: Path, mountpoint: Path) -> Iterator[str]:
    """An ext4 on a loop device of the test's own, its file in `directory`, mounted at
    `mountpoint`, its kernel write cache set to 'write back': the state validate's fio
    judges, planted the same on every host. Loops take that setting (their
    queue/write_cache is writable whenever the backing file can be fsynced), while a
    physical disk reporting 'write through' refuses it, and a host disk is no test's to
    change. Everything undone on the way out, the setting first."""
    image = directory / "stormdeck-wc-loop.img"
    with image.open("wb") as f:
        f.truncate(128 << 20)  # validate --quick prefills 64 MiB
    dev = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                         text=True, check=True).stdout.strip()
    name = Path(dev).name
    knob = Path(f"/sys/block/{name}/queue/write_cache")
    was = knob.read_text().strip()
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
        mountpoint.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mount", dev, str(mountpoint)], check=True, capture_output=True)
        try:
            knob.write_text("write back")
            try:
                yield name
            finally:
                knob.write_text(was)
        finally:
            subprocess.run(["umount", str(mountpoint)], check=True)
    finally:
        subprocess.run(["losetup", "-d", dev], check=True)
        # A device still open is only marked to detach on close: wait, so the lab's own
        # check that no loop of its directory is left never meets this one.
        eventually(lambda: not subprocess.run(["losetup", "-j", str(image)], capture_output=True,
                                              text=True).stdout.strip(), 30, interval=0.2)
        image.unlink()


def validate_cache(lab: LabCluster, scratch: Path, state: Path, *confirm: str) -> dict:
    """`stormdeck validate`'s write-cache check alone (the hosts step), as an operator runs
    it: its JSON report."""
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    res = subprocess.run([sys.executable, "-m", "stormdeck", "validate", "--headless",
                          "--quick", "--json", "-c", str(lab.conf), "--scratch-dir",
                          str(scratch), *[a for d in confirm for a in ("--confirm", d)],
                          "--skip", "settings", "--skip", "curve", "--skip", "peering"],
                         capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode in (1, 2), res.stderr  # a check failed, as each call here expects
    return json.loads(res.stdout)


def cache_verdict(report: dict, disk: str) -> dict:
    (hosts,) = [s for s in report["steps"] if s["id"] == "hosts"]
    (v,) = [v for v in hosts["verdicts"] if v["check"] == f"write cache of {disk}"]
    return v


def test_a_measured_write_cache_under_the_loops_is_judged_there_without_a_change(
        lab_cluster: LabCluster, tmp_path: Path) -> None:
    """validate's fio check on a loop device of the test's own, its write cache planted
    'write back': every fdatasync sends it a flush and the check fails, on every host.
    disk.write_cache_on judges no loop, though the lab's report 'write back' as well and
    carry the OSDs: a loop's flush is an fsync of its file, whose cache is the disk's under
    it. That disk, the one under the lab's loop files, is judged by its own view: where it
    reports 'write back' (this project's machines), validate's fio fails there too
    (confirmed by name: it holds the OSDs) and the rule warns on it (rotational here), on
    no loop, and a virtio disk gets the hypervisor's procedure and no change; where it
    reports 'write through' it has no volatile cache and the rule is silent."""
    lab = lab_cluster
    host = short_hostname()
    state = tmp_path / "state"
    with loop_of_its_own(lab.dir, tmp_path / "loop") as loop:
        v = cache_verdict(validate_cache(lab, tmp_path / "loop", state), loop)
    assert v["verdict"] == "fail", v
    assert v["data"]["flushes_per_write"] >= 0.3, v["evidence"]

    for osd, name in lab_loops(lab).items():
        view = Path(f"/sys/block/{name}/queue/write_cache").read_text().strip()
        assert view == "write back", (osd, name, view)
    (disk,) = disks_under(lab.dir)
    kernel = Path(f"/sys/block/{disk}/queue/write_cache").read_text().strip()
    cached = kernel == "write back"
    if cached:
        dev = device_of(lab.dir)
        assert dev is not None
        v = cache_verdict(validate_cache(lab, lab.dir, state, dev), disk)
        assert v["verdict"] == "fail", v
        assert v["data"]["flushes_per_write"] >= 0.3, v["evidence"]
    store = ValidatedStore(state / "stormdeck" / "validate" / validated.FILE)
    measured = validated.load(store.path)
    assert measured.cache_of(f"{host}:/dev/{loop}").verdict == "fail"

    engine = Engine(quick(WC, seconds=1.0), mutes=None, validated=store)
    # Silence needs the whole window the rule would take to fire (two samples, one second).
    found = judge_for(lab, engine, 10 if cached else 4, until=(lambda now: any(
        f.rule == WC and f.state == "firing" for f in now)) if cached else None)
    said = [f for f in found if f.rule == WC and f.state == "firing"]
    if not cached:
        assert not said, f"{disk} reports {kernel!r}, yet: {said}"
        return
    (f,) = said
    assert f.target == f"{host}:/dev/{disk}", said
    rotational = Path(f"/sys/block/{disk}/queue/rotational").read_text().strip() == "1"
    assert f.severity == (Severity.WARNING if rotational else Severity.INFO)
    assert "fio measured" in f.summary and "through loop" in f.summary
    transport = os.path.realpath(f"/sys/block/{disk}")
    if "/virtio" in transport:
        # No tool in the guest changes it; never the kernel's view in /sys/block (K6.1).
        assert f.changes == ()
        assert "hypervisor" in f.procedure[0] and "VIRTIO_BLK_F_CONFIG_WCE" in f.procedure[0]
    for change in f.changes:
        assert "/sys/block" not in change.command


@contextmanager
def disk_kept_full(directory: Path, seconds: int) -> Iterator[subprocess.Popen[bytes]]:
    """fio's 4 MiB direct writes, 64 in flight through libaio, on a file in `directory`:
    the disk under it keeps a deep queue and each request waits long, as under an OSD's
    own asynchronous I/O. One job, no CPU of its own: libaio's waits are not iowait, and
    the rule no longer asks the CPUs (on this host's vda, 32 in flight measured 192
    queued at 56 ms each, 96% busy, 2 GB/s). A fio that could not start (no room for its
    file, no O_DIRECT there) fails here with its own words, not later as a rule that
    never fired."""
    # Jobs as threads of one process, in a session of its own: fio's default forked jobs
    # outlive a killed parent and would go on writing into the next test.
    log = directory / "stormdeck-full.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["fio", "--name=stormdeck-full", f"--directory={directory}", "--size=256M",
             "--rw=write", "--bs=4M", "--direct=1", "--ioengine=libaio", "--iodepth=64",
             "--numjobs=1", "--thread", f"--runtime={seconds}", "--time_based"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        time.sleep(3)
        if proc.poll() is not None:
            raise AssertionError(f"fio in {directory} ended at once ({proc.returncode}): "
                                 f"{log.read_text(errors='replace')[-800:]}")
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for f in directory.glob("stormdeck-full.*"):
            f.unlink()
        assert subprocess.run(["pgrep", "-s", str(proc.pid)],
                              capture_output=True).returncode == 1, "fio left running"


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")
def test_a_disk_kept_full_under_the_loops_is_at_its_limit_once_and_the_loops_are_not(
        lab_cluster: LabCluster) -> None:
    """The healthy case is the lab under its own load (test_cpu_disk_lab's quiet test: a
    short queue). Here fio keeps the disk under the loop files full while the lab runs:
    a deep queue, long waits, and the rule says so on that disk with its shipped
    thresholds, whatever the CPUs do; the loops above it, whose limit it is, get no
    finding of their own. It stops as soon as the rule fires.

    fio writes beside the loop files, not in pytest's tmp_path: a machine whose /tmp is
    another disk (CI's once) would load a disk that carries no OSD, where the rule rightly
    says nothing."""
    lab = lab_cluster
    (disk,) = disks_under(lab.dir)
    target = f"{short_hostname()}:/dev/{disk}"
    engine = Engine(quick(LIMIT, seconds=5.0), mutes=None)

    def at_limit(found: list) -> list:
        return [f for f in found if f.rule == LIMIT and f.state == "firing"]

    hub = Hub([CephSource(conffile=str(lab.conf)), HostSource(ceph_conf=str(lab.conf))],
              interval=1.0)
    history = History()
    found: list = []

    def step() -> list:
        nonlocal found
        history.append(hub.snapshot())
        found = engine.evaluate(history)
        return at_limit(found)

    hub.start()
    try:
        assert hub.wait_polls(1, timeout=30)
        with disk_kept_full(lab.dir, 150):
            try:
                eventually(step, 120, interval=1.0)
            except AssertionError as exc:
                last = history.last(1)
                d = last[0].disks.get(target) if last else None
                pending = [f for f in found if f.rule == LIMIT]
                raise AssertionError(f"{exc}; {target} last seen as {d}; "
                                     f"{LIMIT} said {pending}") from None
    finally:
        hub.stop()
    (f,) = at_limit(found)
    assert f.target == target and f.severity == Severity.INFO and f.changes == ()
    assert "requests queued" in f.summary and "the hardware limit" in f.summary
    queue = next(e for e in f.evidence if e.metric == "queue depth (aqu-sz)")
    assert queue.samples >= 3 and queue.avg is not None and queue.avg >= 4, queue
