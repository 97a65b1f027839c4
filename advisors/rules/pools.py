"""Pool layout rules: PG counts that split evenly (KNOWLEDGE.md K4.2)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.model import Change, Check, Severity
from stormdeck.advisors.rules.base import Context, Rule


def nearest_power_of_two(n: int) -> int:
    if n <= 1:
        return 1
    low = 1 << (n.bit_length() - 1)
    high = low << 1
    return high if high - n <= n - low else low


class PgNotPowerOfTwo(Rule):
    id = "ceph.pool.pg_not_power_of_two"
    title = "Pool pg_num not a power of two"
    source = "K4.2"
    explanation = (
        "PGs split in halves, so data spreads evenly over a pool's PGs only when pg_num is "
        "a power of two; otherwise some PGs hold twice the data of others, most visibly at "
        "low PG counts (K4.2). Changing pg_num moves data in the background.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        for pool in (c.pools if c else ()):
            n = pool.pg_num
            if n <= 0:
                continue
            good = n & (n - 1) == 0
            target = nearest_power_of_two(n)
            yield Check(
                target=f"pool {pool.name}", fire=not good, clear=good, severity=Severity.INFO,
                summary=f"pool {pool.name} has pg_num {n}; {target} is the nearest power "
                        "of two",
                evidence=(ctx.evidence("pg_num", [float(n)], "PGs"),),
                changes=() if good else (Change(
                    kind="pool_set", target=pool.name, key="pg_num", current=str(n),
                    proposed=str(target), command=f"ceph osd pool set {pool.name} pg_num "
                                                  f"{target}",
                    runtime=True, reversible=True, blast_radius="pool",
                    note="moves data: PGs split or merge in the background"),),
                badness=abs(target - n) / n)


RULES = (PgNotPowerOfTwo,)
