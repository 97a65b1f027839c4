"""What happened, in order: events read off consecutive snapshots, and PG states over time.

An incident is read as a story: OSDs going down and up, health checks raised
and cleared, flags set, config changed (from `ceph config log`, so changes
made by anyone show), the OSD map moving. Each is an Event, found by
comparing a snapshot with the one before it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from stormdeck.collectors.model import Cluster, Records, Snapshot, SourceHealth, disk_key
from stormdeck.collectors.packing import values_of

# The PG states an incident is read by (K3.7: peering blocks IO, recovery does not).
PG_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("peering", ("peering",)),
    ("activating", ("activating",)),
    ("degraded", ("degraded",)),
    ("undersized", ("undersized",)),
    ("recovering", ("recovering", "recovery_wait", "recovery_toofull")),
    ("backfilling", ("backfilling", "backfill_wait", "backfill_toofull")),
    ("stale", ("stale",)),
)
# Config changes this old before the first snapshot are shown too: the change
# made ten minutes before the storm is often its cause.
CONFIG_LOOKBACK = 3600.0
INFO, WARN, ERR = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    # "osd" | "health" | "flag" | "config" | "map" | "pool" | "slow" | "chunkserver" | "disk"
    # | "source" (a source stopped answering, or answered again)
    kind: str
    target: str
    text: str
    level: int = INFO  # INFO, WARN, ERR: for colour and for the report


def source_out(h: SourceHealth) -> bool:
    """Is what this source shows not from now? Stale (its last poll failed or hangs: the
    values are its last answer's), or it never answered. A poll that answered with some
    commands failing is current, so not out."""
    return h.stale or (not h.ok and h.last_success is None)


def answered_at(h: SourceHealth, seen_at: float) -> float:
    """When a source last answered, as a snapshot taken at `seen_at` says: where an
    outage starts (its last answer before it) and ends (the answer that ended it)."""
    last = h.last_success
    return last if last is not None and last <= seen_at else seen_at


def _clock(t: float) -> str:
    import time

    return time.strftime("%H:%M:%S", time.localtime(t))


def pg_classes(c: Cluster | None) -> dict[str, int]:
    """PG counts by incident class, with "inactive" (not active) first."""
    if c is None or c.num_pgs is None:
        return {}
    # Judged by base/pgstate.py: a stale PG is not active, whatever else its state says.
    out = {"inactive": c.pgs_inactive or 0}
    for name, words in PG_CLASSES:
        out[name] = c.pgs_in(*words)
    return out


class Timeline:
    """Events from each new snapshot against the one before; the newest `keep` are kept."""

    def __init__(self, keep: int = 2000) -> None:
        self.events: deque[Event] = deque(maxlen=keep)
        self._prev: Snapshot | None = None
        self._config_seen: set[tuple[int, str]] = set()
        self._began: float | None = None
        self._out_since: dict[str, float] = {}  # source -> when its data stopped

    def add(self, snap: Snapshot) -> list[Event]:
        new = list(self._changes(self._prev, snap))
        new.sort(key=lambda e: e.time)
        self.events.extend(new)
        self._prev = snap
        return new

    def checkpoint(self) -> tuple:
        return (tuple(self.events), self._prev, frozenset(self._config_seen), self._began,
                dict(self._out_since))

    def restore(self, state: tuple) -> None:
        events, self._prev, seen, self._began, out = state
        self.events = deque(events, maxlen=self.events.maxlen)
        self._config_seen = set(seen)
        self._out_since = dict(out)

    def since(self, start: float, end: float | None = None) -> list[Event]:
        return [e for e in self.events if e.time >= start and (end is None or e.time <= end)]

    def _changes(self, a: Snapshot | None, b: Snapshot) -> Iterator[Event]:
        yield from self._config(b)
        yield from self._sources(b)
        if a is None:
            return
        t = b.time
        yield from _daemons(a, b, t)
        yield from _disks(a, b)
        ca, cb = a.cluster, b.cluster
        if ca is None or cb is None:
            return
        old = {h.code: h for h in ca.checks}
        new = {h.code: h for h in cb.checks}
        for code, h in new.items():
            lvl = ERR if h.severity == "HEALTH_ERR" else WARN
            if code not in old:
                yield Event(t, "health", code, f"raised {code}: {h.summary}", lvl)
            elif old[code].severity != h.severity:
                yield Event(t, "health", code, f"{code} is now {h.severity}: {h.summary}", lvl)
        for code in old.keys() - new.keys():
            yield Event(t, "health", code, f"cleared {code}", INFO)
        yield from _mgr(ca, cb, t)
        for flag in sorted(set(cb.osd_flags) - set(ca.osd_flags)):
            yield Event(t, "flag", flag, f"flag {flag} set", WARN)
        for flag in sorted(set(ca.osd_flags) - set(cb.osd_flags)):
            yield Event(t, "flag", flag, f"flag {flag} unset", INFO)
        if ca.osdmap_epoch is not None and cb.osdmap_epoch is not None \
                and cb.osdmap_epoch != ca.osdmap_epoch:
            yield Event(t, "map", "osdmap",
                        f"osdmap e{ca.osdmap_epoch} -> e{cb.osdmap_epoch}", INFO)
        pa = {p.name: p for p in ca.pools}
        pb = {p.name: p for p in cb.pools}
        if ca.pools and cb.pools:  # pools are fetched rarely: empty means not yet
            for name in pb.keys() - pa.keys():
                yield Event(t, "pool", name, f"pool {name} created ({pb[name].pg_num} PGs)",
                            INFO)
            for name in pa.keys() - pb.keys():
                yield Event(t, "pool", name, f"pool {name} deleted", WARN)
            for name in pa.keys() & pb.keys():
                if pa[name].pg_num != pb[name].pg_num:
                    yield Event(t, "pool", name, f"pool {name} pg_num {pa[name].pg_num} -> "
                                f"{pb[name].pg_num}", INFO)
        sa, sb = set(ca.slow_ops_daemons), set(cb.slow_ops_daemons)
        for d in sorted(sb - sa):
            yield Event(t, "slow", d, f"slow ops on {d}", WARN)
        for d in sorted(sa - sb):
            yield Event(t, "slow", d, f"no more slow ops on {d}", INFO)

    def _sources(self, b: Snapshot) -> Iterator[Event]:
        """A source that stopped answering is a gap in the story: its start, and its end
        with how long no data came (the values shown meanwhile were its last answer's)."""
        for name, h in b.sources.items():
            since = self._out_since.get(name)
            if source_out(h) and since is None:
                start = answered_at(h, b.time)
                self._out_since[name] = start
                why = f" ({h.error})" if h.error else ""
                yield Event(start, "source", name, f"{name} stopped answering{why}: no data "
                            f"from it after {_clock(start)}", WARN)
            elif not source_out(h) and since is not None:
                del self._out_since[name]
                end = max(since, answered_at(h, b.time))
                yield Event(end, "source", name, f"{name} answering again: no data from it "
                            f"{_clock(since)} to {_clock(end)} ({end - since:.0f} s)", INFO)

    def _config(self, b: Snapshot) -> Iterator[Event]:
        c = b.cluster
        if c is None:
            return
        if self._began is None:
            self._began = b.time
        for ch in c.config_log:
            key = (ch.version, ch.name)
            if key in self._config_seen:
                continue
            self._config_seen.add(key)
            stamp = ch.stamp if ch.stamp is not None else b.time
            if stamp < self._began - CONFIG_LOOKBACK:
                continue
            if ch.new is None:
                text = f"config rm {ch.name} (was {ch.old})"
            elif ch.old is None:
                text = f"config set {ch.name} = {ch.new}"
            else:
                text = f"config set {ch.name}: {ch.old} -> {ch.new}"
            yield Event(stamp, "config", ch.name, text, WARN)


def _mgr(ca: Cluster, cb: Cluster, t: float) -> Iterator[Event]:
    """The mgr stopping, coming back, or handing over to another."""
    a, b = ca.mgr, cb.mgr
    if a is None or b is None:
        return
    was, now = a.active or "?", b.active or "?"
    if a.serving and not b.serving:
        why = "no active mgr in the mgr map" if b.available is False else \
            f"`{b.silent}` unanswered"
        yield Event(b.down_since if b.down_since is not None else t, "mgr", now,
                    f"mgr.{now} stopped serving: {why}", ERR)
    elif b.available is False and a.available is not False:
        yield Event(t, "mgr", now, f"mgr.{now} failed: no active mgr in the mgr map", ERR)
    if b.active and a.active and b.active != a.active:
        yield Event(t, "mgr", now, f"mgr.{now} active (was mgr.{was})", WARN)
    if b.serving and not a.serving:
        gone = f" after {t - a.down_since:.0f} s" if a.down_since is not None else ""
        yield Event(t, "mgr", now, f"mgr.{now} serving again{gone}", INFO)


# A daemon's flag turning: (field, kind, text when it turns False, its level,
# text when it turns True). Coming back is INFO.
_TURNS = (
    ("up", "osd", "{name} down{where}", ERR, "{name} up{where}"),
    ("in_", "osd", "{name} marked out", WARN, "{name} marked in"),
    ("online", "chunkserver", "chunkserver {name} offline", ERR, "chunkserver {name} online"),
)


# The flag whose turning False means a daemon serves nothing: an OSD down, a chunkserver
# offline (Curve's MDS says ONLINE or OFFLINE, and gives no time it changed).
DOWN_ATTR = {"osd": "up", "chunkserver": "online"}


def turned_off(attr: str, name: str) -> tuple[str, str]:
    """The kind and the opening words of the event told when `name`'s `attr` turns False
    ("osd.3 down", "chunkserver 10.0.0.3:8200 offline"), for a reader looking for it."""
    kind, off = next((k, o) for a, k, o, *_ in _TURNS if a == attr)
    return kind, off.format(name=name, where="")


def off_since(history: Sequence[Snapshot], name: str, attr: str) -> tuple[float, bool] | None:
    """The first tick of the newest run of ticks that have `name`'s `attr` False, and
    whether that tick is where it turned (the tick before had it True); None when the
    newest tick does not have it False. Walked from the newest: the run is short."""
    first = None
    for x in reversed(history):
        d = x.daemons.get(name)
        flag = getattr(d, attr) if d is not None else None
        if flag is not False:
            return (first, flag is True) if first is not None else None
        first = x.time
    return (first, False) if first is not None else None


def _daemons(a: Snapshot, b: Snapshot, t: float) -> Iterator[Event]:
    da, db = a.daemons, b.daemons
    inner_a = da.inner if isinstance(da, Records) else da
    inner_b = db.inner if isinstance(db, Records) else db
    if inner_a is inner_b:
        return  # the source kept every daemon as it was
    names: Iterable[str] = db
    keys = list(inner_b)
    if keys == list(inner_a):
        # The same daemons, made again (every stats period, 10,000 at scale): the
        # figures that turn are compared as columns, and only daemons whose differ read.
        moved: set[int] = set()
        for attr, *_ in _TURNS:
            was, now = values_of(inner_a, attr), values_of(inner_b, attr)
            if was != now:
                moved.update(i for i, (x, y) in enumerate(zip(was, now, strict=True))
                             if x is not y)
        names = [keys[i] for i in sorted(moved)]
    for name in names:
        d = db[name]
        old = da.get(name)
        if old is None or old is d:
            continue
        where = f" on {d.host}" if d.host else ""
        for attr, kind, off, level, back in _TURNS:
            was, now = getattr(old, attr), getattr(d, attr)
            if was is True and now is False:
                yield Event(t, kind, name, off.format(name=name, where=where), level)
            elif was is False and now is True:
                yield Event(t, kind, name, back.format(name=name, where=where), INFO)


def _disks(a: Snapshot, b: Snapshot) -> Iterator[Event]:
    """Disks a host source saw appear or vanish (udev's hot-plug news), at their own times.
    A host kept from the poll before (a stale source) carries the same news: told once."""
    for host, h in b.hosts.items():
        old = a.hosts.get(host)
        if not h.disk_events or (old is not None and old.disk_events == h.disk_events):
            continue
        for e in h.disk_events:
            key = disk_key(host, e.name)
            if e.appeared:
                yield Event(e.time, "disk", key, f"disk {key} appeared"
                            + (f": {e.detail}" if e.detail else ""), INFO)
                continue
            was = a.disks.get(key)
            held = was.daemons if was is not None else ()
            yield Event(e.time, "disk", key, f"disk {key} vanished"
                        + (f" under {', '.join(held)}" if held else ""), ERR if held else WARN)


def events_of(snaps: Iterable[Snapshot]) -> list[Event]:
    tl = Timeline(keep=1_000_000)
    for s in snaps:
        tl.add(s)
    return list(tl.events)


def flapping(events: Iterable[Event], now: float, window: float = 300.0,
             min_downs: int = 2) -> dict[str, int]:
    """Daemons marked down at least `min_downs` times in the window (K7.5)."""
    counts: dict[str, int] = {}
    for e in events:
        if e.kind == "osd" and e.text.startswith(f"{e.target} down") \
                and now - e.time <= window:
            counts[e.target] = counts.get(e.target, 0) + 1
    return {k: n for k, n in sorted(counts.items()) if n >= min_downs}
