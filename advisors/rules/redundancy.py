"""Redundancy a pool gives up by its settings: min_size too low, too many PGs per OSD."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule

# Ceph's default (src/common/options/global.yaml.in: mon_max_pg_per_osd 250; an OSD refuses
# to instantiate PGs past osd_max_pg_per_osd_hard_ratio 3 x that).
HARD_RATIO = 3.0


class MinSize(Rule):
    id = "ceph.pool.min_size"
    title = "Pool accepts writes with no redundancy left (min_size)"
    source = "ok-to-stop-blast-radius"
    explanation = (
        "min_size is how many copies (or EC shards) a PG needs to accept IO. A replicated "
        "pool of size 2 or more with min_size 1 goes on writing to a single OSD while the "
        "others are down or recovering: if that OSD then fails, those writes exist nowhere "
        "(Ceph's pool docs: min_size defaults to size - size/2, which is 1 for size 2). An "
        "erasure-coded pool with "
        "min_size = k writes with no parity at all; Ceph's default is k+1 and its docs warn "
        "that k risks data loss. Pools of size 1 have no redundancy to lose (Ceph raises "
        "POOL_NO_REDUNDANCY for them) and are not judged. Raising min_size makes PGs that "
        "have fewer copies now inactive, so the procedure checks that first; no change is "
        "proposed.")
    reads = ("cluster",)  # the pools alone

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        for p in (c.pools if c else ()):
            if p.size is None or p.min_size is None or p.size < 2 or not p.min_size:
                continue
            if p.type == "erasure" and p.ec_k:
                want = p.ec_k + 1
                bad = p.min_size <= p.ec_k
                what = (f"erasure-coded k={p.ec_k} m={p.ec_m}: min_size {p.min_size} writes "
                        "with no parity left")
                keeps = f"min_size {want} (k+1, Ceph's default) keeps one parity shard"
            else:
                # Ceph's default is size - size/2: 2 for size 3, but 1 for size 2.
                want = max(2, p.size - p.size // 2)
                bad = p.min_size < 2
                what = (f"size {p.size} min_size {p.min_size}: writes go on with a single "
                        "copy")
                keeps = f"min_size {want} keeps every write on two OSDs at least"
            target = f"pool {p.name}"
            yield Check(
                target=target, fire=bad, clear=not bad, severity=Severity.WARNING,
                summary=f"pool {p.name} {what}; {keeps}",
                evidence=(ctx.evidence("min_size", [float(p.min_size)]),
                          ctx.evidence("size", [float(p.size)])),
                procedure=(
                    f"First `ceph pg ls-by-pool {p.name} undersized`: PGs with fewer than "
                    f"{want} copies now become inactive (no IO) when min_size is raised; wait "
                    "for recovery to finish.",
                    f"Then `ceph osd pool set {p.name} min_size {want}`.",
                    "A replicated pool of size 2 loses data on two failures in a row "
                    "whatever its min_size: size 3 is Ceph's default."),
                badness=float(want - p.min_size))


class PgsPerOsd(Rule):
    id = "ceph.osd.pgs_per_osd"
    title = "More PGs on an OSD than the monitors allow"
    source = "ok-to-stop-blast-radius"
    explanation = (
        "The monitors refuse to create pools or raise pg_num once an OSD would hold more "
        "than mon_max_pg_per_osd PGs (250 by default), and an OSD that would hold more "
        "than osd_max_pg_per_osd_hard_ratio (3) times that refuses to instantiate PGs: after "
        "an OSD or host fails and its PGs move to the others, they stay inactive. Counted "
        "from `osd df` (every PG replica an OSD holds); it warns at 90% of the limit, so "
        "that a failure's PGs still fit. Judged only where a pool's "
        "autoscaler is off or in warn mode: with it on, pg_num is the autoscaler's.")
    reads = ("cluster", "daemons")  # the pools, mon_max_pg_per_osd, the OSDs' PG counts

    def __init__(self) -> None:
        self._made: tuple[Any, list[str], list[Any], tuple[Any, str, int, int]] | None = None

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or not c.pools or all(p.autoscale_mode == "on" for p in c.pools):
            return
        limit = ctx.mon_max_pg_per_osd()
        share = float(ctx.p("max_share"))
        # One finding for the cluster, not one per OSD: pg_num is per pool, so what is too
        # many on one OSD is nearly always too many on hundreds (a 1,000-OSD cluster gave
        # 1,000 findings of one cause, and 1,000 evaluations a tick).
        # Read as columns: no Daemon made for the one figure of each OSD this needs.
        ids, (pgs,) = ctx.osd_columns("pgs")
        # The counts move with the osdmap (once a minute or less), the status every
        # second: what they give is worked out again only when they or the limit moved.
        made = self._made
        if made is not None and made[0] == (share, limit) and made[1] == ids and \
                made[2] == pgs:
            worst_pgs, worst, over, n_known = made[3]
        else:
            known = [n for n in pgs if n is not None]
            if not known:
                return
            # max() of (count, id) pairs, without making 10,000 pairs: the highest
            # count, and of the OSDs holding it the greatest id.
            worst_pgs = max(known)
            worst = max(k for n, k in zip(pgs, ids, strict=True) if n == worst_pgs)
            over, n_known = len([n for n in known if n > share * limit]), len(known)
            if ctx.columns is not None:  # the walk (the reference) keeps nothing
                self._made = ((share, limit), ids, pgs, (worst_pgs, worst, over, n_known))
        fire = over > 0
        hard = worst_pgs > HARD_RATIO * limit
        yield Check(
            target="cluster", fire=fire, clear=worst_pgs <= share * limit * 0.95,
            severity=Severity.CRITICAL if hard else Severity.WARNING,
            summary=(f"{over} of {n_known} OSDs past {share:.0%} of mon_max_pg_per_osd "
                     f"{limit:g}; {worst} holds {worst_pgs} PGs, "
                     + (f"past {HARD_RATIO:g} x the limit: it refuses new PGs" if hard else
                        f"{worst_pgs / limit:.0%} of it")),
            evidence=(ctx.evidence(f"PGs on {worst}", ctx.daemon_values(worst, "pgs"),
                                   "PGs"),),
            procedure=(
                "`ceph osd df`: PGS per OSD; `ceph osd pool autoscale-status`: what the "
                "autoscaler would set each pool's pg_num to.",
                "Lower pg_num of pools with more PGs than their data needs (PGs merge in "
                "the background), or add OSDs; raising mon_max_pg_per_osd only hides it.",
                "If an OSD or host fails, its PGs move to the others: keep headroom "
                "below the limit for that."),
            badness=float(worst_pgs))


RULES = (MinSize, PgsPerOsd)
