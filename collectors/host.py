"""The host source: this host's OSD and chunkserver processes and disks, as the kernel sees them.

Per daemon: cores used (rate of CPU time), cores allowed (CPU affinity and
cgroup v1/v2 CPU quota) and whether someone set that limit, how often the quota
throttled it (cpu.stat), its systemd unit, threads, RSS, and the block devices
it holds open.
Per disk: iostat's figures from /proc/diskstats deltas, and from pyudev and
sysfs the rotational flag, model, transport, the kernel's write-cache view
and the device's own (scsi_disk cache_type) where readable.
"""

from __future__ import annotations

import os
import re
import socket
import stat
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from stormdeck.collectors.model import Daemon, Disk, Host, Partial

OSD_NAMES = frozenset({"ceph-osd"})
FD_REFRESH = 60.0  # a daemon's open devices change only when it restarts
VIRTUAL_PREFIXES = ("loop", "dm-", "md", "rbd", "nbd", "zram", "ram", "sr", "drbd")


def short_hostname() -> str:
    # Ceph records the short name in osd metadata; match it.
    return socket.gethostname().split(".")[0]


# ---- processes -------------------------------------------------------------------


def _flag_value(argv: list[str], short: str | None, long: str) -> str | None:
    """The value of `-s V`, `--long V` or `--long=V` (the first given), as Ceph's argparse reads."""
    for i, arg in enumerate(argv):
        if arg in (short, long) and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(long + "="):
            return arg[len(long) + 1:]
    return None


def osd_id_from_argv(argv: list[str]) -> int | None:
    """The OSD id from a ceph-osd command line, in every shape deployers use.

    -i N, --id N, --id=N (bare processes, Rook, packages' units) and -n osd.N,
    --name osd.N, --name=osd.N (cephadm's containers: `ceph-osd -n osd.N -f`).
    """
    for i, arg in enumerate(argv):
        name = None
        if arg in ("-i", "--id") and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--id="):
            value = arg[5:]
        elif arg.startswith("-i") and arg[2:].isdigit():
            value = arg[2:]
        elif arg in ("-n", "--name") and i + 1 < len(argv):
            name = argv[i + 1]
        elif arg.startswith("--name="):
            name = arg[7:]
        else:
            continue
        if name is not None:
            kind, _, value = name.partition(".")
            if kind != "osd":
                return None
        return int(value) if value.isdigit() else None
    return None


def explicit_conf(argv: list[str]) -> str | None:
    """The conf a command line names with -c, --conf or --conf=, if any."""
    return _flag_value(argv, "-c", "--conf")


def cluster_from_argv(argv: list[str]) -> str:
    return _flag_value(argv, None, "--cluster") or "ceph"


def conf_from_argv(argv: list[str], environ: Mapping[str, str] | None = None) -> str:
    """Where a Ceph daemon reads its conf: argv, then CEPH_CONF, then /etc/ceph/$cluster.conf.

    The path is the daemon's own: in a container or chroot it lies inside the
    daemon's root (read it through /proc/PID/root: `daemon_fsid`).
    """
    return (explicit_conf(argv) or (environ or {}).get("CEPH_CONF")
            or f"/etc/ceph/{cluster_from_argv(argv)}.conf")


def fsid_from_argv(argv: list[str]) -> str | None:
    """Rook passes the cluster's fsid on the command line (--fsid X)."""
    value = _flag_value(argv, None, "--fsid")
    return value.strip().lower() if value and _UUID.match(value.strip()) else None


def process_environ(pid: int, proc: Path = Path("/proc")) -> dict[str, str]:
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    out = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def in_process_root(pid: int, path: str, proc: Path = Path("/proc")) -> Path:
    """`path` as the process sees it: through its root (container, chroot) or working dir.

    Where the kernel will not let us follow /proc/PID/root (another user's
    process, without root), the host's own path is the best guess left.
    """
    base = proc / str(pid) / ("root" if path.startswith("/") else "cwd")
    try:
        os.stat(base)
    except PermissionError:
        return Path(path)
    except OSError:
        return base / path.lstrip("/")
    return base / path.lstrip("/")


def daemon_fsid(pid: int, argv: list[str], proc: Path = Path("/proc")) -> str | None:
    """The cluster a daemon belongs to: --fsid, else the fsid in its own conf."""
    fsid = fsid_from_argv(argv)
    if fsid:
        return fsid
    conf = conf_from_argv(argv, process_environ(pid, proc))
    return fsid_from_conf(str(in_process_root(pid, conf, proc)))


class DaemonFsids:
    """Each daemon's fsid, looked up once per process: its conf does not move while it runs."""

    def __init__(self, proc: Path = Path("/proc")) -> None:
        self.proc = proc
        self._known: dict[tuple[int, tuple[str, ...]], str | None] = {}

    def of(self, pid: int, argv: list[str]) -> str | None:
        key = (pid, tuple(argv))
        if key not in self._known:
            if len(self._known) > 4096:  # daemons come and go over months
                self._known.clear()
            self._known[key] = daemon_fsid(pid, argv, self.proc)
        return self._known[key]


_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_FSID = re.compile(r"^\s*fsid\s*=\s*([0-9a-fA-F-]{36})\s*$", re.MULTILINE)


def fsid_from_conf(path: str) -> str | None:
    try:
        m = _FSID.search(Path(path).read_text(errors="replace"))
    except OSError:
        return None
    return m.group(1).lower() if m else None


_CS_FLAG = re.compile(r"^--?chunkServer(Ip|Port)=(.+)$")


def chunkserver_addr_from_argv(argv: list[str]) -> str | None:
    """'10.0.0.1:8200' from a Curve chunkserver's -chunkServerIp=... -chunkServerPort=..."""
    found = {}
    for arg in argv:
        m = _CS_FLAG.match(arg)
        if m:
            found[m.group(1)] = m.group(2)
    if "Port" not in found:
        return None
    return f"{found.get('Ip', '127.0.0.1')}:{found['Port']}"


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


def systemd_unit(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The systemd unit a process runs in, from its cgroup paths (v2's line, v1's
    name=systemd or any controller's): "ceph-FSID@osd.3.service" under cephadm,
    "ceph-osd@3.service" from the packages. None when no path names a service."""
    try:
        lines = (proc / str(pid) / "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        path = line.split(":", 2)[-1]
        units = [part for part in path.split("/") if part.endswith(".service")]
        if units:
            return units[-1]
    return None


def unit_from_shape(argv: Sequence[str], fsid: str | None) -> str | None:
    """The unit a deployer would have started this OSD as, from its command line, where
    the cgroup does not say: cephadm runs `ceph-osd -n osd.N -f` in ceph-FSID@osd.N,
    the packages' unit runs `ceph-osd -f --cluster C --id N --setuser ceph` as
    ceph-osd@N. None for other shapes (Rook, a hand-started OSD): no unit to name."""
    args = list(argv)
    osd = osd_id_from_argv(args)
    if osd is None:
        return None
    name = _flag_value(args, "-n", "--name")
    if name == f"osd.{osd}" and fsid:
        return f"ceph-{fsid}@osd.{osd}.service"
    if "--setuser" in args and _flag_value(args, "-i", "--id") == str(osd):
        cluster = cluster_from_argv(args)
        return f"ceph-osd@{osd}.service" if cluster == "ceph" else None
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


# ---- disks -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DiskCounters:
    reads: int
    read_sectors: int
    read_ms: int
    writes: int
    write_sectors: int
    write_ms: int
    in_flight: int
    io_ms: int
    weighted_ms: int


def parse_diskstats(text: str) -> dict[str, DiskCounters]:
    """/proc/diskstats, the fields iostat uses (Documentation/admin-guide/iostats.rst)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) < 14:
            continue
        try:
            out[f[2]] = DiskCounters(int(f[3]), int(f[5]), int(f[6]), int(f[7]), int(f[9]),
                                     int(f[10]), int(f[11]), int(f[12]), int(f[13]))
        except ValueError:
            continue
    return out


@dataclass(frozen=True, slots=True)
class DiskRates:
    util: float
    read_iops: float
    write_iops: float
    read_bps: float
    write_bps: float
    read_await: float
    write_await: float
    queue_depth: float


def disk_rates(a: DiskCounters, b: DiskCounters, seconds: float) -> DiskRates:
    """What iostat -x prints for the interval between two samples."""
    ms = seconds * 1000.0
    reads, writes = b.reads - a.reads, b.writes - a.writes
    return DiskRates(
        util=min(1.0, max(0.0, (b.io_ms - a.io_ms) / ms)),
        read_iops=reads / seconds, write_iops=writes / seconds,
        read_bps=(b.read_sectors - a.read_sectors) * 512 / seconds,
        write_bps=(b.write_sectors - a.write_sectors) * 512 / seconds,
        read_await=(b.read_ms - a.read_ms) / reads / 1000 if reads > 0 else 0.0,
        write_await=(b.write_ms - a.write_ms) / writes / 1000 if writes > 0 else 0.0,
        queue_depth=max(0.0, (b.weighted_ms - a.weighted_ms) / ms))


def transport_of(sys_path: str, name: str) -> str:
    """The bus a disk hangs on, from its sysfs device path."""
    p = sys_path
    if name.startswith(VIRTUAL_PREFIXES) or "/virtual/" in p:
        return name.rstrip("0123456789") or "virtual"
    for needle, kind in (("/nvme", "nvme"), ("/virtio", "virtio"), ("/usb", "usb"),
                         ("/end_device-", "sas"), ("/ata", "sata"), ("/host", "scsi")):
        if needle in p:
            return kind
    return "unknown"


@dataclass(frozen=True, slots=True)
class DiskInfo:
    rotational: bool | None
    write_cache: str | None
    device_cache: str | None
    model: str | None
    transport: str
    virtual: bool


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def disk_info(name: str, sys_block: Path = Path("/sys/block")) -> DiskInfo:
    """Attributes from sysfs (the udev database may be empty: no udev daemon runs)."""
    d = sys_block / name
    real = os.path.realpath(d)
    rot = _read(d / "queue" / "rotational")
    model = _read(d / "device" / "model")
    vendor = _read(d / "device" / "vendor")
    if model and vendor and not model.startswith(vendor):
        model = f"{vendor} {model}"
    device_cache = None
    scsi_disk = d / "device" / "scsi_disk"
    if scsi_disk.is_dir():
        for entry in sorted(scsi_disk.iterdir()):
            device_cache = _read(entry / "cache_type")
            break
    transport = transport_of(real, name)
    return DiskInfo(rotational=None if rot is None else rot == "1",
                    write_cache=_read(d / "queue" / "write_cache"),
                    device_cache=device_cache, model=model or None, transport=transport,
                    virtual=name.startswith(VIRTUAL_PREFIXES) or "/virtual/" in real)


def list_disks(sys_block: Path = Path("/sys/block")) -> list[str]:
    """Whole disks with a size: pyudev where it works, sysfs otherwise."""
    names: list[str] = []
    try:
        import pyudev

        context = pyudev.Context()
        names = [dev.sys_name for dev in context.list_devices(subsystem="block", DEVTYPE="disk")]
    except Exception:  # no udev, no libudev, a sandbox: sysfs still answers
        names = []
    if not names:
        try:
            names = [p.name for p in sys_block.iterdir()]
        except OSError:
            return []
    return sorted(n for n in names if (_read(sys_block / n / "size") or "0") != "0")


def whole_disk(dev_name: str, sys_class: Path = Path("/sys/class/block")) -> list[str]:
    """The whole disks under a block device: sdb1 -> sdb, dm-3 -> its slaves' disks."""
    d = sys_class / dev_name
    if (d / "partition").exists():
        return [Path(os.path.realpath(d)).parent.name]
    slaves = d / "slaves"
    if slaves.is_dir():
        found = []
        for s in sorted(slaves.iterdir()):
            found += whole_disk(s.name, sys_class)
        if found:
            return found
    return [dev_name]


def open_block_devices(pid: int) -> tuple[str, ...]:
    """Kernel names of the whole disks a process holds open (BlueStore keeps its device open).

    Found by the device number of each open file, not its path: a containerised
    or chrooted daemon's fds read as paths inside its root
    (/var/lib/containers/.../dev/sdb, ROOT/dev/loop0), which name no host device.
    """
    fd_dir = Path(f"/proc/{pid}/fd")
    names: set[str] = set()
    try:
        entries = list(fd_dir.iterdir())
    except OSError:
        return ()
    seen: set[int] = set()
    for fd in entries:
        try:
            target = os.readlink(fd)
            if not target.startswith("/") or target.startswith(("/dev/pts", "/dev/null")):
                continue  # sockets, pipes, anon inodes, terminals
            st = os.stat(fd)
        except OSError:
            continue
        if not stat.S_ISBLK(st.st_mode) or st.st_rdev in seen:
            continue
        seen.add(st.st_rdev)
        try:
            dev = Path(os.readlink(f"/sys/dev/block/{os.major(st.st_rdev)}:"
                                   f"{os.minor(st.st_rdev)}")).name
        except OSError:
            continue
        names.update(whole_disk(dev))
    return tuple(sorted(names))


def tuned_profile(etc: Path = Path("/etc/tuned")) -> str:
    """The profile tuned applies (tuned-adm writes it to active_profile); "" if none."""
    return (_read(etc / "active_profile") or "").strip()


# ---- the source ------------------------------------------------------------------


@dataclass
class _ProcSample:
    cpu: float  # user + system seconds
    at: float
    devices: tuple[str, ...]
    devices_at: float
    cpu_stat: CpuStat | None = None


@dataclass(frozen=True, slots=True)
class ProcInfo:
    """One storage daemon process as the kernel sees it now."""

    daemon_id: str  # "osd.3", or a chunkserver's "ip:port"
    kind: str  # "osd" | "chunkserver"
    pid: int
    create_time: float
    argv: tuple[str, ...]
    cpu_seconds: float  # user + system, since it started
    threads: int
    rss_bytes: int
    cores_allowed: float  # CPU affinity, capped by a cgroup quota
    # A quota, or an affinity narrower than the host's online CPUs: someone chose it.
    cpu_limit_explicit: bool = False
    cpu_quota: float | None = None  # cores, the tightest cgroup quota over it
    cpu_stat: CpuStat | None = None  # the binding quota's cgroup cpu.stat, if any
    unit: str | None = None  # systemd unit from the cgroup, else from the process shape


def scan_processes(proc_names: frozenset[str] = OSD_NAMES,
                   belongs: Callable[[int, list[str]], bool] = lambda pid, argv: True,
                   fsid_of: Callable[[int, list[str]], str | None] | None = None
                   ) -> list[ProcInfo]:
    """This host's ceph-osd and chunkserver processes (those `belongs(pid, argv)` accepts)."""
    out = []
    for p in psutil.process_iter(["name", "cmdline", "create_time"]):
        try:
            name = p.info["name"] or ""
            argv = p.info["cmdline"] or []
            if name in proc_names:
                osd = osd_id_from_argv(argv)
                if osd is None or not belongs(p.pid, argv):
                    continue
                daemon_id, kind = f"osd.{osd}", "osd"
            elif "chunkserver" in name:
                addr = chunkserver_addr_from_argv(argv)
                if addr is None:
                    continue
                daemon_id, kind = addr, "chunkserver"
            else:
                continue
            with p.oneshot():
                t = p.cpu_times()
                threads = p.num_threads()
                rss = p.memory_info().rss
                affinity = len(p.cpu_affinity())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        quota = cgroup_cpu_limit(p.pid)
        allowed = float(affinity) if quota is None else min(float(affinity), quota)
        explicit = quota is not None or affinity < (psutil.cpu_count() or affinity)
        stat = cgroup_cpu_stat(p.pid) if quota is not None else None
        unit = systemd_unit(p.pid)
        if unit is None and kind == "osd":
            unit = unit_from_shape(argv, fsid_of(p.pid, argv) if fsid_of else None)
        out.append(ProcInfo(daemon_id, kind, p.pid, p.info["create_time"], tuple(argv),
                            t.user + t.system, threads, rss, allowed, explicit, quota, stat,
                            unit))
    return out


class HostSource:
    """This host's storage daemons and disks. Rates need two polls; the first gives None."""

    name = "host"

    def __init__(self, ceph_conf: str | None = None, hostname: str | None = None,
                 proc_names: Iterable[str] = OSD_NAMES) -> None:
        self.hostname = hostname or short_hostname()
        self.proc_names = frozenset(proc_names)
        # Only OSDs of the watched cluster: two clusters on one host both have an osd.0.
        self.fsid = fsid_from_conf(ceph_conf) if ceph_conf else None
        self._fsids = DaemonFsids()
        self._procs: dict[tuple[int, float], _ProcSample] = {}
        self._disks: tuple[float, dict[str, DiskCounters]] | None = None
        self._cpu: Any = None

    def close(self) -> None:
        pass

    def poll(self) -> Partial:
        now = time.monotonic()
        daemons = self._poll_daemons(now)
        disks = self._poll_disks(now, daemons)
        return Partial(source=self.name, time=time.time(), daemons=daemons, disks=disks,
                       hosts={self.hostname: self._host()})

    def _host(self) -> Host:
        t = psutil.cpu_times()
        busy, iowait = cpu_busy(self._cpu, t) if self._cpu is not None else (None, None)
        self._cpu = t
        return Host(name=self.hostname, cpus=psutil.cpu_count(), cpu_busy=busy, iowait=iowait,
                    load1=os.getloadavg()[0], tuned_profile=tuned_profile())

    def _belongs(self, pid: int, argv: list[str]) -> bool:
        return self.fsid is None or self._fsids.of(pid, argv) == self.fsid

    def _poll_daemons(self, now: float) -> dict[str, Daemon]:
        out: dict[str, Daemon] = {}
        seen: set[tuple[int, float]] = set()
        for p in scan_processes(self.proc_names, self._belongs, self._fsids.of):
            key = (p.pid, p.create_time)
            seen.add(key)
            prev = self._procs.get(key)
            used = None
            if prev is not None and now > prev.at:
                used = max(0.0, (p.cpu_seconds - prev.cpu) / (now - prev.at))
            if prev is None or now - prev.devices_at >= FD_REFRESH:
                devices, devices_at = open_block_devices(p.pid), now
            else:
                devices, devices_at = prev.devices, prev.devices_at
            self._procs[key] = _ProcSample(p.cpu_seconds, now, devices, devices_at,
                                           p.cpu_stat)
            throttled, throttled_time = throttling(
                prev.cpu_stat if prev is not None else None, p.cpu_stat,
                now - prev.at if prev is not None else 0.0, quota=p.cpu_quota is not None)
            out[p.daemon_id] = Daemon(id=p.daemon_id, kind=p.kind, host=self.hostname,
                                      pid=p.pid, devices=devices or None, cores_used=used,
                                      cores_allowed=p.cores_allowed,
                                      cpu_limit_explicit=p.cpu_limit_explicit,
                                      cpu_throttled=throttled,
                                      cpu_throttled_time=throttled_time, unit=p.unit,
                                      threads=p.threads, rss_bytes=p.rss_bytes)
        for key in set(self._procs) - seen:
            del self._procs[key]
        return out

    def _poll_disks(self, now: float, daemons: Mapping[str, Daemon]) -> dict[str, Disk]:
        try:
            counters = parse_diskstats(Path("/proc/diskstats").read_text())
        except OSError:
            return {}
        prev, self._disks = self._disks, (now, counters)
        holders: dict[str, list[str]] = {}
        for d in daemons.values():
            for dev in d.devices or ():
                holders.setdefault(dev, []).append(d.id)
        out = {}
        for name in list_disks():
            info = disk_info(name)
            rates = None
            if prev is not None and name in counters and name in prev[1] and now > prev[0]:
                rates = disk_rates(prev[1][name], counters[name], now - prev[0])
            disk = Disk(
                host=self.hostname, name=name,
                util=rates.util if rates else None,
                read_iops=rates.read_iops if rates else None,
                write_iops=rates.write_iops if rates else None,
                read_bps=rates.read_bps if rates else None,
                write_bps=rates.write_bps if rates else None,
                read_await=rates.read_await if rates else None,
                write_await=rates.write_await if rates else None,
                queue_depth=rates.queue_depth if rates else None,
                rotational=info.rotational, write_cache=info.write_cache,
                device_cache=info.device_cache, model=info.model, transport=info.transport,
                virtual=info.virtual, daemons=tuple(sorted(holders.get(name, ()))))
            out[disk.key] = disk
        return out


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

