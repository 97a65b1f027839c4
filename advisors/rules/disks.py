"""Disk rules: a volatile write cache under a daemon, and disks at their limit (K2.4, K2.5, K6)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.devices import cache_argv, persist_path
from stormdeck.advisors.findings import Change, Check, Severity
from stormdeck.advisors.rules.base import DISK, Context, Proposes, Rule, mean
from stormdeck.collectors.model import Disk, Host, Records, disk_key
from stormdeck.collectors.packing import PackedDaemons, values_of

VERIFY = ("Verify (K2.5, K6.4): prefill a file on the disk (`dd if=/dev/zero of=FILE bs=1M "
          "count=4096 oflag=direct`), run `fio --name=wc --filename=FILE --rw=randwrite "
          "--ioengine=psync --fdatasync=1 --bs=4k --iodepth=1 --numjobs=32 --runtime=30` while "
          "`iostat -mtx 1` runs: with the cache off fio's IOPS equal the disk's w/s; about half "
          "means the cache is still on, or the host was not rebooted.")

# virtio_blk reports a volatile cache when the device offers VIRTIO_BLK_F_FLUSH; its
# /sys/block/vdX/cache_type is writable only with VIRTIO_BLK_F_CONFIG_WCE (feature bit 11,
# linux drivers/block/virtio_blk.c), which Firecracker does not offer. Firecracker's
# docs/api_requests/block-caching.md: both its cache types advertise flush; "Unsafe"
# acknowledges a flush without syncing the host's file, "Writeback" fsyncs it.
VIRTIO = (" A virtio disk's cache is its hypervisor's: QEMU's drive `cache=` mode, "
          "Firecracker's drive `cache_type` (its default, Unsafe, acknowledges flushes "
          "without syncing the host's file); writing the guest's cache_type works only where "
          "the device offers VIRTIO_BLK_F_CONFIG_WCE.")


def cache_change(host: str, name: str, transport: str | None) -> Change | None:
    """The device-level change for a disk's transport (K6.2); never the kernel's view (K6.1).
    The actuator makes it last: a udev rule for SATA/SAS, the saved feature for NVMe."""
    argv = cache_argv(name, transport or "", on=False)
    if argv is None:
        return None
    note = ("behind a RAID or SAS controller use the controller's own tool, then reboot the "
            "host so the controller sees it (K2.5)")
    if transport == "nvme":
        note = "saved in the controller (-s) so it survives a reset; " + note
    else:
        note = (f"kept across reboots by a udev rule ({persist_path(name)}), which undo "
                "removes; " + note)
    return change("device_cache", disk_key(host, name), "volatile write cache", "on", "off",
                  args={"transport": transport or ""}, note=note)


def solid_state(disk: Disk) -> bool:
    return disk.transport == "nvme" or disk.rotational is False


class WriteCacheOn(Rule):
    id = "disk.write_cache_on"
    proposes = (Proposes("device_cache", ("volatile write cache",), DISK, "off"),)
    title = "Volatile write cache on under a storage daemon"
    source = ("write-cache-raid-ssd-verify, write-cache-kernel-view, write-cache-device-commands, "
              "write-cache-cern, write-cache-check")
    explanation = (
        "With the disk's volatile write cache on, every fsync the OSD or chunkserver issues "
        "becomes a cache flush to the disk, and performance can drop (K2.5); at CERN turning "
        "it off cut commit latency from ~120 ms to ~10 ms (K6.3). Whether it costs is "
        "measured, not assumed: `stormdeck validate` runs fio's fdatasync writes against "
        "the writes and flushes the device saw (K2.5, K6.4), and only a disk that failed "
        "that gets a change. Turn off the DEVICE's cache with the tool for its transport "
        "(K6.2), kept across reboots. Writing `write through` to "
        "/sys/block/*/queue/write_cache only changes the kernel's view, stops its flushes "
        "and risks acknowledged writes on power loss: never do that (K6.1). On SSDs and "
        "NVMe the cache may be what makes the disk fast: without power-loss protection, "
        "turning it off can cost a lot, so there it is information, not a warning.")

    def check(self, ctx: Context) -> Iterable[Check]:
        over = loops_over(ctx)
        for disk in ctx.latest.disks.values():
            if not disk.daemons or disk.virtual:
                continue  # a loop or dm device's "cache" belongs to the disk under it
            state = disk.device_cache or disk.write_cache
            if state is None:
                continue
            on = state.lower().startswith("write back")
            ev = ctx.validated.cache_of(disk.key) if ctx.validated is not None else None
            measured_bad = ev is not None and ev.verdict == "fail"
            # A fio run that found no cost outweighs the cache's state: nothing to do.
            fire = on and (ev is None or measured_bad)
            change = cache_change(disk.host, disk.name, disk.transport) \
                if fire and measured_bad else None
            solid = solid_state(disk)
            severity = Severity.WARNING if measured_bad and not solid else Severity.INFO
            procedure = [VERIFY]
            if ev is None:
                procedure.insert(0, "Measure before changing anything: `stormdeck validate "
                                    f"--scratch-dir DIR` with DIR on {disk.name} (its "
                                    "write-cache check), then look again.")
            elif fire and change is None:
                procedure.insert(0, f"No device-level tool fits a {disk.transport} disk from "
                                    "here: change the cache where it lives (hypervisor, "
                                    "controller), not in /sys/block (K6.1)."
                                 + (VIRTIO if disk.transport == "virtio" else ""))
            if fire and solid:
                procedure.append("An SSD or NVMe without power-loss protection may need its "
                                 "cache: check the model's datasheet before turning it off.")
            found = ("not measured yet" if ev is None else
                     f"fio measured {ev.ratio:.0%} of the device's requests"
                     + (f", {ev.flushes_per_write:.2f} flushes per write"
                        if ev.flushes_per_write is not None else ""))
            loops = over.get((disk.host, disk.name), "")
            yield Check(
                target=disk.key, fire=fire, clear=not fire, severity=severity,
                summary=f"{disk.key} ({disk.transport}, {disk.model or 'model unknown'}) under "
                        f"{', '.join(disk.daemons)}{loops} has its write cache {state}; "
                        f"{found}",
                evidence=(ctx.evidence("kernel write_cache", [], now=disk.write_cache),
                          ctx.evidence("device cache_type", [], now=disk.device_cache),
                          ctx.evidence("fio / device requests",
                                       [ev.ratio] if ev is not None else [], "ratio")),
                changes=(change,) if change else (), procedure=tuple(procedure),
                badness=1.0 if fire else 0.0)


class AtHardwareLimit(Rule):
    id = "disk.at_hardware_limit"
    title = "Disk at its hardware limit"
    source = "disk-at-hardware-limit"
    explanation = (
        "The ideal is disks at full load: a disk at its limit means the hardware limit is "
        "reached, and no tuning will help (K2.4): more or faster disks, or less load, will. "
        "It is judged by the disk's own figures on every kind of device, from "
        "/proc/diskstats as iostat computes them: the requests queued and in flight "
        "(aqu-sz) and the time each waits (r_await/w_await). A disk at its limit keeps a "
        "queue and makes each request wait far beyond its own service time: beyond the "
        "tens of ms of an HDD, or the few ms of an SSD or NVMe (K2.4), with a queue of "
        "its kind (an SSD serves many at once). Neither %util (100% on an SSD long before "
        "it is saturated) nor the CPUs' iowait decides it: an OSD's own asynchronous I/O "
        "(libaio, io_uring) is not counted as iowait, so a disk BlueStore saturates can sit "
        "beside idle CPUs. Both are shown as evidence only.")

    def check(self, ctx: Context) -> Iterable[Check]:
        # Each snapshot's mapping unwrapped once: an older snapshot's disks are packed in
        # columns, and making a Disk again per disk and snapshot cost 7x the rule's time.
        maps = [s.disks.inner if isinstance(s.disks, Records) else s.disks
                for s in ctx.window]
        queued = _ever_queued(maps, min(float(ctx.p("min_queue_depth")),
                                        float(ctx.p("min_queue_depth_hdd"))))
        for disk in ctx.latest.disks.values():
            if not disk.daemons or (disk.virtual and disk.backing):
                # A loop device waits on the disk under its backing file: that disk is
                # judged, once, with every daemon on it; two findings would be one limit.
                continue
            if ctx.columns is not None and disk.key not in queued and \
                    disk.key not in ctx.tracked:
                # Its mean queue cannot reach a limit that no value of it reached: it can
                # neither fire nor clear, and its window (10,000 disks in a fleet, 60
                # snapshots each: half the engine's time) is not walked.
                continue
            queue, waits, util = _limit_series(maps, disk.key)
            q, w = mean(queue), mean(waits)
            if q is None or w is None:
                continue
            solid = disk.rotational is False or disk.transport == "nvme"
            kind = ("NVMe" if disk.transport == "nvme" else "SSD") if solid else "HDD"
            min_q = float(ctx.p("min_queue_depth" if solid else "min_queue_depth_hdd"))
            max_w = float(ctx.p("ssd_await" if solid else "hdd_await"))
            fire = q >= min_q and w >= max_w
            busy = ctx.values(lambda s, h=disk.host: _not_idle(s.hosts[h]))
            yield Check(
                target=disk.key, fire=fire, clear=q < min_q / 2 or w < max_w / 2,
                severity=Severity.INFO,
                summary=f"{disk.key} ({kind}) keeps {q:.1f} requests queued, each waiting "
                        f"{w * 1000:.1f} ms (at least {min_q:g} and {max_w * 1000:g} ms say "
                        "its limit): the hardware limit, no tuning will help",
                evidence=(ctx.evidence("queue depth (aqu-sz)", queue, "requests"),
                          ctx.evidence("await", waits, "s"),
                          ctx.evidence("disk util (evidence only)", util, "ratio"),
                          ctx.evidence("host CPU not idle (evidence only)", busy, "ratio")),
                badness=q / min_q + w / max_w)


def loops_over(ctx: Context) -> dict[tuple[str, str], str]:
    """(host, disk) -> " (through loop0, loop1)": the loop devices with daemons whose I/O
    lands on that disk. Built once a tick: a fleet has thousands of disks."""
    found: dict[tuple[str, str], list[str]] = {}
    for k in ctx.latest.disks.values():
        if k.backing and k.daemons:
            for b in k.backing:
                found.setdefault((k.host, b), []).append(k.name)
    return {key: f" (through {', '.join(sorted(names, key=lambda n: (len(n), n)))})"
            for key, names in found.items()}


def _not_idle(h: Host) -> float | None:
    """The share of CPU time that was not iostat's %idle, "idle without an outstanding disk
    I/O request" (sysstat's iostat(1)): busy plus iowait. A host whose CPUs wait on a
    saturated disk has none idle; counting iowait as idle would never see that limit."""
    if h.cpu_busy is None:
        return None
    return min(1.0, h.cpu_busy + (h.iowait or 0.0))


_LIMIT_FIGURES = ("queue_depth", "util", "read_await", "write_await", "read_iops",
                  "write_iops")


def _ever_queued(maps: list[Mapping[str, Disk]], least: float) -> set[str]:
    """The disks with a queue depth of `least` or more in any of the mappings: each
    distinct mapping read once (a fleet source's scrape is held by 15 snapshots)."""
    out: set[str] = set()
    seen: set[int] = set()
    for m in maps:
        if id(m) in seen:
            continue
        seen.add(id(m))
        out.update(k for k, v in zip(m, values_of(m, "queue_depth"), strict=True)
                   if v is not None and v >= least)
    return out


def _limit_series(maps: list[Mapping[str, Disk]], key: str
                  ) -> tuple[list[float], list[float], list[float]]:
    """Disk `key`'s queue depth, await and util in each mapping that has them (unknown
    and NaN left out, as Context.values does); a packed one's read from its columns."""
    queue: list[float] = []
    waits: list[float] = []
    util: list[float] = []
    for m in maps:
        if isinstance(m, PackedDaemons):
            row = m.figures_at(key, _LIMIT_FIGURES)
            if row is None:
                continue
        else:
            d = m.get(key)
            if d is None:
                continue
            row = (d.queue_depth, d.util, d.read_await, d.write_await, d.read_iops,
                   d.write_iops)
        for v, out in ((row[0], queue), (_weighed(*row[2:]), waits), (row[1], util)):
            if v is not None and v == v:
                out.append(float(v))
    return queue, waits, util


def _weighed(ra: float | None, wa: float | None, r: float | None,
             w: float | None) -> float | None:
    if ra is None and wa is None:
        return None
    r, w = r or 0.0, w or 0.0
    if r + w <= 0:
        return max(ra or 0.0, wa or 0.0)
    return ((ra or 0.0) * r + (wa or 0.0) * w) / (r + w)


RULES = (WriteCacheOn, AtHardwareLimit)
