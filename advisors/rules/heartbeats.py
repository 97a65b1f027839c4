"""The network behind flapping and slow ops: Ceph's slow heartbeats between OSD pairs."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.collectors.model import Cluster, HealthCheck

SLOW_PING_CODES = ("OSD_SLOW_PING_TIME_BACK", "OSD_SLOW_PING_TIME_FRONT")
# The monitors' detail line (src/mon/PGMap.cc, PGMap::get_health_checks): "Slow OSD
# heartbeats on back from osd.0 [dc1,rack1] (down) to osd.1 [dc1,rack1] 1118.001 msec
# possibly improving"; at most 10 lines per check.
_PAIR = re.compile(r"Slow OSD heartbeats on (back|front) from (osd\.\d+) \[[^\]]*\]"
                   r"(?: \(down\))? to (osd\.\d+) \[[^\]]*\](?: \(down\))? ([\d.]+) msec")


@dataclass(frozen=True, slots=True)
class SlowPair:
    network: str  # "back" (cluster network) | "front" (public network)
    source: str  # the OSD that sent the ping
    to: str
    ms: float


def slow_pairs(checks: Sequence[HealthCheck]) -> list[SlowPair]:
    """The OSD pairs Ceph's slow-heartbeat checks name, slowest first."""
    out = []
    for h in checks:
        if h.code not in SLOW_PING_CODES:
            continue
        for line in h.detail:
            m = _PAIR.search(line)
            if m:
                out.append(SlowPair(m.group(1), m.group(2), m.group(3), float(m.group(4))))
    return sorted(out, key=lambda p: -p.ms)


def flapped(ctx: Context, ids: Iterable[str]) -> list[str]:
    """Of `ids`, the OSDs whose up state changed within the window."""
    moved = ctx.changed("up")
    return sorted(i for i in ids if (moved is None or i in moved)
                  and len(set(ctx.daemon_values(i, "up"))) > 1)


class SlowHeartbeats(Rule):
    id = "ceph.network.slow_heartbeats"
    title = "Slow heartbeats between OSDs behind flapping or slow ops"
    source = "slow-heartbeats-network, ceph-mixin-alerts"
    explanation = (
        "OSDs ping their peers on the public (front) and cluster (back) networks; the "
        "monitors raise OSD_SLOW_PING_TIME_FRONT/BACK when a ping takes longer than "
        "mon_warn_on_slow_ping_time, by default 5% of osd_heartbeat_grace (20 s): 1 s. "
        "A ping that slow on many pairs is the network (a NIC, a switch port, a bond, an "
        "MTU mismatch), not the OSDs: OSDs whose heartbeats miss the grace are reported "
        "down and come back (flapping), and replication to them waits (slow ops). This "
        "rule fires where Ceph's check and such a symptom meet, names the slowest pairs "
        "and the OSD and host most of them share. Alone, Ceph's check stays Ceph's "
        "(`ceph.health.check`); a NIC's own drops and errors are `host.nic_errors`.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c: Cluster | None = ctx.cluster
        if c is None:
            return
        pairs = slow_pairs(c.checks)
        # Every OSD a slow pair named within the window: an OSD that went down and came
        # back starts its ping statistics afresh, and drops out of Ceph's list for a while.
        named = {o for p in pairs for o in (p.source, p.to)}
        last = None
        for snap in ctx.window if pairs else ():
            checks = snap.cluster.checks if snap.cluster else ()
            if checks is not last:
                named |= {o for p in slow_pairs(checks) for o in (p.source, p.to)}
                last = checks
        flappers = flapped(ctx, named)
        slow = sorted(named & set(c.slow_ops_daemons))
        daemons = ctx.latest.daemons
        # Looked up by name: a walk of every OSD (10,000) for the few named cost 0.5 ms a tick.
        hosts = {k: d.host for k in named
                 if (d := daemons.get(k)) is not None and d.kind == "osd" and d.host}
        fire = bool(pairs) and bool(flappers or slow)
        if not fire and not ctx.matters("cluster", False):
            return
        common = Counter(o for p in pairs for o in (p.source, p.to)).most_common(1)
        shared = common[0] if common and common[0][1] > 1 else None
        host_count = Counter(hosts.get(o) for p in pairs for o in (p.source, p.to)
                             if hosts.get(o)).most_common(1)
        ties = []
        if flappers:
            ties.append(f"{', '.join(flappers)} went down and up")
        if slow:
            ties.append(f"{', '.join(slow)} have slow ops")
        shown = "; ".join(f"{p.source}->{p.to} {p.network} {p.ms:.0f} ms" for p in pairs[:4])
        summary = (f"{len(pairs)} slow heartbeat pairs ({shown})"
                   + (f"; {shared[0]} is in {shared[1]} of them" if shared else "")
                   + (f" and {host_count[0][0]} in {host_count[0][1]}"
                      if host_count and host_count[0][1] > 1 else "")
                   + (f": {', '.join(ties)}" if ties else ""))
        where = shared[0] if shared else (pairs[0].source if pairs else "osd.N")
        host = hosts.get(where) or "its host"
        yield Check(
            target="cluster", fire=fire, clear=not pairs,
            severity=Severity.CRITICAL if flappers else Severity.WARNING,
            summary=summary,
            evidence=(ctx.evidence("slowest ping", [pairs[0].ms] if pairs else [], "ms"),
                      ctx.evidence("OSDs flapping among them", [float(len(flappers))], "OSDs"),
                      ctx.evidence("with slow ops among them", [float(len(slow))], "OSDs")),
            procedure=(
                f"`ceph daemon {where} dump_osd_network` on {host} (or `ceph daemon "
                "mgr.X dump_osd_network` for all): every peer with its ping times front "
                "and back, over 1, 5 and 15 minutes.",
                "Where the slow pairs share one OSD or host, look at that host's NIC: drops "
                "and errors (`ip -s link`, `ethtool -S IFACE`), the bond's state "
                "(/proc/net/bonding/*), its switch port; where they share none, the "
                "switch or the network between racks.",
                "MTU end to end: `ping -M do -s 8972 PEER` for 9000 (a jumbo MTU on one "
                "side only drops big frames and lets pings of the default size through).",
                "Holding flapping OSDs down does not fix a network: if many flap at once, "
                "a short `ceph osd set nodown` with `ceph osd set noout` stops the churn "
                "while the network is fixed; unset both after."),
            badness=(pairs[0].ms if pairs else 0.0) + 1e6 * len(flappers))


RULES = (SlowHeartbeats,)
