"""Every daemon's window mean of one figure, made exact only where a rule asks.

The engine keeps running sums of a figure per daemon (the rows entering the window
added, those leaving it taken away) with a bound on their rounding, so a median or the
daemons past a threshold are found among a few exact means, not 10,000.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy


def _numpy() -> Any:
    """numpy, imported on first use: the running sums need it, a CLI command that never
    judges a window should not pay its import (~60 ms)."""
    import numpy

    return numpy


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

