"""Disk rules: a volatile write cache under a daemon, and disks at their limit (K2.4, K2.5, K6)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.devices import cache_argv
from stormdeck.advisors.model import Change, Check, Severity
from stormdeck.advisors.rules.base import Context, Rule, mean
from stormdeck.collectors.model import disk_key

VERIFY = ("Verify (K2.5, K6.4): prefill a file on the disk (`dd if=/dev/zero of=FILE bs=1M "
          "count=4096 oflag=direct`), run `fio --name=wc --filename=FILE --rw=randwrite "
          "--ioengine=psync --fdatasync=1 --bs=4k --iodepth=1 --numjobs=32 --runtime=30` while "
          "`iostat -mtx 1` runs: with the cache off fio's IOPS equal the disk's w/s; about half "
          "means the cache is still on, or the host was not rebooted.")


def cache_change(host: str, name: str, transport: str | None) -> Change | None:
    """The device-level change for a disk's transport (K6.2); never the kernel's view (K6.1)."""
    argv = cache_argv(name, transport or "", on=False)
    if argv is None:
        return None
    return Change(kind="device_cache", target=disk_key(host, name),
                  key="volatile write cache", current="on", proposed="off",
                  command=" ".join(argv), runtime=True, reversible=True,
                  blast_radius="host",
                  note="behind a RAID or SAS controller use the controller's own tool, then "
                       "reboot the host so the controller sees it (K2.5)")


class WriteCacheOn(Rule):
    id = "disk.write_cache_on"
    title = "Volatile write cache on under a storage daemon"
    source = "K2.5, K6.1-K6.4"
    explanation = (
        "With the disk's volatile write cache on, every fsync the OSD or chunkserver issues "
        "becomes a cache flush to the disk, and performance drops (K2.5); at CERN turning "
        "it off cut commit latency from ~120 ms to ~10 ms (K6.3). Turn off the DEVICE's "
        "cache with the tool for its transport (K6.2). Writing `write through` to "
        "/sys/block/*/queue/write_cache only changes the kernel's view, stops its flushes "
        "and risks acknowledged writes on power loss: never do that (K6.1).")

    def check(self, ctx: Context) -> Iterable[Check]:
        for disk in ctx.latest.disks.values():
            if not disk.daemons or disk.virtual:
                continue  # a loop or dm device's "cache" belongs to what is under it
            state = disk.device_cache or disk.write_cache
            if state is None:
                continue
            on = state.lower().startswith("write back")
            change = cache_change(disk.host, disk.name, disk.transport) if on else None
            procedure = [VERIFY]
            if on and change is None:
                procedure.insert(0, f"No device-level tool fits a {disk.transport} disk from "
                                    "here: change the cache where it lives (hypervisor, "
                                    "controller), not in /sys/block (K6.1).")
            yield Check(
                target=disk.key, fire=on, clear=not on, severity=Severity.WARNING,
                summary=f"{disk.key} ({disk.transport}, {disk.model or 'model unknown'}) under "
                        f"{', '.join(disk.daemons)} has its write cache {state}",
                evidence=(ctx.evidence("kernel write_cache", [], now=disk.write_cache),
                          ctx.evidence("device cache_type", [], now=disk.device_cache)),
                changes=(change,) if change else (), procedure=tuple(procedure),
                badness=1.0 if on else 0.0)


class AtHardwareLimit(Rule):
    id = "disk.at_hardware_limit"
    title = "Disk at its hardware limit"
    source = "K2.4"
    explanation = (
        "The ideal is disks at full load: %util near 100% together with CPU idle near 0 "
        "means the hardware limit is reached, and no tuning will help (K2.4): more or "
        "faster disks, or less load, will.")

    def check(self, ctx: Context) -> Iterable[Check]:
        for disk in ctx.latest.disks.values():
            if not disk.daemons:
                continue
            util = ctx.values(lambda s, k=disk.key: s.disks[k].util)
            busy = ctx.values(lambda s, h=disk.host: s.hosts[h].cpu_busy)
            u, b = mean(util), mean(busy)
            if u is None or b is None:
                continue
            fire = u >= float(ctx.p("min_util")) and b >= float(ctx.p("min_cpu_busy"))
            yield Check(
                target=disk.key, fire=fire, clear=u < float(ctx.p("min_util")) - 0.1,
                severity=Severity.INFO,
                summary=f"{disk.key} is {u:.0%} busy and its host's CPUs {b:.0%}: the "
                        "hardware limit, no tuning will help",
                evidence=(ctx.evidence("disk util", util, "ratio"),
                          ctx.evidence("host CPU busy", busy, "ratio")),
                badness=u + b)


RULES = (WriteCacheOn, AtHardwareLimit)
