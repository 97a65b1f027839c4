"""Window means from running sums give exactly sum(series) / len(series) where a rule
reads them: the median, the daemons past a threshold, each mean asked for."""

from __future__ import annotations

import random
import statistics
from collections import deque
from collections.abc import Iterator
from dataclasses import replace

import pytest

from stormdeck.advisors.columns import Columns
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.means import _Sums
from stormdeck.advisors.rules import ALL
from stormdeck.collectors.model import Daemon, Snapshot
from tests.captured import lab_snapshot
from tests.unit.test_engine_columns import verdicts

# Few distinct figures, so that many daemons' means tie near the median, and decimals
# whose running sums (added, then taken away) drift from sum()'s by an ulp or so.
FIGURES = (0.001, 0.002, 0.003, 0.1, 0.2, 0.3, 0.7, 0.03)


def daemons_over_time(seed: int, n_daemons: int, n_snaps: int) -> list[Snapshot]:
    """Snapshots whose daemons mapping is shared by runs of snapshots (as a stats period
    shares one), daemons missing a figure now and then, one vanishing for a while."""
    rnd = random.Random(seed)
    base = lab_snapshot()
    template = Daemon(id="osd.0", kind="osd", up=True)
    daemons = {f"osd.{i}": replace(template, id=f"osd.{i}") for i in range(n_daemons)}
    out = []
    mapping = daemons
    for t in range(n_snaps):
        if t % rnd.choice((1, 3, 5)) == 0:
            mapping = {}
            for k, d in daemons.items():
                v = None if rnd.random() < 0.002 else rnd.choice(FIGURES)
                mapping[k] = replace(d, commit_latency=v)
            if 40 <= t < 55:
                mapping.pop("osd.7")
        out.append(replace(base, time=base.time + t, daemons=mapping))
    return out


def reference(snaps: list[Snapshot], ids: list[str], attr: str) -> dict[str, float]:
    out = {}
    for k in ids:
        vals = [float(v) for s in snaps if k in s.daemons
                and (v := getattr(s.daemons[k], attr)) is not None]
        if vals:
            out[k] = sum(vals) / len(vals)
    return out


def ticks(seed: int, span: float) -> Iterator[tuple[Columns, int, list[Snapshot], list[str]]]:
    """Each tick of a History of 150 over daemons_over_time: the engine's columns synced
    to it, the window's first sequence number, its snapshots, the newest's daemons."""
    snaps = daemons_over_time(seed, 300, 220)
    cols = Columns()
    for i in range(1, len(snaps) + 1):
        history = snaps[max(0, i - 150):i]
        cols.sync(history, span)
        first = cols.first_seq(history[-1].time, span)
        yield cols, first, list(cols.snaps[first - cols.base:]), list(history[-1].daemons)


def compare(seed: int, span: float) -> int:
    """Judge every tick's Means against the walk; the ticks whose running sums were
    not exact (so that the bound was what kept the answers right)."""
    inexact = 0
    for i, (cols, first, window, ids) in enumerate(ticks(seed, span), 1):
        means = cols.window_means(ids, "commit_latency", first)
        want = reference(window, ids, "commit_latency")
        assert means.ids == list(want)
        if any(a != w for a, w in zip(means.approx, want.values(), strict=True)):
            inexact += 1
        assert means.median() == statistics.median(want.values())
        for x in [*sorted(set(want.values()))[::3], means.median() * 1.5]:
            assert [means.ids[j] for j in means.above(x)] == [k for k, v in want.items()
                                                              if v > x]
        for j in random.Random(i).sample(range(len(means)), 20):
            assert means.mean(j) == want[means.ids[j]]
    return inexact


@pytest.mark.parametrize(("seed", "span"), [(1, 60.0), (2, 17.0)])
def test_window_means_are_exact_where_read(seed: int, span: float) -> None:
    assert compare(seed, span) > 0  # the running sums did drift: the bound was tested


def test_running_sums_taken_as_exact_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above fails when the running sums are trusted as they are."""
    monkeypatch.setattr(_Sums, "delta", lambda self: 1e-300)
    with pytest.raises(AssertionError):
        compare(1, 60.0)


def test_slowest_osd_of_hundreds_judges_as_the_walk() -> None:
    """The rule over 300 OSDs whose means tie at the median; a few OSDs slow down."""
    snaps = daemons_over_time(3, 300, 160)
    rnd = random.Random(4)
    slowed = []
    for t, snap in enumerate(snaps):
        daemons = dict(snap.daemons)
        for k in ("osd.11", "osd.12") if 20 <= t < 110 else ():
            daemons[k] = replace(daemons[k], commit_latency=rnd.choice((2.0, 3.0)))
        slowed.append(replace(snap, daemons=daemons))
    rules = [r for r in ALL if r.id == "ceph.osd.slowest"]
    fast, slow = Engine(rules=rules), Engine(rules=rules, incremental=False)
    history: deque[Snapshot] = deque(maxlen=120)
    fired = set()
    for snap in slowed:
        history.append(snap)
        a, b = fast.evaluate(history), slow.evaluate(list(history))
        assert not fast.errors, fast.errors
        assert verdicts(a) == verdicts(b)
        fired |= {(f.target, f.state) for f in a}
    assert ("osd.11", "firing") in fired


@pytest.mark.parametrize(("seed", "span"), [(3, 60.0), (4, 17.0)])
def test_column_means_are_sum_over_each_series_bit_for_bit(seed: int, span: float) -> None:
    """`Columns.means` (every daemon's mean by rows of arrays, as the CPU rules read
    them in fleet mode) against sum(series) / len(series) over each daemon's own
    window: daemons missing a figure, one vanishing for a while, every tick, all of
    them and a few."""
    for cols, first, window, ids in ticks(seed, span):
        got = cols.means(ids, "commit_latency", first)
        want = reference(window, ids, "commit_latency")
        assert list(got) == list(want)
        assert all(got[k] == want[k] for k in want)  # == on floats: the same bits here
        some = ids[::7]
        assert cols.means(some, "commit_latency", first) == reference(window, some,
                                                                      "commit_latency")
