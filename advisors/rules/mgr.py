"""The active mgr down or silent: what the console can no longer read, and what to do."""

from __future__ import annotations

import time
from collections.abc import Iterable

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.collectors.model import MgrState

# What only the mgr answers: these parts of the screen are as old as its last answer.
MGR_PARTS = "PG states, `osd perf`, `osd status`, `osd df` and the PG dump"


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def mgr_name(m: MgrState) -> str:
    return f"mgr.{m.active}" if m.active else "the mgr"


class MgrDown(Rule):
    id = "ceph.mgr.down"
    title = "No mgr serving: PG stats, OSD latency and fill go unread"
    source = "mgr-failure"
    clock = True  # how long it has been down moves with the clock alone
    reads = ("cluster",)
    explanation = (
        "The mons mark the active mgr failed once it sends no beacon for "
        "mon_mgr_beacon_grace (30 s by default) and hand its role to a standby; with none, "
        "Ceph raises MGR_DOWN, a warning that turns an error after mon_mgr_inactive_grace "
        "(60 s), and so does this finding. Until then a dead mgr still looks active in the "
        "mgr map, so stormdeck also counts a command it sent that no mgr answered. Either "
        "way what "
        "only the mgr answers (PG states in detail, per-OSD latency and IO, fill, the PG "
        "dump) stops, and IO keeps flowing: OSDs and clients do not need the mgr, but "
        "what operators watch, and the balancer, the autoscaler and Prometheus' ceph "
        "metrics, do. Named as soon as it is seen, with what the screen shows from before.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        m = c.mgr if c is not None else None
        if m is None:
            return
        now = ctx.latest.time
        down = m.down_since is not None and not m.serving
        lasting = now - m.down_since if down and m.down_since is not None else 0.0
        fire = down and lasting >= float(ctx.p("silent_seconds"))
        name = mgr_name(m)
        if m.available is False:
            why = ("no active mgr in the mgr map"
                   + (f", {m.standbys} standbys" if m.standbys else ", no standby"))
        elif m.silent is not None:
            why = (f"{name} has not answered `{m.silent}`; the mgr map still names it "
                   "active (the mons wait mon_mgr_beacon_grace, 30 s by default)")
        else:
            why = "the mgr answers"
        since = f" since {_clock(m.down_since)} ({lasting:.0f} s)" \
            if m.down_since is not None else ""
        shown = (f"; {MGR_PARTS} are as of {_clock(m.answered_at)}"
                 if m.answered_at is not None else f"; {MGR_PARTS} never read")
        # Ceph's own verdict where it has one: MGR_DOWN turns HEALTH_ERR once no mgr has
        # been active for mon_mgr_inactive_grace (60 s).
        ceph = next((h.severity for h in c.checks if h.code == "MGR_DOWN"), None) \
            if c is not None else None
        yield Check(
            target=name if m.active else "mgr", fire=fire, clear=not down,
            severity=Severity.CRITICAL if ceph == "HEALTH_ERR" else Severity.WARNING,
            summary=f"{name} down{since}: {why}{shown}",
            evidence=(ctx.evidence("seconds without a serving mgr", [lasting], "s"),),
            procedure=(
                "On a mon: `ceph mgr dump` names the active mgr and its standbys; "
                "`ceph -s` says MGR_DOWN once the mons gave up on it.",
                f"On {name}'s host: is it running (`systemctl status ceph-mgr@NAME`, "
                "`cephadm ls`, `kubectl -n rook-ceph get pods -l app=rook-ceph-mgr`), and "
                "its log's last lines (a module that crashed it says so).",
                "A standby takes over by itself; `ceph mgr fail NAME` hands over at once. "
                "With no standby, start the mgr again, and run two: "
                "`ceph orch apply mgr 2` on cephadm, `mgr.count: 2` in Rook's CephCluster."),
            badness=lasting)


RULES: tuple[type[Rule], ...] = (MgrDown,)
