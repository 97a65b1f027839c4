"""The host source: this host's OSD and chunkserver processes and disks, joined each poll.

Per daemon: cores used (rate of CPU time), cores allowed and whether someone set
that limit, how often the quota throttled it, its systemd unit, threads, RSS, and
the block devices it holds open; per disk, iostat's figures.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from stormdeck.collectors.host.cgroup import cpu_busy, throttling
from stormdeck.collectors.host.disks import (
    DiskCounters,
    DiskInfo,
    Disks,
    DiskWatch,
    _read,
    backing_disks,
    disk_rates,
    open_block_devices,
    parse_diskstats,
)
from stormdeck.collectors.host.network import nic_stats
from stormdeck.collectors.host.processes import (
    OSD_NAMES,
    DaemonFsids,
    _ProcSample,
    fsid_from_conf,
    scan_processes,
    short_hostname,
)
from stormdeck.collectors.model import Daemon, Disk, DiskEvent, Host, Partial

FD_REFRESH = 60.0  # a daemon's open devices change only when it restarts


def tuned_profile(etc: Path = Path("/etc/tuned")) -> str:
    """The profile tuned applies (tuned-adm writes it to active_profile); "" if none."""
    return (_read(etc / "active_profile") or "").strip()


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
        self._nics = nic_stats(getattr(self, "_nics", None))
        return Host(name=self.hostname, cpus=psutil.cpu_count(), cpu_busy=busy, iowait=iowait,
                    load1=os.getloadavg()[0], tuned_profile=tuned_profile(),
                    udev=self.devices.udev, disk_events=self._disk_events,
                    mem_total=psutil.virtual_memory().total, nics=self._nics)

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
