"""Pool layout rules: PG counts that split evenly (KNOWLEDGE.md K4.2)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import ANY, Context, Proposes, Rule
from stormdeck.collectors.model import Pool


def next_power_of_two(n: int) -> int:
    """The smallest power of two >= n: PGs only ever split toward it, never merge."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def copies(pool: Pool) -> int:
    """PG instances per PG: size for replicated pools, k+m shards for EC ones."""
    if pool.type == "erasure" and pool.ec_k and pool.ec_m:
        return pool.ec_k + pool.ec_m
    return max(pool.size or 1, 1)


def pgs_per_osd_after(ctx: Context, pool: Pool, pg_num: int) -> tuple[float, float] | None:
    """(the mean PG instances per in OSD, the busiest OSD's) once `pool` has `pg_num` PGs:
    what OSDMonitor's check_pg_num weighs against mon_max_pg_per_osd (the mean), and
    what the busiest OSD would carry, the pool's new PGs spread over its OSDs."""
    c = ctx.cluster
    if c is None:
        return None
    in_osds = c.num_in_osds or sum(1 for d in ctx.osds() if d.in_ is not False) or 0
    if not in_osds:
        return None
    now = {p.id: p.pg_num_target if p.pg_num_target is not None else p.pg_num
           for p in c.pools}
    added = (pg_num - now.get(pool.id, pool.pg_num)) * copies(pool)
    total = sum(n * copies(p) for p in c.pools for n in (now[p.id],)) + added
    mean = total / in_osds
    busiest = mean
    if all(p.pgs_by_osd for p in c.pools if p.pg_num):
        per_osd: dict[str, int] = {}
        for p in c.pools:
            for osd, n in p.pgs_by_osd.items():
                per_osd[osd] = per_osd.get(osd, 0) + n
        spread = max(len(pool.pgs_by_osd), 1)
        busiest = max((n + (added / spread if osd in pool.pgs_by_osd else 0)
                       for osd, n in per_osd.items()), default=mean)
    return mean, busiest


def split_blocked(ctx: Context, pool: Pool, pg_num: int) -> str | None:
    """Why splitting `pool` to `pg_num` must not be proposed, or None. The one place a
    split is vetted: PGs per OSD here; the blast radius's fullness forecast (issue 25:
    OSDs past backfillfull once the split's data lands) belongs here too."""
    limit = ctx.mon_max_pg_per_osd()
    after = pgs_per_osd_after(ctx, pool, pg_num)
    if after is None:
        return "the OSDs in the cluster are unknown, so PGs per OSD cannot be checked"
    mean, busiest = after
    if mean > limit:
        return (f"{pg_num} PGs would put {mean:.0f} PG copies on the average OSD, beyond "
                f"mon_max_pg_per_osd {limit:g}: the mon refuses it")
    if busiest > limit:
        return (f"{pg_num} PGs would put about {busiest:.0f} PG copies on the busiest OSD, "
                f"beyond mon_max_pg_per_osd {limit:g} (TOO_MANY_PGS; past "
                "osd_max_pg_per_osd_hard_ratio x that, OSDs refuse to create PGs)")
    return None


class PgNotPowerOfTwo(Rule):
    id = "ceph.pool.pg_not_power_of_two"
    proposes = (Proposes("pool_set", ("pg_num",), ANY, r"\d+"),)
    title = "Pool pg_num not a power of two"
    source = "pg-num-power-of-two"
    explanation = (
        "PGs split in halves, so data spreads evenly over a pool's PGs only when pg_num is "
        "a power of two; otherwise some PGs hold twice the data of others, most visibly at "
        "low PG counts (K4.2). Ceph's own POOL_PG_NUM_NOT_POWER_OF_TWO health warning says "
        "the same (mon_warn_on_pool_pg_num_not_power_of_two). Judged on pg_num_target, where "
        "the pool is heading while it splits or merges; pools the autoscaler runs "
        "(pg_autoscale_mode on) are its business and skipped. The proposal rounds up: "
        "splitting moves data in the background, and merging PGs in the middle of a split "
        "is never proposed, nor splitting back in the middle of a merge. A split is "
        "proposed only where PG copies per OSD stay under mon_max_pg_per_osd (250), and "
        "where the autoscaler (warn mode) has a target, "
        "toward that target rather than against it.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        for pool in (c.pools if c else ()):
            n = pool.pg_num_target if pool.pg_num_target is not None else pool.pg_num
            if n <= 0 or pool.autoscale_mode == "on":
                continue
            good = n & (n - 1) == 0
            up = next_power_of_two(max(n, pool.pg_num))
            target = up
            procedure: list[str] = []
            # In warn mode the autoscaler has a target and warns against any other; with
            # it off the operator chose the count, and its figure is not pressed on them.
            auto = pool.autoscale_target if pool.autoscale_mode == "warn" else None
            if auto is not None and auto > 0 and auto & (auto - 1) == 0:
                if auto >= pool.pg_num:
                    target = auto  # the autoscaler's own power of two, not a second opinion
                    procedure.append(f"The autoscaler's target for {pool.name} is {auto} "
                                     "(`ceph osd pool autoscale-status`): proposed as is.")
                else:
                    target = 0
                    procedure.append(
                        f"The autoscaler's target for {pool.name} is {auto}, below pg_num "
                        f"{pool.pg_num} (`ceph osd pool autoscale-status`): rounding up to "
                        f"{up} would work against it. Decide between them; going to {auto} "
                        "merges PGs and moves data.")
            elif pool.autoscale_mode == "warn":
                procedure.append(f"{pool.name}'s autoscaler is in warn mode and warns against "
                                 "any pg_num but its own: read its target first (`ceph osd "
                                 "pool autoscale-status`, NEW PG_NUM) and prefer it.")
            blocked = split_blocked(ctx, pool, target) if target and not good else None
            if blocked:
                procedure.append(f"Not proposing {target}: {blocked}. Add OSDs first, or "
                                 f"set pg_num to {up // 2} (a merge, data moves) if the "
                                 "pool's share of the data allows.")
            moving = pool.pg_num != n
            # A merge under way toward a count that is no power of two: rounding up would
            # stop the operator's merge and split back, so it is named, not proposed.
            merging = pool.pg_num > n
            if merging and not good:
                procedure.append(
                    f"{pool.name} is merging from pg_num {pool.pg_num} toward {n}: "
                    f"{up} stops that merge and splits back, {up // 2} merges further; "
                    "both move data. Not proposed: decide which the pool's share of the "
                    "data calls for.")
            propose = not good and bool(target) and not blocked and not merging
            yield Check(
                target=f"pool {pool.name}", fire=not good, clear=good,
                severity=Severity.WARNING,
                summary=f"pool {pool.name} has pg_num {pool.pg_num}"
                        + (f" (heading for {n})" if moving else "")
                        + f"; {up} is the next power of two",
                evidence=(ctx.evidence("pg_num_target", [float(n)], "PGs"),),
                # The value before is where the pool is heading, as the actuator reads it
                # back (pg_num_target): a step of a split under way is not the operator's
                # value, and a plan made mid-split was refused as stale.
                changes=(change(
                    "pool_set", pool.name, "pg_num", str(n), str(target),
                    note="moves data: PGs split in the background"
                         + (f" (pg_num is {pool.pg_num} now, on its way to {n})"
                            if moving else "")),) if propose else (),
                procedure=tuple(procedure),
                badness=abs(up - n) / n)


RULES = (PgNotPowerOfTwo,)
