"""Leader and primary balance: Curve's leadernum range, elections, bthreads; Ceph primaries."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stormdeck.advisors.actuators.curve import ALL_POOLS
from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import ANY, Context, Proposes, Rule, mean

# Ceph releases in order: require_min_compat_client is compared by it, never lowered.
RELEASES = ("argonaut", "bobtail", "cuttlefish", "dumpling", "emperor", "firefly", "giant",
            "hammer", "infernalis", "jewel", "kraken", "luminous", "mimic", "nautilus",
            "octopus", "pacific", "quincy", "reef", "squid", "tentacle", "umbrella")


def release_at_least(release: str | None, floor: str) -> bool | None:
    """Whether `release` is `floor` or later; None when it is not a name we know."""
    if release not in RELEASES:
        return None
    return RELEASES.index(release) >= RELEASES.index(floor)


def _version(text: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in (text or "").split(".")[:3]) or (0,)
    except ValueError:
        return (0,)


def desired_primaries(pool, affinity) -> dict[str, float]:
    """Each OSD's fair share of the pool's primaries, as Ceph's read balancer computes it
    (src/osd/OSDMap.cc, OSDMap::calc_desired_primary_distribution): its PGs in the pool
    divided by the pool's size, times its primary affinity, stretched so the shares add
    up to pg_num. Its PG count already carries its CRUSH weight and reweight."""
    size = pool.size or 1
    raw = {osd: n / size * affinity.get(osd, 1.0) for osd, n in pool.pgs_by_osd.items()}
    total = sum(raw.values())
    if total <= 0:
        return {}
    factor = sum(pool.primaries.values()) / total
    return {osd: v * factor for osd, v in raw.items()}


def binomial_tail(n: int, p: float, k: int) -> float:
    """P(X >= k) for X ~ Binomial(n, p): how often chance alone gives k or more."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k, n + 1):
        term = math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                        + i * lp + (n - i) * lq)
        total += term
        if term < total * 1e-12:
            break  # the terms only shrink from here (k is above the mean)
    return min(1.0, total)


def chance_of_worst(primaries: dict[str, int], want: dict[str, float], total: int
                    ) -> tuple[str, float]:
    """The OSD whose primaries stand furthest above its fair share in standard deviations,
    and how likely chance alone makes some OSD that far over: each OSD's count is
    Binomial(PGs, share / PGs), and with many OSDs one of them is likely to be high, so
    the tail is multiplied by the number of OSDs (Bonferroni; an upper bound)."""
    def z(osd: str) -> float:
        share = want[osd]
        q = share / total if total else 0.0
        sd = math.sqrt(max(total * q * (1 - q), 1e-9))
        return (primaries.get(osd, 0) - share) / sd
    worst = max(want, key=z)
    q = want[worst] / total if total else 0.0
    tail = binomial_tail(total, q, primaries.get(worst, 0))
    return worst, min(1.0, tail * len(want))


class PrimarySpread(Rule):
    id = "ceph.primary.spread"
    title = "Primary PGs unevenly spread over a pool's OSDs"
    source = "primary-balance, read-balancer-compat"
    explanation = (
        "Reads go to a PG's primary, so primaries are to Ceph what raft leaders are to "
        "Curve (K7.2). Judged per replicated pool as Ceph's read balancer does "
        "(OSDMap::calc_desired_primary_distribution): an OSD's fair share is its PGs in "
        "the pool / size x its primary affinity, so OSDs with lower affinity or weight are "
        "meant to lead less. Pools with fewer PGs than OSDs cannot be balanced (a 1-PG .mgr "
        "pool scores 3 on three OSDs) and are not judged; from Reef a pool's "
        "read_balance_score says the same where PG counts are missing. Which OSD leads a "
        "PG is chance: with 10-33 primaries per OSD a 30% deviation happens by itself "
        "(each OSD's count is binomial), so the spread is judged against chance and fires "
        "only beyond what chance gives once in a thousand (Bonferroni over the pool's "
        "OSDs). Reef fixes primaries offline with osdmaptool; Squid adds the read "
        "balancer. Both need require_min_compat_client reef: kernel clients (krbd, "
        "kcephfs, ceph-csi's default krbd mounter) that connect later are refused, "
        "`ceph features` lists only clients connected now, and it must never be lowered "
        "(K8.5). Reef before 18.2.4 lacks the client-compat checks for pg-upmap-primary "
        "(its mons crashed encoding it in 18.2.2, ceph PR 55712): upgrade first (K9.7).")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        limit = float(ctx.p("max_deviation"))
        score_limit = float(ctx.p("max_read_balance_score"))
        in_osds: int | None = None  # counted when a score needs it (10,000 OSDs walked)
        for pool in c.pools:
            if pool.type != "replicated" or (pool.size or 0) < 2:
                continue  # one copy: its only OSD leads every PG, there is nothing to move
            steps = self._procedure(c.release, c.require_min_compat_client, pool.name,
                                    c.version, c.client_releases)
            want = desired_primaries(pool, c.primary_affinity) if pool.primaries else {}
            if want:
                if pool.pg_num < len(pool.pgs_by_osd) or \
                        pool.pg_num / len(want) < float(ctx.p("min_mean")):
                    continue  # too few PGs per OSD to balance (K8.5)
                worst, dev = max(((osd, self._over(pool.primaries.get(osd, 0), share))
                                  for osd, share in want.items()), key=lambda kv: kv[1])
                total = sum(pool.primaries.values())
                if math.isinf(dev):
                    chance = 0.0  # primaries where affinity says none: not chance
                else:
                    worst, chance = chance_of_worst(dict(pool.primaries), want, total)
                    dev = self._over(pool.primaries.get(worst, 0), want[worst])
                have = pool.primaries.get(worst, 0)
                score = pool.read_balance_score
                alpha = float(ctx.p("chance"))
                beyond = dev > limit and chance < alpha
                yield Check(
                    target=f"pool {pool.name}", fire=beyond,
                    clear=dev <= limit * 0.8 or chance >= alpha * 10,
                    severity=Severity.WARNING,
                    summary=f"pool {pool.name}: {worst} is primary for {have} PGs against a "
                            f"fair share of {want[worst]:.1f} ({dev:.0%} over, weighted by "
                            f"PGs and primary affinity); chance alone does that in "
                            f"{self._odds(chance)}"
                            + (f"; read_balance_score {score:g}"
                               if score is not None and score == score else ""),
                    evidence=(ctx.evidence("primaries / fair share", sorted(
                        pool.primaries.get(o, 0) / s for o, s in want.items() if s > 0),
                        "ratio"),
                              ctx.evidence("probability by chance", [chance], "")),
                    procedure=steps, badness=min(dev, 1e6))
                continue
            score = pool.read_balance_score
            if score is None or score != score:
                continue
            if in_osds is None:
                in_osds = sum(1 for d in ctx.osds() if d.up and d.in_)
            if pool.pg_num < max(in_osds, 1):
                continue  # no counts, no score, or too few PGs for either to mean anything
            yield Check(
                target=f"pool {pool.name}", fire=score > score_limit,
                clear=score <= score_limit, severity=Severity.INFO,
                summary=f"pool {pool.name} has read_balance_score {score:g}",
                evidence=(ctx.evidence("read_balance_score", [score], ""),),
                procedure=steps, badness=score)

    @staticmethod
    def _over(have: int, share: float) -> float:
        if share <= 0:
            return math.inf if have else 0.0  # primaries where affinity says none
        return (have - share) / share

    @staticmethod
    def _odds(chance: float) -> str:
        if chance <= 0:
            return "never"
        if chance >= 0.5:
            return "most pools"
        return f"1 pool in {1 / chance:,.0f}"

    @staticmethod
    def _procedure(release: str | None, required: str | None, pool: str,
                   version: str | None = None,
                   clients: Mapping[str, int] | None = None) -> tuple[str, ...]:
        squid_on = release_at_least(release, "squid")
        reef_on = release_at_least(release, "reef")
        if not reef_on:
            return ("This release has no read balancer; Reef adds an offline one, Squid an "
                    "online one (K7.2). Primary affinity (`ceph osd primary-affinity`) is "
                    "the only lever here.",)
        if release == "reef" and _version(version) < (18, 2, 4):
            return (f"Reef {version or ''} before 18.2.4 lacks the client-compat checks for "
                    "pg-upmap-primary (its mons crashed encoding it in 18.2.2, ceph PR "
                    "55712): upgrade to 18.2.4 or later before balancing primaries (K9.7). "
                    "Primary affinity (`ceph osd primary-affinity`) needs no compat raise.",)
        ready = release_at_least(required, "reef")
        if ready:
            compat = (f"require_min_compat_client is already {required}: nothing to raise "
                      "(and never lower it, K8.5).")
        else:
            compat = PrimarySpread._compat(required, clients or {})
            if compat is None:
                return (f"require_min_compat_client is {required or 'unknown'} and the "
                        "connected clients' releases are unknown: run `ceph features` and "
                        "read its `client` section before anything else. Raising it to reef "
                        "refuses every kernel client (krbd, kcephfs, ceph-csi's default krbd "
                        "mounter) that connects LATER, which `ceph features` cannot show; "
                        "primary affinity (`ceph osd primary-affinity`) needs no raise "
                        "(K8.5, K9.7).",)
        if squid_on:
            return (compat, "`ceph balancer mode upmap-read` (or `read`), then `ceph balancer "
                            "on`; follow the pool in `ceph osd pool ls detail`.")
        return (compat, f"`ceph osd getmap -o om`, `osdmaptool om --read out.txt --read-pool "
                        f"{pool}`, review out.txt, then run its `ceph osd pg-upmap-primary` "
                        "lines.")

    @staticmethod
    def _compat(required: str | None, clients: Mapping[str, int]) -> str | None:
        """The step about require_min_compat_client, naming the clients connected now;
        None when they are unknown (then no raise is proposed at all)."""
        if not clients:
            return None
        listed = ", ".join(f"{n} x {rel}" for rel, n in sorted(
            clients.items(), key=lambda kv: RELEASES.index(kv[0]) if kv[0] in RELEASES
            else -1))
        older = {rel: n for rel, n in clients.items() if not release_at_least(rel, "reef")}
        later = ("Kernel clients (krbd, kcephfs, ceph-csi's default krbd mounter) that "
                 "connect LATER will be refused once it is reef, and `ceph features` "
                 "shows only clients connected now; never lower it again (K8.5, K9.7).")
        if older:
            return (f"require_min_compat_client is {required or 'unknown'}; clients "
                    f"connected now ({listed}, from `ceph features`) include "
                    f"{sum(older.values())} older than Reef (kernel clients report as "
                    "luminous): raising it would refuse them, so do NOT raise it; balance "
                    f"with primary affinity (`ceph osd primary-affinity`) instead. {later}")
        return (f"require_min_compat_client is {required or 'unknown'}; clients connected "
                f"now: {listed} (`ceph features`), none older than Reef. {later} Only if no "
                "such client will ever mount: `ceph osd set-require-min-compat-client "
                "reef`.")


def own_schedules(ctx: Context, settle: float) -> list[tuple[float, float]]:
    """When stormdeck's own leader schedules ran, as the newest snapshot carries them (the
    source stamps them from the journal as it collects), each widened by `settle` seconds
    for its transfers to land: term rises then are transfers, not elections."""
    cv = ctx.latest.curve
    if cv is None:
        return []
    return [(start, (end if end is not None else start + 600.0) + settle)
            for start, end in cv.own_schedules]


# How long after the MDS last showed a TransferLeader operator a leader move may still be
# its doing: the operator ends at a heartbeat (10 s), the MDS's counts follow within 10 s.
TRANSFER_LOOKBACK = 30.0


@dataclass(frozen=True, slots=True)
class Elections:
    """Raft elections in a window, told apart from leader transfers (K8.8)."""

    elections: float  # term rises no transfer explains
    transfers: float  # term rises the MDS's operators or stormdeck's schedules explain
    candidate_looks: int  # snapshots in which some copyset stood as CANDIDATE
    candidates: int  # the most copysets seen as CANDIDATE at once
    moving: list[str]  # chunkservers whose leaders kept moving with no transfer about
    raft_seen: bool  # whether any raft page was compared at all
    busy: list[float]  # bthread usage / workers, now
    mds_counts: bool = False  # whether leader counts came from the leader MDS's series

    @property
    def flapping(self) -> bool:
        # As curve.leaders.flapping's defaults judge it: a lone election is not a storm.
        return self.elections >= 3 or self.candidate_looks >= 2


def judge_elections(ctx: Context, settle: float = 60.0, moving_fraction: float = 0.3
                    ) -> Elections:
    mine = own_schedules(ctx, settle)
    elections = transfers = 0.0
    candidate_looks = most = 0
    raft_seen = False
    # When the MDS showed a TransferLeader operator: a leader move up to TRANSFER_LOOKBACK
    # later may be its doing (the MDS's counts lag the operator that moved them).
    shown = [s.time for s in ctx.window if s.curve is not None
             and (s.curve.transfer_copysets or s.curve.transfer_leader_ops)]
    quiet: list = []  # snapshots in which no transfer was about
    for snap in ctx.window:
        css = [d for d in snap.daemons.values() if d.kind == "chunkserver"]
        rises = sum(d.term_rises or 0 for d in css)
        unexplained = sum(d.elections or 0 for d in css)
        raft_seen = raft_seen or any(d.term_rises is not None for d in css)
        ours = any(a <= snap.time <= b for a, b in mine)
        mds_moving = any(snap.time - TRANSFER_LOOKBACK <= t <= snap.time for t in shown)
        if ours:
            transfers += rises
        else:
            elections += unexplained
            transfers += rises - unexplained
            seen = sum(d.candidates or 0 for d in css)
            if seen:
                candidate_looks += 1
                most = max(most, seen)
        if not ours and not mds_moving:
            quiet.append(snap)
    moving = []
    latest = list(ctx.chunkservers())
    mds_counts = any(d.leaders_from == "mds" for d in latest)
    if len(quiet) >= 3:
        # A chunkserver's own count is live: judged against every quiet poll. The MDS's
        # is refreshed every 10 s, so most polls cannot show a move: judged against the
        # quiet polls in which the MDS's counts moved at all.
        changed = sum(1 for s in quiet if any(
            d.leader_delta for d in s.daemons.values()
            if d.kind == "chunkserver" and d.leaders_from == "mds"))
        need_own = max(2, int(len(quiet) * moving_fraction))
        need_mds = max(2, int(changed * moving_fraction))
        for d in latest:
            moves = sum(1 for s in quiet if d.id in s.daemons and s.daemons[d.id].leader_delta)
            if moves >= (need_mds if d.leaders_from == "mds" else need_own):
                moving.append(d.id)
    busy = [d.bthread_usage / d.bthread_workers for d in ctx.chunkservers()
            if d.bthread_usage is not None and d.bthread_workers]
    return Elections(elections, transfers, candidate_looks, most, moving, raft_seen, busy,
                     mds_counts)


class CurveLeaderSpread(Rule):
    id = "curve.leaders.spread"
    proposes = (Proposes("curve_leader_schedule", ("rapid-leader-schedule",), ANY,
                         r"range <= [0-9.e+]+"),)
    title = "Curve leaders unevenly spread over chunkservers"
    source = "curve-leader-balance, curve-rapid-leader-schedule, curve-scheduler-terms"
    explanation = (
        "Every Curve read and write goes to its copyset's leader, so leaders must be "
        "balanced across chunkservers; leadernum_range (largest minus smallest leader "
        "count per chunkserver) within 5 is balanced (K2.1). `curve_ops_tool "
        "rapid-leader-schedule -logical_pool_id=N -scheduleAll=false` (or `curve bs update "
        "leader-schedule --logicalpoolid N`) moves one pool's leaders; its transfers ride on "
        "chunkserver heartbeats, so the range falls over a few heartbeat periods (10 s "
        "each) and it sometimes has to be run again (K2.2). It ignores the scheduler's "
        "cooling time (K8.8), so none is proposed while chunkservers are offline, copysets "
        "unhealthy or leaders changing by elections.")

    def check(self, ctx: Context) -> Iterable[Check]:
        cv = ctx.latest.curve
        if cv is None:
            return
        limit = float(ctx.p("max_range"))
        blockers = self._blockers(ctx)
        unknown = []
        for pool in cv.pools:
            if pool.leader_range is None:
                continue
            if pool.pool_id is None:
                unknown.append(pool)
                continue
            series = ctx.values(lambda s, n=pool.name: next(
                p.leader_range for p in s.curve.pools if p.name == n))
            proposal = change(
                "curve_leader_schedule", pool.name, "rapid-leader-schedule",
                f"range {pool.leader_range:g}", f"range <= {limit:g}",
                args={"pool_id": str(pool.pool_id)},
                note=f"moves the leaders of logical pool {pool.pool_id} alone"
                     + (f" (its id from {cv.pool_ids_from[pool.name]})"
                        if pool.name in cv.pool_ids_from else "")
                     + " (with the Go "
                     f"CLI: curve bs update leader-schedule --logicalpoolid {pool.pool_id}); "
                     "there is nothing to undo, and it may need a second run")
            yield Check(
                target=pool.name, fire=pool.leader_range > limit,
                clear=pool.leader_range <= limit, severity=Severity.WARNING,
                summary=f"logical pool {pool.name} (id {pool.pool_id}): leadernum range "
                        f"{pool.leader_range:g} (min {pool.leader_min or 0:g}, max "
                        f"{pool.leader_max or 0:g}), over {limit:g}"
                        + (f"; no schedule while {'; '.join(blockers)}" if blockers else ""),
                evidence=(ctx.evidence("leadernum_range", series, "leaders"),),
                changes=() if blockers else (proposal,),
                procedure=self._wait(blockers), badness=pool.leader_range)
        if unknown:
            yield self._all_pools(ctx, unknown, limit, blockers)

    @staticmethod
    def _wait(blockers: list[str]) -> tuple[str, ...]:
        if not blockers:
            return ()
        return (f"No leader schedule now: {'; '.join(blockers)}. Bring chunkservers back "
                "and let copysets recover (`curve_ops_tool copysets-status`), find what "
                "causes the elections (curve.leaders.flapping), then schedule.",)

    def _all_pools(self, ctx: Context, pools: list, limit: float,
                   blockers: list[str]) -> Check:
        bad = [p for p in pools if p.leader_range > limit]
        worst = max(pools, key=lambda p: p.leader_range)
        names = ", ".join(f"{p.name} (range {p.leader_range:g})" for p in bad or pools)
        proposal = change(
            "curve_leader_schedule", ALL_POOLS, "rapid-leader-schedule",
            f"range {worst.leader_range:g}", f"range <= {limit:g}",
            note="the logical pools' ids could not be read (give --curve-ops-tool or "
                 "--curve-cli), so this schedules EVERY logical pool (with the Go CLI: "
                 "curve bs update leader-schedule --all); nothing to undo")
        series = ctx.values(lambda s: max(p.leader_range for p in s.curve.pools
                                          if p.leader_range is not None))
        return Check(
            target=ALL_POOLS, fire=bool(bad), clear=not bad, severity=Severity.WARNING,
            summary=f"logical pools {names} over {limit:g}; their ids could not be read "
                    "from the cluster, so a schedule can only be proposed for all pools"
                    + self._why_no_id(ctx, bad or pools)
                    + (f"; no schedule while {'; '.join(blockers)}" if blockers else ""),
            evidence=(ctx.evidence("largest leadernum_range", series, "leaders"),),
            changes=() if blockers else (proposal,), procedure=self._wait(blockers),
            badness=worst.leader_range)

    @staticmethod
    def _why_no_id(ctx: Context, pools: list) -> str:
        cv = ctx.latest.curve
        why = {cv.pool_ids_from[p.name] for p in pools
               if cv is not None and p.name in cv.pool_ids_from}
        return f" ({'; '.join(sorted(why))})" if why else ""

    @staticmethod
    def _blockers(ctx: Context) -> list[str]:
        cv = ctx.latest.curve
        assert cv is not None
        out = []
        offline = cv.chunkservers_offline or sum(
            1 for d in ctx.chunkservers() if d.online is False)
        if offline:
            out.append(f"{offline} chunkserver{'s are' if offline > 1 else ' is'} offline")
        if cv.copysets_unhealthy:
            out.append(f"{cv.copysets_unhealthy} of {cv.copysets_total} copysets are unhealthy")
        for call in ("copysets-status", "chunkserver-status", "chunkserver-list",
                     "curve bs list chunkserver", "curve bs status copyset"):
            if call in cv.tool_errors:
                out.append(f"{call} did not answer, so its health is unknown")
        e = judge_elections(ctx)
        if e.flapping:
            out.append(f"leaders are changing by elections ({e.elections:.0f} term rises no "
                       "transfer explains)")
        return out


class CurveLeaderFlapping(Rule):
    id = "curve.leaders.flapping"
    title = "Curve leaders keep changing: elections under load"
    source = "curve-elections-under-load, curve-scheduler-terms"
    explanation = (
        "Copyset heartbeats share bthreads with user-data replication; under heavy load "
        "heartbeats time out and leaders keep changing (K2.3). Elections, not transfers: "
        "the MDS's own leader scheduler (every 30 s) and a rapid leader schedule move "
        "leaders and raise raft terms too (K8.8), so a term rise counts only when no "
        "TransferLeader operator of the MDS and no schedule stormdeck ran explains it; "
        "copysets standing as CANDIDATE in /raft_stat are elections in progress. Look at "
        "bthread usage against the worker count beside it, `received PreVoteResponse from` "
        "in the logs, and clients retrying, which adds load. A longer "
        "copyset.election_timeout_ms hides it but is NOT for production: a longer timeout "
        "means longer IO stalls when something really fails.")

    def check(self, ctx: Context) -> Iterable[Check]:
        css = list(ctx.chunkservers())
        if not css or len(ctx.window) < 3:
            return
        e = judge_elections(ctx, float(ctx.p("schedule_settle_seconds")),
                            float(ctx.p("moving_fraction")))
        need = int(ctx.p("min_chunkservers"))
        fire = e.elections >= float(ctx.p("min_elections")) or e.candidate_looks >= 2 or \
            (not e.raft_seen and len(e.moving) >= need)
        busy = f"; bthreads up to {max(e.busy):.0%} busy" if e.busy else ""
        yield Check(
            target="cluster", fire=fire,
            clear=e.elections == 0 and e.candidate_looks == 0 and not e.moving,
            severity=Severity.WARNING,
            summary=self._summary(e, ctx, len(css)) + busy,
            evidence=(ctx.evidence("raft elections", [e.elections]),
                      ctx.evidence("term rises from transfers", [e.transfers]),
                      ctx.evidence("copysets as CANDIDATE", [float(e.candidates)]),
                      *((ctx.evidence("bthread usage / workers", e.busy, "ratio"),)
                        if e.busy else ())),
            procedure=(
                "Find the load behind it first: bthread usage near the worker count "
                "(curve.bthread.saturated), disks at their limit, clients retrying.",
                "NOT FOR PRODUCTION: to confirm the diagnosis on a test cluster, raise "
                "copyset.election_timeout_ms host by host: edit it in curveadm's "
                "topology.yaml, `curveadm config commit`, `curveadm reload --role "
                "chunkserver --host HOST`, wait for its copysets to be healthy, then the "
                "next host; then run the leader schedule.",),
            badness=e.elections + e.candidates + len(e.moving))


    @staticmethod
    def _summary(e: Elections, ctx: Context, chunkservers: int) -> str:
        moved = (f"leaders moved on {len(e.moving)} of {chunkservers} chunkservers with no "
                 "transfer about")
        if not e.raft_seen:
            # No raft page compared: no term was seen, so no election is counted; the
            # moving counts are all there is, and whose counts they are is said.
            return ((moved if e.moving else "leaders moved on no chunkserver without a "
                     "transfer about") + f" in {ctx.span:.0f} s; "
                    + ("from the MDS's counts, no raft pages read" if e.mds_counts else
                       "from the chunkservers' own counts, no raft pages read"))
        return (f"{e.elections:.0f} raft elections (term rises no leader transfer explains) "
                f"and copysets standing as CANDIDATE in {e.candidate_looks} looks in "
                f"{ctx.span:.0f} s; {e.transfers:.0f} term rises were transfers"
                + (f"; {moved}" if e.moving else ""))


class BthreadSaturated(Rule):
    id = "curve.bthread.saturated"
    title = "Chunkserver bthread workers saturated"
    source = "curve-elections-under-load"
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
