"""Did a change move a figure? Alternated windows compared with a block bootstrap: a ratio,
its interval, and a verdict that says when the run could not tell."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

A, B = "A", "B"  # without the change, with it


def schedule(rounds: int) -> tuple[str, ...]:
    """The order of the windows: ABBA repeated (`rounds` pairs, an even number). A drift
    that is linear over the run then weighs on A and B alike: each AB pair's bias is met by
    the BA pair's opposite one, as careful benchmarks alternate their runs."""
    if rounds < 2 or rounds % 2:
        raise ValueError(f"rounds is an even number of A/B pairs, 2 or more, not {rounds}")
    return tuple("ABBA" * (rounds // 2))


@dataclass(frozen=True, slots=True)
class Window:
    """One window's per-second samples of a figure, measured with (B) or without (A) it."""

    arm: str
    samples: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Effect:
    """What the change did to one figure: B's level over A's, with its 95% interval."""

    figure: str
    before: float  # A's mean over its windows
    after: float  # B's
    ratio: float  # the pairs' geometric mean of B/A: drift cancels over ABBA
    ci_low: float
    ci_high: float
    verdict: str  # "better", "worse", "no effect", "not separable"
    smallest_effect: float  # the least change (as a fraction) this run could have seen
    higher_is_better: bool

    def as_dict(self) -> dict[str, object]:
        return {"figure": self.figure, "before": self.before, "after": self.after,
                "ratio": self.ratio, "ci_low": self.ci_low, "ci_high": self.ci_high,
                "verdict": self.verdict, "smallest_effect": self.smallest_effect}


# Seconds of samples resampled together: a second's figure is correlated with the next
# (queues drain over several), so single seconds resampled alone would narrow the interval.
BLOCK = 3
REPLICATES = 2000
# Student's t at 97.5% for 0..30 degrees of freedom (index = df; 0 unused), the last for
# more: a 95% two-sided interval.
T975 = (math.inf, 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
        2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074,
        2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def _pairs(windows: Sequence[Window]) -> list[tuple[Window, Window, bool]]:
    """Adjacent (A, B) windows in run order, and whether the pair ran A first."""
    out = []
    for i in range(0, len(windows) - 1, 2):
        w1, w2 = windows[i], windows[i + 1]
        if {w1.arm, w2.arm} != {A, B}:
            raise ValueError("windows must come in A/B pairs (see schedule)")
        a, b = (w1, w2) if w1.arm == A else (w2, w1)
        out.append((a, b, w1.arm == A))
    return out


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _resampled_means(xs: Sequence[float], rng: np.random.Generator, block: int,
                     replicates: int) -> np.ndarray:
    """The means of `replicates` circular block bootstrap samples of `xs`, each as long
    as `xs`: blocks of `block` seconds from random starts, wrapping at the end, the last
    cut short. In numpy: the console runs the judging in its worker, and a pure-Python
    loop over 2,000 replicates of every window cost it most of a second (profiled)."""
    x = np.asarray(xs, dtype=float)
    n = len(x)
    if n <= block:
        return np.full(replicates, x.mean())
    k = -(-n // block)
    starts = rng.integers(0, n, size=(replicates, k, 1))
    idx = ((starts + np.arange(block)) % n).reshape(replicates, k * block)[:, :n]
    return x[idx].mean(axis=1)  # type: ignore[no-any-return]


def _log_ratio(a: float, b: float) -> float:
    if a <= 0 or b <= 0:
        raise ValueError("a figure's window mean must be positive to be compared as a ratio")
    return math.log(b / a)


def _bootstrap_variance(before: Sequence[Window], after: Sequence[Window],
                        rng: np.random.Generator, block: int, replicates: int,
                        figure: str) -> float:
    """The variance of (mean log level of `after`) - (mean log level of `before`) that the
    seconds inside the windows account for: each window's seconds resampled in blocks
    (they are correlated), the windows kept. A replicate in which a window's resample is
    all idle seconds has no ratio and is left out; too many such, and there is none."""
    def logs(ws: Sequence[Window]) -> tuple[np.ndarray, np.ndarray]:
        means = np.stack([_resampled_means(w.samples, rng,
                                           min(block, max(1, len(w.samples) // 2)),
                                           replicates) for w in ws])
        ok = (means > 0).all(axis=0)
        return np.log(np.where(means > 0, means, 1.0)).mean(axis=0), ok

    la, ok_a = logs(before)
    lb, ok_b = logs(after)
    ok = ok_a & ok_b
    if ok.sum() < max(2, replicates // 2):
        raise ValueError(f"{figure} is zero in too many seconds to compare as a ratio")
    return float(np.var((lb - la)[ok], ddof=1))


def _between_variance(ab: Sequence[float], ba: Sequence[float]) -> float:
    """The variance of the mean log ratio from how the pairs of one order differ among
    themselves (pooled over AB and BA, so a linear drift, which sets the two orders apart,
    adds nothing): every cause of a window's level, its seconds and the window as a
    whole. Pairs - 2 degrees of freedom."""
    ss = sum((x - _mean(ab)) ** 2 for x in ab) + sum((x - _mean(ba)) ** 2 for x in ba)
    n = len(ab) + len(ba)
    return ss / (n - 2) / n


def compare(figure: str, windows: Sequence[Window], higher_is_better: bool,
            seed: int = 0, block: int = BLOCK, replicates: int = REPLICATES) -> Effect:
    """The change's effect on `figure` from windows in the order `schedule` gives.

    The estimate is the mean over pairs of log(B/A), each pair's windows adjacent in time.
    Its standard error is the larger of two: how pairs of the same order (AB among AB, BA
    among BA) differ, which sees everything that moves a window's level, and a block
    bootstrap of the seconds inside each window, which sees only their noise but needs no
    pairs to compare. The interval takes Student's t with pairs - 2 degrees of freedom
    (two orders' means are estimated), 1 with only one pair of each order."""
    if len(windows) < 4 or len(windows) % 2 or any(len(w.samples) < 3 for w in windows):
        raise ValueError("a comparison needs whole A/B pairs, 2 or more, of windows of 3 "
                         "samples or more")
    if any(not math.isfinite(x) for w in windows for x in w.samples):
        raise ValueError(f"{figure} has a sample that is not a number")
    if block < 1 or replicates < 2:
        raise ValueError("a bootstrap needs blocks of 1 sample or more and 2 replicates "
                         "or more")
    pairs = _pairs(windows)
    logs = [_log_ratio(_mean(a.samples), _mean(b.samples)) for a, b, _ in pairs]
    est = _mean(logs)
    ab = [x for x, p in zip(logs, pairs, strict=True) if p[2]]
    ba = [x for x, p in zip(logs, pairs, strict=True) if not p[2]]
    if len(ab) != len(ba):
        # Without as many BA pairs as AB, a drift is not cancelled (see schedule).
        raise ValueError("the windows must run in ABBA order: as many BA pairs as AB")
    # With pairs in order, the mean of the pairs' log ratios is that of B's minus A's.
    var = _bootstrap_variance([a for a, _b, _f in pairs], [b for _a, b, _f in pairs],
                              np.random.default_rng(seed), block, replicates, figure)
    df = 1
    if len(pairs) >= 4:
        # Run to run, a window's level moves more than its seconds do (up to 29% on the
        # lab): the seconds alone gave a 10% "better" to a change nothing read (stop 49).
        var = max(var, _between_variance(ab, ba))
        df = len(pairs) - 2
    half = T975[min(df, len(T975) - 1)] * math.sqrt(var)
    lo, hi = math.exp(est - half), math.exp(est + half)
    ratio = math.exp(est)
    if lo > 1.0 or hi < 1.0:
        up = lo > 1.0
        verdict = "better" if up == higher_is_better else "worse"
    else:
        verdict = "no effect"
    # The interval's half-width around the estimate, as a fraction: a change this large
    # would have put the interval clear of 1 about half the time (twice it, nearly
    # always).
    smallest = max(hi / ratio - 1.0, 1.0 - lo / ratio)
    before = _mean([x for w in windows if w.arm == A for x in w.samples])
    after = _mean([x for w in windows if w.arm == B for x in w.samples])
    return Effect(figure, before, after, ratio, lo, hi, verdict, smallest, higher_is_better)


def compare_before_after(figure: str, windows: Sequence[Window], higher_is_better: bool,
                         seed: int = 0, block: int = BLOCK,
                         replicates: int = REPLICATES) -> Effect:
    """The effect on `figure` of a change that could not be alternated (it moves data or
    takes a restart): windows all A, then all B (AA..BB..), at least two of each.

    The estimate is the mean log level of the B windows over that of the A windows. Its
    standard error is the larger of the seconds' block bootstrap and how windows of one
    arm differ among themselves, pooled over both arms (2k - 2 degrees of freedom): what
    a window's level does next to another of the same setting. A drift over the time the
    change took to settle is not cancelled, as ABBA cancels it; the result says so."""
    arms = [w.arm for w in windows]
    k = arms.count(A)
    if k < 2 or arms != [A] * k + [B] * k or any(len(w.samples) < 3 for w in windows):
        raise ValueError("a before/after comparison needs as many B windows as A, 2 or "
                         "more of each, A first, each of 3 samples or more")
    if any(not math.isfinite(x) for w in windows for x in w.samples):
        raise ValueError(f"{figure} has a sample that is not a number")
    means = [_mean(w.samples) for w in windows]
    if min(means) <= 0:
        raise ValueError("a figure's window mean must be positive to be compared as a ratio")
    la, lb = [math.log(m) for m in means[:k]], [math.log(m) for m in means[k:]]
    est = _mean(lb) - _mean(la)
    ss = sum((x - _mean(la)) ** 2 for x in la) + sum((x - _mean(lb)) ** 2 for x in lb)
    df = 2 * k - 2
    between = ss / df * (2 / k)
    within = _bootstrap_variance(windows[:k], windows[k:], np.random.default_rng(seed),
                                 block, replicates, figure)
    half = T975[min(df, len(T975) - 1)] * math.sqrt(max(between, within))
    lo, hi, ratio = math.exp(est - half), math.exp(est + half), math.exp(est)
    if lo > 1.0 or hi < 1.0:
        verdict = "better" if (lo > 1.0) == higher_is_better else "worse"
    else:
        verdict = "no effect"
    smallest = max(hi / ratio - 1.0, 1.0 - lo / ratio)
    before = _mean([x for w in windows[:k] for x in w.samples])
    after = _mean([x for w in windows[k:] for x in w.samples])
    return Effect(figure, before, after, ratio, lo, hi, verdict, smallest, higher_is_better)


# A step between two windows of the same arm that ran next to each other (BB, AA in
# ABBAABBA) larger than this share: the offered load moved in a way the alternation cannot
# cancel (a client started or stopped), not a drift.
MAX_LOAD_STEP = 0.35


def load_moved(load: Sequence[Window], max_step: float = MAX_LOAD_STEP) -> str | None:
    """Why the offered load makes the run not separable, or None: the load figure (client
    ops per second, or what the operator names) compared between adjacent windows of the
    same arm, where the change cannot be the cause."""
    if any(not w.samples for w in load):
        raise ValueError("a load window has no samples")
    worst: tuple[float, int] | None = None
    for i in range(len(load) - 1):
        w1, w2 = load[i], load[i + 1]
        if w1.arm != w2.arm:
            continue
        m1, m2 = _mean(w1.samples), _mean(w2.samples)
        if m1 <= 0 and m2 <= 0:
            continue
        step = abs(m2 - m1) / max(m1, m2)
        if worst is None or step > worst[0]:
            worst = (step, i)
    if worst is None or worst[0] <= max_step:
        return None
    step, i = worst
    return (f"the load moved by {step:.0%} between windows {i + 1} and {i + 2}, both "
            f"{'with' if load[i].arm == B else 'without'} the change: not separable")


def mix_moved(figure: str, windows: Sequence[Window], max_step: float = MAX_LOAD_STEP
              ) -> str | None:
    """Why the mix of the offered load makes the run not separable, or None: a figure of
    the load's kind (bytes per op, the share of writes) compared among the windows of
    each arm, the first and the last included (load_moved sees only neighbours of one
    arm, and those two have none). Within an arm the change cannot move it; across arms
    it may (a change that slows writes shifts a closed-loop client's share of them)."""
    worst: tuple[float, int, int] | None = None
    for arm in (A, B):
        means = [(_mean(w.samples) if w.samples else 0.0, k)
                 for k, w in enumerate(windows) if w.arm == arm]
        if len(means) < 2:
            continue
        (low, i), (top, j) = min(means), max(means)
        if top <= 0:
            continue
        step = (top - low) / top
        if worst is None or step > worst[0]:
            worst = (step, i, j)
    if worst is None or worst[0] <= max_step:
        return None
    step, i, j = worst
    lo, hi = _mean(windows[i].samples) if windows[i].samples else 0.0, \
        _mean(windows[j].samples)
    return (f"the mix of the load moved: {figure} was {lo:.3g} in window {i + 1} and "
            f"{hi:.3g} in window {j + 1}, both {'with' if windows[i].arm == B else 'without'}"
            " the change: not separable")


def judge(figure: str, windows: Sequence[Window], higher_is_better: bool,
          load: Sequence[Window] | None = None, seed: int = 0) -> tuple[Effect, str | None]:
    """`compare`, with the verdict "not separable" where the offered load moved (and why)."""
    effect = compare(figure, windows, higher_is_better, seed=seed)
    why = load_moved(load) if load is not None else None
    if why is not None:
        effect = Effect(effect.figure, effect.before, effect.after, effect.ratio,
                        effect.ci_low, effect.ci_high, "not separable",
                        effect.smallest_effect, higher_is_better)
    return effect, why
