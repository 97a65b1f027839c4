"""The experiment engine's statistics on synthetic series (issue 44): no planted effect
reports one in about 5% of runs at 95% confidence, also when whole windows move (as the
lab's do, run to run); a planted 20% effect under a 25% drift is found in at least 90% of
runs; a load that steps is not separable."""

from __future__ import annotations

import math
import random

import pytest

from stormdeck.advisors.experiment.stats import (
    A,
    B,
    Window,
    compare,
    compare_before_after,
    judge,
    load_moved,
    schedule,
)

SECONDS = 10  # a window's samples
ROUNDS = 4  # A/B pairs: ABBAABBA


def run(rng: random.Random, effect: float, drift: float, noise: float = 0.08,
        rho: float = 0.6, rounds: int = ROUNDS, swing: float = 0.0,
        seconds: int = SECONDS) -> list[Window]:
    """Per-second latencies over one run: a level that drifts linearly by `drift` from the
    first second to the last, B's multiplied by 1 + `effect`, AR(1) noise (each second
    leans on the one before, as queues do), and each window's level moved as a whole by a
    log-normal factor of sd `swing` (what its seconds cannot show)."""
    order = schedule(rounds)
    total = len(order) * seconds
    windows, e, t = [], 0.0, 0
    for arm in order:
        whole = math.exp(rng.gauss(0.0, swing)) if swing else 1.0
        xs = []
        for _ in range(seconds):
            e = rho * e + math.sqrt(1 - rho * rho) * rng.gauss(0.0, noise)
            level = 10.0 * (1 + drift * t / total) * (1 + effect if arm == B else 1.0)
            xs.append(level * whole * math.exp(e))
            t += 1
        windows.append(Window(arm, tuple(xs)))
    return windows


def test_the_schedule_alternates_so_a_linear_drift_cancels() -> None:
    assert schedule(4) == tuple("ABBAABBA")
    with pytest.raises(ValueError, match="even number"):
        schedule(3)
    # No noise, a 25% drift and no effect: a ratio of 1 within 0.2% (the drift is linear
    # in the figure, so its logarithm's cancels to first order only).
    windows = run(random.Random(1), effect=0.0, drift=0.25, noise=0.0)
    assert compare("latency", windows, higher_is_better=False).ratio == \
        pytest.approx(1.0, abs=0.002)


@pytest.mark.parametrize(("rounds", "swing", "seconds"),
                         [(4, 0.0, 10), (4, 0.1, 10), (8, 0.0, 10), (8, 0.1, 10), (4, 0.1, 3)])
def test_no_planted_effect_is_reported_in_about_5_percent_of_runs(rounds: int, swing: float,
                                                                  seconds: int) -> None:
    """95% is a promise about false effects: about 1 run in 20 (at most 7% of 400 runs, for
    the runs' own spread), whether or not whole windows move. Before the pairs' own spread
    counted (stop 49), 10% window swings gave 9% false effects, and 3-second windows (the
    lab tests' own) 15%, steady or not."""
    rng = random.Random(42)
    runs = 400
    false = sum(compare("latency", run(rng, effect=0.0, drift=0.25, rounds=rounds,
                                       swing=swing, seconds=seconds), False, seed=i,
                        replicates=200).verdict != "no effect" for i in range(runs))
    assert false <= 0.07 * runs, f"{false} of {runs} reported an effect that is not there"


@pytest.mark.parametrize(("rounds", "swing"), [(4, 0.0), (6, 0.05), (8, 0.05)])
def test_a_planted_20_percent_effect_under_25_percent_drift_is_found(rounds: int,
                                                                     swing: float) -> None:
    """In at least 80% of runs of 4 pairs with steady windows, and 90% of the default 6
    pairs (and of 8) with windows swinging by 5%: what a run resolves grows with its
    pairs."""
    rng = random.Random(7)
    runs = 200
    found = 0
    for i in range(runs):
        e = compare("latency", run(rng, effect=0.20, drift=0.25, rounds=rounds, swing=swing),
                    False, seed=i, replicates=200)
        found += e.verdict == "worse" and e.ci_low > 1.0
    share = 0.8 if rounds == 4 else 0.9
    assert found >= share * runs, f"found in {found} of {runs}"


def test_no_effect_says_the_smallest_effect_it_could_have_seen() -> None:
    e = compare("latency", run(random.Random(3), effect=0.0, drift=0.1), False)
    assert e.verdict == "no effect"
    assert e.ci_low < 1.0 < e.ci_high
    assert 0.0 < e.smallest_effect < 0.5


def test_a_load_that_steps_between_windows_of_one_arm_is_not_separable() -> None:
    rng = random.Random(5)
    lat = run(rng, effect=0.0, drift=0.0)
    steady = [Window(w.arm, tuple(1000.0 + rng.gauss(0, 20) for _ in w.samples)) for w in lat]
    assert load_moved(steady) is None
    # Halfway through, the clients drop to a third: a step no alternation cancels.
    stepped = [Window(w.arm, tuple(x / 3 for x in w.samples)) if i >= 4 else w
               for i, w in enumerate(steady)]
    why = load_moved(stepped)
    assert why is not None and "between windows 4 and 5" in why, why
    effect, said = judge("latency", lat, False, load=stepped)
    assert effect.verdict == "not separable" and said == why


def test_bad_input_is_one_sentence() -> None:
    short = [Window(a, (1.0, 2.0)) for a in "ABBA"]
    with pytest.raises(ValueError, match="3 samples or more"):
        compare("x", short, True)
    odd = [Window(a, (1.0, 2.0, 3.0)) for a in "ABBAA"]
    with pytest.raises(ValueError, match="whole A/B pairs"):
        compare("x", odd, True)
    with pytest.raises(ValueError, match="ABBA order"):
        compare("x", [Window(a, (1.0, 2.0, 3.0)) for a in "ABAB"], True)
    with pytest.raises(ValueError, match="not a number"):
        compare("x", [Window(a, (1.0, math.nan, 3.0)) for a in "ABBA"], True)
    with pytest.raises(ValueError, match="blocks of 1 sample"):
        compare("x", [Window(a, (1.0, 2.0, 3.0)) for a in "ABBA"], True, block=0)
    with pytest.raises(ValueError, match="A/B pairs"):
        compare("x", [Window(A, (1.0, 1.0, 1.0))] * 4, True)


def before_after(rng: random.Random, effect: float, k: int, swing: float,
                 drift: float = 0.0, seconds: int = SECONDS) -> list[Window]:
    """k windows without, then k with: `run`'s seconds, in that order instead of ABBA."""
    windows = []
    for i, arm in enumerate([A] * k + [B] * k):
        whole = math.exp(rng.gauss(0.0, swing))
        level = 10.0 * (1 + drift * i / (2 * k)) * (1 + effect if arm == B else 1.0)
        e, xs = 0.0, []
        for _ in range(seconds):
            e = 0.6 * e + 0.8 * rng.gauss(0.0, 0.08)
            xs.append(level * whole * math.exp(e))
        windows.append(Window(arm, tuple(xs)))
    return windows


@pytest.mark.parametrize(("k", "swing"), [(2, 0.1), (3, 0.05), (6, 0.1)])
def test_before_after_reports_no_planted_effect_in_about_5_percent_of_runs(
        k: int, swing: float) -> None:
    """A change that moves data is measured once: its interval must still hold 95% of
    the time when whole windows move as the lab's do (no drift: that one pair cannot
    cancel it, and the report says so)."""
    rng = random.Random(7)
    runs = 400
    false = sum(compare_before_after("latency", before_after(rng, 0.0, k, swing), False,
                                     seed=i, replicates=200).verdict != "no effect"
                for i in range(runs))
    assert false <= 0.07 * runs, f"{false} of {runs} reported an effect that is not there"


def test_before_after_finds_a_large_effect_and_says_what_it_could_see() -> None:
    rng = random.Random(3)
    found = [compare_before_after("latency", before_after(rng, 0.5, 6, 0.05), False,
                                  seed=i, replicates=200) for i in range(100)]
    assert sum(e.verdict == "worse" for e in found) >= 90
    assert all(1.2 < e.ratio < 1.9 and 0 < e.smallest_effect < 1 for e in found)


@pytest.mark.parametrize("arms", ["ABAB", "AB", "BBAA", "AAAB"])
def test_before_after_takes_only_its_own_order(arms: str) -> None:
    windows = [Window(a, (1.0, 2.0, 3.0)) for a in arms]
    with pytest.raises(ValueError, match="before/after"):
        compare_before_after("latency", windows, False)
