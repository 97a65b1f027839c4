"""Incident triage: OSDs that flap, and slow ops that last (KNOWLEDGE.md K7.5, K3.7)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import OSD, Context, Proposes, Rule


def downs(ctx: Context, daemon_id: str) -> int:
    """How often the daemon went from up to down within the window."""
    seen = [s.daemons[daemon_id].up for s in ctx.window if daemon_id in s.daemons]
    return sum(1 for a, b in itertools.pairwise(seen) if a is True and b is False)


class OsdFlapping(Rule):
    id = "ceph.osd.flapping"
    proposes = (Proposes("osd_flag", ("noup",), OSD, "set"),)
    title = "OSD flapping: down and up again, more than once"
    source = "K7.5, K3.7"
    explanation = (
        "Every time an OSD is marked down or up, the PGs on it peer again, and peering "
        "blocks client IO (K3.7). An OSD that goes down more than once in minutes is "
        "flapping (ceph-mixin's alert, K7.5): its own crashes, a host that runs out of "
        "memory, or a cluster network that drops heartbeats. Find the cause before "
        "restarting anything else; to stop the churn meanwhile, keep that one OSD down with "
        "`ceph osd set-group noup osd.N` (Luminous and later), not the cluster-wide noup.")

    def check(self, ctx: Context) -> Iterable[Check]:
        need = int(ctx.p("min_downs"))
        moved = ctx.changed("up")
        for d in ctx.osds():
            if moved is not None and d.id not in moved and not ctx.matters(d.id, False):
                continue  # up (or down) all along: no flap, and nothing to clear
            n = downs(ctx, d.id)
            yield Check(
                target=d.id, fire=n >= need, clear=n == 0,
                severity=Severity.CRITICAL if n >= int(ctx.p("critical_downs"))
                else Severity.WARNING,
                summary=f"{d.id} went down {n} times in {ctx.span:.0f} s"
                        + (f" (on {d.host})" if d.host else ""),
                evidence=(ctx.evidence("times marked down", [float(n)], "times"),
                          ctx.evidence("up", ctx.daemon_values(d.id, "up"), "up=1")),
                changes=(change(
                    "osd_flag", d.id, "noup", "unset", "set",
                    note=f"{d.id} stays down the next time it goes down, so its PGs peer "
                         f"once more and then stop; undo when the cause is found: ceph osd "
                         f"unset-group noup {d.id}"),) if n >= need else (),
                procedure=(f"Read {d.id}'s log and `ceph crash ls` for crashes; on "
                           f"{d.host or 'its host'} look for OOM kills (dmesg) and for "
                           "dropped packets on the cluster network.",
                           f"If it keeps flapping while you look, `ceph osd set-group noup "
                           f"{d.id}` keeps that OSD alone down and stops the churn of "
                           "peering; never the cluster-wide `ceph osd set noup`, which would "
                           "keep every restarting OSD down."),
                badness=float(n))


class SlowOps(Rule):
    id = "ceph.slow_ops"
    title = "Slow ops that last"
    source = "K7.5, K3.7"
    explanation = (
        "Requests older than osd_op_complaint_time (30 s) mean a client waits. Slow ops for "
        "30 s and more are ceph-mixin's alert (K7.5). During a peering storm they are the "
        "clients' side of it (K3.7); outside one, look at the named OSDs' disks and hosts.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or c.slow_ops is None:
            return
        named = ", ".join(c.slow_ops_daemons[:8]) or "unnamed daemons"
        yield Check(
            target="cluster", fire=c.slow_ops > 0, clear=c.slow_ops == 0,
            severity=Severity.CRITICAL if c.slow_ops >= int(ctx.p("critical_ops"))
            else Severity.WARNING,
            summary=f"{c.slow_ops} slow ops on {named}",
            evidence=(ctx.evidence("slow ops", ctx.values(
                lambda s: s.cluster.slow_ops if s.cluster else None), "ops"),),
            procedure=tuple(
                f"`ceph daemon {d} dump_ops_in_flight` on its host shows what {d} waits for."
                for d in c.slow_ops_daemons[:3]) or (
                "`ceph health detail` names the daemons with slow ops.",),
            badness=float(c.slow_ops))


RULES = (OsdFlapping, SlowOps)
