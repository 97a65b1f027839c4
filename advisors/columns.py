"""The engine's Columns: the snapshots it judges over, numbered, read once per figure.

A rule asks for a daemon's figure over its window (`daemon_values`) once per
daemon per tick; walking every snapshot of the window for each would cost
history x daemons. So the engine keeps Columns: each (daemon, figure) asked
for is a column appended with the new snapshots only, and a window is a slice
of it. Which daemons' figure changed in a window (`changed`) is kept the same
way, so rules about rare changes (an OSD going down) look only at those.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stormdeck.advisors.means import RESUM_AFTER, Means, _numpy, _Sums
from stormdeck.collectors.model import Daemon, Records, Snapshot
from stormdeck.collectors.packing import value_of, values_of

if TYPE_CHECKING:
    import numpy


class _Column:
    """One daemon's figure: the sequence numbers of the snapshots that had it, and its values."""

    __slots__ = ("filled", "need", "seqs", "start", "tick", "vals")

    def __init__(self, start: int) -> None:
        self.start = start  # the first sequence number looked at
        self.filled = start  # the next one to look at
        self.seqs = array("q")
        # A list, not an array: the floats are the snapshots' own objects, and summing
        # a list makes no new ones.
        self.vals: list[float] = []
        self.tick = -1  # `end` at the last request
        self.need = start  # the earliest sequence number asked for in that tick


class _Changes:
    """For one figure: each daemon's last value and the sequence number where it last changed."""

    __slots__ = ("changed_at", "filled", "keys", "last", "start", "values")

    def __init__(self, start: int) -> None:
        self.start = start
        self.filled = start
        self.last: dict[str, Any] = {}
        self.changed_at: dict[str, int] = {}
        # The last mapping's ids and values in its order: a new mapping with the same
        # ids is compared as two lists (in C), and only the places that differ are read.
        self.keys: list[str] | None = None
        self.values: list[Any] | None = None


class _Matrix:
    """One figure of every daemon, a row per snapshot, aligned to one order of daemons.

    Rows of snapshots that share their daemons mapping are the same row, a numpy array
    of doubles. Every daemon's window sum is the rows added one at a time from 0.0, for
    all daemons at once: each element the same IEEE additions, in the same order, as
    sum() over the daemon's own series makes (a missing value is a 0.0 here, and adding
    0.0 changes no sum; daemons with one in the window are done apart). Kept before as
    a list per daemon summed in C: at 10,000 OSDs in fleet mode, where every OSD has a
    CPU figure, appending to and summing 10,000 lists was a quarter of the engine's
    work on a tick a new scrape landed.
    """

    __slots__ = ("filled", "index", "last_map", "missing", "need", "order", "rows",
                 "start", "tick")

    def __init__(self, order: list[str], start: int) -> None:
        self.order = order
        self.index = {k: i for i, k in enumerate(order)}
        self.start = start  # sequence number of rows[0]
        self.filled = start
        self.rows: list[numpy.ndarray] = []
        self.missing: list[frozenset[str]] = []  # per row: daemons without a value
        self.last_map: Any = None  # the daemons mapping the last row was read from
        self.tick = -1
        self.need = start


_NO_MISSING: frozenset[str] = frozenset()


def _inner(m: Mapping[str, Any]) -> Mapping[str, Any]:
    return m.inner if isinstance(m, Records) else m


def _osd_index(daemons: Mapping[str, Daemon]) -> tuple[list[str], list[int] | None]:
    """The OSDs' ids in the mapping's order, and their places in it (None: every daemon
    is an OSD)."""
    ids = list(daemons)
    kinds = values_of(daemons, "kind")
    if all(k == "osd" for k in kinds):
        return ids, None
    keep = [i for i, k in enumerate(kinds) if k == "osd"]
    return [ids[i] for i in keep], keep


class Columns:
    """The snapshots the engine judges over, numbered, with per-daemon columns filled lazily."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.snaps: list[Snapshot] = []
        self.times: list[float] = []
        self.base = 0  # sequence number of snaps[0]
        self._cols: dict[tuple[str, str], _Column] = {}
        self._changes: dict[str, _Changes] = {}
        self._mats: dict[str, _Matrix] = {}
        self._sums: dict[str, _Sums] = {}
        self._kinds: tuple[Any, dict[str, tuple[Daemon, ...]]] = (None, {})
        self._osds: tuple[Any, tuple[list[str], list[int] | None]] = (None, ([], None))
        self._columns: tuple[Any, dict[str, list[Any]]] = (None, {})
        self._kept: dict[str, tuple[int, list[float | None]]] = {}
        self._positions: tuple[Any, dict[str, int]] = (None, {})

    def of_kind(self, daemons: Mapping[str, Daemon], kind: str) -> tuple[Daemon, ...]:
        """The daemons of one kind, in the mapping's order: made once per mapping (a
        snapshot's, or one shared by snapshots), not once per rule per tick."""
        # Keyed by the mapping under the snapshot's Records, which wraps it anew each tick.
        inner = _inner(daemons)
        mapping, kinds = self._kinds
        if mapping is not inner:
            kinds = {}
            self._kinds = (inner, kinds)
        out = kinds.get(kind)
        if out is None:
            out = kinds[kind] = tuple(d for d in daemons.values() if d.kind == kind)
        return out

    def osd_column(self, daemons: Mapping[str, Daemon], attr: str) -> list[Any]:
        """The OSDs' `attr`, in the order of osd_index's ids: read once per daemons mapping
        (a stats period's), whichever rules ask, and the same list while it lasts (so a
        rule may tell an unchanged column by identity). Not to be changed by the caller."""
        inner = _inner(daemons)
        mapping, made = self._columns
        if mapping is not inner:
            made = {}
            self._columns = (inner, made)
        out = made.get(attr)
        if out is None:
            _, keep = self.osd_index(daemons)
            out = values_of(inner, attr)
            if keep is not None:
                out = [out[i] for i in keep]
            made[attr] = out
        return out

    def position(self, ids: list[str]) -> dict[str, int]:
        """Each id's place in `ids` (osd_index's list), made once per list."""
        held, out = self._positions
        if held is not ids:
            out = {k: i for i, k in enumerate(ids)}
            self._positions = (ids, out)
        return out

    def osd_index(self, daemons: Mapping[str, Daemon]) -> tuple[list[str], list[int] | None]:
        """_osd_index, made again only when the daemons' ids or kinds may differ: a packed
        mapping shares its templates (ids, kinds, hosts) with the last while none changed."""
        inner = _inner(daemons)
        key = getattr(inner, "_templates", inner)
        held, out = self._osds
        if held is not key:
            out = _osd_index(daemons)
            self._osds = (key, out)
        return out

    @property
    def end(self) -> int:
        """The sequence number the next snapshot will get."""
        return self.base + len(self.snaps)

    def sync(self, history: Sequence[Snapshot], keep: float) -> None:
        """Learn the snapshots `history` has that were not seen yet; forget those older
        than its first one or than `keep` seconds before its latest."""
        latest = history[-1]
        if not self.snaps or self.snaps[-1] is not latest:
            known = self.snaps[-1] if self.snaps else None
            at = None
            if known is not None:
                for i in range(len(history) - 1, -1, -1):
                    if history[i] is known:
                        at = i
                        break
                    if history[i].time < known.time:
                        break
            if at is None:
                base = self.end  # a history not continuing ours: start over, numbers go on
                self.reset()
                self.base = base
                at = -1
            for snap in history[at + 1:]:
                self.snaps.append(snap)
                self.times.append(snap.time)
        first = history[0]
        cut = 0
        limit = latest.time - keep
        while cut < len(self.snaps) - 1 and (self.times[cut] < limit or (
                self.snaps[cut] is not first and self.times[cut] <= first.time)):
            cut += 1
        if cut:
            del self.snaps[:cut]
            del self.times[:cut]
            self.base += cut
        if len(self._cols) > 4 * max(1, len(latest.daemons)) * 8:
            self._cols = {k: c for k, c in self._cols.items() if c.tick >= self.end - 2}

    def first_seq(self, now: float, span: float) -> int:
        """The sequence number of the oldest snapshot within `span` seconds of `now`."""
        # Found by bisection, then stepped to where `now - t <= span` starts to hold (the
        # test as written, which a subtraction moved to the other side may round apart):
        # walking back from the end cost 600 steps for each of a dozen long windows.
        times = self.times
        lo = bisect_left(times, now - span)
        while lo > 0 and now - times[lo - 1] <= span:
            lo -= 1
        while lo < len(times) and not now - times[lo] <= span:
            lo += 1
        return self.base + min(lo, len(times) - 1)

    def kept(self, key: str, fn: Callable[[Snapshot], Any], first: int) -> list[float]:
        """Context.values(fn) from sequence number `first` on, each snapshot's value made
        once and kept under `key` (one figure per key: rules that read the same one share
        it), not again each tick for every snapshot of a ten-minute window."""
        start, vals = self._kept.get(key, (first, []))
        base, end = self.base, self.end
        if first < start or start + len(vals) < base:
            start, vals = max(first, base), []
        if base > start:
            del vals[:base - start]
            start = base
        for seq in range(start + len(vals), end):
            vals.append(_value(fn, self.snaps[seq - base]))
        self._kept[key] = (start, vals)
        return [v for v in vals[first - start:] if v is not None]

    def series(self, daemon_id: str, attr: str, first: int) -> list[float]:
        """The daemon's known, finite-or-inf values of `attr` from sequence number `first` on."""
        end = self.end
        key = (daemon_id, attr)
        col = self._cols.get(key)
        if col is None or first < col.start:
            col = self._cols[key] = _Column(max(first, self.base))
        if col.filled < end:
            seqs, vals = col.seqs, col.vals
            base = self.base
            for seq in range(max(col.filled, base), end):
                v = value_of(self.snaps[seq - base].daemons, daemon_id, attr)
                if v is None:
                    continue
                if type(v) is not float:
                    try:
                        v = float(v)
                    except (TypeError, ValueError):
                        continue
                if v != v:  # NaN: unknown
                    continue
                seqs.append(seq)
                vals.append(v)
            col.filled = end
        if col.tick != end:
            # A new tick: what the last one needed is all any window may need again.
            cut = bisect_left(col.seqs, col.need)
            if cut:
                del col.seqs[:cut]
                del col.vals[:cut]
            col.start = max(col.start, col.need)
            col.tick, col.need = end, first
        elif first < col.need:
            col.need = first
        return col.vals[bisect_left(col.seqs, first):]

    def _row(self, daemons: Mapping[str, Any], order: list[str],
             attr: str) -> tuple[list[float], frozenset[str]]:
        if len(daemons) == len(order):
            values = values_of(daemons, attr)  # a packed snapshot's without making Daemons
            if list(daemons) != order:
                values = [getattr(daemons.get(k), attr, None) for k in order]
        else:
            values = [getattr(daemons.get(k), attr, None) for k in order]
        missing = []
        for i, v in enumerate(values):
            if type(v) is not float:
                try:
                    v = values[i] = float(v)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    missing.append(order[i])
                    values[i] = 0.0
                    continue
            if v != v:  # NaN: unknown
                missing.append(order[i])
                values[i] = 0.0
        return values, frozenset(missing) if missing else _NO_MISSING

    def _matrix(self, attr: str, first: int) -> _Matrix:
        end, base = self.end, self.base
        latest = _inner(self.snaps[-1].daemons)
        m = self._mats.get(attr)
        if m is not None and (first < m.start or len(latest) != len(m.order) or (
                latest is not m.last_map and list(latest) != m.order)):
            m = None  # daemons came or went (or a wider window): read the rows again
        if m is None:
            m = self._mats[attr] = _Matrix(list(latest), max(first, base))
        prev_map = m.last_map
        for seq in range(max(m.filled, base), end):
            # The mapping under each snapshot's Records: snapshots of one fleet scrape
            # share it, and so share one row (10,000 values read once, not 15 times).
            daemons = _inner(self.snaps[seq - base].daemons)
            if daemons is prev_map:
                row, missing = m.rows[-1], m.missing[-1]
            else:
                # Daemons absent from this snapshot have no value in it either.
                values, missing = self._row(daemons, m.order, attr)
                row = _numpy().array(values, dtype=float)
            m.rows.append(row)
            m.missing.append(missing)
            prev_map = daemons
        m.filled = end
        m.last_map = prev_map
        if m.tick != end:
            # A new tick: rows before this window go (one rule asks for means; should
            # another ask for a wider window in the same tick, the rows are read again).
            cut = first - m.start
            if cut > 0:
                del m.rows[:cut]
                del m.missing[:cut]
                m.start = first
            m.tick, m.need = end, first
        elif first < m.need:
            m.need = first
        return m

    def means(self, ids: Iterable[str], attr: str, first: int) -> dict[str, float]:
        """Each daemon's mean of `attr` from sequence number `first` on, where it has
        values: exactly what sum(series) / len(series) gives, for all in one pass."""
        wanted = ids if isinstance(ids, list) else list(ids)
        if len(wanted) * 8 < len(self.snaps[-1].daemons):
            # A few of many (the OSDs under a CPU quota on the librados path): their own
            # columns, not a row of every daemon read per snapshot.
            few = {}
            for daemon_id in wanted:
                vals = self.series(daemon_id, attr, first)
                if vals:
                    few[daemon_id] = sum(vals) / len(vals)
            return few
        m = self._matrix(attr, first)
        skip = first - m.start
        n = len(m.rows) - skip
        if n <= 0:
            return {}
        np = _numpy()
        sums = np.zeros(len(m.order))
        for row in m.rows[skip:]:  # sum()'s additions, in its order, all daemons at once
            sums = sums + row
        everyone = dict(zip(m.order, (sums / n).tolist(), strict=True))  # each x / n
        apart: set[str] = set()
        for missing in set(m.missing[first - m.start:]):
            apart |= missing
        if wanted == m.order and not apart:
            return everyone
        out = {}
        for daemon_id in wanted:
            if daemon_id in apart or daemon_id not in everyone:
                vals = self.series(daemon_id, attr, first)
                if vals:
                    out[daemon_id] = sum(vals) / len(vals)
            else:
                out[daemon_id] = everyone[daemon_id]
        return out

    def _running(self, attr: str, first: int) -> _Sums | None:
        """The running sums of `attr` over the window from `first` on; None when this tick
        already cut them to another window (a second rule with another span)."""
        end, base = self.end, self.base
        latest = _inner(self.snaps[-1].daemons)
        s = self._sums.get(attr)
        if s is not None and (first < s.start or s.filled < base or len(latest) != len(
                s.order) or (latest is not s.last_map and list(latest) != s.order)):
            s = None  # daemons came or went, a wider window, or rows lost: read again
        if s is None:
            s = self._sums[attr] = _Sums(list(latest), max(first, base))
        elif s.tick == end and first != s.start:
            return None
        prev_map = s.last_map
        for seq in range(max(s.filled, base), end):
            daemons = _inner(self.snaps[seq - base].daemons)
            if daemons is prev_map:
                row, missing, top = s.rows[-1], s.missing[-1], s.tops[-1]
            else:
                values, missing = self._row(daemons, s.order, attr)
                row = _numpy().array(values, dtype=float)
                top = max(max(values), -min(values)) if values else 0.0
            s.rows.append(row)
            s.missing.append(missing)
            s.tops.append(top)
            s.add(row, top)
            prev_map = daemons
        s.filled = end
        s.last_map = prev_map
        cut = first - s.start
        if cut > 0:
            for row in s.rows[:cut]:
                s.take(row)
            del s.rows[:cut]
            del s.missing[:cut]
            del s.tops[:cut]
            s.start = first
        if s.ops > RESUM_AFTER + len(s.rows):
            s.resum()
        s.tick = end
        return s

    def window_means(self, ids: Iterable[str], attr: str, first: int) -> Means:
        """Each daemon's mean of `attr` from sequence number `first` on, where it has
        values, as `Means`: exact where asked, for what `means` costs only for a few."""
        wanted = ids if isinstance(ids, list) else list(ids)
        s = None
        if len(wanted) * 8 >= len(self.snaps[-1].daemons):
            s = self._running(attr, first)
        if s is None or not s.rows:
            return Means.of(self.means(wanted, attr, first))
        n = len(s.rows)
        delta = s.delta()
        apart: set[str] = set()
        for missing in set(s.missing):
            apart |= missing
        rows, sums, index = s.rows, s.sums, s.index
        approx: Any
        if math.isinf(delta):
            # An infinite figure: running sums would lose it. Every mean is summed whole.
            cols = [sum(c) for c in zip(*(r.tolist() for r in rows), strict=True)]
            sums, delta = _numpy().array(cols), 0.0
        if not apart and wanted == s.order:
            out_ids, approx = wanted, sums / n  # each one IEEE division, as x / n
            at = list(range(len(wanted)))
        else:
            sums = sums.tolist()
            out_ids, approx, at = [], [], []
            own: dict[int, float] = {}
            for daemon_id in wanted:
                j = index.get(daemon_id)
                if daemon_id in apart or j is None:
                    vals = self.series(daemon_id, attr, first)
                    if vals:
                        own[len(out_ids)] = sum(vals) / len(vals)
                        out_ids.append(daemon_id)
                        approx.append(own[len(out_ids) - 1])
                        at.append(-1)
                    continue
                out_ids.append(daemon_id)
                approx.append(sums[j] / n)
                at.append(j)
        if delta == 0.0:
            return Means(out_ids, approx, 0.0)

        def exact(places: list[int]) -> list[float]:
            # Each sum is sum()'s over the daemon's series, in its order, from 0.0: the
            # rows added one at a time, for all asked at once (a place at a time in C).
            cols = [at[i] for i in places]
            take = _numpy().array(cols, dtype=_numpy().intp)
            got = _numpy().zeros(len(cols))
            for row in rows:
                got = got + row[take]
            # A daemon summed whole above (a value missing in the window) keeps its own.
            return [float(approx[i]) if j < 0 else x / n
                    for i, j, x in zip(places, cols, got.tolist(), strict=True)]
        return Means(out_ids, approx, delta, exact)

    def changed(self, attr: str, first: int) -> set[str]:
        """Daemons whose `attr` may have differed between snapshots from `first` on: a
        superset (a change to and from None counts), never missing one that did."""
        end = self.end
        ch = self._changes.get(attr)
        if ch is None or first < ch.start:
            ch = self._changes[attr] = _Changes(max(first, self.base))
            # Values before the window do not count: start knowing each daemon's
            # value in the snapshot before it, when we have it.
            if ch.start > self.base:
                before = self.snaps[ch.start - 1 - self.base]
                ch.last = dict(zip(before.daemons, values_of(before.daemons, attr),
                                   strict=True))
        base = self.base
        prev_map: Any = None
        for seq in range(max(ch.filled, base), end):
            daemons = _inner(self.snaps[seq - base].daemons)
            if daemons is prev_map:
                continue
            prev_map = daemons
            last, at = ch.last, ch.changed_at
            keys, values = list(daemons), values_of(daemons, attr)
            if keys == ch.keys and ch.values is not None:
                if values != ch.values:
                    for i in [i for i, (a, b) in enumerate(zip(ch.values, values, strict=True))
                              if a != b]:
                        k = keys[i]
                        at[k] = seq
                        last[k] = values[i]
            else:
                for k, v in zip(keys, values, strict=True):
                    if k in last and last[k] != v:
                        at[k] = seq
                    last[k] = v
            ch.keys, ch.values = keys, values
        ch.filled = end
        return {k for k, seq in ch.changed_at.items() if seq > first}



def _value(fn: Callable[[Snapshot], Any], snap: Snapshot) -> float | None:
    """What Context.values takes of one snapshot: a finite-or-infinite float, or None."""
    try:
        v = fn(snap)
    except (KeyError, AttributeError, TypeError, ZeroDivisionError):
        return None
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v)
