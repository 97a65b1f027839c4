"""The figures an experiment compares, each second's value from two reads of the counters."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

from stormdeck.advisors.experiment.counters import OsdCounters, Sample


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure: how a second's value comes from the summed counter differences."""

    name: str
    unit: str
    higher_is_better: bool
    value: Callable[[OsdCounters, float], float | None]  # (differences, seconds) -> value
    scale: float = 1.0  # shown as value * scale in `unit`


def _rate(pick: Callable[[OsdCounters], float]) -> Callable[[OsdCounters, float], float]:
    return lambda d, dt: pick(d) / dt


def _mean(total: Callable[[OsdCounters], float], count: Callable[[OsdCounters], float]
          ) -> Callable[[OsdCounters, float], float | None]:
    # A second with no op of the kind has no latency (not a latency of zero).
    return lambda d, _dt: total(d) / count(d) if count(d) > 0 else None


FIGURES: tuple[Figure, ...] = (
    Figure("write latency", "ms", False, _mean(lambda d: d.w_sum, lambda d: d.w_count), 1e3),
    Figure("read latency", "ms", False, _mean(lambda d: d.r_sum, lambda d: d.r_count), 1e3),
    Figure("write IOPS", "op/s", True, _rate(lambda d: d.op_w)),
    Figure("read IOPS", "op/s", True, _rate(lambda d: d.op_r)),
    Figure("client bytes", "MB/s", True, _rate(lambda d: d.in_bytes + d.out_bytes), 1e-6),
)
BY_NAME = {f.name: f for f in FIGURES}
# The offered load: every client op the OSDs served, of any kind. A closed-loop client
# (a fixed number of ops in flight) serves fewer when latency rises, so this moves with
# the change too; it is compared only between windows of the same arm (stats.load_moved).
LOAD = Figure("client ops", "op/s", True, _rate(lambda d: d.op_r + d.op_w + d.op_rw))


def _ops(d: OsdCounters) -> float:
    return d.op_r + d.op_w + d.op_rw


# The load's mix, which a change of the OSDs' settings does not move: the client's sizes
# and its share of writes. A step in either is another workload (rados bench's cleanup
# deletes are writes of no bytes), compared over every window (stats.mix_moved).
MIX: tuple[Figure, ...] = (
    Figure("bytes per op", "B", True,
           lambda d, _dt: (d.in_bytes + d.out_bytes) / _ops(d) if _ops(d) > 0 else None),
    Figure("write share", "", True,
           lambda d, _dt: (d.op_w + d.op_rw) / _ops(d) if _ops(d) > 0 else None),
)


def summed(before: Sample, after: Sample) -> tuple[OsdCounters, float] | None:
    """The counters' differences over the OSDs read at both ends, and the seconds between;
    None when none was, or one restarted (its counters went back)."""
    dt = after.time - before.time
    both = [o for o in after.osds if o in before.osds]
    if dt <= 0 or not both:
        return None
    diffs = [after.osds[o].minus(before.osds[o]) for o in both]
    if any(d is None for d in diffs):
        return None
    total = [sum(vals) for vals in zip(*(d.values() for d in diffs if d), strict=True)]
    return OsdCounters(*total), dt


def seconds_of(samples: list[Sample], figures: tuple[Figure, ...]
               ) -> dict[str, list[float]]:
    """Each figure's value for every interval between consecutive reads of a window; an
    interval without a value (no op of that kind, a restart) is left out."""
    out: dict[str, list[float]] = {f.name: [] for f in figures}
    for a, b in itertools.pairwise(samples):
        got = summed(a, b)
        if got is None:
            continue
        d, dt = got
        for f in figures:
            v = f.value(d, dt)
            if v is not None:
                out[f.name].append(v)
    return out


def shown(f: Figure, value: float) -> str:
    v = value * f.scale
    return f"{v:.2f} {f.unit}" if abs(v) < 100 else f"{v:,.0f} {f.unit}"
