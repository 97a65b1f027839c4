"""The exporter's series as Prometheus reads them: names, labels, build info, cgroup throttling."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from stormdeck import __version__
from stormdeck.collectors.exporter import HostCollector
from stormdeck.collectors.host.cgroup import (
    CpuStat,
    cgroup_cpu_limit,
    cgroup_cpu_throttled,
    parse_cpu_stat,
)

FSID = "0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"

# cpu.stat as the kernel writes it, quoted in netdata/netdata#12595 (a cgroup v1
# cpu,cpuacct hierarchy, then a v2 one); v1's throttled_time is in ns, v2's in us.
V1_STAT = "nr_periods 7\nnr_throttled 2\nthrottled_time 127918677\n"
V2_STAT = ("usage_usec 73899\nuser_usec 27213\nsystem_usec 46685\nnr_periods 7\n"
           "nr_throttled 3\nthrottled_usec 139381\n")


def tree(tmp_path: Path, proc_lines: str) -> tuple[Path, Path]:
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True)
    (proc / "42" / "cgroup").write_text(proc_lines)
    return proc, tmp_path / "cgroup"


def test_throttled_seconds_from_cgroup_v1(tmp_path: Path) -> None:
    proc, root = tree(tmp_path, "4:cpu,cpuacct:/osd/3\n0::/\n")
    osd = root / "cpu,cpuacct" / "osd" / "3"
    osd.mkdir(parents=True)
    assert cgroup_cpu_throttled(42, proc, root) == 0.0  # no quota: nothing throttles it
    (osd / "cpu.cfs_quota_us").write_text("250000\n")
    (osd / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_throttled(42, proc, root) is None  # a quota, but no figure
    (osd / "cpu.stat").write_text(V1_STAT)
    assert cgroup_cpu_throttled(42, proc, root) == pytest.approx(0.127918677)


def test_throttled_seconds_follow_the_binding_quota_in_cgroup_v2(tmp_path: Path) -> None:
    proc, root = tree(tmp_path, "0::/system.slice/ceph-osd@3.service\n")
    unit = root / "system.slice" / "ceph-osd@3.service"
    unit.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu cpuset\n")
    (unit / "cpu.max").write_text("400000 100000\n")
    (unit / "cpu.stat").write_text(V2_STAT)
    (root / "system.slice" / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_throttled(42, proc, root) == pytest.approx(0.139381)
    # A tighter slice binds now: its throttling is what holds the OSD back.
    (root / "system.slice" / "cpu.max").write_text("150000 100000\n")
    (root / "system.slice" / "cpu.stat").write_text(V2_STAT.replace("139381", "5000000"))
    assert cgroup_cpu_limit(42, proc, root) == 1.5
    assert cgroup_cpu_throttled(42, proc, root) == pytest.approx(5.0)
    assert cgroup_cpu_throttled(999, proc, root) == 0.0  # gone: no quota found


def write_existing(path: Path, text: str) -> None:
    """Write a cgroup file; never create one (a plain directory would take it silently)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def quota_files(base: Path, cores: float) -> dict[str, str] | None:
    period = 100_000
    quota = str(int(cores * period))
    if not (base / "cgroup.procs").is_file():
        return None  # not a mounted cgroup hierarchy
    if (base / "cgroup.controllers").is_file():
        try:
            enabled = (base / "cgroup.subtree_control").read_text().split()
        except OSError:
            return None
        return {"cpu.max": f"{quota} {period}"} if "cpu" in enabled else None
    if (base / "cpu.cfs_quota_us").is_file():
        return {"cpu.cfs_period_us": str(period), "cpu.cfs_quota_us": quota}
    return None


@contextlib.contextmanager
def cpu_cgroup(cores: float) -> Iterator[Path]:
    """A real cgroup with a CPU quota: v2 where the cpu controller is on, else v1's cpu."""
    name = f"stormdeck-test-{os.getpid()}"
    made = None
    try:
        for base in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"),
                     Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct")):
            files = quota_files(base, cores)
            if files is None:
                continue
            try:
                (base / name).mkdir()
            except OSError:
                continue
            made = base / name
            try:
                for f, v in files.items():
                    write_existing(made / f, v)
            except OSError:
                made.rmdir()
                made = None
                continue
            break
        if made is None:
            pytest.skip("cannot make a cgroup with a CPU quota here (needs root)")
        yield made
    finally:
        if made is not None:
            with contextlib.suppress(OSError):
                made.rmdir()


def test_the_exporter_serves_a_throttled_osd_with_its_cluster(tmp_path: Path) -> None:
    conf = tmp_path / "ceph.conf"
    conf.write_text(f"[global]\nfsid = {FSID}\n")
    shell = tmp_path / "ceph-osd"
    shell.symlink_to(shutil.which("sh") or "/bin/sh")
    with cpu_cgroup(0.1) as group:
        busy = tmp_path / "busy.sh"
        busy.write_text("while :; do :; done\n")
        # sh runs the script; what follows it is the OSD's command line as ceph-osd has it.
        osd = subprocess.Popen([str(shell), str(busy), "-i", "78", "-c", str(conf)])
        try:
            write_existing(group / "cgroup.procs", str(osd.pid))
            v2 = (group / "cpu.max").exists()

            def stat() -> CpuStat:
                got = parse_cpu_stat((group / "cpu.stat").read_text(), v2)
                assert got is not None
                return got

            # Five periods cut short by the quota, counted by the kernel: however long a
            # busy host takes to give the loop its share, not a fixed sleep.
            deadline = time.monotonic() + 60
            while stat().throttled < 5 and time.monotonic() < deadline:
                time.sleep(0.05)
            before = stat().throttled_seconds
            registry = CollectorRegistry()
            registry.register(HostCollector(ceph_conf=str(conf), hostname="h1"))
            text = generate_latest(registry).decode()
            after = stat().throttled_seconds
        finally:
            osd.kill()
            osd.wait()
    samples = {(s.name, s.labels.get("ceph_daemon")): s
               for fam in text_string_to_metric_families(text) for s in fam.samples}
    throttled = samples["stormdeck_daemon_cpu_throttled_seconds_total", "osd.78"]
    assert throttled.labels["cluster"] == FSID and throttled.labels["ceph_fsid"] == FSID
    # The kernel's own figure, read just before and after the scrape.
    assert 0 < before <= throttled.value <= after, (before, throttled.value, after)
    assert samples["stormdeck_daemon_cores_allowed", "osd.78"].value == pytest.approx(0.1)


def test_series_names_build_info_and_cluster_label(tmp_path: Path) -> None:
    conf = tmp_path / "ceph.conf"
    conf.write_text(f"[global]\nfsid = {FSID}\n")
    registry = CollectorRegistry()
    registry.register(HostCollector(ceph_conf=str(conf), hostname="h1"))
    families = {f.name: f for f in text_string_to_metric_families(
        generate_latest(registry).decode())}
    assert "stormdeck_exporter_scrape_seconds" not in families
    (took,) = families["stormdeck_exporter_scrape_duration_seconds"].samples
    assert 0 < took.value < 10
    (build,) = families["stormdeck_build_info"].samples
    assert build.value == 1 and build.labels["version"] == __version__
    (tuned,) = families["stormdeck_host_tuned_profile_info"].samples
    assert tuned.labels["cluster"] == FSID
    for s in families["stormdeck_device_info"].samples:
        assert s.labels["cluster"] == FSID and s.labels["hostname"] == "h1"
    # Without -c the host's devices are no one cluster's: an empty cluster, which
    # Prometheus stores as no label at all.
    bare = CollectorRegistry()
    bare.register(HostCollector(hostname="h1"))
    text = generate_latest(bare).decode()
    assert 'stormdeck_host_tuned_profile_info{cluster=""' in text


def osd_process(tmp_path: Path, osd_id: int, script: str) -> subprocess.Popen:
    """A process the exporter takes for ceph-osd `osd_id` (its name and command line)."""
    shell = tmp_path / "ceph-osd"
    if not shell.exists():
        shell.symlink_to(shutil.which("sh") or "/bin/sh")
    body = tmp_path / f"osd{osd_id}.sh"
    body.write_text(script)
    return subprocess.Popen([str(shell), str(body), "-i", str(osd_id)])


def served(collector: HostCollector) -> dict[tuple[str, str], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    return {(s.name, s.labels["ceph_daemon"]): s.value
            for fam in text_string_to_metric_families(generate_latest(registry).decode())
            for s in fam.samples if s.labels.get("ceph_daemon")}


def test_a_dead_osd_process_has_no_series(tmp_path: Path) -> None:
    """A process gone (reaped or a zombie) drops out of the scrape, so Prometheus marks its
    series stale instead of reading its last values as current."""
    import psutil

    zombie = osd_process(tmp_path, 91, "exit 0\n")
    deadline = time.monotonic() + 30
    while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    live = osd_process(tmp_path, 92, "while :; do sleep 1; done\n")
    try:
        deadline = time.monotonic() + 30
        while ("stormdeck_daemon_threads", "osd.92") not in served(HostCollector()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert not {k for k in served(HostCollector()) if k[1] == "osd.91"}
    finally:
        live.kill()
        live.wait()
        zombie.wait()
    assert not {k for k in served(HostCollector()) if k[1] in ("osd.91", "osd.92")}


def test_a_process_that_dies_during_the_scan_is_not_served(tmp_path: Path,
                                                           monkeypatch) -> None:
    """Its cgroup is read after psutil's figures: dead by then, it would be served with no
    quota, its limit and throttling made up, as if it ran."""
    from stormdeck.collectors.host import processes

    osd = osd_process(tmp_path, 93, "while :; do sleep 1; done\n")
    real = processes.cgroup_cpu_limit

    def dies_first(pid: int, *args: object) -> float | None:
        if pid == osd.pid:
            osd.kill()
            osd.wait()
        return real(pid, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(processes, "cgroup_cpu_limit", dies_first)
    try:
        deadline = time.monotonic() + 30
        while psutil_argv(osd.pid) is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert not {k for k in served(HostCollector()) if k[1] == "osd.93"}
    finally:
        osd.kill()
        osd.wait()


def psutil_argv(pid: int) -> list[str] | None:
    """The command line once the shell has it (before exec it is the parent's)."""
    import psutil

    try:
        argv = psutil.Process(pid).cmdline()
    except psutil.Error:
        return None
    return argv if "-i" in argv else None


def test_throttling_is_served_as_the_scan_read_it(monkeypatch) -> None:
    """Read again by pid after the scan, a process that died meanwhile was served 0: a
    counter reset, a figure from no process at all."""
    from stormdeck.collectors import exporter
    from stormdeck.collectors.host.processes import ProcInfo

    dead = subprocess.Popen(["true"])
    dead.wait()
    info = ProcInfo("osd.94", "osd", dead.pid, 0.0, ("ceph-osd", "-i", "94"), 12.0, 60,
                    2**30, 1.0, True, 1.0, CpuStat(100, 7, 1.5))
    monkeypatch.setattr(exporter, "scan_processes", lambda *a, **kw: [info])
    got = served(HostCollector(hostname="h1"))
    assert got["stormdeck_daemon_cpu_throttled_seconds_total", "osd.94"] == 1.5
