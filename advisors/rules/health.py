"""Ceph's own health as a floor: every check Ceph raises is a finding, and PGs not active."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from stormdeck.advisors.findings import Check, Finding, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.advisors.rules.peering import mgr_blind
from stormdeck.base import pgstate
from stormdeck.collectors.model import Cluster, HealthCheck, Snapshot

FLOOR_ID = "ceph.health.check"
_OSD_NAME = re.compile(r"\bosd\.\d+\b")
CEPH_MUTED = "muted in Ceph (`ceph health mute`); `ceph health unmute CODE` ends it"

# Ceph's severities: a check is HEALTH_WARN or HEALTH_ERR (rados/operations/health-checks).
SEVERITY = {"HEALTH_WARN": Severity.WARNING, "HEALTH_ERR": Severity.CRITICAL}

# Health checks a stormdeck rule judges with more to say. Where that rule fires at the
# check's severity or above, unmuted, the check folds into its finding (Ceph's words kept
# in its notes and detail): one finding per problem, never a lower one.
COVERED_BY: dict[str, tuple[str, ...]] = {
    "PG_AVAILABILITY": ("ceph.pgs.inactive", "ceph.peering.storm"),
    "OBJECT_UNFOUND": ("ceph.pgs.unfound",),
    "SLOW_OPS": ("ceph.slow_ops",),
    "OSD_NEARFULL": ("ceph.osd.fullness",),
    "OSD_BACKFILLFULL": ("ceph.osd.fullness",),
    "OSD_FULL": ("ceph.osd.fullness",),
    "POOL_NEARFULL": ("ceph.pool.fullness",),
    "POOL_BACKFILLFULL": ("ceph.pool.fullness",),
    "POOL_FULL": ("ceph.pool.fullness",),
    "OSDMAP_FLAGS": ("ceph.flags.left_set",),
    "OSD_FLAGS": ("ceph.flags.left_set",),
    "TOO_MANY_PGS": ("ceph.osd.pgs_per_osd",),
    "MGR_DOWN": ("ceph.mgr.down",),
}
# stormdeck's own findings that another rule says more about: PGs not active during a
# peering storm are the storm's (its finding takes the count and the stuck-PG steps).
RULE_COVERED_BY: dict[str, tuple[str, ...]] = {
    "ceph.pgs.inactive": ("ceph.peering.storm",),
}


# What to look at first for the checks behind incidents that no rule judges on its own:
# network behind flapping and slow ops, and a disk's early failure
# (rados/operations/health-checks; `ceph daemon osd.N dump_osd_network`).
_NETWORK = ("`ceph daemon osd.N dump_osd_network` on an OSD's host lists its slow peers and "
            "their ping times front and back; the hosts both sides of the slow links share "
            "a NIC, a switch or a bond.",
            "On those hosts: drops and errors (`ip -s link`, /proc/net/dev), the bond's "
            "state (/proc/net/bonding/*), and the MTU end to end (`ping -M do -s 8972` "
            "for 9000).")
_DISK = ("`ceph device ls` maps OSDs to devices; `smartctl -a /dev/X` (or `ceph device "
         "get-health-metrics DEVID`) shows reallocated and pending sectors and media errors.",
         "The OSD's log and the host's kernel log (`journalctl -k`) show I/O errors; an OSD "
         "whose disk is failing is better marked out (`ceph osd out N`) while its peers "
         "still have the data than after a second failure.")
PROCEDURES: dict[str, tuple[str, ...]] = {
    "OSD_SLOW_PING_TIME_BACK": _NETWORK,
    "OSD_SLOW_PING_TIME_FRONT": _NETWORK,
    "OSD_SCRUB_ERRORS": ("`rados list-inconsistent-pg POOL`, then `rados "
                         "list-inconsistent-obj PGID --format=json-pretty`: which copy, which "
                         "error (read_error is the disk, data_digest_mismatch a bad copy).",
                         *_DISK,
                         "`ceph pg repair PGID` rewrites the bad copy from a good one; with "
                         "a failing disk it comes back, so look at the disk first."),
    "PG_DAMAGED": ("`ceph health detail` names the PGs; `rados list-inconsistent-obj PGID` "
                   "what is damaged.", *_DISK),
    "OSD_TOO_MANY_REPAIRS": ("Repairs of reads that failed on this OSD: its disk is the "
                             "first suspect.", *_DISK),
    "BLUESTORE_SPURIOUS_READ_ERRORS": ("Reads that failed once and succeeded on retry: an "
                                       "early sign of a failing disk or its path.", *_DISK),
    "BLUESTORE_SLOW_OP_ALERT": ("BlueStore operations slower than "
                                "bluestore_slow_ops_warn_threshold on this OSD: its disk, "
                                "or the host's load.", *_DISK),
    "DEVICE_HEALTH": ("Ceph's device health predicts these devices fail soon.", *_DISK),
    "DEVICE_HEALTH_IN_USE": ("Devices expected to fail are still in use by OSDs that are "
                             "in: mark them out so data moves while it can.", *_DISK),
    "RECENT_CRASH": ("`ceph crash ls-new`, then `ceph crash info ID`: which daemon, which "
                     "backtrace. A crash beside an OSD going down and up is why it flaps; "
                     "`ceph crash archive-all` once understood.",),
}


def severity_of(ceph_severity: str) -> Severity:
    """HEALTH_WARN -> warning, HEALTH_ERR -> critical; anything else Ceph may add one day
    is at least a warning (the floor never reads an unknown word as fine)."""
    return SEVERITY.get(ceph_severity, Severity.WARNING)


def _codes(window: Sequence[Snapshot]) -> set[str]:
    out: set[str] = set()
    last = None
    for s in window:
        c = s.cluster
        if c is None or c.checks is last:
            continue
        last = c.checks
        out.update(h.code for h in c.checks)
    return out


class HealthFloor(Rule):
    id = FLOOR_ID
    title = "Ceph's own health check"
    source = "ceph-mixin-alerts"
    explanation = (
        "Every health check Ceph raises (`ceph health detail`) is a finding here at Ceph's "
        "own severity: HEALTH_WARN is a warning, HEALTH_ERR critical, with Ceph's detail "
        "lines. So `stormdeck check` never exits below what `ceph health` says; stormdeck's "
        "rules add to it, never replace it. A check muted in Ceph (`ceph health mute`) is "
        "shown as muted and does not count, as Ceph's own status leaves it out. Where a "
        "stormdeck rule judges the same problem (inactive PGs, fullness, flags, slow ops) "
        "and fires at least as high, the check is folded into that rule's finding. What "
        "each check means and what to do: docs.ceph.com rados/operations/health-checks.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        now = {h.code: h for h in c.checks}
        for h in c.checks:
            sev = severity_of(h.severity)
            count = f" ({h.count})" if h.count is not None else ""
            yield Check(
                target=h.code, fire=True, clear=False, severity=sev,
                summary=f"{h.summary} (Ceph: {h.severity})",
                evidence=(ctx.evidence("Ceph health check", [], now=f"{h.code}{count}"),),
                procedure=(*PROCEDURES.get(h.code, ()),
                           *self._crashed_flappers(ctx, h),
                           f"`ceph health detail` lists every {h.code} item; what it means "
                           "and what to do: https://docs.ceph.com/en/latest/rados/operations/"
                           f"health-checks/#{h.code.lower().replace('_', '-')}"),
                detail=h.detail, ceph_muted=h.muted,
                badness=float(h.count if h.count is not None else 1) * int(sev))
        # A check Ceph no longer raises clears at once (else it would linger as firing).
        for code in (_codes(ctx.window) | ctx.tracked) - set(now) - {"cluster"}:
            yield Check(target=code, fire=False, clear=True, severity=Severity.INFO,
                        summary=f"{code} no longer raised")
        # Ceph says WARN/ERR but its checks could not be read (`health detail` failed):
        # the status alone still sets the floor.
        sev = SEVERITY.get(c.health or "")
        missing = sev is not None and not c.checks
        yield Check(
            target="cluster", fire=missing, clear=not missing,
            severity=sev or Severity.WARNING,
            summary=f"Ceph says {c.health}, and its health detail could not be read",
            evidence=(ctx.evidence("Ceph health", [], now=c.health or "unknown"),),
            procedure=("`ceph health detail` names the checks behind the status.",),
            badness=float(int(sev or 0)))

    @staticmethod
    def _crashed_flappers(ctx: Context, h: HealthCheck) -> tuple[str, ...]:
        """RECENT_CRASH naming an OSD that went down or up within the window: the crash
        is why it flaps (the flapping rule's own advice is about the symptom)."""
        if h.code != "RECENT_CRASH":
            return ()
        named = set(_OSD_NAME.findall(" ".join((h.summary, *h.detail))))
        moved = ctx.changed("up")
        flapped = sorted(d.id for d in ctx.osds() if d.id in named
                         and (moved is None or d.id in moved)
                         and len(set(ctx.daemon_values(d.id, "up"))) > 1)
        return (f"{', '.join(flapped)} crashed and went down or up in the last "
                f"{ctx.span:.0f} s: the crash is why it flaps; read its crash report "
                "before holding it down.",) if flapped else ()


def _inactive_by_state(c: Cluster) -> dict[str, int]:
    return {state: n for state, n in c.pg_states.items() if n and not pgstate.is_active(state)}


def _inactive_for(ctx: Context) -> float:
    """Seconds PGs have been not active without a break, as far as the window reaches."""
    since = ctx.latest.time
    for s in reversed(ctx.window):
        c = s.cluster
        if c is None or not c.pgs_inactive:
            break
        since = s.time
    return ctx.latest.time - since


class PgsInactive(Rule):
    id = "ceph.pgs.inactive"
    title = "PGs not active: no IO to their objects"
    source = "ceph-mixin-alerts, peering-blocks-io"
    clock = True  # stuck once inactive for stuck_seconds, data unchanged or not
    explanation = (
        "A PG that is not active (peering, down, incomplete, stale, unknown...) serves no "
        "reads or writes: every RBD image, file or object with data in it hangs. "
        "Stale means no OSD of its acting set has reported it to the monitors lately: its "
        "'active' is old news (base/pgstate.py judges PG states). So one such PG is "
        "critical as soon as Ceph's PG map shows it, where `ceph.peering.storm` waits for "
        "10 PGs and 1%. ceph-mixin's CephPGsInactive fires on one inactive PG for 5 min "
        "(ceph-mixin): from then on the PG is stuck, and the procedure says how to find "
        "what it waits for. Every PG unknown at once is a mgr with no PG stats "
        "(`ceph.mgr.no_pg_stats`), not judged here.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or c.pgs_inactive is None or mgr_blind(c):
            return
        n = c.pgs_inactive
        lasting = _inactive_for(ctx) if n else 0.0
        stuck = lasting >= float(ctx.p("stuck_seconds"))
        states = _inactive_by_state(c)
        shown = ", ".join(f"{k} {v}" for k, v in sorted(states.items(), key=lambda kv: -kv[1])
                          [:6])
        procedure = [
            "`ceph pg dump_stuck inactive` (and `stale`) lists the PGs; `ceph pg PGID query` "
            "says what each waits for (recovery_state: blocked_by, "
            "down_osds_we_would_probe, peering_blocked_by).",
            "Bring back the OSDs it names (`ceph osd tree down`; their hosts, disks, logs); "
            "a down OSD is marked out after mon_osd_down_out_interval (600 s) and its data "
            "moves.",
        ]
        if c.pgs_in("stale"):
            procedure.append("Stale: no OSD of the acting set reports the PG; if those OSDs "
                             "are up, their primaries cannot reach the monitors (network, "
                             "auth, a hung daemon).")
        if c.pgs_in("incomplete", "down"):
            procedure.append("down/incomplete: an OSD with needed history is missing; never "
                             "`ceph osd lost`, `ceph pg force-create-pg` or "
                             "`ceph-objectstore-tool --op mark-complete` without that OSD "
                             "being gone for good: they discard writes.")
        series = ctx.kept("pgs_inactive",
                          lambda s: s.cluster.pgs_inactive if s.cluster else None)
        yield Check(
            target="cluster", fire=n > 0, clear=n == 0, severity=Severity.CRITICAL,
            summary=f"{n} of {c.num_pgs} PGs not active ({shown or 'by state unknown'})"
                    + (f" for {lasting:.0f} s: stuck (CephPGsInactive: 1 PG for 5 min)"
                       if stuck else f" for {lasting:.0f} s" if lasting else ""),
            evidence=(ctx.evidence("PGs not active", series, "PGs"),
                      ctx.evidence("not active for", [lasting], "s")),
            procedure=tuple(procedure), badness=float(n) + (1e6 if stuck else 0.0))


class ObjectUnfound(Rule):
    id = "ceph.pgs.unfound"
    title = "Unfound objects: recovery cannot find a copy"
    source = "osd-down-out-and-markdown, ceph-mixin-alerts"
    explanation = (
        "OBJECT_UNFOUND: Ceph knows of a newer version of an object but no OSD it has "
        "probed holds it; IO to it blocks. The usual cause is an OSD that held the only "
        "newer copy being down. Bring it back; the mark_unfound_lost command forgets the "
        "object or rolls it back to an older version and is for the data's owner to "
        "decide after every OSD that might hold it was probed, never advice. PGs in "
        "recovery_unfound or backfill_unfound state, or Ceph's OBJECT_UNFOUND check, fire "
        "this rule; it proposes no change.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        health = next((h for h in c.checks if h.code == "OBJECT_UNFOUND"), None)
        pgs = c.pgs_in("recovery_unfound", "backfill_unfound")
        objects = health.count if health is not None and health.count is not None else None
        bad = pgs > 0 or health is not None
        what = (f"{objects} unfound objects" if objects is not None else "unfound objects")
        yield Check(
            target="cluster", fire=bad, clear=not bad, severity=Severity.CRITICAL,
            summary=f"{what}; {pgs} PGs recovery_unfound/backfill_unfound",
            evidence=(ctx.evidence("PGs with unfound objects", [float(pgs)], "PGs"),),
            procedure=(
                "`ceph health detail` names the PGs; `ceph pg PGID list_unfound` the objects.",
                "`ceph pg PGID query`: recovery_state might_have_unfound lists each OSD "
                "and whether it was probed ('osd is down', 'already probed').",
                "Bring back every down OSD it names (`ceph osd tree down`); recovery finds "
                "the object there by itself.",
                "Do not run `ceph pg PGID mark_unfound_lost revert|delete`: it discards the "
                "newest writes (or the object) for good. It is a decision for the data's "
                "owner, after every OSD that may hold it has been probed."),
            detail=health.detail if health is not None else (),
            ceph_muted=health.muted if health is not None else False,
            badness=float(objects or pgs))


def link(findings: list[Finding]) -> list[Finding]:
    """Fold Ceph's checks into the stormdeck findings that judge the same problem.

    A check's finding goes where a covering rule fires, unmuted, at its severity or
    above: that finding takes Ceph's summary into its notes and its detail lines. Where
    none does, the check stays as it is, naming the rule that also looks at it; a check
    muted in Ceph stays, muted, and mutes a covering finding that covers nothing else.
    """
    floors = [f for f in findings if (f.rule == FLOOR_ID and f.target in COVERED_BY)
              or f.rule in RULE_COVERED_BY]
    if not floors:
        return findings
    by_rule: dict[str, list[Finding]] = {}
    for f in findings:
        by_rule.setdefault(f.rule, []).append(f)
    dropped: set[tuple[str, str]] = set()
    extra: dict[tuple[str, str], list[Finding]] = {}
    renamed: dict[tuple[str, str], Finding] = {}
    for fl in floors:
        rules = RULE_COVERED_BY[fl.rule] if fl.rule in RULE_COVERED_BY else \
            COVERED_BY[fl.target]
        covering = [f for r in rules for f in by_rule.get(r, ())]
        if fl.muted:
            if fl.rule == FLOOR_ID:  # muted in Ceph: said on what covers it
                for f in covering:
                    extra.setdefault(f.key, []).append(fl)
            continue
        strong = [f for f in covering if f.state == "firing" and not f.muted
                  and f.severity >= fl.severity]
        if strong:
            dropped.add(fl.key)
            for f in strong:
                extra.setdefault(f.key, []).append(fl)
        elif covering:
            renamed[fl.key] = replace(fl, notes=(*fl.notes, "stormdeck's "
                                                 f"{', '.join(sorted({f.rule for f in covering}))} "
                                                 "judges this as well (its finding)"))
    out = []
    for f in findings:
        if f.key in dropped:
            continue
        f = renamed.get(f.key, f)
        folded = extra.get(f.key)
        if folded and f.rule != FLOOR_ID:
            notes = [(f"Ceph {x.target}: " if x.rule == FLOOR_ID else f"{x.rule}: ")
                     + x.summary + (" (muted in Ceph)" if x.muted else "") for x in folded]
            steps = [p for x in folded if x.rule != FLOOR_ID for p in x.procedure
                     if p not in f.procedure]
            if steps:
                f = replace(f, procedure=(*f.procedure, *steps))
            detail = [line for x in folded for line in x.detail]
            if _OSD_NAME.fullmatch(f.target):  # one OSD's finding: the lines about it
                detail = [line for line in detail
                          if f.target in _OSD_NAME.findall(line)] or detail
            muted = f.muted or (all(x.muted for x in folded) and _only_muted(f, folded,
                                                                           findings))
            f = replace(f, notes=(*f.notes, *notes), muted=muted,
                        detail=tuple(dict.fromkeys((*f.detail, *detail))))
        out.append(f)
    return out


def _only_muted(f: Finding, folded: list[Finding], findings: list[Finding]) -> bool:
    """Whether every check of Ceph's this finding covers is present and muted in Ceph."""
    mine = {code for code, rules in COVERED_BY.items() if f.rule in rules}
    live = [x for x in findings if x.rule == FLOOR_ID and x.target in mine and not x.muted]
    return bool(folded) and not live


RULES = (HealthFloor, PgsInactive, ObjectUnfound)
