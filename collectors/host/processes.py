"""Which process is which daemon: OSD id, cluster, conf, fsid, unit, from argv and /proc."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from stormdeck.collectors.host.cgroup import CpuStat, cgroup_cpu_limit, cgroup_cpu_stat

OSD_NAMES = frozenset({"ceph-osd"})


def short_hostname() -> str:
    # Ceph records the short name in osd metadata; match it.
    return socket.gethostname().split(".")[0]


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
        # Its cgroup files are read by pid after psutil's: a process that died between
        # gives no quota and no unit, figures that would be served as a running daemon's.
        if not p.is_running():
            continue
        out.append(ProcInfo(daemon_id, kind, p.pid, p.info["create_time"], tuple(argv),
                            t.user + t.system, threads, rss, allowed, explicit, quota, stat,
                            unit))
    return out
