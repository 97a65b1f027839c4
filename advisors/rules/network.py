"""The network behind flapping and slow ops: NICs whose error and drop counters climb."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.collectors.model import Nic


def _count(n: Nic, what: str) -> int:
    return n.errin + n.errout if what == "errors" else n.dropin + n.dropout


class NicErrors(Rule):
    id = "host.nic_errors"
    title = "A NIC counting errors or drops now"
    source = "K7.5, K3.7"
    explanation = (
        "OSDs flap and ops go slow when heartbeats and replication traffic are lost: Ceph "
        "raises OSD_SLOW_PING_TIME_BACK/FRONT for slow heartbeats, and its OSD "
        "troubleshooting guide starts with dropped packets and interface errors. This "
        "host's NICs' counters (psutil, /proc/net/dev) are judged by how much they rose "
        "within the window, not by their totals since boot: receive or send errors (a bad "
        "cable, optic or port; a duplex or MTU mismatch) are a warning, drops (full rings, "
        "a congested bond member) beyond a rate are information.")

    def check(self, ctx: Context) -> Iterable[Check]:
        first = ctx.window[0] if ctx.window else ctx.latest
        span = max(ctx.span, 1.0)
        min_errors = float(ctx.p("min_errors"))
        drops_per_min = float(ctx.p("drops_per_minute"))
        for host, h in ctx.latest.hosts.items():
            before = first.hosts.get(host)
            for name, n in h.nics.items():
                old = before.nics.get(name) if before is not None else None
                if old is None:
                    continue
                errors = max(0, _count(n, "errors") - _count(old, "errors"))
                drops = max(0, _count(n, "drops") - _count(old, "drops"))
                rate = drops / span * 60
                bad_errors = errors >= min_errors
                bad_drops = rate >= drops_per_min
                fire = bad_errors or bad_drops
                target = f"{host}:{name}"
                if not ctx.matters(target, fire):
                    continue
                what = []
                if errors:
                    what.append(f"{errors} errors (rx {n.errin - old.errin}, tx "
                                f"{n.errout - old.errout})")
                if drops:
                    what.append(f"{drops} drops ({rate:.0f}/min)")
                yield Check(
                    target=target, fire=fire, clear=not fire,
                    severity=Severity.WARNING if bad_errors else Severity.INFO,
                    summary=f"{name} on {host}: {', '.join(what) or 'quiet'} in the last "
                            f"{ctx.span:.0f} s" + (f"; MTU {n.mtu}" if n.mtu else "")
                            + ("; link down" if n.up is False else ""),
                    evidence=(ctx.evidence("errors in window", [float(errors)]),
                              ctx.evidence("drops per minute", [rate])),
                    procedure=(
                        f"`ip -s -s link show {name}` and `ethtool -S {name}`: which "
                        "counter (crc, frame, fifo, missed); `ethtool {name}`: speed and "
                        "duplex as expected?",
                        "A bond: /proc/net/bonding/* shows each member's link failures; "
                        "the MTU must match end to end (`ping -M do -s 8972 PEER` for "
                        "9000).",
                        "`ceph health detail` OSD_SLOW_PING_TIME_*: the OSDs whose "
                        "heartbeats this slows."),
                    badness=float(errors) + rate)


RULES = (NicErrors,)
