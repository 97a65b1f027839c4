"""OSD flags left set: cluster-wide, per OSD, per CRUSH node; their age and who set them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.base import units
from stormdeck.collectors.model import Cluster, LogEntry

# What each flag stops (rados/operations/health-checks OSDMAP_FLAGS, mon-osd-interaction).
EFFECT = {
    "noout": "down OSDs are never marked out, so their data is not re-replicated",
    "norebalance": "no data moves to rebalance",
    "nobackfill": "no backfill: degraded or misplaced PGs stay so",
    "norecover": "no recovery: degraded PGs stay degraded",
    "noup": "OSDs that start are kept down",
    "nodown": "failed OSDs are not marked down: their PGs hang IO",
    "noin": "OSDs that start are not marked in",
    "pause": "every client read and write is stopped",
    "pauserd": "every client read is stopped",
    "pausewr": "every client write is stopped",
    "noscrub": "no scrubs: errors on disk go unnoticed",
    "nodeep-scrub": "no deep scrubs: silent corruption goes unnoticed",
    "notieragent": "no cache tiering agent",
    "nosnaptrim": "deleted snapshots are not trimmed: space is not freed",
}
STOPS_IO = frozenset({"pause", "pauserd", "pausewr", "full"})
SCRUB = frozenset({"noscrub", "nodeep-scrub"})
_CMD = re.compile(r"cmd='?(\[.*\])")
_ENTITY = re.compile(r"entity='([^']*)'")
_FROM = re.compile(r"from='([^']*)'")


def _set_by(audit: Iterable[LogEntry], flag: str, scope: str) -> LogEntry | None:
    """The newest audit entry that set `flag` on `scope` ("cluster", "osd.3", "host1")."""
    found = None
    for e in audit:
        m = _CMD.search(e.message)
        if m is None or ("finished" not in e.message and "dispatch" not in e.message):
            continue
        try:
            cmds = json.loads(m.group(1))
        except ValueError:
            continue
        for cmd in cmds if isinstance(cmds, list) else ():
            if not isinstance(cmd, dict):
                continue
            prefix = cmd.get("prefix")
            if scope == "cluster" and prefix == "osd set" and cmd.get("key") == flag:
                found = e
            elif scope != "cluster" and prefix in ("osd set-group", f"osd add-{flag}"):
                who = cmd.get("who") or cmd.get("ids") or []
                who = [who] if isinstance(who, str) else who
                flags = str(cmd.get("flags", flag)).split(",")
                if flag in flags and (scope in who or scope.removeprefix("osd.") in who):
                    found = e
    return found


def flags_of(c: Cluster) -> list[tuple[str, str]]:
    """Every (scope, flag) set: ("cluster", "noout"), ("osd.3", "noout"), ("host1", "noup")."""
    out = [("cluster", f) for f in c.osd_flags if f in EFFECT or f in STOPS_IO]
    for scope, flags in sorted(c.osd_state_flags.items()):
        out += [(scope, f) for f in flags if f in EFFECT]
    return out


class FlagsLeftSet(Rule):
    id = "ceph.flags.left_set"
    title = "OSD flags set: what they stop, since when, by whom"
    source = "osd-down-out-and-markdown"
    clock = True  # how long a flag has been set grows between scrapes
    explanation = (
        "Flags are how an operator holds Ceph still for maintenance (noout for a reboot, "
        "norebalance and nobackfill while adding hosts), stormdeck's own proposals "
        "included, and they are forgotten: noout left set means a dead OSD's data is never "
        "re-replicated (a down OSD is marked out after mon_osd_down_out_interval, 600 s, "
        "only without it); nobackfill/norecover leave PGs degraded; noup keeps "
        "restarted OSDs down; pause stops every client. Ceph raises OSDMAP_FLAGS (cluster) "
        "and OSD_FLAGS (per OSD, host or class) but says neither since when nor who: the "
        "audit log does (`ceph log last 50 info audit`), as long as its tail still holds "
        "the command. Scrub flags are judged only once left for a day.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        now = ctx.latest.time
        seen: dict[tuple[str, str], float] = {}
        for s in ctx.window:  # the first snapshot of the window that had it set
            if s.cluster is None:
                continue
            for key in flags_of(s.cluster):
                seen.setdefault(key, s.time)
        current = flags_of(c)
        for scope, flag in current:
            entry = _set_by(c.audit, flag, scope)
            if entry is not None:
                age: float | None = now - entry.stamp
                who = _ENTITY.search(entry.message)
                addr = _FROM.search(entry.message)
                by = f"set by {who.group(1) if who else entry.who}" + \
                     (f" from {addr.group(1)}" if addr else "") + f" {units.age(age)} ago"
            else:
                age = None
                since = now - seen.get((scope, flag), now)
                by = (f"set at least {units.age(since)} ago (seen since); who set it is no longer "
                      "in the audit tail")
            long_set = float(ctx.p("scrub_max_age_seconds"))
            if flag in SCRUB and (age if age is not None else now - seen.get(
                    (scope, flag), now)) < long_set:
                fire = False
            else:
                fire = True
            sev = Severity.CRITICAL if flag in STOPS_IO else Severity.WARNING
            on = "cluster-wide" if scope == "cluster" else f"on {scope}"
            unset = (f"ceph osd unset {flag}" if scope == "cluster" else
                     f"ceph osd rm-{flag} {scope}" if scope.startswith("osd.") and
                     flag in ("noout", "noup", "nodown", "noin") else
                     f"ceph osd unset-group {flag} {scope}")
            yield Check(
                target=f"{scope}:{flag}", fire=fire, clear=not fire, severity=sev,
                summary=f"{flag} {on}: {EFFECT.get(flag, 'set')}; {by}",
                evidence=(ctx.evidence("flag", [], now=f"{flag} {on}"),
                          ctx.evidence("set for", [age] if age is not None else [], "s")),
                procedure=(f"If the work it was set for is over: `{unset}`.",
                           "`ceph log last 100 info audit` shows who set flags lately; the "
                           "mon hosts' ceph.audit.log holds older entries."),
                badness=float(age or 0.0) + (1e9 if flag in STOPS_IO else 0.0))
        for scope, flag in set(seen) - set(current):
            yield Check(target=f"{scope}:{flag}", fire=False, clear=True,
                        severity=Severity.INFO, summary=f"{flag} unset")


RULES = (FlagsLeftSet,)
