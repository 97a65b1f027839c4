"""Block devices as the kernel and udev see them: /proc/diskstats rates, identity, write cache.

Through pyudev what udev knows where a udev daemon runs (model, serial, WWN, bus,
/dev/disk/by-id and by-path links) and the kernel's attributes always (rotational,
the kernel's write-cache view, the device's own scsi_disk cache_type, size). A
pyudev Monitor tells when a disk appears or vanishes.
"""

from __future__ import annotations

import fcntl
import os
import re
import stat
import struct
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VIRTUAL_PREFIXES = ("loop", "dm-", "md", "rbd", "nbd", "zram", "ram", "sr", "drbd")


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
