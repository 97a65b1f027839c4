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
    # (the counters' differences, the seconds, the OSD processes' CPU seconds or None)
    value: Callable[[OsdCounters, float, float | None], float | None]
    scale: float = 1.0  # shown as value * scale in `unit`


Value = Callable[[OsdCounters, float, float | None], float | None]


def _rate(pick: Callable[[OsdCounters], float]) -> Value:
    return lambda d, dt, _cpu: pick(d) / dt


def _mean(total: Callable[[OsdCounters], float], count: Callable[[OsdCounters], float]
          ) -> Value:
    # A second with no op of the kind has no latency (not a latency of zero).
    return lambda d, _dt, _cpu: total(d) / count(d) if count(d) > 0 else None


def _ops(d: OsdCounters) -> float:
    return d.op_r + d.op_w + d.op_rw


def _cpu_per_op(d: OsdCounters, _dt: float, cpu: float | None) -> float | None:
    return cpu / _ops(d) if cpu is not None and _ops(d) > 0 else None


# The CPU the OSD processes spent per client op, when every OSD read runs on this host:
# a change can keep latency and IOPS and still cost cores (debug logging does).
CPU_PER_OP = Figure("CPU per op", "µs", False, _cpu_per_op, 1e6)


FIGURES: tuple[Figure, ...] = (
    Figure("write latency", "ms", False, _mean(lambda d: d.w_sum, lambda d: d.w_count), 1e3),
    Figure("read latency", "ms", False, _mean(lambda d: d.r_sum, lambda d: d.r_count), 1e3),
    Figure("write IOPS", "op/s", True, _rate(lambda d: d.op_w)),
    Figure("read IOPS", "op/s", True, _rate(lambda d: d.op_r)),
    Figure("client bytes", "MB/s", True, _rate(lambda d: d.in_bytes + d.out_bytes), 1e-6),
    CPU_PER_OP,
)
BY_NAME = {f.name: f for f in FIGURES}
# The offered load: every client op the OSDs served, of any kind. A closed-loop client
# (a fixed number of ops in flight) serves fewer when latency rises, so this moves with
# the change too; it is compared only between windows of the same arm (stats.load_moved).
LOAD = Figure("client ops", "op/s", True, _rate(_ops))

# The load's mix, which a change of the OSDs' settings does not move: the client's sizes
# and its share of writes. A step in either is another workload (rados bench's cleanup
# deletes are writes of no bytes), compared over every window (stats.mix_moved).
MIX: tuple[Figure, ...] = (
    Figure("bytes per op", "B", True,
           lambda d, _dt, _c: (d.in_bytes + d.out_bytes) / _ops(d) if _ops(d) > 0 else None),
    Figure("write share", "", True,
           lambda d, _dt, _c: (d.op_w + d.op_rw) / _ops(d) if _ops(d) > 0 else None),
)


def summed(before: Sample, after: Sample) -> tuple[OsdCounters, float, float | None] | None:
    """The counters' differences over the OSDs read at both ends, the seconds between, and
    the CPU seconds their processes spent (None unless known for each of them at both
    ends); None when no OSD was read at both, or one restarted (its counters went back)."""
    dt = after.time - before.time
    both = [o for o in after.osds if o in before.osds]
    if dt <= 0 or not both:
        return None
    diffs = [after.osds[o].minus(before.osds[o]) for o in both]
    if any(d is None for d in diffs):
        return None
    total = [sum(vals) for vals in zip(*(d.values() for d in diffs if d), strict=True)]
    cpu: float | None = None
    if all(o in before.cpu and o in after.cpu for o in both):
        cpu = sum(after.cpu[o] - before.cpu[o] for o in both)
        if cpu < 0:  # a process replaced between the reads
            cpu = None
    return OsdCounters(*total), dt, cpu


def seconds_of(samples: list[Sample], figures: tuple[Figure, ...]
               ) -> dict[str, list[float]]:
    """Each figure's value for every interval between consecutive reads of a window; an
    interval without a value (no op of that kind, a restart) is left out."""
    out: dict[str, list[float]] = {f.name: [] for f in figures}
    for a, b in itertools.pairwise(samples):
        got = summed(a, b)
        if got is None:
            continue
        d, dt, cpu = got
        for f in figures:
            v = f.value(d, dt, cpu)
            if v is not None:
                out[f.name].append(v)
    return out


def shown(f: Figure, value: float) -> str:
    v = value * f.scale
    return f"{v:.2f} {f.unit}" if abs(v) < 100 else f"{v:,.0f} {f.unit}"
