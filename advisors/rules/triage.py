"""Incident triage: OSDs that flap, and slow ops that last (KNOWLEDGE.md K7.5, K3.7)."""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import OSD, Context, Proposes, Rule


def downs(ctx: Context, daemon_id: str) -> int:
    """How often the daemon went from up to down within the window."""
    seen = [s.daemons[daemon_id].up for s in ctx.window if daemon_id in s.daemons]
    return sum(1 for a, b in itertools.pairwise(seen) if a is True and b is False)


# What the cluster log says of an OSD's downs (src/mon/OSDMonitor.cc, src/osd/OSD.cc):
# a clean stop (systemctl stop, a planned restart, an upgrade's restart) sends
# MOSDMarkMeDown, and the mon logs "osd.N marked itself down" ("... down and dead" since
# Quincy). Heartbeat failures are the mon's "osd.N failed (...) (K reporters from
# different host after S >= grace G)", and the OSD's own "Monitor daemon marked osd.N
# down, but it is still running" when it was alive all along. "marked itself dead as of
# eN" follows such a wrong mark too, so it is NOT a clean stop.
_CLEAN = re.compile(r"^(osd\.\d+) marked itself down\b")
_HEARTBEAT = re.compile(r"^(osd\.\d+)\b[^(]* failed \(.*reporters? from|"
                        r"^Monitor daemon marked (osd\.\d+) down, but it is still running")


@dataclass(frozen=True, slots=True)
class DownReasons:
    """Per OSD, from the cluster log lines of the window: clean stops and heartbeat marks."""

    clean: Counter[str]
    heartbeat: Counter[str]


def down_reasons(ctx: Context) -> DownReasons:
    """Every cluster log line the window's snapshots carried (each keeps a tail), once."""
    seen: set[tuple[str, int, float]] = set()
    clean: Counter[str] = Counter()
    heartbeat: Counter[str] = Counter()
    since = ctx.window[0].time if ctx.window else 0.0
    last_log: object = None
    for snap in ctx.window:
        c = snap.cluster
        if c is None or not c.log or c.log is last_log:
            continue
        last_log = c.log
        for e in c.log:
            key = (e.who, e.seq, e.stamp)
            if key in seen or e.stamp < since - 1.0:
                continue
            seen.add(key)
            if m := _CLEAN.match(e.message):
                clean[m.group(1)] += 1
            elif m := _HEARTBEAT.match(e.message):
                heartbeat[m.group(1) or m.group(2)] += 1
    return DownReasons(clean, heartbeat)


def upgrading(ctx: Context) -> bool:
    """An orchestrator upgrade (or any rolling one) runs: daemons on mixed versions."""
    c = ctx.cluster
    return c is not None and c.versions_mixed


def keeps_pgs_active(ctx: Context, osd: str) -> str | None:
    """Why holding `osd` down could leave PGs inactive, or None when the snapshot says no
    PG would go. A first, conservative judge from the snapshot: the apply path asks Ceph
    itself (`osd ok-to-stop`, advisors/ceph_admin.py) before it sets noup; the blast
    radius's prediction (issue 25) can replace this function."""
    c = ctx.cluster
    if c is None:
        return "the cluster's state is unknown"
    inactive = c.pgs_inactive
    if inactive:
        return f"{inactive} PGs are inactive already"
    others = [d.id for d in ctx.osds() if d.id != osd and d.up is False and d.in_ is not False]
    if others:
        return (f"{', '.join(others[:4])} {'is' if len(others) == 1 else 'are'} down as well: "
                "PGs with copies on both would go inactive")
    for pool in c.pools:
        if pool.pgs_by_osd and not pool.pgs_by_osd.get(osd):
            continue  # no PG of this pool on it
        size, least = pool.size or 0, pool.min_size or 0
        if size - 1 < least:
            return (f"pool {pool.name} has size {size} and min_size {least}: its PGs on "
                    f"{osd} stop serving IO while it is down")
    return None


class OsdFlapping(Rule):
    id = "ceph.osd.flapping"
    proposes = (Proposes("osd_flag", ("noup", "noout"), OSD, "set"),)
    title = "OSD flapping: down and up again, more than once"
    source = "ceph-mixin-alerts, peering-blocks-io, osd-down-out-and-markdown"
    explanation = (
        "Every time an OSD is marked down or up, the PGs on it peer again, and peering "
        "blocks client IO (K3.7). An OSD that goes down more than once in minutes is "
        "flapping (ceph-mixin's alert, K7.5): its own crashes, a host that runs out of "
        "memory, or a cluster network that drops heartbeats. Ceph itself stops an OSD "
        "marked down osd_max_markdown_count (5) times in osd_max_markdown_period (600 s) "
        "(K9.4). Clean stops (the mon's 'marked itself down': planned restarts, upgrades) "
        "are not flaps, and nothing is said while noout is set or daemons run mixed "
        "versions (an upgrade). Find the cause before restarting anything else. To stop "
        "the churn of ONE OSD meanwhile: `ceph osd set-group noup osd.N` keeps it down, "
        "and since a down OSD is marked out after mon_osd_down_out_interval (600 s) and "
        "its data backfills elsewhere, `ceph osd set-group noout osd.N` (the same flag as "
        "`ceph osd add-noout osd.N`) keeps it in while you look. Only one OSD at a time, "
        "and only where no PG would go inactive without it (`ceph osd ok-to-stop`, asked "
        "again before the flag is set). Many OSDs flapping at once is the network or "
        "heartbeats: a short cluster-wide nodown + noout while the network is checked, "
        "never noup on each.")

    def check(self, ctx: Context) -> Iterable[Check]:
        need = int(ctx.p("min_downs"))
        moved = ctx.changed("up")
        c = ctx.cluster
        counted: dict[str, tuple[int, int]] = {}  # osd -> (downs, clean stops among them)
        reasons: DownReasons | None = None
        osds = ctx.osds() if moved is None else ()
        if moved is not None:
            # Up (or down) all along and not tracked: no flap, and nothing to clear. The
            # few others are picked from the ids, not a walk of every OSD (10,000).
            osds = ctx.osds_among(moved | ctx.tracked)
        for d in osds:
            n = downs(ctx, d.id)
            if n and reasons is None:
                reasons = down_reasons(ctx)
            clean = min(n, reasons.clean[d.id]) if reasons is not None else 0
            counted[d.id] = (n, clean)
        quiet = ""
        if c is not None and "noout" in c.osd_flags:
            quiet = "noout is set (maintenance)"
        elif upgrading(ctx):
            quiet = f"daemons run mixed versions ({c.version if c else '?'} the oldest): an " \
                    "upgrade restarts them"
        flapping = {osd: n - clean for osd, (n, clean) in counted.items()
                    if n - clean >= need and not quiet}
        storm = len(flapping) >= int(ctx.p("storm_osds"))
        heartbeats = sum(reasons.heartbeat[o] for o in flapping) if reasons else 0
        # One OSD at a time: the worst one alone may be held down, if no PG goes inactive.
        worst = max(flapping, key=lambda o: (flapping[o], o)) if flapping and not storm \
            else None
        blocked = keeps_pgs_active(ctx, worst) if worst else None
        interval = ctx.effective("mon_osd_down_out_interval", "mon") or "600"
        daemons = ctx.latest.daemons  # counted holds OSDs of it alone
        for osd, (n, clean) in counted.items():
            flaps = n - clean
            fire = osd in flapping
            d = daemons[osd]
            changes: tuple = ()
            procedure = [f"Read {osd}'s log and `ceph crash ls-new` for crashes; on "
                         f"{d.host or 'its host'} look for OOM kills (dmesg) and for "
                         "dropped packets on the cluster network."]
            if fire and osd == worst and blocked is None:
                changes = (
                    change("osd_flag", osd, "noup", "unset", "set",
                           note=f"{osd} stays down the next time it goes down, so its PGs "
                                "peer once more and then stop; Ceph is asked `osd "
                                "ok-to-stop` first. Undo when the cause is found: ceph osd "
                                f"unset-group noup {osd}"),
                    change("osd_flag", osd, "noout", "unset", "set",
                           note=f"held down, {osd} would be marked out after "
                                f"mon_osd_down_out_interval ({interval} s) and its data "
                                "backfill elsewhere; noout (as `ceph osd add-noout "
                                f"{osd}`) keeps it in while you diagnose. Undo: ceph osd "
                                f"unset-group noout {osd} (or ceph osd rm-noout {osd})"))
                procedure.append(
                    f"Check first that no PG goes inactive without it: `ceph osd ok-to-stop "
                    f"{osd}`. Never the cluster-wide `ceph osd set noup`, which would keep "
                    "every restarting OSD down.")
            elif fire and storm:
                procedure.append(f"{len(flapping)} OSDs flap at once: see the cluster "
                                 "finding of this rule; no OSD is held down one by one.")
            elif fire and osd != worst:
                procedure.append(f"One OSD at a time: {worst} flaps most and comes first; "
                                 f"hold {osd} down only once that one is settled.")
            elif fire:
                procedure.append(f"Not holding {osd} down: {blocked}. Find the cause with it "
                                 "up; `ceph osd ok-to-stop " + osd + "` says when it could.")
            if clean:
                procedure.append(f"{clean} of its {n} downs were clean stops ('marked itself "
                                 "down': a restart or an upgrade), not counted.")
            if quiet and n:
                procedure.append(f"Not judged while {quiet}.")
            yield Check(
                target=osd, fire=fire, clear=flaps == 0 or bool(quiet),
                severity=Severity.CRITICAL if flaps >= int(ctx.p("critical_downs"))
                else Severity.WARNING,
                summary=f"{osd} went down {flaps} times in {ctx.span:.0f} s"
                        + (f" (on {d.host})" if d.host else "")
                        + (f", besides {clean} clean stops" if clean else ""),
                evidence=(ctx.evidence("times marked down", [float(n)], "times"),
                          ctx.evidence("clean stops (marked itself down)", [float(clean)],
                                       "times"),
                          ctx.evidence("up", ctx.daemon_values(osd, "up"), "up=1")),
                changes=changes, procedure=tuple(procedure), badness=float(flaps))
        if storm or ctx.matters("cluster", False):
            yield self._storm(ctx, flapping, storm, heartbeats)

    @staticmethod
    def _storm(ctx: Context, flapping: dict[str, int], storm: bool, heartbeats: int) -> Check:
        names = ", ".join(sorted(flapping, key=lambda o: -flapping[o])[:8])
        why = (f"{heartbeats} heartbeat failure reports in the log" if heartbeats
               else "many at once: the network or heartbeats, not one OSD")
        return Check(
            target="cluster", fire=storm, clear=not storm, severity=Severity.CRITICAL,
            summary=f"{len(flapping)} OSDs flap at once ({names}): {why}",
            evidence=(ctx.evidence("OSDs flapping", [float(len(flapping))], "OSDs"),
                      ctx.evidence("heartbeat failure reports", [float(heartbeats)])),
            procedure=(
                "Stop the marking for a short while, not per OSD: `ceph osd set nodown` "
                "and `ceph osd set noout` (no OSD is marked down or out; a really dead OSD "
                "then stalls its PGs' IO, so keep it short and watch `ceph -s`).",
                "Check the network the heartbeats take: `ceph health detail` for "
                "OSD_SLOW_PING_TIME_BACK/FRONT, `ceph daemon osd.N dump_osd_network` on "
                "an OSD host, the NICs' drops and errors (`ip -s link`), bonds and MTU "
                "(`ping -M do -s 8972` between hosts on the cluster network).",
                "When the cause is fixed: `ceph osd unset nodown` and `ceph osd unset "
                "noout`."),
            badness=float(len(flapping)))


class SlowOps(Rule):
    id = "ceph.slow_ops"
    title = "Slow ops that last"
    source = "ceph-mixin-alerts, peering-blocks-io"
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
