"""Too few PGs per OSD where no autoscaler raises them: data spreads unevenly over the OSDs."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.advisors.rules.peering import mgr_blind

# src/common/options/ (main): the autoscaler aims at mon_target_pg_per_osd (100); the
# monitors refuse more than mon_max_pg_per_osd (250) per OSD.
TARGET_PER_OSD = 100


class PgsTooFew(Rule):
    id = "ceph.osd.pgs_too_few"
    title = "Too few PGs per OSD, and no autoscaler to raise them"
    source = "pgs-per-osd-too-few"
    explanation = (
        "CRUSH places PGs, not objects: with few PGs per OSD the OSDs' shares of the data "
        "differ by whole PGs, so some fill (and work) well before the others. Ceph's docs "
        "aim at about 100 PGs per OSD (mon_target_pg_per_osd, the autoscaler's target); "
        "older releases raised TOO_FEW_PGS below mon_pg_warn_min_per_osd = 30, a check "
        "turned off (0) once the autoscaler came. This rule uses that 30 (min_per_osd): the "
        "mean of the PGs each up-and-in OSD holds (`osd df` PGS, replicas counted). Judged "
        "once the cluster stores min_objects (10000, the old mon_pg_warn_min_objects "
        "guard) and only when a pool's autoscaler is off or in warn mode; with it on, "
        "pg_num is its "
        "business. Information: raising pg_num splits PGs and moves data, so it is "
        "planned, not done in an incident.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or not c.pools or all(p.autoscale_mode == "on" for p in c.pools):
            return
        if mgr_blind(c):
            return  # a mgr no OSD reports to yet counts 0 PGs everywhere: not judged
        if c.num_objects is None or c.num_objects < int(ctx.p("min_objects")):
            return  # little data: nothing to spread unevenly yet
        counts = [d.pgs for d in ctx.osds() if d.pgs is not None and d.up and d.in_]
        if not counts:
            return
        mean = sum(counts) / len(counts)
        low = float(ctx.p("min_per_osd"))
        target = ctx.number("mon_target_pg_per_osd", "mgr", TARGET_PER_OSD)
        limit = ctx.mon_max_pg_per_osd()
        manual = sorted(p.name for p in c.pools if p.autoscale_mode != "on")
        fire = mean < low
        yield Check(
            target="cluster", fire=fire, clear=mean >= low * 1.1,
            severity=Severity.INFO,
            summary=f"{mean:.0f} PGs per OSD on average over {len(counts)} OSDs (fewer than "
                    f"{low:g}; Ceph aims at {target:g}); autoscaler off or warn on "
                    f"{', '.join(manual[:4])}" + (" ..." if len(manual) > 4 else ""),
            evidence=(ctx.evidence("PGs per OSD, mean", [mean], "PGs"),
                      ctx.evidence("PGs per OSD, fewest", [float(min(counts))], "PGs")),
            procedure=(
                "`ceph osd pool autoscale-status`: each pool's share of the data and the "
                "pg_num the autoscaler would give it; `ceph osd df`: PGS and %USE per OSD "
                "(uneven %USE is the cost of too few PGs).",
                "Raise pg_num of the pools that hold most of the data, to a power of two, "
                f"keeping every OSD under mon_max_pg_per_osd ({limit:g}) with room for a "
                "failed OSD's PGs; or `ceph osd pool set POOL pg_autoscale_mode on`.",
                "Splitting PGs moves data (backfill): do it outside busy hours and never "
                "while PGs are degraded or OSDs near full."),
            badness=low - mean if fire else 0.0)


RULES = (PgsTooFew,)
