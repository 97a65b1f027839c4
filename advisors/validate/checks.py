"""Validation steps 1 and 2: this host's settings and write cache, the cluster's settings."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from stormdeck.advisors import overrides
from stormdeck.advisors.actuators.base import same
from stormdeck.advisors.rules.ec import fast_ec_capable, rgw_bulk_data
from stormdeck.advisors.validate import judge
from stormdeck.advisors.validate.context import POOL_PREFIX, SCRATCH_NAME, Ctx
from stormdeck.advisors.validate.judge import Verdict
from stormdeck.base.errors import UserError
from stormdeck.collectors.model import Snapshot

# ---- step 1: hosts -------------------------------------------------------------------


def host_checks(ctx: Ctx) -> list[Verdict]:
    snap = ctx.snapshot
    out = [judge.tuned(h.name, h.tuned_profile) for h in snap.hosts.values()]
    osds = [d for d in snap.daemons.values() if d.kind == "osd"]
    for d in osds:
        if d.cores_allowed is not None:
            out.append(judge.cores(d.id, d.cores_allowed, d.cores_used,
                                   d.cpu_limit_explicit))
            out.append(judge.op_threads(d.id, op_thread_count(snap, d), d.cores_allowed,
                                        op_threads_per_core()))
    if not any(d.cores_allowed is not None for d in osds):
        out.append(Verdict("cores allowed per OSD", judge.SKIP, "no OSD of this cluster runs "
                           "on this host (run the exporter on OSD hosts, or validate there)",
                           judge.CORES))
    ctx.progress(0.3, "host settings read; measuring the write cache with fio")
    out.append(write_cache_check(ctx))
    return out


def op_threads_per_core() -> float:
    """The rule's threshold, with the operator's override: validate and check agree."""
    from stormdeck.advisors.settings import load_settings

    try:
        params = load_settings()["ceph.osd.op_threads_vs_cores"].params
    except UserError:
        params = {}
    return float(params.get("threads_per_core", judge.OP_THREADS_PER_CORE))


def op_thread_count(snap: Snapshot, d: Any) -> int | None:
    """Op worker threads an OSD runs: shards x threads per shard, for its device class."""
    c = snap.cluster
    if c is None:
        return None
    kind = "ssd" if d.device_class in ("ssd", "nvme") else "hdd"

    def value(name: str) -> int | None:
        opt = c.config.get(name)
        if opt is None or not opt.exists:
            return None
        for who in (d.id, "osd", "global"):
            if who in opt.values:
                return _int(opt.values[who])
        return _int(opt.default)

    shards = value("osd_op_num_shards") or value(f"osd_op_num_shards_{kind}")
    threads = value("osd_op_num_threads_per_shard") or \
        value(f"osd_op_num_threads_per_shard_{kind}")
    return shards * threads if shards and threads else None


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text is not None else None
    except ValueError:
        return None


def device_of(path: Path) -> str | None:
    """The block device a directory's filesystem sits on ("vda", "sdb1"), if it has one."""
    st = os.stat(path)
    link = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    return Path(os.path.realpath(link)).name if link.exists() else None


def parse_flushes(text: str) -> dict[str, tuple[int, int]]:
    """Per device (flush requests completed, ms spent flushing): /proc/diskstats' 19th and
    20th columns, there since Linux 5.5 (Documentation/admin-guide/iostats.rst, fields 16
    and 17 after the name). Older kernels' shorter lines give nothing: no count, not 0."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 20 and f[18].isdigit() and f[19].isdigit():
            out[f[2]] = (int(f[18]), int(f[19]))
    return out


def flush_rates(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
                dev: str, seconds: float) -> tuple[float | None, float | None]:
    """(flushes per second, ms per flush) of `dev` between two readings; None: not counted."""
    if dev not in before or dev not in after or seconds <= 0:
        return None, None
    n = after[dev][0] - before[dev][0]
    ms = after[dev][1] - before[dev][1]
    return n / seconds, (ms / n if n > 0 else None)


def write_cache_check(ctx: Ctx) -> Verdict:
    """K2.5: fio 4K writes with fdatasync on a pre-filled scratch file, against the w/s the
    device shows in /proc/diskstats over the same seconds."""
    from stormdeck.collectors.host.disks import parse_diskstats, whole_disk

    directory = ctx.options.scratch_dir
    if ctx.options.read_only:
        # fio's fdatasync'd writes load the disk (perhaps an OSD's): the kind of thing
        # read-only mode exists to keep off a production cluster.
        return Verdict(f"write cache under {directory}", judge.SKIP, "read-only mode: not "
                       "measured, as fio writes a scratch file with fdatasync", judge.WCACHE)
    dev = device_of(directory)
    if dev is None:
        return Verdict(f"write cache under {directory}", judge.SKIP,
                       f"{directory} is on no block device (tmpfs, overlay)", judge.WCACHE_FIO)
    # A partition's flushes go to its disk: the disk's cache is what is judged.
    disk = (whole_disk(dev) or [dev])[0]
    if shutil.which("fio") is None:
        return Verdict(f"write cache of {dev}", judge.SKIP, "fio is not installed", judge.WCACHE)
    holders = [d for k in ctx.snapshot.disks.values() if k.name in (dev, disk)
               for d in k.daemons]
    if holders and dev not in ctx.options.confirmed_devices and not ctx.confirm(
            f"{dev} holds {', '.join(holders)}: writing a scratch file to it competes with "
            "them. Type the device name to go on:", dev):
        return Verdict(f"write cache of {dev}", judge.SKIP,
                       f"{dev} holds {', '.join(holders)}; not confirmed", judge.WCACHE)
    scratch = directory / SCRATCH_NAME
    ctx.cleanup.push(f"file {scratch}", lambda: scratch.unlink(missing_ok=True))
    try:
        size = 64 if ctx.options.quick else 1024
        seconds = 5 if ctx.options.quick else 30
        ctx.run(["dd", "if=/dev/zero", f"of={scratch}", "bs=1M", f"count={size}",
                 "oflag=direct", "status=none"], timeout=300)
        ctx.progress(0.5, f"fio on {scratch} for {seconds} s")
        text = Path("/proc/diskstats").read_text()
        before, flushes_before = parse_diskstats(text).get(dev), parse_flushes(text)
        started = time.monotonic()
        out = ctx.run(["fio", "--name=stormdeck-validate", f"--filename={scratch}",
                       "--rw=randwrite", "--ioengine=psync", "--fdatasync=1", "--bs=4k",
                       "--iodepth=1", f"--numjobs={4 if ctx.options.quick else 32}",
                       f"--size={size}M", f"--runtime={seconds}", "--time_based",
                       "--group_reporting", "--output-format=json"], timeout=seconds + 120)
        elapsed = time.monotonic() - started
        text = Path("/proc/diskstats").read_text()
        after, flushes_after = parse_diskstats(text).get(dev), parse_flushes(text)
    finally:
        ctx.cleanup.pop(f"file {scratch}")
    try:
        iops = float(json.loads(out[out.index("{"):])["jobs"][0]["write"]["iops"])
    except (ValueError, KeyError, IndexError) as exc:
        raise UserError(f"fio's output is not what stormdeck reads ({exc})") from None
    wps = (after.writes - before.writes) / elapsed if before and after else None
    flushes = flush_rates(flushes_before, flushes_after, disk, elapsed)
    kernel = next((k.write_cache for k in ctx.snapshot.disks.values() if k.name == disk), None)
    return judge.write_cache(disk, iops, wps, kernel, *flushes)


# ---- step 2: cluster settings ---------------------------------------------------------------


def cluster_settings(ctx: Ctx) -> list[Verdict]:
    c = ctx.snapshot.cluster
    if c is None:
        return [Verdict("cluster settings", judge.SKIP, "no Ceph cluster", judge.PG_POW2)]
    out = [judge.pg_num(p.name, p.pg_num) for p in c.pools
           if not p.name.startswith(POOL_PREFIX)]
    out += [judge.ec_pool(p.name, p.ec_k, p.ec_m, c.release, p.flags, p.stripe_unit,
                          capable=fast_ec_capable(p), version=c.version,
                          bulk=rgw_bulk_data(p))
            for p in c.pools if p.type == "erasure"]

    def effective(name: str) -> str | None:
        opt = c.config.get(name)
        if opt is None or not opt.exists:
            return None
        return opt.values.get("osd", opt.values.get("global", opt.default))

    scheduler = overrides.scheduler(c)
    out += judge.scrub({n: effective(n) for n in (
        "osd_scrub_sleep", "osd_scrub_load_threshold", "osd_scrub_min_interval",
        "osd_deep_scrub_interval", "osd_mclock_profile")}, scheduler)
    stored = {}
    for name, opt in c.config.items():
        over = overrides.override(c, name)
        value = opt.values.get("osd", opt.values.get("global"))
        if over is not None and value is not None and not same(value,
                                                                 over.forced or opt.default):
            stored[name] = (value, over.why())
    out += judge.overridden_settings(stored)
    out.append(judge.secure_mode({n: effective(n) for n in (
        "ms_cluster_mode", "ms_service_mode", "ms_client_mode")}))
    return out

