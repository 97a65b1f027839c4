"""The shape of a rule, and the context it judges: the latest snapshot, a window of history.

A Context reads its window through the engine's Columns (advisors/columns.py) where
the engine keeps them, so a rule over 10,000 OSDs does not walk every snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.columns import Columns, _osd_index, _value
from stormdeck.advisors.findings import Change, Check, Evidence, Thresholds
from stormdeck.advisors.means import Means
from stormdeck.collectors.model import (
    Cluster,
    ConfigOption,
    Daemon,
    RunningValue,
    Snapshot,
)
from stormdeck.collectors.options import ABOVE_DATABASE, LAYER_FROM, osd_number, same_value
from stormdeck.collectors.packing import values_of

if TYPE_CHECKING:
    from stormdeck.advisors.validated import Validated

# mon_max_pg_per_osd's default (src/common/options/global.yaml.in).
MON_MAX_PG_PER_OSD = 250


@dataclass(frozen=True)
class Context:
    latest: Snapshot
    window: Sequence[Snapshot]  # oldest first, ends with latest
    params: Thresholds
    columns: Columns | None = None  # the engine's; None: walk the window
    first_seq: int = 0  # the window's first snapshot, in the columns' numbering
    tracked: frozenset[str] = field(default_factory=frozenset)  # targets this rule is
    # pending or firing on: a check on any other target that does not fire changes nothing
    # What `stormdeck validate` measured (advisors/validated.py); None: nothing.
    validated: Validated | None = None

    def p(self, name: str) -> Any:
        return self.params[name]

    @property
    def span(self) -> float:
        return self.latest.time - self.window[0].time if self.window else 0.0

    def values(self, fn: Callable[[Snapshot], float | None]) -> list[float]:
        out = []
        for snap in self.window:
            v = _value(fn, snap)
            if v is not None:
                out.append(v)
        return out

    def kept(self, key: str, fn: Callable[[Snapshot], float | None]) -> list[float]:
        """values(fn), with each snapshot's value kept by the engine under `key` (one
        figure per key, whichever rule asks): for windows of hundreds of snapshots."""
        if self.columns is not None:
            return self.columns.kept(key, fn, self.first_seq)
        return self.values(fn)

    def daemon_values(self, daemon_id: str, attr: str) -> list[float]:
        if self.columns is not None:
            return self.columns.series(daemon_id, attr, self.first_seq)
        return self.values(lambda s: getattr(s.daemons[daemon_id], attr))

    def daemon_means(self, ids: Iterable[str], attr: str) -> dict[str, float]:
        """Each daemon's mean of `attr` over the window, where it has values (one pass)."""
        if self.columns is not None:
            return self.columns.means(ids, attr, self.first_seq)
        out = {}
        for daemon_id in ids:
            vals = self.daemon_values(daemon_id, attr)
            if vals:
                out[daemon_id] = sum(vals) / len(vals)
        return out

    def window_means(self, ids: Iterable[str], attr: str) -> Means:
        """daemon_means as `Means`: with the engine's columns, exact only where asked."""
        if self.columns is not None:
            return self.columns.window_means(ids, attr, self.first_seq)
        return Means.of(self.daemon_means(ids, attr))

    def changed(self, attr: str) -> set[str] | None:
        """Daemons whose `attr` may have changed within the window (a superset); None
        when the engine keeps no columns and every daemon must be looked at."""
        if self.columns is None:
            return None
        return self.columns.changed(attr, self.first_seq)

    def and_tracked(self, ids: list[str], positions: Iterable[int]) -> Iterable[int]:
        """`positions` in `ids` (OSDs past a rule's limit) and those of the targets the
        rule tracks (pending or firing: their checks must run to clear), in order."""
        if not self.tracked or self.columns is None:
            return positions
        at = self.columns.position(ids)
        return sorted({*positions, *(at[k] for k in self.tracked if k in at)})

    def matters(self, target: str, fire: bool) -> bool:
        """Whether a check on `target` can change anything: it fires, or the rule is
        pending or firing there. Rules over thousands of daemons skip the rest."""
        return fire or target in self.tracked or self.columns is None

    def evidence(self, metric: str, values: Sequence[float], unit: str = "",
                 now: float | str | None = None) -> Evidence:
        if not values:
            return Evidence(metric=metric, window=self.span, now=now, unit=unit, samples=0)
        return Evidence(metric=metric, window=self.span, now=values[-1] if now is None else now,
                        min=min(values), avg=sum(values) / len(values), max=max(values),
                        unit=unit, samples=len(values))

    @property
    def cluster(self) -> Cluster | None:
        return self.latest.cluster

    def option(self, name: str) -> ConfigOption | None:
        c = self.cluster
        return c.config.get(name) if c is not None else None

    def database(self, name: str, who: str = "osd") -> str | None:
        """The value the config database gives `who`: the most specific section set
        (osd.3 > osd > global), else the option's default. What a proposal compares and
        changes (`ceph config set`), not always what the daemons run."""
        opt = self.option(name)
        if opt is None:
            return None
        chain = [who]
        if "." in who:
            chain.append(who.split(".")[0])
        chain.append("global")
        for section in chain:
            if section in opt.values:
                return opt.values[section]
        return opt.default

    def effective(self, name: str, who: str = "osd") -> str | None:
        """The value `who` runs with: what an OSD reported (`config show`) from a layer
        above the config database (ceph.conf, environment, command line, runtime), else
        the database's (docs/knowledge.md, running-config). For a section (`osd`,
        `global`) the OSDs' value only where every up OSD was read and all of them run
        the same one from above the database; where they differ, or not all were read,
        the database's, and `provenance` says who runs what."""
        run = self.running_value(name, who)
        return run.value if run is not None else self.database(name, who)

    def running_value(self, name: str, who: str = "osd") -> RunningValue | None:
        """The value `who` runs with from a layer above the database, as `effective`
        takes it; None where the database's value stands (or nothing was read)."""
        opt, c = self.option(name), self.cluster
        if opt is None or c is None or not opt.running:
            return None
        if who.startswith("osd."):
            r = opt.running.get(who)
            return r if r is not None and r.wins_over_database else None
        if who not in ("osd", "global") or not c.running_read or \
                c.num_up_osds is None or len(c.running_read) < c.num_up_osds or \
                len(opt.running) < len(c.running_read):
            # Not every OSD read, or not every one read runs a value of its own: the
            # database's stands (and 10,000 OSDs are not walked to find that out).
            return None
        seen = [opt.running.get(o) for o in c.running_read]
        first = seen[0]
        if first is None or not first.wins_over_database or any(
                r is None or not r.wins_over_database or r.value != first.value
                for r in seen):
            return None
        # The count said every up OSD; the set says which: one read before it went down
        # and another up since, not read, would otherwise pass for all of them.
        ids, (ups,) = self.osd_columns("up")
        up = {i for i, u in zip(ids, ups, strict=True) if u}
        return first if up <= c.running_read else None

    def provenance(self, name: str, who: str = "osd") -> str:
        """Where the value the OSDs of `who` run with comes from, when that is not the
        config database: "osd.1, osd.2 run osd_scrub_sleep = 0.1 set at runtime (`ceph
        tell`); the config database gives 0: a restart reverts it (2 of 3 OSDs read)".
        Empty where every OSD read runs the database's value."""
        opt, c = self.option(name), self.cluster
        if opt is None or c is None or not opt.running:
            return ""
        scope = {who} & c.running_read if who.startswith("osd.") else c.running_read
        differ: dict[str, RunningValue] = {}
        for osd in scope:
            r = opt.running.get(osd)
            if r is not None and r.wins_over_database and \
                    not same_value(r.value, self.database(name, osd)):
                differ[osd] = r
        if not differ:
            return ""
        osds = sorted(differ, key=osd_number)
        named = ", ".join(osds[:4]) + (f" and {len(osds) - 4} more" if len(osds) > 4 else "")
        values = sorted({r.value or "?" for r in differ.values()})
        layers = sorted({LAYER_FROM.get(r.source or "", r.source or "?")
                         if r.source in ABOVE_DATABASE or r.source == "default"
                         else "from before its last start" for r in differ.values()})
        db = self.database(name, who)
        revert = ": a restart reverts it" if all(
            r.source == "override" for r in differ.values()) else \
            ", which it reads only at start: a restart takes it" if all(
                r.source not in ABOVE_DATABASE for r in differ.values()) else ""
        read = "" if who.startswith("osd.") else f" ({len(osds)} of {len(scope)} OSDs read)"
        return (f"{named} {'runs' if len(osds) == 1 else 'run'} {name} = "
                f"{', '.join(values)} {' and '.join(layers)}; the config database gives "
                f"{db}{revert}{read}")

    def effective_per_osd(self, name: str) -> Callable[[str], str | None]:
        """`effective(name, who)` for any OSD `who`, the option read once: the value it
        reported from above the database, else its own section where set, else what
        every OSD without one is given (osd, global, default): for rules that ask it of
        10,000 OSDs a tick."""
        opt = self.option(name)
        if opt is None:
            return lambda who: None
        shared, values = self.database(name, "osd"), opt.values
        above = {o: r.value for o, r in opt.running.items() if r.wins_over_database}
        if not above:
            return lambda who: values.get(who, shared)
        return lambda who: above[who] if who in above else values.get(who, shared)

    def number(self, name: str, who: str, default: float) -> float:
        """`effective` as a number; `default` where it is unknown or not a number."""
        raw = self.effective(name, who)
        try:
            return float(raw) if raw is not None else default
        except ValueError:
            return default

    def mon_max_pg_per_osd(self) -> float:
        return self.number("mon_max_pg_per_osd", "mon", MON_MAX_PG_PER_OSD)

    def osds(self) -> Iterable[Daemon]:
        if self.columns is not None:
            return self.columns.of_kind(self.latest.daemons, "osd")
        return (d for d in self.latest.daemons.values() if d.kind == "osd")

    def osds_among(self, few: set[str]) -> list[Daemon]:
        """The OSDs of the latest snapshot whose ids are in `few`, in the mapping's order,
        found by position when few: not a walk of every id (10,000) for a handful."""
        daemons = self.latest.daemons
        if not few:
            return []
        if len(few) <= 32:
            ids = list(daemons)
            picked = sorted((k for k in few if k in daemons), key=ids.index)
        else:
            picked = [k for k in daemons if k in few]
        return [d for d in map(daemons.__getitem__, picked) if d.kind == "osd"]

    def osd_columns(self, *attrs: str) -> tuple[list[str], list[list[Any]]]:
        """The OSDs' ids and, per attr, their values in the same (the mapping's) order,
        read from a packed snapshot's columns: no Daemon is made (at 10,000 OSDs making
        them is the cost of a rule that reads two figures of each)."""
        daemons = self.latest.daemons
        if self.columns is not None:
            ids, _ = self.columns.osd_index(daemons)
            return ids, [self.columns.osd_column(daemons, a) for a in attrs]
        ids, keep = _osd_index(daemons)
        cols = [values_of(daemons, a) for a in attrs]
        if keep is None:
            return ids, cols
        return ids, [[c[i] for i in keep] for c in cols]

    def chunkservers(self) -> Iterable[Daemon]:
        if self.columns is not None:
            return self.columns.of_kind(self.latest.daemons, "chunkserver")
        return (d for d in self.latest.daemons.values() if d.kind == "chunkserver")




def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def config_change(ctx: Context, option: str, proposed: str, who: str = "osd",
                  note: str = "") -> Change:
    opt = ctx.option(option)
    # The database's value: what `ceph config set` replaces and apply checks has not moved.
    return change("ceph_config", who, option, ctx.database(option, who), proposed,
                  runtime=opt.runtime if opt else None, note=note)


def unset_step(ctx: Context, name: str, who: str = "osd", already: bool = True) -> str:
    """The step where the config database already gives what a rule wants and OSDs run
    another value from a layer above it: a `ceph config set` would change nothing, so
    the runtime value is dropped (`config unset`) or the ceph.conf line removed."""
    opt, db = ctx.option(name), ctx.database(name, who)
    above = sorted((o for o, r in (opt.running.items() if opt is not None else ())
                    if r.wins_over_database
                    and not same_value(r.value, ctx.database(name, o))), key=osd_number)
    told = [o for o in above if opt is not None and opt.running[o].source == "override"]
    waiting = [o for o in above if opt is not None
               and opt.running[o].source not in ABOVE_DATABASE]
    rest = [o for o in above if o not in told and o not in waiting]

    def named(osds: list[str]) -> str:
        return ", ".join(osds[:4]) + (f" and {len(osds) - 4} more" if len(osds) > 4 else "")

    steps = []
    if told:
        steps.append(f"`ceph tell {told[0] if len(told) == 1 else 'osd.N'} config unset "
                     f"{name}` on {named(told)}, set at runtime: they run the database's "
                     "value at once")
    if rest:
        steps.append(f"remove {name} from ceph.conf (or the command line, the container's "
                     f"environment) of {named(rest)} and restart them")
    if waiting:
        steps.append(f"restart {named(waiting)}, which read {name} only at start "
                     "(`ceph osd ok-to-stop` first)")
    lead = (f"The config database already gives {name} = {db}" if already else
            f"The OSDs run {name} from a layer above the config database, so the change "
            "alone changes nothing they run")
    return f"{lead}: " + "; ".join(steps) + "." if steps else f"{lead}."


@dataclass(frozen=True, slots=True)
class Proposes:
    """One kind of change a rule may propose: its kind, the keys, the shape of the target
    and of the proposed value (regular expressions the whole text must match). A plan is
    accepted only if its rule declares the change (advisors/plan.py)."""

    kind: str
    keys: tuple[str, ...]
    target: str
    proposed: str = r".+"

    def allows(self, c: Change) -> bool:
        return (c.kind == self.kind and c.key in self.keys
                and re.fullmatch(self.target, c.target) is not None
                and re.fullmatch(self.proposed, c.proposed) is not None)


# Target and value shapes the declarations share.
ANY = r".+"
OSD = r"osd\.\d+"
NUMBER = r"\d+(?:\.\d+)?"
DISK = r"[A-Za-z0-9_.-]+:/dev/[a-z0-9]+"  # collectors.model.disk_key


class Rule:
    """One advisor. Subclasses set the class attributes and implement `check`."""

    id: ClassVar[str]
    title: ClassVar[str]
    source: ClassVar[str]  # the docs/knowledge.md section ids it rests on, comma-separated
    explanation: ClassVar[str]
    # Every change `check` can propose; none: the rule only advises.
    proposes: ClassVar[tuple[Proposes, ...]] = ()
    # True: the verdict moves with the clock as well as with the data (how long a flag
    # has been set, a date), so the rule is judged every tick. False: judged only when
    # a tick brings new data (engine.py: a fleet source hands the same scrape for 15 s);
    # its findings carry over and their for-durations still run in between.
    clock: ClassVar[bool] = False
    # The parts of a snapshot the verdict rests on (engine.PARTS): a rule judges again
    # only when one of them is new. This host's own source brings new disks and host
    # figures every second; a rule of the daemons alone need not judge again for them.
    reads: ClassVar[tuple[str, ...]] = ("cluster", "daemons", "disks", "hosts", "curve",
                                        "validated")

    @classmethod
    def may_propose(cls, c: Change) -> bool:
        return any(p.allows(c) for p in cls.proposes)

    def check(self, ctx: Context) -> Iterable[Check]:
        raise NotImplementedError
