"""What `stormdeck exporter` publishes for Prometheus: what no other exporter gives, read
fresh at each scrape: per daemon CPU seconds, cores allowed, threads and RSS; per device
the write cache (the kernel's view and the device's own), rotational, transport, model;
the host's tuned profile; the time each daemon's cgroup was throttled by its CPU quota.

Labels join with the series operators already have: `ceph_daemon` as ceph-mgr and
ceph-exporter name OSDs, `device` as node_exporter names disks (kernel names), and
`hostname` as ceph_osd_metadata and node_uname_info's nodename (short form), and
`cluster` as ceph-mixin's dashboards and alerts select a cluster by: the fsid, the value
cephadm's scrape jobs give it (a `cluster` target label set by relabelling wins over it).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from stormdeck import __version__
from stormdeck.collectors.host.disks import disk_info, list_disks
from stormdeck.collectors.host.processes import (
    OSD_NAMES,
    DaemonFsids,
    fsid_from_conf,
    scan_processes,
    short_hostname,
)
from stormdeck.collectors.host.source import tuned_profile

PREFIX = "stormdeck"


class HostCollector(Collector):
    """A prometheus_client collector: every scrape reads /proc and /sys again (~ms)."""

    def __init__(self, ceph_conf: str | None = None, hostname: str | None = None) -> None:
        self.hostname = hostname or short_hostname()
        self.fsid = fsid_from_conf(ceph_conf) if ceph_conf else None
        # Each OSD's own conf, read through its root: a container's is not the host's.
        self._fsids = DaemonFsids()

    def _belongs(self, pid: int, argv: list[str]) -> bool:
        return self.fsid is None or self._fsids.of(pid, argv) == self.fsid

    def collect(self) -> Iterator[Any]:
        started = time.perf_counter()
        labels = ["ceph_daemon", "chunkserver", "hostname", "ceph_fsid", "cluster"]
        cpu = CounterMetricFamily(f"{PREFIX}_daemon_cpu_seconds",
                                  "CPU time (user + system) of the daemon's process", labels=labels)
        allowed = GaugeMetricFamily(f"{PREFIX}_daemon_cores_allowed",
                                    "Cores the daemon may use: its CPU affinity, capped by its "
                                    "cgroup's CPU quota", labels=labels)
        threads = GaugeMetricFamily(f"{PREFIX}_daemon_threads", "Threads of the daemon",
                                    labels=labels)
        rss = GaugeMetricFamily(f"{PREFIX}_daemon_rss_bytes", "Resident memory of the daemon",
                                labels=labels)
        throttled = CounterMetricFamily(
            f"{PREFIX}_daemon_cpu_throttled_seconds",
            "Time the cgroup whose CPU quota binds the daemon was throttled (cpu.stat: "
            "v2 throttled_usec, v1 throttled_time); 0 without a quota", labels=labels)
        for p in scan_processes(OSD_NAMES, self._belongs):
            osd = p.daemon_id if p.kind == "osd" else ""
            cs = p.daemon_id if p.kind == "chunkserver" else ""
            fsid = (self._fsids.of(p.pid, list(p.argv)) or "") if p.kind == "osd" else ""
            # cluster: the OSD's own fsid, even without -c; a chunkserver is in no Ceph one.
            values = [osd, cs, self.hostname, fsid, fsid]
            cpu.add_metric(values, p.cpu_seconds)
            allowed.add_metric(values, p.cores_allowed)
            threads.add_metric(values, p.threads)
            rss.add_metric(values, p.rss_bytes)
            # The scan's, read while the process ran: read again by pid, a process that
            # died since would be served 0 (no cgroup found), a counter reset of a daemon
            # that no longer runs.
            seconds = p.cpu_stat.throttled_seconds if p.cpu_stat is not None else \
                0.0 if p.cpu_quota is None else None
            if seconds is not None:
                throttled.add_metric(values, seconds)
        yield from (cpu, allowed, threads, rss, throttled)
        yield from self._devices()
        profile = tuned_profile()
        tuned = GaugeMetricFamily(f"{PREFIX}_host_tuned_profile_info",
                                  "The active tuned profile (empty: none)",
                                  labels=["hostname", "profile", "cluster"])
        tuned.add_metric([self.hostname, profile, self._cluster], 1.0)
        yield tuned
        build = GaugeMetricFamily(f"{PREFIX}_build_info", "The exporter's version, always 1",
                                  labels=["version", "python_version"])
        build.add_metric([__version__, platform.python_version()], 1.0)
        yield build
        took = GaugeMetricFamily(f"{PREFIX}_exporter_scrape_duration_seconds",
                                 "How long this scrape took the exporter", labels=["hostname"])
        took.add_metric([self.hostname], time.perf_counter() - started)
        yield took

    @property
    def _cluster(self) -> str:
        # Only with -c is everything on this host one cluster's; else devices and the
        # host carry no cluster (an empty label is no label).
        return self.fsid or ""

    def _devices(self) -> Iterator[Any]:
        labels = ["device", "hostname", "cluster"]
        kernel = GaugeMetricFamily(
            f"{PREFIX}_device_write_cache_on", "1 if the kernel sees a volatile write cache "
            "(/sys/block/*/queue/write_cache is 'write back'), 0 if 'write through'",
            labels=labels)
        device = GaugeMetricFamily(
            f"{PREFIX}_device_cache_on", "1 if the device's own write cache is on, as its "
            "scsi_disk cache_type says, where readable (knowledge: write-cache-device-commands)",
            labels=labels)
        info = GaugeMetricFamily(f"{PREFIX}_device_info", "A block device and what it is",
                                 labels=[*labels, "rotational", "transport", "model",
                                         "virtual"])
        for name in list_disks():
            d = disk_info(name)
            values = [name, self.hostname, self._cluster]
            if d.write_cache is not None:
                kernel.add_metric(values, 1.0 if d.write_cache == "write back" else 0.0)
            if d.device_cache is not None:
                device.add_metric(values, 1.0 if d.device_cache.startswith("write back")
                                  else 0.0)
            info.add_metric([*values, _flag(d.rotational), d.transport or "", d.model or "",
                             _flag(d.virtual)], 1.0)
        yield from (kernel, device, info)


def _flag(v: bool | None) -> str:
    return "" if v is None else "1" if v else "0"
