"""Erasure-coded pools: fast EC in Tentacle and its stripe unit (KNOWLEDGE.md K5, K7.3)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.model import Change, Check, Severity
from stormdeck.advisors.rules.base import Context, Rule

FIXED = (20, 2, 1)  # 20.2.0 crashes OSDs with the flag set (tracker 74813)


def _version(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in (text or "").split(".")[:3]) or None
    except ValueError:
        return None


class FastEcOff(Rule):
    id = "ceph.ec.fast_ec_off"
    title = "Erasure-coded pool without fast EC"
    source = "K5.1, K5.3, K7.3"
    explanation = (
        "Tentacle's fast EC (allow_ec_optimizations) brings partial reads and writes and "
        "parity-delta writes: small reads 2-3x, small writes at least 2x at equal latency "
        "(K5.3). It can NOT be turned off again (K5.1, K7.3). 20.2.0 crashes OSDs with it "
        "set (tracker 74813): use 20.2.1 or later.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        version = _version(c.version) if c else None
        if c is None or version is None or version < (20,):
            return
        for pool in c.pools:
            if pool.type != "erasure":
                continue
            on = pool.ec_optimizations
            if version < FIXED:
                yield Check(
                    target=f"pool {pool.name}", fire=not on, clear=on,
                    severity=Severity.INFO,
                    summary=f"EC pool {pool.name} could use fast EC, but {c.version} crashes "
                            "OSDs with it (tracker 74813): upgrade to 20.2.1 first",
                    evidence=(ctx.evidence("ceph version", [], now=c.version),))
                continue
            yield Check(
                target=f"pool {pool.name}", fire=not on, clear=on, severity=Severity.INFO,
                summary=f"EC pool {pool.name} ({pool.ec_k}+{pool.ec_m}) runs without fast EC",
                evidence=(ctx.evidence("pool flags", [], now=",".join(pool.flags) or "none"),),
                changes=() if on else (Change(
                    kind="fast_ec", target=pool.name, key="allow_ec_optimizations",
                    current="false", proposed="true",
                    command=f"ceph osd pool set {pool.name} allow_ec_optimizations true",
                    runtime=True, reversible=False, blast_radius="pool",
                    note="IRREVERSIBLE: fast EC cannot be turned off again"),))


class StripeUnitSmall(Rule):
    id = "ceph.ec.stripe_unit_small"
    title = "EC stripe unit smaller than fast EC wants"
    source = "K5.2"
    explanation = (
        "For new fast-EC pools a 16K stripe_unit is recommended; the default is still 4K, "
        "and an existing pool's stripe unit cannot change (K5.2). This is advice for the "
        "next pool: its erasure-code profile sets stripe_unit.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        version = _version(c.version) if c else None
        if c is None or version is None or version < (20,):
            return
        want = int(ctx.p("stripe_unit"))
        for pool in c.pools:
            if pool.type != "erasure" or pool.stripe_unit is None:
                continue
            small = pool.stripe_unit < want
            yield Check(
                target=f"pool {pool.name}", fire=small, clear=not small, severity=Severity.INFO,
                summary=f"EC pool {pool.name} has a {pool.stripe_unit // 1024} KiB stripe unit; "
                        f"create new fast-EC pools with {want // 1024} KiB",
                evidence=(ctx.evidence("stripe_unit", [float(pool.stripe_unit)], "B"),),
                procedure=(f"For the next pool: `ceph osd erasure-code-profile set NAME "
                           f"k={pool.ec_k} m={pool.ec_m} stripe_unit={want // 1024}K`.",))


RULES = (FastEcOff, StripeUnitSmall)
