"""Leader and primary balance: Curve's leadernum range, elections, bthreads; Ceph primaries."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.model import Change, Check, Severity
from stormdeck.advisors.rules.base import Context, Rule, mean


class PrimarySpread(Rule):
    id = "ceph.primary.spread"
    title = "Primary PGs unevenly spread over OSDs"
    source = "K7.2"
    explanation = (
        "Reads go to a PG's primary, so primaries are to Ceph what raft leaders are to "
        "Curve (K7.2). Count them per OSD from `pg dump pgs_brief` (`osd df`'s PGS column "
        "counts all PGs, not primaries); from Reef a pool's read_balance_score above 1 "
        "says the same. Reef fixes primaries offline with osdmaptool; Squid adds the read "
        "balancer. Both need require-min-compat-client reef, which kernel clients (krbd, "
        "kcephfs) do not support.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        counts = {d.id: d.primary_pgs for d in ctx.osds()
                  if d.primary_pgs is not None and d.up and d.in_}
        steps = self._procedure(c.release if c else None)
        if len(counts) >= 2:
            avg = sum(counts.values()) / len(counts)
            if avg >= float(ctx.p("min_mean")):
                worst_id, worst = max(counts.items(), key=lambda kv: abs(kv[1] - avg))
                dev = abs(worst - avg) / avg
                limit = float(ctx.p("max_deviation"))
                yield Check(
                    target="cluster", fire=dev > limit, clear=dev <= limit * 0.8,
                    severity=Severity.WARNING,
                    summary=f"{worst_id} is primary for {worst} PGs against a mean of "
                            f"{avg:.0f} ({dev:.0%} off); range {min(counts.values())}-"
                            f"{max(counts.values())}",
                    evidence=(ctx.evidence("primary PGs per OSD",
                                           sorted(float(v) for v in counts.values()), "PGs"),),
                    procedure=steps, badness=dev)
        limit = float(ctx.p("max_read_balance_score"))
        for pool in (c.pools if c else ()):
            score = pool.read_balance_score
            if score is None or pool.type != "replicated" or score != score:  # NaN: unknown
                continue
            yield Check(
                target=f"pool {pool.name}", fire=score > limit, clear=score <= limit,
                severity=Severity.INFO,
                summary=f"pool {pool.name} has read_balance_score {score:g}",
                evidence=(ctx.evidence("read_balance_score", [score], ""),),
                procedure=steps, badness=score)

    @staticmethod
    def _procedure(release: str | None) -> tuple[str, ...]:
        squid_on = ("squid", "tentacle", "umbrella")
        common = ("Check first that no kernel client (krbd, kcephfs) mounts the cluster, then "
                  "`ceph osd set-require-min-compat-client reef`.")
        if release in squid_on:
            return (common, "`ceph balancer mode upmap-read` (or `read`), then "
                            "`ceph balancer on`; follow `ceph osd pool ls detail`.")
        if release == "reef":
            return (common, "`ceph osd getmap -o om`, `osdmaptool om --read out.txt "
                            "--read-pool POOL`, review out.txt, then run its "
                            "`ceph osd pg-upmap-primary` lines.")
        return ("This release has no read balancer; Reef adds an offline one, Squid an "
                "online one (K7.2).",)


class CurveLeaderSpread(Rule):
    id = "curve.leaders.spread"
    title = "Curve leaders unevenly spread over chunkservers"
    source = "K2.1, K2.2"
    explanation = (
        "Every Curve read and write goes to its copyset's leader, so leaders must be "
        "balanced across chunkservers; leadernum_range (largest minus smallest leader "
        "count per chunkserver) within 5 is balanced (K2.1). `curve_ops_tool "
        "rapid-leader-schedule` moves leaders; its transfers ride on chunkserver "
        "heartbeats, so the range falls over a few heartbeat periods (10 s each) and it "
        "sometimes has to be run again (K2.2).")

    def check(self, ctx: Context) -> Iterable[Check]:
        cv = ctx.latest.curve
        if cv is None:
            return
        limit = float(ctx.p("max_range"))
        for pool in cv.pools:
            if pool.leader_range is None:
                continue
            series = ctx.values(lambda s, n=pool.name: next(
                p.leader_range for p in s.curve.pools if p.name == n))
            if pool.pool_id is not None:
                cmd = (f"curve_ops_tool rapid-leader-schedule -logical_pool_id={pool.pool_id} "
                       "-scheduleAll=false")
                note = ""
            else:
                cmd = "curve_ops_tool rapid-leader-schedule"
                note = "the pool's id is unknown here, so this schedules every logical pool"
            change = Change(kind="curve_leader_schedule", target=pool.name,
                            key="rapid-leader-schedule", current=f"range {pool.leader_range:g}",
                            proposed=f"range <= {limit:g}", command=cmd, runtime=True,
                            reversible=False, blast_radius="pool",
                            note=note or "moves leaders between chunkservers; there is "
                                         "nothing to undo, and it may need a second run")
            yield Check(
                target=pool.name, fire=pool.leader_range > limit,
                clear=pool.leader_range <= limit, severity=Severity.WARNING,
                summary=f"logical pool {pool.name}: leadernum range {pool.leader_range:g} "
                        f"(min {pool.leader_min or 0:g}, max {pool.leader_max or 0:g}), "
                        f"over {limit:g}",
                evidence=(ctx.evidence("leadernum_range", series, "leaders"),),
                changes=(change,), badness=pool.leader_range)


class CurveLeaderFlapping(Rule):
    id = "curve.leaders.flapping"
    title = "Curve leaders keep changing: elections under load"
    source = "K2.3"
    explanation = (
        "Copyset heartbeats share bthreads with user-data replication; under heavy load "
        "heartbeats time out and leaders keep changing (K2.3). The signs: leader counts "
        "uneven and always moving, raft terms rising, bthread usage near the worker "
        "count, `received PreVoteResponse from` in the logs, and clients retrying, which "
        "adds load. A longer copyset.election_timeout_ms hides it but is NOT for "
        "production: a longer timeout means longer IO stalls when something really fails.")

    def check(self, ctx: Context) -> Iterable[Check]:
        css = list(ctx.chunkservers())
        if not css or len(ctx.window) < 3:
            return
        moving = [d.id for d in css
                  if len([x for x in ctx.daemon_values(d.id, "leader_delta") if x != 0])
                  >= max(2, int(len(ctx.window) * float(ctx.p("moving_fraction"))))]
        rises = sum(ctx.values(lambda s: sum(d.term_rises or 0 for d in s.daemons.values()
                                             if d.kind == "chunkserver")))
        busy = [d.bthread_usage / d.bthread_workers for d in css
                if d.bthread_usage is not None and d.bthread_workers]
        need = int(ctx.p("min_chunkservers"))
        fire = len(moving) >= need or (len(moving) >= 1 and rises > 0)
        yield Check(
            target="cluster", fire=fire, clear=not moving and rises == 0,
            severity=Severity.WARNING,
            summary=f"leaders moved on {len(moving)} of {len(css)} chunkservers and raft "
                    f"terms rose {rises:.0f} times in {ctx.span:.0f} s"
                    + (f"; bthreads up to {max(busy):.0%} busy" if busy else ""),
            evidence=(ctx.evidence("chunkservers with moving leaders", [float(len(moving))]),
                      ctx.evidence("raft term rises", [rises]),
                      *((ctx.evidence("bthread usage / workers", busy, "ratio"),)
                        if busy else ())),
            procedure=(
                "Find the load behind it first: bthread usage near the worker count "
                "(curve.bthread.saturated), disks at their limit, clients retrying.",
                "NOT FOR PRODUCTION: to confirm the diagnosis on a test cluster, raise "
                "copyset.election_timeout_ms host by host: edit it in curveadm's "
                "topology.yaml, `curveadm config commit`, `curveadm reload --role "
                "chunkserver --host HOST`, wait for its copysets to be healthy, then the "
                "next host; then run the leader schedule.",),
            badness=float(len(moving)) + rises)


class BthreadSaturated(Rule):
    id = "curve.bthread.saturated"
    title = "Chunkserver bthread workers saturated"
    source = "K2.3"
    explanation = (
        "Heartbeats and user-data replication share a chunkserver's bthread workers "
        "(K2.3): when busy workers near the worker count, heartbeats wait, elections "
        "follow and leaders move. The load must come down or the workers go up.")

    def check(self, ctx: Context) -> Iterable[Check]:
        for d in ctx.chunkservers():
            shares = ctx.values(lambda s, i=d.id: s.daemons[i].bthread_usage
                                / s.daemons[i].bthread_workers)
            avg = mean(shares)
            if avg is None:
                continue
            need = float(ctx.p("busy_fraction"))
            yield Check(
                target=d.id, fire=avg >= need, clear=avg < need - 0.1,
                severity=Severity.WARNING,
                summary=f"{d.id}: {avg:.0%} of its {d.bthread_workers} bthread workers busy",
                evidence=(ctx.evidence("bthread usage / workers", shares, "ratio"),),
                badness=avg)


RULES = (PrimarySpread, CurveLeaderSpread, CurveLeaderFlapping, BthreadSaturated)
