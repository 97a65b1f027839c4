"""The host source: this host's OSD and chunkserver processes and disks, as the kernel sees them.

Per daemon: cores used (rate of CPU time), cores allowed (CPU affinity and
cgroup v1/v2 CPU quota) and whether someone set that limit, how often the quota
throttled it (cpu.stat), its systemd unit, threads, RSS, and the block devices
it holds open.
Per disk: iostat's figures from /proc/diskstats deltas; through pyudev what
udev knows where a udev daemon runs (model, serial, WWN, bus, /dev/disk/by-id
and by-path links) and the kernel's attributes always (rotational, the
kernel's write-cache view, the device's own scsi_disk cache_type, size). A
pyudev Monitor tells when a disk appears or vanishes.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import stat
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import psutil
from stormdeck.collectors.model import Daemon, Disk, DiskEvent, Host, Partial

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
    serial: str | None = None
    wwn: str | None = None
    bus: str | None = None
    rpm: int | None = None
    links: tuple[str, ...] = ()
    size_bytes: int | None = None


UDEV_DATA = Path("/run/udev/data")


def udev_running(data: Path = UDEV_DATA) -> bool:
    """True if a udev daemon keeps its database here.

    In a container or chroot libudev still lists sysfs, but no daemon ran the
    rules that name a disk (ID_MODEL, ID_SERIAL, /dev/disk/by-id): /run/udev/data
    is missing or empty.
    """
    try:
        return any(True for _ in data.iterdir())
    except OSError:
        return False


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _unhex(value: str) -> str:
    r"""udev's _ENC encoding (blkid_encode_string): unsafe bytes as \xNN."""
    raw = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), value)
    return " ".join(raw.split())


def _udev_text(props: Mapping[str, str], key: str) -> str | None:
    """A udev string property as the device gave it: KEY_ENC decoded, else KEY with
    udev's underscores (they stand for spaces) as spaces."""
    enc = props.get(f"{key}_ENC")
    value = _unhex(enc) if enc else " ".join(props.get(key, "").replace("_", " ").split())
    return value or None


def _wwn(props: Mapping[str, str]) -> str | None:
    # An all-zero WWN is a drive that has none (harvester/harvester#6604: two such disks
    # would look like one).
    for key in ("ID_WWN_WITH_EXTENSION", "ID_WWN"):
        value = props.get(key, "").strip()
        if value and value.lower().removeprefix("0x").strip("0"):
            return value
    return None


def _rpm(props: Mapping[str, str]) -> int | None:
    value = props.get("ID_ATA_ROTATION_RATE_RPM", "")
    return int(value) if value.isdigit() else None


class Disks:
    """This host's whole disks through pyudev: what udev knows where a udev daemon runs
    (model, serial, WWN, bus, /dev/disk links), the kernel's attributes always.

    `udev=False` reads as where no udev runs (sysfs only), whatever this host has;
    None finds out (`udev_running`).
    """

    def __init__(self, udev: bool | None = None, sys_block: Path = Path("/sys/block"),
                 udev_data: Path = UDEV_DATA) -> None:
        self.sys_block = sys_block
        self.udev = udev_running(udev_data) if udev is None else udev
        self.context: Any = None
        try:
            import pyudev

            self.context = pyudev.Context()
        except Exception:  # no libudev (a minimal image): sysfs still answers
            self.context = None

    def device(self, name: str) -> Any:
        if self.context is None:
            return None
        import pyudev

        try:
            return pyudev.Devices.from_name(self.context, "block", name)
        except (pyudev.DeviceNotFoundError, OSError, ValueError):
            return None

    def names(self) -> list[str]:
        """Whole disks with a size."""
        names: list[str] = []
        if self.context is not None:
            try:
                names = [d.sys_name for d in
                         self.context.list_devices(subsystem="block", DEVTYPE="disk")]
            except Exception:  # a sandbox without sysfs enumeration
                names = []
        if not names:
            try:
                names = [p.name for p in self.sys_block.iterdir()]
            except OSError:
                return []
        return sorted(n for n in names if (_read(self.sys_block / n / "size") or "0") != "0")

    def info(self, name: str) -> DiskInfo:
        dev = self.device(name)
        if dev is None:
            return _sysfs_info(name, self.sys_block)
        attrs = dev.attributes

        def attr(key: str) -> str | None:
            try:
                return attrs.asstring(key).strip()
            except (KeyError, UnicodeDecodeError, OSError):
                return None

        props: Mapping[str, str] = dict(dev.properties) if self.udev else {}
        rpm = _rpm(props)
        rot = attr("queue/rotational")
        rotational = rot == "1" if rot is not None else None if rpm is None else rpm > 0
        model = _udev_text(props, "ID_MODEL") or attr("device/model")
        vendor = _udev_text(props, "ID_VENDOR") or attr("device/vendor")
        if model and vendor and vendor != "ATA" and not model.startswith(vendor):
            model = f"{vendor} {model}"
        serial = (props.get("ID_SERIAL_SHORT") or props.get("ID_SERIAL") or "").strip()
        links = tuple(sorted(link for link in dev.device_links
                             if link.startswith(("/dev/disk/by-id/", "/dev/disk/by-path/"))))
        size = attr("size")
        real = dev.sys_path
        return DiskInfo(
            rotational=rotational, write_cache=attr("queue/write_cache"),
            device_cache=self._device_cache(dev), model=model or None,
            transport=transport_of(real, name),
            virtual=name.startswith(VIRTUAL_PREFIXES) or "/virtual/" in real,
            serial=serial or None, wwn=_wwn(props), bus=props.get("ID_BUS") or None,
            rpm=rpm, links=links if self.udev else (),
            size_bytes=int(size) * 512 if size and size.isdigit() else None)

    @staticmethod
    def _device_cache(dev: Any) -> str | None:
        """The device's own cache as its scsi_disk says (SCSI, SATA behind libata, SAS).

        Read below the disk's own sysfs path: pyudev's children of the SCSI parent would
        enumerate all of sysfs, per disk, per poll."""
        scsi_disk = Path(dev.sys_path) / "device" / "scsi_disk"
        try:
            entries = sorted(scsi_disk.iterdir())
        except OSError:
            return None
        return _read(entries[0] / "cache_type") if entries else None


def _sysfs_info(name: str, sys_block: Path) -> DiskInfo:
    """Attributes from sysfs by hand: where even libudev cannot be loaded."""
    d = sys_block / name
    real = os.path.realpath(d)
    rot = _read(d / "queue" / "rotational")
    model = _read(d / "device" / "model")
    vendor = _read(d / "device" / "vendor")
    # libata names every SATA disk's vendor "ATA": the model says who made it.
    if model and vendor and vendor != "ATA" and not model.startswith(vendor):
        model = f"{vendor} {model}"
    device_cache = None
    scsi_disk = d / "device" / "scsi_disk"
    if scsi_disk.is_dir():
        for entry in sorted(scsi_disk.iterdir()):
            device_cache = _read(entry / "cache_type")
            break
    size = _read(d / "size")
    return DiskInfo(rotational=None if rot is None else rot == "1",
                    write_cache=_read(d / "queue" / "write_cache"),
                    device_cache=device_cache, model=model or None,
                    transport=transport_of(real, name),
                    virtual=name.startswith(VIRTUAL_PREFIXES) or "/virtual/" in real,
                    size_bytes=int(size) * 512 if size and size.isdigit() else None)


_DEFAULT: Disks | None = None


def _default() -> Disks:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Disks()
    return _DEFAULT


def disk_info(name: str) -> DiskInfo:
    """What this host knows of a disk: udev's names where it runs, sysfs always."""
    return _default().info(name)


def list_disks() -> list[str]:
    """Whole disks with a size: pyudev where it works, sysfs otherwise."""
    return _default().names()


class DiskWatch:
    """Whole disks appearing and vanishing, as announced (pyudev.Monitor, block/disk).

    A MonitorObserver thread stamps each event and reads the disk's size at once,
    into a queue the host source drains each poll: a loop device attached and
    detached between two polls is still seen, at its own times. udev's events where
    a udev daemon runs (the disk is named by then), the kernel's own where none does
    (a container). `error` says why there is no watch (no libudev, netlink refused).
    """

    def __init__(self, disks: Disks) -> None:
        self._queue: deque[tuple[float, str, bool]] = deque(maxlen=4096)
        self._observer: Any = None
        self.error: str | None = None
        if disks.context is None:
            self.error = "no libudev"
            return
        try:
            import pyudev

            monitor = pyudev.Monitor.from_netlink(disks.context,
                                                  source="udev" if disks.udev else "kernel")
            monitor.filter_by("block", "disk")
            self._observer = pyudev.MonitorObserver(monitor, callback=self._event,
                                                    name="stormdeck-disk-watch")
            self._observer.daemon = True
            self._observer.start()
        except Exception as exc:  # netlink refused in a sandbox: the listing still tells
            self._observer, self.error = None, str(exc) or type(exc).__name__

    def _event(self, dev: Any) -> None:
        present = False
        if dev.action != "remove":
            # A loop device is never added or removed: attaching and detaching change
            # its size, so a disk is there when it has one.
            try:
                present = int(dev.attributes.asstring("size")) > 0
            except (KeyError, ValueError, OSError):
                present = False
        self._queue.append((time.time(), dev.sys_name, present))

    def drain(self) -> list[tuple[float, str, bool]]:
        """(time, kernel name, present after the event), oldest first, since the last drain."""
        out = []
        while True:
            try:
                out.append(self._queue.popleft())
            except IndexError:
                return out

    def close(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer = None


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


LOOP_GET_STATUS64 = 0x4C05  # linux/loop.h
_LOOP_INFO64 = struct.Struct("=QQQQQIIII64s64s32s2Q")  # struct loop_info64, 232 bytes


def loop_backing_dev(name: str, sys_class: Path = Path("/sys/class/block"),
                     dev_dir: Path = Path("/dev")) -> int | None:
    """The device number (st_dev) of the filesystem that holds a loop device's backing file;
    None for a device that is no attached loop.

    The loop driver's own answer first (LOOP_GET_STATUS64's lo_device, what `losetup -a`
    prints as [MAJMIN]): it holds when the file was deleted, or when its path
    (/sys/block/loopN/loop/backing_file) is one inside another mount namespace, a container's.
    Where /dev/loopN cannot be opened (no root), the path's stat is the best left.
    """
    path = _read(sys_class / name / "loop" / "backing_file")
    if path is None:
        return None  # not a loop device, or nothing attached
    try:
        fd = os.open(dev_dir / name, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            buf = fcntl.ioctl(fd, LOOP_GET_STATUS64, bytes(_LOOP_INFO64.size))
            return _LOOP_INFO64.unpack(buf)[0]
        except OSError:
            pass
        finally:
            os.close(fd)
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


def backing_disks(name: str, sys_class: Path = Path("/sys/class/block"),
                  dev_dir: Path = Path("/dev"), _depth: int = 0) -> tuple[str, ...]:
    """The whole disks a loop device's I/O lands on: those under the filesystem that holds
    its backing file (a partition's disk, an LVM volume's disks, a loop in a loop's file).
    Where OSDs run on loop files this is their disk: MicroCeph's `microceph disk add
    loop,<size>,<nr>` makes "file-backed loop OSDs" on the root disk
    (documentation.ubuntu.com/microceph, reference/commands/disk, how-to/single-node).
    () for no loop, or a file on a filesystem on no block device (tmpfs, overlay, NFS; a
    btrfs's st_dev is an anonymous number that names no disk either)."""
    dev = loop_backing_dev(name, sys_class, dev_dir) if _depth < 8 else None
    if dev is None:
        return ()
    link = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    try:
        holder = Path(os.readlink(link)).name
    except OSError:
        return ()
    found: list[str] = []
    for disk in whole_disk(holder, sys_class):
        under = backing_disks(disk, sys_class, dev_dir, _depth + 1)
        found += under or [disk]
    return tuple(dict.fromkeys(found))


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
                 proc_names: Iterable[str] = OSD_NAMES, udev: bool | None = None,
                 watch: bool = True) -> None:
        """`udev=False` reads disks as where no udev runs (sysfs only); None finds out.
        `watch=False` notices disks coming and going by the listing alone."""
        self.hostname = hostname or short_hostname()
        self.devices = Disks(udev=udev)
        self.watch = DiskWatch(self.devices) if watch else None
        self._present: set[str] | None = None
        self._disk_events: tuple[DiskEvent, ...] = ()
        self.proc_names = frozenset(proc_names)
        # Only OSDs of the watched cluster: two clusters on one host both have an osd.0.
        self.fsid = fsid_from_conf(ceph_conf) if ceph_conf else None
        self._fsids = DaemonFsids()
        self._procs: dict[tuple[int, float], _ProcSample] = {}
        self._disks: tuple[float, dict[str, DiskCounters]] | None = None
        self._cpu: Any = None

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()

    def poll(self) -> Partial:
        now = time.monotonic()
        daemons = self._poll_daemons(now)
        disks = self._poll_disks(now, daemons)  # before _host: it sets the disk events
        return Partial(source=self.name, time=time.time(), daemons=daemons, disks=disks,
                       hosts={self.hostname: self._host()})

    def _host(self) -> Host:
        t = psutil.cpu_times()
        busy, iowait = cpu_busy(self._cpu, t) if self._cpu is not None else (None, None)
        self._cpu = t
        return Host(name=self.hostname, cpus=psutil.cpu_count(), cpu_busy=busy, iowait=iowait,
                    load1=os.getloadavg()[0], tuned_profile=tuned_profile(),
                    udev=self.devices.udev, disk_events=self._disk_events)

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
        news = self.watch.drain() if self.watch is not None else []
        names = self.devices.names()
        out = {}
        infos = {name: self.devices.info(name) for name in names}
        # A daemon on a loop device writes to the disk under the loop's backing file: that
        # disk's cache and limit are the daemon's too (MicroCeph's `disk add loop,...`, the
        # lab). Looked up for held loops only: the exporter and idle loops need none.
        backing = {name: backing_disks(name) for name in names
                   if holders.get(name) and infos[name].virtual}
        for name, unders in backing.items():
            for under in unders:
                if under != name:
                    mine = holders.setdefault(under, [])
                    mine += [d for d in holders[name] if d not in mine]
        for name in names:
            info = infos[name]
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
                virtual=info.virtual, daemons=tuple(sorted(holders.get(name, ()))),
                serial=info.serial, wwn=info.wwn, bus=info.bus, rpm=info.rpm, links=info.links,
                backing=backing.get(name, ()))
            out[disk.key] = disk
        self._disk_events = self._comings_and_goings(news, names, infos)
        return out

    def _comings_and_goings(self, news: list[tuple[float, str, bool]], names: list[str],
                            infos: Mapping[str, DiskInfo]) -> tuple[DiskEvent, ...]:
        """Disks that appeared or vanished since the last poll: the watch's events in
        order, then what the listing shows that they did not (a lost event, no watch)."""
        listed = set(names)
        if self._present is None:
            self._present = listed  # what is there at the start is no news
            return ()
        present, events = self._present, []
        for at, name, there in news:
            if there and name not in present:
                present.add(name)
                events.append(DiskEvent(at, name, True))
            elif not there and name in present:
                present.discard(name)
                events.append(DiskEvent(at, name, False))
        wall = time.time()
        events += [DiskEvent(wall, n, True) for n in sorted(listed - present)]
        events += [DiskEvent(wall, n, False) for n in sorted(present - listed)]
        self._present = listed
        return tuple(replace(e, detail=_what(infos[e.name]))
                     if e.appeared and e.name in infos else e for e in events)


def _what(info: DiskInfo) -> str:
    """A disk in a few words: its size, model and serial, as far as known."""
    parts = []
    if info.size_bytes:
        parts.append(f"{info.size_bytes / 2**30:.4g} GiB")
    parts += [p for p in (info.model, info.serial and f"serial {info.serial}") if p]
    return ", ".join(parts)


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

