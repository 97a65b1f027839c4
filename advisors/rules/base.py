"""The shape of a rule, and the context it judges: the latest snapshot, a window of history.

A rule asks for a daemon's figure over its window (`daemon_values`) once per
daemon per tick; walking every snapshot of the window for each would cost
history x daemons. So the engine keeps Columns: each (daemon, figure) asked
for is a column appended with the new snapshots only, and a window is a slice
of it. Which daemons' figure changed in a window (`changed`) is kept the same
way, so rules about rare changes (an OSD going down) look only at those.
"""

from __future__ import annotations

import math
import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.findings import Change, Check, Evidence, Thresholds
from stormdeck.collectors.model import (
    Cluster,
    ConfigOption,
    Daemon,
    Records,
    RunningValue,
    Snapshot,
)
from stormdeck.collectors.options import ABOVE_DATABASE, LAYER_FROM, osd_number, same_value
from stormdeck.collectors.packing import value_of, values_of

if TYPE_CHECKING:
    import numpy

    from stormdeck.advisors.validated import Validated


def _numpy() -> Any:
    """numpy, imported on first use: the running sums need it, a CLI command that never
    judges a window should not pay its import (~60 ms)."""
    import numpy

    return numpy

# mon_max_pg_per_osd's default (src/common/options/global.yaml.in).
MON_MAX_PG_PER_OSD = 250


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

# Running sums are added to and taken from this many times before they are summed
# again from the window's rows: their error bound (Means.delta) grows with the count.
RESUM_AFTER = 1200
_U = 2.0 ** -53  # the unit roundoff of a double


class _Sums:
    """One figure of every daemon: the window's rows (shared as _Matrix's are) and, per
    daemon, a running sum of them (the new rows added, the rows leaving the window taken
    away), with what bounds its distance from sum() over the daemon's own series.

    The running sums are not sum()'s: they are only used to find the few daemons whose
    exact mean is needed (the median's neighbours, those past a threshold). Rows and
    sums are numpy arrays of doubles: a row in and a row out at 10,000 OSDs were two
    lists of 10,000 new floats a tick (2.5 ms of a 10 ms rule, in a console's heap);
    as arrays, microseconds. Each element is still one IEEE double operation, as a
    Python float's, so `delta` bounds them the same way, and resum() and the exact
    sums add the rows in the same order as before.
    """

    __slots__ = ("filled", "index", "last_map", "missing", "nmax", "ops", "order", "rows",
                 "start", "sums", "tick", "tops", "vmax")

    def __init__(self, order: list[str], start: int) -> None:
        self.order = order
        self.index = {k: i for i, k in enumerate(order)}
        self.start = start  # sequence number of rows[0]
        self.filled = start
        self.rows: list[numpy.ndarray] = []
        self.missing: list[frozenset[str]] = []
        self.tops: list[float] = []  # per row: its largest magnitude
        self.sums = _numpy().zeros(len(order))
        self.ops = 0  # rows added or taken away since the sums were last exact (plus those)
        self.vmax = 0.0  # the largest magnitude in any row since then
        self.nmax = 0  # the most rows held at once since then
        self.last_map: Any = None
        self.tick = -1

    def add(self, row: numpy.ndarray, top: float) -> None:
        # Added in order from 0.0, the sums are sum()'s exactly, until a row goes.
        self.sums = self.sums + row
        self.ops += 1
        if top > self.vmax or top != top:
            self.vmax = top
        self.nmax = max(self.nmax, len(self.rows))

    def take(self, row: numpy.ndarray) -> None:
        self.sums = self.sums - row
        self.ops += 1

    def resum(self) -> None:
        """The sums again from the rows, in sum()'s order: exact, their bound reset."""
        sums = _numpy().zeros(len(self.order))
        for row in self.rows:
            sums = sums + row
        self.sums = sums
        self.ops = len(self.rows)
        self.vmax = max(self.tops, default=0.0)
        self.nmax = len(self.rows)

    def delta(self) -> float:
        """A bound on |running sum / n - sum(series) / n| for every daemon with no value
        missing in the window: each of `ops` additions (and each of sum()'s n) rounds
        by at most a unit roundoff of a partial sum, |partial| <= (nmax + 1) * vmax;
        the two divisions by n add one each. Twice that, for slack."""
        n = len(self.rows)
        if n == 0:
            return 0.0
        bound = 2.0 * (self.ops + n + 2) * _U * (self.nmax + 1) * self.vmax / n
        return bound if bound == bound else math.inf


class Means:
    """Daemons' window means of one figure, each exactly what sum(series) / len(series)
    gives over its own series, but made exact only where asked: `approx` is within
    `delta` of each, so a median or the daemons past a threshold are found among a few.
    `approx` is a numpy array of doubles: the median and the places past a threshold
    are found in C.
    """

    __slots__ = ("_at", "_exact", "_known", "approx", "delta", "ids")

    def __init__(self, ids: list[str], approx: Any, delta: float,
                 exact: Callable[[list[int]], list[float]] | None = None) -> None:
        self.ids = ids
        self.approx = _numpy().asarray(approx, dtype=float)
        self.delta = delta
        self._exact = exact
        self._known: dict[int, float] = {}
        self._at: dict[str, int] | None = None

    @classmethod
    def of(cls, means: Mapping[str, float]) -> Means:
        """Means already exact."""
        return cls(list(means), list(means.values()), 0.0)

    def __len__(self) -> int:
        return len(self.ids)

    def values(self) -> list[float]:
        """Every mean, exact, in order (makes them all: for the reference path)."""
        return [self.mean(i) for i in range(len(self.ids))]

    def mean(self, i: int) -> float:
        """The exact mean of the `i`th daemon."""
        if self.delta == 0.0 or self._exact is None:
            return float(self.approx[i])
        v = self._known.get(i)
        if v is None:
            v = self._known[i] = self._exact([i])[0]
        return v

    def _means(self, places: list[int]) -> list[float]:
        """The exact means of many, made together."""
        if self.delta == 0.0 or self._exact is None:
            return [float(self.approx[i]) for i in places]
        known = self._known
        new = [i for i in places if i not in known]
        if new:
            known.update(zip(new, self._exact(new), strict=True))
        return [known[i] for i in places]

    def where(self, daemon_id: str) -> int | None:
        """The place of a daemon with values in the window; None if it has none."""
        if self._at is None:
            self._at = {k: i for i, k in enumerate(self.ids)}
        return self._at.get(daemon_id)

    def median(self) -> float:
        """statistics.median of the exact means. The kth smallest exact mean is within
        delta of the kth smallest approximation, so it is among the daemons whose
        approximation is near that one; those further below are only counted."""
        n = len(self.approx)
        if n == 0:
            raise ValueError("no means")
        k = n // 2
        a = self.approx
        # Only the two middle places are needed: a partition, not a sort.
        s = _numpy().partition(a, (k - 1, k) if n > 1 else k).tolist()
        if self.delta == 0.0:
            return s[k] if n % 2 else (s[k - 1] + s[k]) / 2
        low, high = (s[k] if n % 2 else s[k - 1]), s[k]
        lo, hi = low - 4.0 * self.delta, high + 4.0 * self.delta
        below = int((a < lo).sum())
        near = sorted(self._means(_numpy().flatnonzero((a >= lo) & (a <= hi)).tolist()))
        if n % 2:
            return near[k - below]
        return (near[k - 1 - below] + near[k - below]) / 2

    def above(self, x: float) -> list[int]:
        """The places, in order, of the daemons whose exact mean is above `x`."""
        if self.delta == 0.0:
            return _numpy().flatnonzero(self.approx > x).tolist()
        maybe = _numpy().flatnonzero(self.approx > x - 4.0 * self.delta).tolist()
        return [i for i, m in zip(maybe, self._means(maybe), strict=True) if m > x]


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
                c.num_up_osds is None or len(c.running_read) < c.num_up_osds:
            return None
        seen = [opt.running.get(o) for o in c.running_read]
        first = seen[0]
        if first is None or not first.wins_over_database or any(
                r is None or not r.wins_over_database or r.value != first.value
                for r in seen):
            return None
        return first

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
                         for r in differ.values()})
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


def _value(fn: Callable[[Snapshot], Any], snap: Snapshot) -> float | None:
    """What Context.values takes of one snapshot: a finite-or-infinite float, or None."""
    try:
        v = fn(snap)
    except (KeyError, AttributeError, TypeError, ZeroDivisionError):
        return None
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return float(v)


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def config_change(ctx: Context, option: str, proposed: str, who: str = "osd",
                  note: str = "") -> Change:
    opt = ctx.option(option)
    # The database's value: what `ceph config set` replaces and apply checks has not moved.
    return change("ceph_config", who, option, ctx.database(option, who), proposed,
                  runtime=opt.runtime if opt else None, note=note)


def unset_step(ctx: Context, name: str, who: str = "osd") -> str:
    """The step where the config database already gives what a rule wants and OSDs run
    another value from a layer above it: a `ceph config set` would change nothing, so
    the runtime value is dropped (`config unset`) or the ceph.conf line removed."""
    opt, db = ctx.option(name), ctx.database(name, who)
    above = sorted((o for o, r in (opt.running.items() if opt is not None else ())
                    if r.wins_over_database
                    and not same_value(r.value, ctx.database(name, o))), key=osd_number)
    told = [o for o in above if opt is not None and opt.running[o].source == "override"]
    rest = [o for o in above if o not in told]

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
    return (f"The config database already gives {name} = {db}: " + "; ".join(steps) + "."
            if steps else f"The config database already gives {name} = {db}.")


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
