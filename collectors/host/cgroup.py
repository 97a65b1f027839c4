"""A daemon's CPU as the kernel accounts it: cores allowed, cgroup quota, throttling, busy time."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


def cgroup_cpu_limit(pid: int, proc: Path = Path("/proc"),
                     cgroup_root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The tightest CPU quota (in cores) over the process's cgroup and its ancestors.

    cgroup v2: cpu.max ("max 100000" or "200000 100000"); v1: cpu.cfs_quota_us
    over cpu.cfs_period_us (-1 = none). None if no quota applies.
    """
    quotas = _cpu_quotas(pid, proc, cgroup_root)
    return min(q[0] for q in quotas) if quotas else None


def cgroup_cpu_throttled(pid: int, proc: Path = Path("/proc"),
                         cgroup_root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """Seconds the cgroup whose quota binds the process (the tightest) has been throttled.

    cgroup v2: cpu.stat's throttled_usec; v1: cpu.stat's throttled_time, in ns
    (Documentation/scheduler/sched-bwc.rst). 0.0 when no quota applies, as nothing can
    throttle it; None when the quota's cgroup gives no throttled figure.
    """
    quotas = _cpu_quotas(pid, proc, cgroup_root)
    if not quotas:
        return 0.0
    _, directory, v2 = min(quotas, key=lambda q: q[0])
    key, scale = ("throttled_usec", 1e-6) if v2 else ("throttled_time", 1e-9)
    try:
        text = (directory / "cpu.stat").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value) * scale
    return None


@dataclass(frozen=True, slots=True)
class CpuStat:
    """The counters of cpu.stat that say how often a CPU quota held a cgroup back."""

    periods: int  # nr_periods: CFS periods in which the cgroup had runnable tasks
    throttled: int  # nr_throttled: of those, the ones its quota cut short
    throttled_seconds: float  # v2 throttled_usec, v1 throttled_time (ns)


def parse_cpu_stat(text: str, v2: bool) -> CpuStat | None:
    """cpu.stat of cgroup v2 or v1 (Documentation/scheduler/sched-bwc.rst); None if partial."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().isdigit():
            values[name] = int(value)
    key, scale = ("throttled_usec", 1e-6) if v2 else ("throttled_time", 1e-9)
    if not {"nr_periods", "nr_throttled", key} <= set(values):
        return None
    return CpuStat(values["nr_periods"], values["nr_throttled"], values[key] * scale)


def cgroup_cpu_stat(pid: int, proc: Path = Path("/proc"),
                    cgroup_root: Path = Path("/sys/fs/cgroup")) -> CpuStat | None:
    """cpu.stat of the cgroup whose quota binds the process (the tightest), read through
    /proc/PID/cgroup on v2 or v1; None when no quota applies or the file says too little."""
    quotas = _cpu_quotas(pid, proc, cgroup_root)
    if not quotas:
        return None
    _, directory, v2 = min(quotas, key=lambda q: q[0])
    try:
        return parse_cpu_stat((directory / "cpu.stat").read_text(), v2)
    except OSError:
        return None


def _cpu_quotas(pid: int, proc: Path, cgroup_root: Path) -> list[tuple[float, Path, bool]]:
    """(cores, cgroup directory, is v2) for every CPU quota over the process's cgroups."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return []
    quotas: list[tuple[float, Path, bool]] = []
    for line in lines:
        hid, controllers, path = line.split(":", 2)
        if hid == "0" and controllers == "":
            base = _v2_mount(cgroup_root)
            read, v2 = _v2_limit, True
        elif "cpu" in controllers.split(","):
            base = _v1_cpu_mount(cgroup_root, controllers)
            read, v2 = _v1_limit, False
        else:
            continue
        if base is None:
            continue
        here = base / path.lstrip("/")
        # Walk up to the mount: any ancestor's quota binds the whole subtree.
        while True:
            lim = read(here)
            if lim is not None:
                quotas.append((lim, here, v2))
            if here == base or base not in here.parents:
                break
            here = here.parent
    return quotas


def _v2_mount(root: Path) -> Path | None:
    # Unified hierarchy at the root, or beside the v1 controllers (hybrid mode).
    for candidate in (root, root / "unified"):
        if (candidate / "cgroup.controllers").exists():
            return candidate
    return None


def _v1_cpu_mount(root: Path, controllers: str) -> Path | None:
    for name in (controllers, "cpu,cpuacct", "cpu", "cpuacct,cpu"):
        if (root / name).is_dir():
            return root / name
    return None


def _v2_limit(directory: Path) -> float | None:
    try:
        quota, period = (directory / "cpu.max").read_text().split()
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return int(quota) / int(period)


def _v1_limit(directory: Path) -> float | None:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def throttling(prev: CpuStat | None, now: CpuStat | None, seconds: float,
               quota: bool = True) -> tuple[float | None, float | None]:
    """(share of CFS periods throttled, throttled seconds per second) between two cpu.stat
    readings. No quota at all: (0.0, 0.0), nothing can throttle it; a first reading, a
    counter that went back (a new cgroup) or an unreadable file: unknown."""
    if now is None:
        return (0.0, 0.0) if not quota else (None, None)
    if prev is None or seconds <= 0 or now.periods < prev.periods or \
            now.throttled < prev.throttled:
        return None, None
    periods = now.periods - prev.periods
    share = (now.throttled - prev.throttled) / periods if periods else 0.0
    return share, max(0.0, now.throttled_seconds - prev.throttled_seconds) / seconds


def _total(t: Any) -> float:
    """All CPU time, counting a guest's once: Linux already includes guest and guest_nice
    in user and nice (as psutil's cpu_times_percent subtracts them), so a host that also
    runs VMs (Proxmox beside Ceph) would otherwise count its guests' time twice."""
    return sum(t) - getattr(t, "guest", 0) - getattr(t, "guest_nice", 0)


def cpu_busy(prev: Any, now: Any) -> tuple[float | None, float | None]:
    """(busy, iowait) as ratios of all CPU time between two psutil.cpu_times() samples."""
    total = _total(now) - _total(prev)
    if total <= 0:
        return None, None
    io = getattr(now, "iowait", 0) - getattr(prev, "iowait", 0)
    idle = (now.idle - prev.idle) + io
    return max(0.0, min(1.0, 1 - idle / total)), max(0.0, io / total)
