"""The rules, one module per family; each cites the docs/knowledge.md sections it rests on."""

from stormdeck.advisors.rules import (
    capacity,
    cpu,
    disks,
    ec,
    failing_disk,
    flags,
    fullness,
    health,
    heartbeats,
    host,
    latency,
    leaders,
    mclock,
    mclock_capacity,
    memory,
    mgr,
    network,
    peering,
    pg_density,
    pools,
    redundancy,
    release,
    running,
    triage,
)
from stormdeck.advisors.rules.base import Context, Rule

ALL: tuple[type[Rule], ...] = (*cpu.RULES, *latency.RULES, *leaders.RULES, *peering.RULES,
                               *pools.RULES, *ec.RULES, *disks.RULES, *host.RULES,
                               *triage.RULES, *mclock.RULES, *release.RULES,
                               *capacity.RULES, *health.RULES, *fullness.RULES,
                               *flags.RULES, *redundancy.RULES,
                               *memory.RULES, *running.RULES, *mclock_capacity.RULES,
                               *network.RULES, *mgr.RULES,
                               *heartbeats.RULES, *failing_disk.RULES, *pg_density.RULES)
BY_ID: dict[str, type[Rule]] = {r.id: r for r in ALL}
# The rules an incident is read by: the triage view shows their findings.
TRIAGE: tuple[type[Rule], ...] = (
    peering.PeeringStorm, peering.MgrWithoutPgStats, mgr.MgrDown, triage.OsdFlapping,
    triage.SlowOps, latency.SlowestOsd, peering.ScrubDuringLoad, leaders.CurveLeaderFlapping,
    latency.RaftNetwork, mclock.MclockBackgroundVsClients,
)

__all__ = ["ALL", "BY_ID", "TRIAGE", "Context", "Rule", "health"]
