"""Latency rules: the slowest OSD, raft append and the network path (K1.7, K2.4)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule, mean
from stormdeck.collectors.model import disk_key


class SlowestOsd(Rule):
    id = "ceph.osd.slowest"
    title = "One OSD far slower than the rest"
    source = "slowest-osd-bounds-cluster"
    explanation = (
        "Hot data is spread pseudo-randomly over the OSDs, so the cluster is only as fast "
        "as its slowest OSD (K1.7). This OSD's commit latency stands far above the "
        "median; its disk and CPU are shown beside it to tell which one holds it back.")
    # All parts (the default): its verdict is the window's mean, which moves as the
    # window slides even while the daemons part stands still.

    def check(self, ctx: Context) -> Iterable[Check]:
        ids, _ = ctx.osd_columns()
        means = ctx.window_means(ids, "commit_latency")
        if len(means) < 3:
            return
        factor, floor = float(ctx.p("factor")), float(ctx.p("min_latency"))
        if ctx.columns is not None:
            # 10,000 OSDs' means are known within a bound from running sums; only the
            # median's neighbours and those that fire or are tracked are summed exactly.
            median = means.median()
            walk = set(means.above(max(factor * median, floor)))
            walk.update(i for i in map(means.where, ctx.tracked) if i is not None)
            order = sorted(walk)
        else:
            median = statistics.median(means.values())
            order = list(range(len(means)))
        for i in order:
            osd_id, avg = means.ids[i], means.mean(i)
            d = ctx.latest.daemons[osd_id]
            # A down OSD's latency is the mgr's last figure from before it died: never
            # "the slowest now" (its being down is a finding of its own).
            fire = avg > factor * median and avg > floor and d.up is not False
            if not ctx.matters(osd_id, fire):
                continue  # neither firing nor tracked: the check would change nothing
            series = ctx.daemon_values(osd_id, "commit_latency")
            disks = [ctx.latest.disks.get(disk_key(d.host, dev)) for dev in d.devices or ()]
            util = [k.util for k in disks if k is not None and k.util is not None]
            where = f" on {', '.join(d.devices)}" if d.devices else ""
            cpu = (f", CPU {d.cores_used:.1f} of {d.cores_allowed:g} cores"
                   if d.cores_used is not None and d.cores_allowed else "")
            yield Check(
                target=osd_id, fire=fire,
                clear=avg <= factor * 0.8 * median or avg <= floor * 0.8 or d.up is False,
                severity=Severity.WARNING,
                summary=f"{osd_id} commits in {avg * 1000:.1f} ms against a median of "
                        f"{median * 1000:.1f} ms{where}"
                        f"{f' ({max(util):.0%} busy)' if util else ''}{cpu}",
                evidence=(ctx.evidence("commit latency", series, "s"),
                          ctx.evidence("median commit latency", [median], "s"),
                          *((ctx.evidence("disk util", util, "ratio"),) if util else ())),
                badness=avg / median if median else avg)


class RaftAppendLatency(Rule):
    id = "curve.raft.append_latency"
    title = "Raft log writes slower than the disk class allows"
    source = "curve-raft-latency"
    explanation = (
        "raft_storage_append_entries_latency is the disk write of the raft log: hundreds "
        "of microseconds to a few milliseconds on SSD, tens of milliseconds on HDD (K2.4). "
        "Above that band the disk (or its write cache, K2.5) is what slows every write.")

    def check(self, ctx: Context) -> Iterable[Check]:
        for d in ctx.chunkservers():
            lat = ctx.daemon_values(d.id, "raft_append_latency")
            if not lat:
                continue
            cls = "hdd" if d.device_class == "hdd" else "ssd"
            band = float(ctx.p(f"{cls}_max"))
            avg = sum(lat) / len(lat)
            yield Check(
                target=d.id, fire=avg > band, clear=avg <= band * 0.8,
                severity=Severity.WARNING,
                summary=f"{d.id} appends its raft log in {avg * 1000:.1f} ms, above the "
                        f"{band * 1000:g} ms band of {cls.upper()}",
                evidence=(ctx.evidence("raft append latency", lat, "s"),
                          *((ctx.evidence("raft append p99", ctx.daemon_values(
                              d.id, "raft_append_latency_p99"), "s"),)
                            if d.raft_append_latency_p99 is not None else ())),
                badness=avg / band)


class RaftNetwork(Rule):
    id = "curve.raft.network"
    title = "Raft replication slow in the network or RPC path"
    source = "curve-raft-latency"
    explanation = (
        "raft_send_entries_latency is one disk write plus one RPC (K2.4). When it exceeds "
        "the append (disk) latency by more than a few milliseconds, the time goes to the "
        "network or the RPC layer, not the disk.")

    def check(self, ctx: Context) -> Iterable[Check]:
        for d in ctx.chunkservers():
            gaps = ctx.values(lambda s, i=d.id: s.daemons[i].raft_send_latency
                              - s.daemons[i].raft_append_latency)
            avg = mean(gaps)
            if avg is None:
                continue
            limit = float(ctx.p("max_gap"))
            yield Check(
                target=d.id, fire=avg > limit, clear=avg <= limit * 0.8,
                severity=Severity.WARNING,
                summary=f"{d.id}: raft send takes {avg * 1000:.1f} ms more than the disk "
                        "append: the network or RPC path",
                evidence=(ctx.evidence("send minus append latency", gaps, "s"),
                          ctx.evidence("raft send latency",
                                       ctx.daemon_values(d.id, "raft_send_latency"), "s")),
                badness=avg / limit)


RULES = (SlowestOsd, RaftAppendLatency, RaftNetwork)
