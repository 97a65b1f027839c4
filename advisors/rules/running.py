"""Values OSDs run with that the config database does not hold: lost or kept at a restart."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.overrides import override
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.collectors.model import ConfigOption, RunningValue
from stormdeck.collectors.options import ABOVE_DATABASE, osd_number, same_value

SHOWN = 4  # OSDs named in a summary; the rest are counted
same = same_value


def database_value(opt: ConfigOption, osd: str, host: str | None = None,
                   device_class: str | None = None) -> tuple[str | None, bool]:
    """What the config database gives `osd` and whether it holds a value at all (False:
    the option's default). Ceph's order: the daemon's own section, then `osd`, then
    `global`; within a section a value under a mask that matches the OSD (its host, its
    device class) before the plain one."""
    chain = [osd]
    for section in ("osd", "global"):
        chain += [f"{section}/host:{host}" if host else "",
                  f"{section}/class:{device_class}" if device_class else "", section]
    for who in chain:
        if who and who in opt.values:
            return opt.values[who], True
    return opt.default, False


class RunningDiffers(Rule):
    id = "ceph.config.running_differs"
    title = "OSDs run with a value the config database does not hold"
    source = "running-config, config-history-and-reset"
    reads = ("cluster", "daemons")
    explanation = (
        "An option's value comes from several layers, later ones winning: Ceph's default, "
        "the config database (`ceph config set`), the daemon's ceph.conf, its environment "
        "and command line, and a value set at runtime (`ceph tell ... config set`, "
        "injectargs, the admin socket). `ceph config show osd.N` reports what the OSD "
        "runs with and the layer it came from. A value set at runtime that the database "
        "does not hold is lost when the OSD restarts; a ceph.conf or command-line value "
        "silently outranks the database, so a `ceph config set` there changes nothing the "
        "OSD runs with; and an option the OSD reads only at start runs its old value until "
        "a restart, whatever the database says (`config show` marks the database's value "
        "as ignored). All three are found on the options stormdeck judges, on the OSDs read "
        "so far (a few a poll: the finding says how many), and named with the layer, so "
        "a tuning is known for what it is before a restart undoes it.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        where: dict[str, tuple[str | None, str | None]] | None = None

        def place(osd: str) -> tuple[str | None, str | None]:
            # Host and device class, made once a tick and only when a value above the
            # database is seen: the masks the database may hold a value under.
            nonlocal where
            if where is None:
                ids, (hosts, classes) = ctx.osd_columns("host", "device_class")
                where = {i: (h, k) for i, h, k in zip(ids, hosts, classes, strict=True)}
            return where.get(osd, (None, None))

        for name, opt in sorted(c.config.items()):
            if not opt.running:
                continue
            runtime: list[tuple[str, RunningValue, str | None, bool]] = []
            outranked: list[tuple[str, RunningValue, str | None, bool]] = []
            waiting: list[tuple[str, RunningValue, str | None, bool]] = []
            for osd, r in opt.running.items():
                if r.value is None or not r.wins_over_database:
                    continue
                db, held = database_value(opt, osd, *place(osd))
                if same(r.value, db):
                    continue
                if r.source not in ABOVE_DATABASE:
                    # The database's value of an option read only at start: not run yet.
                    waiting.append((osd, r, db, held))
                    continue
                ov = override(c, name, osd)
                if r.source == "override" and ov is not None and ov.forced is not None \
                        and same(r.value, ov.forced):
                    # The OSD's own doing (mClock zeroes the sleeps at every start): no
                    # operator's value, and a restart does it again.
                    continue
                if r.source == "override":
                    runtime.append((osd, r, db, held))
                elif held:
                    # A file's value beside an empty database is the operator's choice of
                    # layer, not a conflict: only one the database contradicts is.
                    outranked.append((osd, r, db, held))
            read = len(c.running_read)
            for kind, found in (("runtime", runtime), ("outranked", outranked),
                                ("restart", waiting)):
                if ctx.matters(_target(name, kind), bool(found)):
                    yield self._check(ctx, name, kind, found, read)

    def _check(self, ctx: Context, name: str, kind: str,
               found: list[tuple[str, RunningValue, str | None, bool]], read: int) -> Check:
        found.sort(key=lambda f: osd_number(f[0]))
        osds = [f[0] for f in found]
        named = ", ".join(osds[:SHOWN]) + (f" and {len(osds) - SHOWN} more"
                                           if len(osds) > SHOWN else "")
        values = sorted({f[1].value or "" for f in found})
        dbs = sorted({f[2] if f[3] else f"unset (Ceph's default {f[2]})" for f in found})
        layers = sorted({f[1].source or "" for f in found})
        of = f"{len(osds)} of {read} OSDs read"
        if kind == "restart":
            summary = (f"{named} run {name} = {', '.join(values)}, not the config "
                       f"database's {', '.join(dbs)}: the OSD reads {name} only at start, "
                       f"so the database's value waits for a restart ({of})")
            procedure = (
                f"Restart {named} (one failure domain at a time, `ceph osd ok-to-stop` "
                "first) for the database's value to apply; or `ceph config rm` it if it "
                "was not meant to.",)
        elif kind == "runtime":
            summary = (f"{named} run {name} = {', '.join(values)}, set at runtime (`ceph "
                       f"tell` or the admin socket); the config database gives "
                       f"{', '.join(dbs)}: a restart reverts it ({of})")
            procedure = (
                f"To keep it: `ceph config set osd {name} "
                f"{values[0] if len(values) == 1 else 'VALUE'}` (or in the section or mask "
                "that holds it now: the database then agrees, and a restart keeps it).",
                f"To drop it: `ceph tell osd.N config unset {name}` on each, and the OSD "
                "runs with the database's value again.")
        else:
            summary = (f"{named} run {name} = {', '.join(values)} from "
                       f"{' and '.join(layers)}, which outranks the config database's "
                       f"{', '.join(dbs)}: `ceph config set` changes nothing they run with "
                       f"({of})")
            procedure = (
                f"Decide which layer holds {name}: remove it from ceph.conf (or the "
                "daemon's command line) on the OSDs' hosts and restart them, so the "
                "database's value applies; or `ceph config rm` it from the database so "
                "nothing claims a value the OSDs do not run with.",
                *(("From the environment: it is set where the OSDs are deployed (their "
                   "container's environment); change it there, not in ceph.conf.",)
                  if "env" in layers else ()),
                "`ceph config assimilate-conf` moves a ceph.conf's settings into the "
                "database.")
        return Check(
            target=_target(name, kind),
            fire=bool(found), clear=not found, severity=Severity.INFO, summary=summary,
            evidence=(ctx.evidence("OSDs differing", [float(len(osds))], "OSDs"),
                      ctx.evidence("OSDs read", [float(read)], "OSDs")),
            procedure=procedure, badness=float(len(osds)))


_TARGET = {"runtime": "runtime", "restart": "awaits a restart"}


def _target(name: str, kind: str) -> str:
    return f"{name} ({_TARGET.get(kind, 'above the database')})"


RULES = (RunningDiffers,)
