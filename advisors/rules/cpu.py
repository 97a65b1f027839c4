"""CPU rules: cores per OSD against the scaling knee and the starving point (KNOWLEDGE.md K1)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.model import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule, mean

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


class CoresBeyondKnee(Rule):
    id = "ceph.osd.cores_beyond_knee"
    title = "OSD allowed more cores than it can use"
    source = "K1.2-K1.5"
    explanation = (
        "Measured on NVMe OSDs, the knee of an OSD's CPU scaling is about 8-10 cores for "
        "small reads and 12 for writes (K1.4); past it each added core buys little. IOPS per "
        "used core stay flat while IOPS per allocated core fall (K1.3), so cores an OSD is "
        "given but does not use are better spent on OSDs that are starved or on other work. "
        "An OSD may still want short bursts above its average (K1.3): lower its allowance "
        "toward the knee, not toward its average.")

    def check(self, ctx: Context) -> Iterable[Check]:
        for d in ctx.osds():
            if d.cores_allowed is None:
                continue
            used = ctx.daemon_values(d.id, "cores_used")
            if not used:
                continue
            reads = mean(ctx.daemon_values(d.id, "read_iops")) or 0.0
            writes = mean(ctx.daemon_values(d.id, "write_iops")) or 0.0
            kind = "read" if reads > writes else "write"
            knee = float(ctx.p(f"knee_{kind}"))
            frac = float(ctx.p("used_fraction"))
            avg = sum(used) / len(used)
            share = avg / d.cores_allowed
            yield Check(
                target=d.id, fire=d.cores_allowed > knee and share < frac,
                clear=d.cores_allowed <= knee or share >= frac * 1.2, severity=Severity.INFO,
                summary=f"{d.id} may use {d.cores_allowed:g} cores, beyond the {knee:g}-core "
                        f"knee for {kind}-heavy load, and used {avg:.1f} on average",
                evidence=(ctx.evidence("cores used", used, "cores"),
                          ctx.evidence("cores allowed", [d.cores_allowed], "cores")),
                procedure=(f"Lower {d.id}'s CPU allowance toward {knee:g} cores where it is set: "
                           f"systemd `systemctl set-property ceph-osd@{d.id[4:]}.service "
                           f"CPUQuota={int(knee * 100)}%`, its cpuset, or the container's "
                           "CPU limit.",),
                badness=d.cores_allowed - knee)


class CoresStarved(Rule):
    id = "ceph.osd.cores_starved"
    title = "OSD short of cores under small IO"
    source = "K1.2, K1.5"
    explanation = (
        "For small random IO an OSD scales almost linearly from 2 to 4 cores (K1.2), and "
        "2-4 cores per OSD is the measured recommendation (K1.5). This OSD is busy at its "
        "CPU allowance while serving small IO with fewer cores than that: the CPU, not the "
        "disk, is what limits it, and the slowest OSD bounds the cluster (K1.7).")

    def check(self, ctx: Context) -> Iterable[Check]:
        for d in ctx.osds():
            if d.cores_allowed is None:
                continue
            used = ctx.daemon_values(d.id, "cores_used")
            if not used:
                continue
            busy = (sum(used) / len(used)) / d.cores_allowed
            iops, size = _io_size(ctx, d.id)
            small = size is not None and size <= float(ctx.p("small_io_bytes"))
            loaded = iops is not None and iops >= float(ctx.p("min_iops"))
            few = d.cores_allowed < float(ctx.p("min_cores"))
            need = float(ctx.p("busy_fraction"))
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


class IopsPerCore(Rule):
    id = "ceph.osd.iops_per_core"
    title = "Small-IO load per core beyond the sizing guidance"
    source = "K1.1, K1.4"
    explanation = (
        "Upstream sizing asks for 1 core per 1000-3000 IOPS of small IO (K1.1); the 60-OSD "
        "measurements found 1600-3900 write and 2400-8500 read IOPS per allocated core "
        "(K1.4). Beyond the guidance the OSDs' cores, not the disks, set the ceiling: a "
        "capacity warning, before latency shows it.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        osds = list(ctx.osds())
        allowed = [d.cores_allowed for d in osds if d.cores_allowed]
        if c is None or not osds or len(allowed) < len(osds) / 2:
            return
        iops = ctx.values(lambda s: (s.cluster.client_read_iops or 0)
                          + (s.cluster.client_write_iops or 0))
        bps = ctx.values(lambda s: (s.cluster.client_read_bps or 0)
                         + (s.cluster.client_write_bps or 0))
        avg_iops, avg_bps = mean(iops), mean(bps)
        if not avg_iops or avg_bps is None:
            return
        # Scale the known allowances to all OSDs, as hosts we cannot see are alike.
        cores = sum(allowed) * len(osds) / len(allowed)
        per_core = avg_iops / cores
        small = avg_bps / avg_iops <= float(ctx.p("small_io_bytes"))
        limit = float(ctx.p("max_iops_per_core"))
        yield Check(
            target="cluster", fire=small and per_core > limit,
            clear=not small or per_core < limit * 0.9, severity=Severity.INFO,
            summary=f"{avg_iops:.0f} client IOPS on {cores:.0f} allocated OSD cores: "
                    f"{per_core:.0f} IOPS per core, beyond the {limit:.0f} of the guidance",
            evidence=(ctx.evidence("client IOPS", iops, "IOPS"),
                      ctx.evidence("allocated OSD cores", [cores], "cores"),
                      ctx.evidence("IOPS per allocated core", [per_core], "IOPS")),
            badness=per_core)


SHARD_OPTIONS = {"hdd": ("osd_op_num_shards_hdd", "osd_op_num_threads_per_shard_hdd"),
                 "ssd": ("osd_op_num_shards_ssd", "osd_op_num_threads_per_shard_ssd")}


class OpThreadsVsCores(Rule):
    id = "ceph.osd.op_threads_vs_cores"
    title = "Op threads far beyond the cores the OSD may use"
    source = "K1.6, K3.3"
    explanation = (
        "An OSD's op work queue runs shards x threads-per-shard worker threads (8 x 2 = 16 "
        "on SSD by default, K1.6) besides its messenger, BlueStore and RocksDB threads. "
        "Many more runnable threads than allowed cores means threads sleeping and waking "
        "(K1.8), and for peering threads more than the CPUs made things slower (K3.3).")

    def check(self, ctx: Context) -> Iterable[Check]:
        for d in ctx.osds():
            if not d.cores_allowed:
                continue
            cls = "hdd" if d.device_class == "hdd" else "ssd"
            shards_opt, threads_opt = SHARD_OPTIONS[cls]
            shards = _positive(ctx.effective("osd_op_num_shards", d.id)) or \
                _positive(ctx.effective(shards_opt, d.id))
            threads = _positive(ctx.effective("osd_op_num_threads_per_shard", d.id)) or \
                _positive(ctx.effective(threads_opt, d.id))
            if not shards or not threads:
                continue
            total = shards * threads
            factor = float(ctx.p("threads_per_core"))
            yield Check(
                target=d.id, fire=total > factor * d.cores_allowed,
                clear=total <= factor * d.cores_allowed, severity=Severity.INFO,
                summary=f"{d.id} runs {shards:g} x {threads:g} = {total:g} op threads on "
                        f"{d.cores_allowed:g} allowed core(s)",
                evidence=(ctx.evidence("op threads", [total], "threads"),
                          ctx.evidence("cores allowed", [d.cores_allowed], "cores")),
                procedure=(f"Either give {d.id} more cores, or lower {threads_opt} for it "
                           f"(`ceph config set {d.id} {threads_opt} 1`) and restart it: the "
                           "option is read at start-up.",),
                badness=total / d.cores_allowed)


def _positive(value: str | None) -> float | None:
    try:
        v = float(value) if value is not None else None
    except ValueError:
        return None
    return v if v and v > 0 else None


RULES = (CoresBeyondKnee, CoresStarved, IopsPerCore, OpThreadsVsCores)
