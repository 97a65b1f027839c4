"""What the host source reads of an OSD's CPU limit: whether someone set it, how often its
quota throttled it (cgroup v1 and v2 cpu.stat), and the systemd unit it runs in."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormdeck.collectors.host.cgroup import CpuStat, cgroup_cpu_stat, parse_cpu_stat, throttling
from stormdeck.collectors.host.processes import systemd_unit, unit_from_shape

FSID = "947fa75c-7285-49b2-974b-1949c4903441"

# cpu.stat as the kernel writes it, quoted in netdata/netdata#12595 (v1 cpu,cpuacct, then
# v2), as tests/unit/test_exporter_series.py uses them.
V1_STAT = "nr_periods 7\nnr_throttled 2\nthrottled_time 127918677\n"
V2_STAT = ("usage_usec 73899\nuser_usec 27213\nsystem_usec 46685\nnr_periods 7\n"
           "nr_throttled 3\nthrottled_usec 139381\n")
# /proc/PID/cgroup of OSDs: the packages' unit as `systemctl status ceph-osd@2` prints its
# CGroup (public deployment notes), and cephadm's ceph-FSID@osd.N (ceph/ceph#41829), with
# podman's --cgroups=split payload below it (ceph/ceph#40025).
PACKAGED_V2 = "0::/system.slice/system-ceph\\x2dosd.slice/ceph-osd@2.service\n"
CEPHADM_V2 = (f"0::/system.slice/system-ceph\\x2d{FSID}.slice/ceph-{FSID}@osd.3.service"
              "/libpod-payload-1e414cfae0f2\n")
CEPHADM_V1 = (f"12:cpu,cpuacct:/system.slice/system-ceph\\x2d{FSID}.slice/"
              f"ceph-{FSID}@osd.3.service\n1:name=systemd:/system.slice/"
              f"system-ceph\\x2d{FSID}.slice/ceph-{FSID}@osd.3.service\n")


def proc_with(tmp_path: Path, cgroup: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cgroup").write_text(cgroup)
    return proc


def test_cpu_stat_of_both_versions() -> None:
    assert parse_cpu_stat(V1_STAT, v2=False) == CpuStat(7, 2, pytest.approx(0.127918677))
    assert parse_cpu_stat(V2_STAT, v2=True) == CpuStat(7, 3, pytest.approx(0.139381))
    assert parse_cpu_stat("usage_usec 5\n", v2=True) is None  # no cpu controller enabled
    assert parse_cpu_stat(V1_STAT, v2=True) is None  # v1's file read as v2: not guessed


def test_cpu_stat_of_the_binding_quota_through_proc_pid_cgroup(tmp_path: Path) -> None:
    proc = proc_with(tmp_path, CEPHADM_V2)
    root = tmp_path / "cgroup"
    (root).mkdir()
    (root / "cgroup.controllers").write_text("cpu cpuset memory\n")
    unit = root / CEPHADM_V2.strip().removeprefix("0::/")
    unit.mkdir(parents=True)
    assert cgroup_cpu_stat(42, proc, root) is None  # no quota anywhere
    (unit / "cpu.max").write_text("150000 100000\n")
    (unit / "cpu.stat").write_text(V2_STAT)
    assert cgroup_cpu_stat(42, proc, root) == CpuStat(7, 3, pytest.approx(0.139381))


def test_throttling_is_a_rate_between_two_readings() -> None:
    a, b = CpuStat(1000, 10, 1.0), CpuStat(1100, 50, 3.0)
    share, per_second = throttling(a, b, 10.0)
    assert share == pytest.approx(0.4) and per_second == pytest.approx(0.2)
    assert throttling(None, b, 10.0) == (None, None)  # the first reading
    assert throttling(b, a, 10.0) == (None, None)  # counters went back: a new cgroup
    assert throttling(None, None, 10.0, quota=False) == (0.0, 0.0)  # nothing can throttle
    assert throttling(a, None, 10.0, quota=True) == (None, None)  # a quota, unreadable


@pytest.mark.parametrize(("cgroup", "unit"), [
    (PACKAGED_V2, "ceph-osd@2.service"),
    (CEPHADM_V2, f"ceph-{FSID}@osd.3.service"),
    (CEPHADM_V1, f"ceph-{FSID}@osd.3.service"),
    ("0::/\n", None),
    ("0::/user.slice/user-0.slice/session-3.scope\n", None),
])
def test_the_unit_from_the_cgroup_path(tmp_path: Path, cgroup: str, unit: str | None) -> None:
    assert systemd_unit(42, proc_with(tmp_path, cgroup)) == unit


def test_the_unit_from_the_process_shape_where_no_cgroup_says() -> None:
    cephadm = ["/usr/bin/ceph-osd", "-n", "osd.3", "-f", "--setuser", "ceph",
               "--setgroup", "ceph", "--default-log-to-file=false"]
    assert unit_from_shape(cephadm, FSID) == f"ceph-{FSID}@osd.3.service"
    packaged = ["/usr/bin/ceph-osd", "-f", "--cluster", "ceph", "--id", "2", "--setuser",
                "ceph", "--setgroup", "ceph"]
    assert unit_from_shape(packaged, None) == "ceph-osd@2.service"
    assert unit_from_shape(["ceph-osd", "-i", "0", "-c", "/lab/ceph.conf"], FSID) is None
    assert unit_from_shape(cephadm, None) is None  # no fsid: no unit name to give
