"""Capacity rules: live client load against what `stormdeck validate` measured (K5.5)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule, mean


class LoadBeyondValidated(Rule):
    id = "ceph.cluster.load_vs_validated"
    title = "Client load beyond 70% of the validated capacity"
    source = "K5.5"
    explanation = (
        "A response curve (IOPS against latency at rising concurrency) bends like a hockey "
        "stick: past its knee latency climbs and IOPS do not. Keep production below ~70% "
        "of the most the curve reached, for headroom (K5.5). `stormdeck validate` measured "
        "that curve for this cluster with 4K rados bench reads and writes; this compares "
        "the live client IOPS with it, reads against the read curve and writes against the "
        "write curve, a mixed load as the sum of both shares. Larger IO than 4K costs more "
        "per op, so this is a lower bound of the real use.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or ctx.validated is None:
            return
        caps = ctx.validated.capacity_of(c.fsid)
        if not caps:
            return
        limit = float(ctx.p("max_share"))
        series = {"read": ctx.values(lambda s: s.cluster.client_read_iops),
                  "write": ctx.values(lambda s: s.cluster.client_write_iops)}
        share = 0.0
        parts = []
        evidence = []
        for kind, values in series.items():
            cap = caps.get(kind)
            if cap is None or cap.max_iops <= 0:
                continue
            live = mean(values) or 0.0
            share += live / cap.max_iops
            parts.append(f"{live:.0f} {kind} IOPS of {cap.max_iops:.0f}")
            evidence += [ctx.evidence(f"client {kind} IOPS", values, "IOPS"),
                         ctx.evidence(f"validated most {kind} IOPS", [cap.max_iops], "IOPS")]
        if not parts:
            return
        newest = max(cap.time for cap in caps.values())
        quick = any(cap.quick for cap in caps.values())
        when = time.strftime("%Y-%m-%d", time.localtime(newest))
        yield Check(
            target="cluster", fire=share > limit, clear=share < limit - 0.1,
            severity=Severity.WARNING,
            summary=f"clients use {share:.0%} of the capacity validated on {when} "
                    f"({'; '.join(parts)}), beyond the {limit:.0%} to stay under"
                    + ("; measured by a --quick run, a rough figure" if quick else ""),
            evidence=(*evidence, ctx.evidence("share of validated capacity", [share],
                                              "ratio")),
            procedure=("Add OSDs or hosts, or move load away, before latency turns up the "
                       "curve's knee (K5.5).",
                       "Validate again after the cluster changed: `stormdeck validate` "
                       "(its response curve step)."),
            badness=share)


RULES = (LoadBeyondValidated,)
