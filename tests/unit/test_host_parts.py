"""The host source's parts: argv, cgroups, diskstats, sysfs, and real processes on this host."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from stormdeck.collectors.host.cgroup import cgroup_cpu_limit
from stormdeck.collectors.host.disks import (
    DiskCounters,
    disk_rates,
    list_disks,
    parse_diskstats,
    transport_of,
    whole_disk,
)
from stormdeck.collectors.host.processes import (
    chunkserver_addr_from_argv,
    conf_from_argv,
    fsid_from_conf,
    osd_id_from_argv,
)
from stormdeck.collectors.host.source import HostSource
from tests.conftest import DATA


@pytest.mark.parametrize(("argv", "osd"), [
    (["/usr/bin/ceph-osd", "-f", "--cluster", "ceph", "--id", "12", "--setuser", "ceph"], 12),
    (["ceph-osd", "-f", "-c", "/x/ceph.conf", "-i", "3"], 3),
    (["ceph-osd", "--id=7"], 7),
    (["ceph-osd", "-i5"], 5),
    (["ceph-osd", "-f"], None),
    (["ceph-osd", "-i", "abc"], None),
])
def test_osd_id_from_argv(argv: list[str], osd: int | None) -> None:
    assert osd_id_from_argv(argv) == osd


def test_conf_and_fsid(tmp_path: Path) -> None:
    assert conf_from_argv(["ceph-osd", "-c", "/a/b.conf"]) == "/a/b.conf"
    assert conf_from_argv(["ceph-osd", "--conf=/c.conf"]) == "/c.conf"
    assert conf_from_argv(["ceph-osd", "--cluster", "east"]) == "/etc/ceph/east.conf"
    conf = tmp_path / "ceph.conf"
    conf.write_text("[global]\nfsid = 82ECA5CE-C080-4AE7-8900-ACBB79931CEB\nmon host = x\n")
    assert fsid_from_conf(str(conf)) == "82eca5ce-c080-4ae7-8900-acbb79931ceb"
    assert fsid_from_conf(str(tmp_path / "none.conf")) is None


def test_chunkserver_addr() -> None:
    argv = ["curvebs-chunkserver", "-conf=/etc/curve/chunkserver.conf",
            "-chunkServerIp=10.0.0.3", "-chunkServerPort=8201", "-chunkServerStoreUri=local://x"]
    assert chunkserver_addr_from_argv(argv) == "10.0.0.3:8201"
    assert chunkserver_addr_from_argv(["chunkserver", "--chunkServerPort=8200"]) == \
        "127.0.0.1:8200"
    assert chunkserver_addr_from_argv(["chunkserver"]) is None


def _cgroup_tree(tmp_path: Path, proc_lines: str) -> tuple[Path, Path]:
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cgroup").write_text(proc_lines)
    return proc, tmp_path / "cgroup"


def test_cgroup_v2_quota_and_tighter_ancestor(tmp_path: Path) -> None:
    proc, root = _cgroup_tree(tmp_path, "0::/system.slice/ceph-osd@3.service\n")
    leaf = root / "system.slice" / "ceph-osd@3.service"
    leaf.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu cpuset\n")
    (leaf / "cpu.max").write_text("400000 100000\n")
    assert cgroup_cpu_limit(42, proc, root) == 4.0
    (root / "system.slice" / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_limit(42, proc, root) == 1.5
    (leaf / "cpu.max").write_text("max 100000\n")
    (root / "system.slice" / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_limit(42, proc, root) is None


def test_cgroup_v1_quota(tmp_path: Path) -> None:
    proc, root = _cgroup_tree(tmp_path, "4:cpu,cpuacct:/osd/3\n3:cpuset:/\n0::/\n")
    leaf = root / "cpu,cpuacct" / "osd" / "3"
    leaf.mkdir(parents=True)
    (leaf / "cpu.cfs_quota_us").write_text("250000\n")
    (leaf / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_limit(42, proc, root) == 2.5
    (leaf / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_limit(42, proc, root) is None


def test_cgroup_hybrid_reads_the_unified_mount(tmp_path: Path) -> None:
    proc, root = _cgroup_tree(tmp_path, "1:cpu:/\n0::/osd\n")
    (root / "unified" / "osd").mkdir(parents=True)
    (root / "unified" / "cgroup.controllers").write_text("")
    (root / "unified" / "osd" / "cpu.max").write_text("50000 100000\n")
    assert cgroup_cpu_limit(42, proc, root) == 0.5
    assert cgroup_cpu_limit(999, proc, root) is None  # gone


def test_parse_diskstats_sample() -> None:
    stats = parse_diskstats((DATA / "diskstats_sample.txt").read_text())
    assert stats, "the sample has disks"
    for name, c in stats.items():
        assert name and c.reads >= 0 and c.io_ms >= 0
    assert parse_diskstats("garbage\n 7 0 loop0 x y\n") == {}


def test_disk_rates_as_iostat() -> None:
    a = DiskCounters(reads=100, read_sectors=800, read_ms=50, writes=1000, write_sectors=8000,
                     write_ms=2000, in_flight=0, io_ms=10_000, weighted_ms=20_000)
    b = DiskCounters(reads=300, read_sectors=2400, read_ms=250, writes=3000, write_sectors=24000,
                     write_ms=8000, in_flight=4, io_ms=11_800, weighted_ms=24_000)
    r = disk_rates(a, b, 2.0)
    assert r.read_iops == 100 and r.write_iops == 1000
    assert r.read_bps == 1600 * 512 / 2 and r.write_bps == 16000 * 512 / 2
    assert r.util == pytest.approx(0.9)
    assert r.read_await == pytest.approx(0.001) and r.write_await == pytest.approx(0.003)
    assert r.queue_depth == pytest.approx(2.0)
    idle = disk_rates(b, b, 1.0)
    assert idle.util == 0 and idle.read_await == 0 and idle.write_await == 0


@pytest.mark.parametrize(("path", "name", "kind"), [
    ("/sys/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1", "nvme0n1", "nvme"),
    ("/sys/devices/pci0000:00/0000:00:17.0/ata3/host2/target2:0:0/2:0:0:0/block/sda", "sda",
     "sata"),
    ("/sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0/host0/port-0:0/end_device-0:0/"
     "target0:0:0/0:0:0:0/block/sdb", "sdb", "sas"),
    ("/sys/devices/pci0000:00/0000:00:05.0/virtio2/block/vda", "vda", "virtio"),
    ("/sys/devices/virtual/block/loop0", "loop0", "loop"),
    ("/sys/devices/virtual/block/dm-3", "dm-3", "dm-"),
])
def test_transport_of(path: str, name: str, kind: str) -> None:
    assert transport_of(path, name) == kind


def test_whole_disk_of_partitions_and_dm(tmp_path: Path) -> None:
    devices = tmp_path / "devices" / "sdb"
    (devices / "sdb2").mkdir(parents=True)
    (devices / "sdb2" / "partition").write_text("2\n")
    cls = tmp_path / "class"
    cls.mkdir()
    (cls / "sdb2").symlink_to(devices / "sdb2")
    (cls / "sdb").symlink_to(devices)
    (cls / "dm-0" / "slaves").mkdir(parents=True)
    (cls / "dm-0" / "slaves" / "sdb2").symlink_to(devices / "sdb2")
    assert whole_disk("sdb2", cls) == ["sdb"]
    assert whole_disk("dm-0", cls) == ["sdb"]
    assert whole_disk("sdb", cls) == ["sdb"]


def test_list_disks_are_real_block_devices() -> None:
    disks = list_disks()
    assert disks
    for name in disks:
        assert Path("/sys/block", name).exists()


@pytest.fixture
def fake_osd(tmp_path: Path):
    """A real busy process that the kernel calls ceph-osd, with an OSD id on its command line."""
    shell = tmp_path / "ceph-osd"
    shell.symlink_to(shutil.which("sh") or "/bin/sh")
    proc = subprocess.Popen([str(shell), "-c", "while :; do :; done", "-i", "77"])
    time.sleep(0.2)
    yield proc
    proc.kill()
    proc.wait()


def test_host_source_measures_cores_used_and_allowed(fake_osd: subprocess.Popen) -> None:
    src = HostSource(hostname="h1")
    proc = psutil.Process(fake_osd.pid)
    cpu0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
    first = src.poll().daemons["osd.77"]
    assert first.cores_used is None, "one sample gives no rate"
    assert first.pid == fake_osd.pid and first.threads == 1
    assert first.cores_allowed == float(len(os.sched_getaffinity(fake_osd.pid)))
    # Every CPU of the host and no quota: nobody limited it.
    assert first.cpu_limit_explicit is False and first.cpu_throttled == 0.0
    assert first.unit is None  # a bare process, in no service
    time.sleep(1.0)
    busy = src.poll().daemons["osd.77"]
    cpu1, t1 = sum(proc.cpu_times()[:2]), time.monotonic()
    # Against what the kernel says the loop got over the same second, not a fixed figure:
    # on a shared 2-core machine a busy loop may get a quarter of a core.
    expected = (cpu1 - cpu0) / (t1 - t0)
    assert busy.cores_used is not None and busy.cores_used > 0.05
    assert busy.cores_used == pytest.approx(expected, abs=0.15), (busy.cores_used, expected)
    os.sched_setaffinity(fake_osd.pid, {0})
    pinned = src.poll().daemons["osd.77"]
    assert pinned.cores_allowed == 1.0
    assert pinned.cpu_limit_explicit is (len(os.sched_getaffinity(0)) > 1)
    assert pinned.host == "h1" and pinned.rss_bytes and pinned.rss_bytes > 0


def test_host_source_keeps_to_its_cluster(fake_osd: subprocess.Popen, tmp_path: Path) -> None:
    conf = tmp_path / "watched.conf"
    conf.write_text("fsid = 11111111-2222-3333-4444-555555555555\n")
    # The fake OSD names no conf, so it is another cluster's (/etc/ceph/ceph.conf).
    assert "osd.77" not in HostSource(ceph_conf=str(conf)).poll().daemons
    assert "osd.77" in HostSource().poll().daemons


def test_host_source_disks_have_rates_on_the_second_poll() -> None:
    src = HostSource(hostname="h1")
    first = src.poll().disks
    assert first and all(d.util is None for d in first.values())
    time.sleep(0.3)
    second = src.poll().disks
    assert all(d.util is not None and 0 <= d.util <= 1 for d in second.values())
    for d in second.values():
        assert d.key == f"h1:/dev/{d.name}"
        assert d.write_cache in (None, "write back", "write through")


def test_host_cpu_busy_counts_a_guests_time_once() -> None:
    """A Proxmox host running VMs beside Ceph: the kernel counts guest time inside user
    already, so adding the guest column again would inflate busy (and the total)."""
    from psutil._pslinux import scputimes

    from stormdeck.collectors.host.cgroup import cpu_busy

    def times(user: float, idle: float, guest: float) -> scputimes:
        fields = dict.fromkeys(scputimes._fields, 0.0)
        fields.update(user=user, idle=idle, guest=guest)
        return scputimes(**fields)

    # 10 s of two CPUs: 6 s user of which 4 s ran a guest, 14 s idle.
    busy, iowait = cpu_busy(times(0, 0, 0), times(6, 14, 4))
    assert busy == pytest.approx(6 / 20) and iowait == 0
    # Summing every column (the old way) would have said 10/24.
    assert busy != pytest.approx(10 / 24)
    assert cpu_busy(times(1, 1, 0), times(1, 1, 0)) == (None, None)
