"""The engine's columns judge exactly as walking every window does, tick by tick."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import replace

import pytest

from stormdeck.advisors.columns import Columns
from stormdeck.advisors.engine import Engine
from stormdeck.collectors.model import Snapshot
from tests.captured import lab_snapshot, with_cluster


def wander(seed: int, n: int, step: float) -> list[Snapshot]:
    """A lab snapshot whose OSDs flap, slow down, vanish and lose figures at random."""
    rnd = random.Random(seed)
    base = lab_snapshot()
    daemons = dict(base.daemons)
    # A cluster of a dozen OSDs, so that the slowest one stands against a median.
    template = daemons["osd.0"]
    for i in range(3, 12):
        daemons[f"osd.{i}"] = replace(template, id=f"osd.{i}")
    out = []
    for i in range(n):
        for key, d in list(daemons.items()):
            roll = rnd.random()
            if roll < 0.06:
                d = replace(d, up=not d.up)
            elif roll < 0.08:
                d = replace(d, up=None)
            elif roll < 0.5:
                slow = key in ("osd.1", "osd.7") and rnd.random() < 0.7
                d = replace(d, commit_latency=None if rnd.random() < 0.05 else
                            rnd.uniform(0.02, 0.2) if slow else rnd.uniform(0.001, 0.004),
                            cores_used=rnd.uniform(0.1, 1.0), cores_allowed=1.0,
                            read_iops=rnd.uniform(0, 3000), write_iops=rnd.uniform(0, 3000))
            daemons[key] = d
        shown = {k: d for k, d in daemons.items() if not (k == "osd.5" and i % 17 < 3)}
        snap = replace(base, time=base.time + i * step, daemons=shown)
        if rnd.random() < 0.2:
            active = rnd.randint(0, 60)
            snap = with_cluster(snap, num_pgs=65, pg_states={"peering": 65 - active,
                                                             "active+clean": active},
                                pg_flags={"peering": 65 - active, "active": active})
        out.append(snap)
    return out


def verdicts(findings: list) -> list[tuple]:
    return [(f.rule, f.target, f.state, int(f.severity), f.summary,
             tuple((e.metric, e.min, e.avg, e.max, e.now, e.samples) for e in f.evidence))
            for f in findings]


@pytest.mark.parametrize(("seed", "step", "keep"), [(1, 1.0, 600), (2, 5.0, 40), (3, 2.0, 7)])
def test_columns_give_the_verdicts_of_whole_windows(seed: int, step: float, keep: int) -> None:
    snaps = wander(seed, 160, step)
    fast, slow = Engine(), Engine(incremental=False)
    history: deque[Snapshot] = deque(maxlen=keep)
    fired = set()
    for snap in snaps:
        history.append(snap)
        a, b = fast.evaluate(history), slow.evaluate(list(history))
        assert verdicts(a) == verdicts(b)
        fired |= {(f.rule, f.state) for f in a}
    # The walk went through what the columns must get right.
    assert {r for r, _ in fired} >= {"ceph.osd.flapping", "ceph.osd.slowest",
                                     "ceph.peering.storm"}


def test_a_history_that_does_not_continue_starts_the_columns_over() -> None:
    one, two = wander(4, 30, 1.0), wander(5, 30, 1.0)
    fast, slow = Engine(), Engine(incremental=False)
    for snaps in (one, two, one[:10]):
        for i in range(1, len(snaps) + 1):
            assert verdicts(fast.evaluate(snaps[:i])) == verdicts(slow.evaluate(snaps[:i]))


def test_changed_is_a_superset_of_what_moved() -> None:
    snaps = wander(6, 80, 1.0)
    cols = Columns()
    for i in range(1, len(snaps) + 1):
        cols.sync(snaps[:i], 300.0)
        first = cols.first_seq(snaps[i - 1].time, 30.0)
        window = cols.snaps[first - cols.base:]
        moved = cols.changed("up", first)
        for key in snaps[i - 1].daemons:
            seen = [s.daemons[key].up for s in window if key in s.daemons]
            if len(set(seen)) > 1:
                assert key in moved


def test_columns_over_a_packing_history_judge_as_whole_windows() -> None:
    """The History packs all but its newest snapshots; the engine reads packed rows
    through their columns (a window read again when an OSD vanishes reads them)."""
    from stormdeck.collectors.hub import History

    snaps = wander(6, 120, 1.0)
    fast, slow = Engine(), Engine(incremental=False)
    packed = History(600, whole=3)
    plain: deque[Snapshot] = deque(maxlen=600)
    for snap in snaps:
        packed.append(snap)
        plain.append(replace(snap))
        assert verdicts(fast.evaluate(list(packed))) == verdicts(slow.evaluate(list(plain)))


def test_first_seq_by_bisection_is_the_walk_back() -> None:
    """The window's first snapshot: the oldest whose `now - t <= span`, as walking back
    from the newest finds it, for spans that land on, between and beyond the times."""
    def walked(times: list[float], now: float, span: float) -> int:
        lo = len(times)
        while lo > 0 and now - times[lo - 1] <= span:
            lo -= 1
        return min(lo, len(times) - 1)

    rnd = random.Random(8)
    cols = Columns()
    for _ in range(5000):
        n = rnd.randint(1, 40)
        t0 = rnd.uniform(0, 2e9)
        times = sorted(t0 + rnd.choice((i * 0.1, float(i), rnd.uniform(0, 100)))
                       for i in range(n))
        now = times[-1] + rnd.choice((0.0, 0.3, 1.0))
        span = rnd.choice((0.0, 0.1, 1.0, 30.0, 600.0, now - times[rnd.randrange(n)]))
        cols.times, cols.base = times, 7
        assert cols.first_seq(now, span) == 7 + walked(times, now, span)


def test_kept_values_are_the_window_walks() -> None:
    """Figures of each snapshot kept by the engine (Context.kept) give, tick by tick and
    for windows shorter and longer than the history, what walking the window gives."""
    from stormdeck.advisors.rules.base import Context

    snaps = wander(9, 150, 1.0)

    def inactive(s: Snapshot) -> float | None:
        return s.cluster.pgs_inactive if s.cluster else None

    cols = Columns()
    history: deque[Snapshot] = deque(maxlen=50)
    for snap in snaps:
        history.append(snap)
        cols.sync(list(history), 300.0)
        for span in (5.0, 30.0, 120.0):
            first = cols.first_seq(snap.time, span)
            window = cols.snaps[first - cols.base:]
            walk = Context(snap, window, {}).values(inactive)
            assert cols.kept("inactive", inactive, first) == walk
