"""CPU rules: cores per OSD against the knee, the starving point and its quota (KNOWLEDGE.md K1)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule, mean
from stormdeck.collectors.model import Daemon, Pool

KIB = 1024


def _io_size(ctx: Context, daemon_id: str) -> tuple[float | None, float | None]:
    """(average IOPS, average bytes per IO) over the window."""
    def both(a: str, b: str):  # -> Callable[[Snapshot], float | None]
        def get(s):  # one snapshot's sum, None where neither side is known
            d = s.daemons[daemon_id]
            x, y = getattr(d, a), getattr(d, b)
            return None if x is None and y is None else (x or 0.0) + (y or 0.0)
        return get

    avg_iops = mean(ctx.values(both("read_iops", "write_iops")))
    avg_bps = mean(ctx.values(both("read_bps", "write_bps")))
    if avg_iops is None or avg_bps is None or avg_iops <= 0:
        return avg_iops, None
    return avg_iops, avg_bps / avg_iops


def limit_how(d: Daemon, cores: float) -> str:
    """How to set an OSD's CPU limit to `cores`, for the way it was started: cephadm's unit
    is ceph-FSID@osd.N (its container limit lives in the service spec), the packages'
    ceph-osd@N; otherwise its cpuset or its container's limit."""
    quota = f"CPUQuota={round(cores * 100)}%"
    unit = d.unit or ""
    if re.fullmatch(r"ceph-[0-9a-f-]{36}@osd\.\d+\.service", unit):
        return (f"`systemctl set-property {unit} {quota}` (cephadm's unit); cephadm rewrites "
                f"the unit when it redeploys {d.id}, so keep it in the OSD service spec too "
                f"(`extra_container_args: [\"--cpus={cores:g}\"]`, `ceph orch apply -i SPEC`)")
    if re.fullmatch(r"ceph-osd@\d+\.service", unit):
        return f"`systemctl set-property {unit} {quota}` (a drop-in; it survives restarts)"
    if unit:
        return f"`systemctl set-property {unit} {quota}`"
    return ("its cpuset (`taskset -a -p -c LIST PID` for a running test) or its container's "
            f"CPU limit (--cpus={cores:g})")


class CoresBeyondKnee(Rule):
    id = "ceph.osd.cores_beyond_knee"
    reads = ("daemons",)  # its OSDs' figures, nothing else
    title = "OSD allowed more cores than it can use"
    source = ("osd-cpu-single-osd-scaling, osd-cpu-used-vs-allocated, osd-cpu-cluster-knee, "
              "osd-cpu-recommendation")
    explanation = (
        "Measured on NVMe OSDs, the knee of an OSD's CPU scaling is about 8-10 cores for "
        "small reads and 12 for writes (K1.4); past it each added core buys little. IOPS per "
        "used core stay flat while IOPS per allocated core fall (K1.3), so cores an OSD is "
        "given but does not use are better spent on OSDs that are starved or on other work. "
        "Only a limit someone set is judged (a cpuset or a quota): an OSD nobody pinned "
        "shares its host's CPUs and is given nothing. And an OSD may average 6-8 cores yet "
        "do best bursting above 16 (K1.3): it is judged by its peak and by whether its quota "
        "ever throttled it, never by its mean, and lowered toward the knee only.")

    def check(self, ctx: Context) -> Iterable[Check]:
        for d in ctx.osds():
            if d.cores_allowed is None or not d.cpu_limit_explicit:
                continue
            used = ctx.daemon_values(d.id, "cores_used")
            if not used:
                continue
            throttled = ctx.daemon_values(d.id, "cpu_throttled")
            reads = mean(ctx.daemon_values(d.id, "read_iops")) or 0.0
            writes = mean(ctx.daemon_values(d.id, "write_iops")) or 0.0
            kind = "read" if reads > writes else "write"
            knee = float(ctx.p(f"knee_{kind}"))
            frac = float(ctx.p("used_fraction"))
            peak = max(used)
            share = peak / d.cores_allowed
            held = any(t > 0 for t in throttled)
            yield Check(
                target=d.id, fire=d.cores_allowed > knee and share < frac and not held,
                clear=d.cores_allowed <= knee or share >= frac * 1.2 or held,
                severity=Severity.INFO,
                summary=f"{d.id} may use {d.cores_allowed:g} cores, beyond the {knee:g}-core "
                        f"knee for {kind}-heavy load, and peaked at {peak:.1f} "
                        f"({sum(used) / len(used):.1f} on average), never throttled",
                evidence=(ctx.evidence("cores used", used, "cores"),
                          ctx.evidence("cores allowed", [d.cores_allowed], "cores"),
                          ctx.evidence("periods throttled", throttled, "ratio")),
                procedure=(f"Lower {d.id}'s CPU limit toward {knee:g} cores, not toward its "
                           f"average (it may need bursts, K1.3): {limit_how(d, knee)}.",),
                badness=d.cores_allowed - knee)


class CpuThrottled(Rule):
    id = "ceph.osd.cpu_throttled"
    reads = ("daemons",)  # its OSDs' figures, nothing else
    title = "OSD held back by its CPU quota"
    source = "osd-cpu-used-vs-allocated, osd-cpu-recommendation"
    explanation = (
        "An OSD's CPU use comes in bursts: one that averages 6-8 cores does best when it "
        "can burst above 16 for short moments (K1.3). A CPU quota (a container's --cpus, "
        "systemd's CPUQuota, cgroup cpu.max) cuts every burst at its limit: the kernel "
        "stops the OSD's threads for the rest of the period, and requests wait even though "
        "the average use looks below the limit. The cgroup's cpu.stat counts the periods "
        "in which that happened (nr_throttled of nr_periods). Give the OSD room to burst: "
        "at least 2-4 cores for small IO (K1.5), or no quota and a cpuset instead.")

    def check(self, ctx: Context) -> Iterable[Check]:
        need = float(ctx.p("min_throttled"))
        # Only OSDs under a quota report it; walking the window of the rest (10,000
        # OSDs without a host source) cost 8 ms a tick.
        quota = [d for d in ctx.osds() if d.cpu_throttled is not None]
        # Every OSD's mean share in one pass over the columns; the windows of those that
        # can change nothing (never throttled enough, not tracked) are not walked.
        means = ctx.daemon_means([d.id for d in quota], "cpu_throttled")
        for d in quota:
            share = means.get(d.id)
            if share is None or not ctx.matters(d.id, share >= need):
                continue
            shares = ctx.daemon_values(d.id, "cpu_throttled")
            stopped = ctx.daemon_values(d.id, "cpu_throttled_time")
            used = ctx.daemon_values(d.id, "cores_used")
            allowed = d.cores_allowed or 0.0
            more = max(float(ctx.p("min_cores")), 2 * allowed)
            yield Check(
                target=d.id, fire=share >= need, clear=share < need / 2,
                severity=Severity.WARNING,
                summary=f"{d.id}'s CPU quota of {allowed:g} cores throttled it in "
                        f"{share:.0%} of scheduler periods"
                        + (f", {mean(stopped) or 0:.2f} s stopped per second" if stopped
                           else ""),
                evidence=(ctx.evidence("periods throttled", shares, "ratio"),
                          ctx.evidence("throttled time", stopped, "s/s"),
                          ctx.evidence("cores used", used, "cores"),
                          ctx.evidence("cores allowed", [allowed], "cores")),
                procedure=(f"Raise {d.id}'s CPU quota (to {more:g} cores, say) or replace it "
                           f"by a cpuset: {limit_how(d, more)}.",
                           "Read it back: cpu.stat's nr_throttled stops rising (`cat "
                           "/sys/fs/cgroup/.../cpu.stat`)."),
                badness=share)


class CoresStarved(Rule):
    id = "ceph.osd.cores_starved"
    reads = ("daemons",)  # its OSDs' figures, nothing else
    title = "OSD short of cores under small IO"
    source = "osd-cpu-single-osd-scaling, osd-cpu-recommendation"
    explanation = (
        "For small random IO an OSD scales almost linearly from 2 to 4 cores (K1.2), and "
        "2-4 cores per OSD is the measured recommendation (K1.5). This OSD is busy at its "
        "CPU allowance while serving small IO with fewer cores than that: the CPU, not the "
        "disk, is what limits it, and the slowest OSD bounds the cluster (K1.7).")

    def check(self, ctx: Context) -> Iterable[Check]:
        min_cores, need = float(ctx.p("min_cores")), float(ctx.p("busy_fraction"))
        # Fleet mode knows every OSD's CPU: walking each one's window for its IO size
        # was 68% of the engine at 10,000 OSDs. It fires only on an OSD with few cores,
        # busy on average: the means come by column, in one pass, and only OSDs that
        # may fire (or are tracked) have their windows read.
        allowed = [(d, d.cores_allowed) for d in ctx.osds()
                   if d.cores_allowed is not None and d.cores_allowed > 0]
        walk_all = ctx.columns is None  # the reference walk: judge them all
        means = ctx.daemon_means([d.id for d, cores in allowed if walk_all or cores < min_cores
                                  or d.id in ctx.tracked], "cores_used")
        for d, cores in allowed:
            mean_used = means.get(d.id)
            if mean_used is None:  # no figure in the window, or can neither fire nor clear
                continue
            few, busy = cores < min_cores, mean_used / cores
            if not ctx.matters(d.id, few and busy >= need):
                continue
            used = ctx.daemon_values(d.id, "cores_used")
            iops, size = _io_size(ctx, d.id)
            small = size is not None and size <= float(ctx.p("small_io_bytes"))
            loaded = iops is not None and iops >= float(ctx.p("min_iops"))
            yield Check(
                target=d.id, fire=few and small and loaded and busy >= need,
                clear=not few or busy < need - 0.1 or not loaded,
                severity=Severity.WARNING,
                summary=f"{d.id} is at {busy:.0%} of its {d.cores_allowed:g} allowed "
                        f"core{'s' if d.cores_allowed != 1 else ''} serving "
                        f"{iops or 0:.0f} IOPS of {(size or 0) / KIB:.0f} KiB",
                evidence=(ctx.evidence("cores used", used, "cores"),
                          ctx.evidence("cores allowed", [d.cores_allowed], "cores"),
                          ctx.evidence("IOPS", [iops or 0.0], "IOPS"),
                          ctx.evidence("bytes per IO", [size or 0.0], "B")),
                procedure=(f"Give {d.id} at least {float(ctx.p('min_cores')):g} cores: raise "
                           "its systemd CPUQuota, widen its cpuset (`taskset -a -p -c ...` "
                           "for a running test), or the container's CPU limit.",),
                badness=busy)


def replicas(pools: Iterable[Pool]) -> float | None:
    """Copies each client write makes, over the pools weighted by PGs: size for replicated
    pools, k+m shards for erasure-coded ones."""
    total = weight = 0.0
    for p in pools:
        copies = p.size if p.type == "replicated" else (
            p.ec_k + p.ec_m if p.ec_k and p.ec_m else p.size)
        if copies and p.pg_num:
            total += copies * p.pg_num
            weight += p.pg_num
    return total / weight if weight else None


class IopsPerCore(Rule):
    id = "ceph.osd.iops_per_core"
    title = "Small-IO load per core beyond what was measured"
    source = "osd-cpu-sizing-guidance, osd-cpu-cluster-knee"
    explanation = (
        "The 60-OSD measurements (3 replicas) found 2400-8500 small random read IOPS and "
        "1600-3900 write IOPS per allocated core (K1.4); upstream sizing asks for 1 core "
        "per 1000-3000 IOPS (K1.1). Reads and writes cost differently, so each is judged "
        "apart. The write figures count OSD operations, replication included (the report "
        "factors in the 3 copies to compare with its single-OSD tests, K9.1): so client "
        "writes are counted times the pools' copies and held against 3,900 OSD writes per "
        "core, not against 3,900 x 3 again. Beyond that the OSDs' cores, not the disks, "
        "set the ceiling: a capacity warning before latency shows it. Only OSDs given a "
        "cpuset or quota have cores of their own to count.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        osds = list(ctx.osds())
        pinned = [d.cores_allowed for d in osds if d.cpu_limit_explicit and d.cores_allowed]
        if c is None or not osds or len(pinned) < len(osds) / 2:
            return
        copies = replicas(c.pools) or 1.0
        # Scale the known allowances to all OSDs, as hosts we cannot see are alike.
        cores = sum(pinned) * len(osds) / len(pinned)
        small = float(ctx.p("small_io_bytes"))
        reads = ctx.values(lambda s: s.cluster.client_read_iops)
        writes = ctx.values(lambda s: s.cluster.client_write_iops)
        r_iops, w_iops = mean(reads) or 0.0, mean(writes) or 0.0
        r_bps = mean(ctx.values(lambda s: s.cluster.client_read_bps)) or 0.0
        w_bps = mean(ctx.values(lambda s: s.cluster.client_write_bps)) or 0.0
        r_small = r_iops > 0 and r_bps / r_iops <= small
        w_small = w_iops > 0 and w_bps / w_iops <= small
        r_core, w_core = r_iops / cores, w_iops * copies / cores
        r_lim = float(ctx.p("max_read_iops_per_core"))
        w_lim = float(ctx.p("max_write_ops_per_core"))
        over = []
        if r_small and r_core > r_lim:
            over.append(f"{r_core:.0f} reads per core (measured up to {r_lim:.0f})")
        if w_small and w_core > w_lim:
            over.append(f"{w_core:.0f} write copies per core ({w_iops:.0f} client writes x "
                        f"{copies:g} copies; measured up to {w_lim:.0f})")
        yield Check(
            target="cluster", fire=bool(over),
            clear=(not r_small or r_core < r_lim * 0.9) and (not w_small or
                                                             w_core < w_lim * 0.9),
            severity=Severity.INFO,
            summary=f"{cores:.0f} pinned OSD cores serve "
                    + ("; ".join(over) if over else
                       f"{r_core:.0f} reads and {w_core:.0f} write copies per core"),
            evidence=(ctx.evidence("client read IOPS", reads, "IOPS"),
                      ctx.evidence("client write IOPS", writes, "IOPS"),
                      ctx.evidence("copies per write", [copies]),
                      ctx.evidence("allocated OSD cores", [cores], "cores"),
                      ctx.evidence("reads per core", [r_core], "IOPS"),
                      ctx.evidence("write copies per core", [w_core], "IOPS")),
            badness=max(r_core / r_lim, w_core / w_lim))


SHARD_OPTIONS = {"hdd": ("osd_op_num_shards_hdd", "osd_op_num_threads_per_shard_hdd"),
                 "ssd": ("osd_op_num_shards_ssd", "osd_op_num_threads_per_shard_ssd")}


OP_THREADS_PER_CORE = 8
"""Op threads per allowed core beyond which threads contend, shared with validate. The
densest configuration measured to work: the default 16 op threads (8 shards x 2, K1.6) on
2 cores, where the OSD used every core and scaled almost linearly to 4 (K1.2, K1.5)."""


class OpThreadsVsCores(Rule):
    id = "ceph.osd.op_threads_vs_cores"
    title = "Op threads far beyond the cores the OSD may use"
    source = "osd-cpu-single-osd-scaling, osd-cpu-recommendation, osd-op-threads"
    explanation = (
        "An OSD's op work queue runs shards x threads-per-shard worker threads (8 x 2 = 16 "
        "on SSD by default, K1.6) besides its messenger, BlueStore and RocksDB threads. "
        "The densest measured configuration that still used every core was those 16 "
        "threads on 2 cores (K1.2, K1.5): 8 per core. Beyond that threads sleep and wake "
        "(K1.8). The fix is cores, not fewer threads: the op queue's scheduler sizes them "
        "(under mClock an HDD OSD runs 1 shard x 5 threads).")

    def check(self, ctx: Context) -> Iterable[Check]:
        # Fleet mode knows every OSD's cores allowed: each option looked up once for all
        # OSDs, and a check made only where it can change something (10,000 of them a
        # new scrape were this rule's 9 ms at 10,000 OSDs).
        value = {name: ctx.effective_per_osd(name) for name in (
            "osd_op_num_shards", "osd_op_num_threads_per_shard",
            *SHARD_OPTIONS["hdd"], *SHARD_OPTIONS["ssd"])}
        factor = float(ctx.p("threads_per_core"))
        for d in ctx.osds():
            if not d.cores_allowed:
                continue
            cls = "hdd" if d.device_class == "hdd" else "ssd"
            shards_opt, threads_opt = SHARD_OPTIONS[cls]
            shards = _positive(value["osd_op_num_shards"](d.id)) or \
                _positive(value[shards_opt](d.id))
            threads = _positive(value["osd_op_num_threads_per_shard"](d.id)) or \
                _positive(value[threads_opt](d.id))
            if not shards or not threads:
                continue
            total = shards * threads
            if not ctx.matters(d.id, total > factor * d.cores_allowed):
                continue
            need = math.ceil(total / factor)
            where = "; ".join(w for w in (ctx.provenance(o, d.id) for o in (
                "osd_op_num_shards", "osd_op_num_threads_per_shard", shards_opt,
                threads_opt)) if w)
            yield Check(
                target=d.id, fire=total > factor * d.cores_allowed,
                clear=total <= factor * d.cores_allowed, severity=Severity.INFO,
                summary=f"{d.id} runs {shards:g} x {threads:g} = {total:g} op threads on "
                        f"{d.cores_allowed:g} allowed core(s), more than {factor:g} per core"
                        + (f" ({where})" if where else ""),
                evidence=(ctx.evidence("op threads", [total], "threads"),
                          ctx.evidence("cores allowed", [d.cores_allowed], "cores")),
                # Never fewer threads: under mClock an HDD OSD runs 1 shard x 5 threads,
                # and cutting them could leave one thread for all its IO.
                procedure=(f"Give {d.id} more cores: at least {need:g} for its {total:g} op "
                           f"threads; {limit_how(d, need)}. "
                           "Do not lower the op thread counts: the scheduler sizes them.",),
                badness=total / d.cores_allowed)


def _positive(value: str | None) -> float | None:
    try:
        v = float(value) if value is not None else None
    except ValueError:
        return None
    return v if v and v > 0 else None


RULES = (CoresBeyondKnee, CoresStarved, CpuThrottled, IopsPerCore, OpThreadsVsCores)
