"""Pool layout rules: PG counts that split evenly (KNOWLEDGE.md K4.2)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import ANY, Context, Proposes, Rule


def next_power_of_two(n: int) -> int:
    """The smallest power of two >= n: PGs only ever split toward it, never merge."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


class PgNotPowerOfTwo(Rule):
    id = "ceph.pool.pg_not_power_of_two"
    proposes = (Proposes("pool_set", ("pg_num",), ANY, r"\d+"),)
    title = "Pool pg_num not a power of two"
    source = "K4.2"
    explanation = (
        "PGs split in halves, so data spreads evenly over a pool's PGs only when pg_num is "
        "a power of two; otherwise some PGs hold twice the data of others, most visibly at "
        "low PG counts (K4.2). Ceph's own POOL_PG_NUM_NOT_POWER_OF_TWO health warning says "
        "the same (mon_warn_on_pool_pg_num_not_power_of_two). Judged on pg_num_target, where "
        "the pool is heading while it splits or merges; pools the autoscaler runs "
        "(pg_autoscale_mode on) are its business and skipped. The proposal rounds up: "
        "splitting moves data in the background, and merging PGs in the middle of a split "
        "is never proposed.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        for pool in (c.pools if c else ()):
            n = pool.pg_num_target if pool.pg_num_target is not None else pool.pg_num
            if n <= 0 or pool.autoscale_mode == "on":
                continue
            good = n & (n - 1) == 0
            target = next_power_of_two(max(n, pool.pg_num))
            moving = pool.pg_num != n
            yield Check(
                target=f"pool {pool.name}", fire=not good, clear=good,
                severity=Severity.WARNING,
                summary=f"pool {pool.name} has pg_num {pool.pg_num}"
                        + (f" (heading for {n})" if moving else "")
                        + f"; {target} is the next power of two",
                evidence=(ctx.evidence("pg_num_target", [float(n)], "PGs"),),
                changes=() if good else (change(
                    "pool_set", pool.name, "pg_num", str(pool.pg_num), str(target),
                    note="moves data: PGs split in the background"),),
                badness=abs(target - n) / n)


RULES = (PgNotPowerOfTwo,)
