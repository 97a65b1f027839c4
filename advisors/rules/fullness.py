"""Fullness: OSDs against the monitors' ratios, pools' fill and their linear growth forecast."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.collectors.model import Cluster, Snapshot

DAY = 86400.0
# Ceph's defaults (mon_osd_nearfull_ratio, mon_osd_backfillfull_ratio, mon_osd_full_ratio),
# for a cluster whose `osd dump` was not read.
DEFAULT_RATIOS = (0.85, 0.90, 0.95)


def ratios(c: Cluster | None) -> tuple[float, float, float]:
    """(nearfull, backfillfull, full) as the monitors hold them, else Ceph's defaults."""
    if c is None:
        return DEFAULT_RATIOS
    return (c.nearfull_ratio if c.nearfull_ratio is not None else DEFAULT_RATIOS[0],
            c.backfillfull_ratio if c.backfillfull_ratio is not None else DEFAULT_RATIOS[1],
            c.full_ratio if c.full_ratio is not None else DEFAULT_RATIOS[2])


def slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Least-squares slope of (time, value) points, per second: Prometheus' predict_linear
    fits the same line (ceph-mixin's CephPoolGrowthWarning)."""
    n = len(points)
    if n < 2:
        return None
    mt = sum(p[0] for p in points) / n
    mv = sum(p[1] for p in points) / n
    var = sum((p[0] - mt) ** 2 for p in points)
    if var == 0:
        return None
    return sum((p[0] - mt) * (p[1] - mv) for p in points) / var


def all_pool_points(history: Iterable[Snapshot]) -> dict[str, list[tuple[float, float]]]:
    """Every pool's used ratio over the snapshots: one point where a snapshot's pools
    are new (the source keeps the same tuple until `df` or the osdmap moves), so an
    hour of History costs one pass and no point is counted twice."""
    out: dict[str, list[tuple[float, float]]] = {}
    last = None
    for s in history:
        c = s.cluster
        if c is None or c.pools is last:
            continue
        last = c.pools
        for p in c.pools:
            if p.used_ratio is not None:
                out.setdefault(p.name, []).append((s.time, p.used_ratio))
    return out


def pool_points(history: Iterable[Snapshot], name: str) -> list[tuple[float, float]]:
    """One pool's used ratio over the snapshots (all_pool_points)."""
    return all_pool_points(history).get(name, [])


def days_to_full(points: Sequence[tuple[float, float]], min_span: float) -> float | None:
    """Days until the pool's used ratio reaches 1 at the rate the points grew; None when
    they span less than `min_span` seconds or do not grow."""
    if len(points) < 2 or points[-1][0] - points[0][0] < min_span:
        return None
    k = slope(points)
    if k is None or k <= 0:
        return None
    return max(0.0, (1.0 - points[-1][1]) / k / DAY)


class OsdFullness(Rule):
    id = "ceph.osd.fullness"
    title = "OSD past the nearfull, backfillfull or full ratio"
    source = "ceph-mixin-alerts, ok-to-stop-blast-radius"
    explanation = (
        "The monitors judge each OSD's use against three ratios (`ceph osd dump`: "
        "nearfull_ratio 0.85, backfillfull_ratio 0.90, full_ratio 0.95 by default). "
        "Nearfull is a warning; past backfillfull no PG backfills into the OSD, so recovery "
        "stalls (backfill_toofull) and redundancy stays reduced; past full the cluster "
        "stops writes to every PG on it (ceph-mixin's CephOSDNearFull, BackfillFull, "
        "Full; BACKFILLFULL also counts backfills in flight). The OSD is "
        "judged by `osd df`'s %use, as the monitors judge it. Raising the ratios buys "
        "hours, not space: only as a short emergency step, and back after.")

    def __init__(self) -> None:
        # The OSDs past nearfull, by the utilization column and ratio they were found at.
        self._hot: tuple[list[Any], float, list[int]] | None = None

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        near, backfill, full = ratios(c)
        # Read as a column, and only the OSDs past nearfull or tracked looked at: a check
        # per OSD (10,000 a tick) changes nothing for the others.
        ids, (used,) = ctx.osd_columns("utilization")
        if ctx.columns is not None:
            # The column is the same list for a stats period: those past nearfull are
            # found again only when it (or the ratio) is new; the tracked by their place.
            hot = self._hot
            if hot is None or hot[0] is not used or hot[1] != near:
                hot = self._hot = (used, near, [i for i, u in enumerate(used)
                                                if u is not None and u >= near])
            walk: Iterable[int] = ctx.and_tracked(ids, hot[2])
        else:
            walk = range(len(ids))
        for i in walk:
            osd_id, u = ids[i], used[i]
            if u is None:
                continue
            fire = u >= near
            if not ctx.matters(osd_id, fire):
                continue
            if u >= full:
                sev, past = Severity.CRITICAL, f"full ratio {full:.0%}: writes stop"
            elif u >= backfill:
                sev, past = Severity.WARNING, (f"backfillfull ratio {backfill:.0%}: no "
                                               "backfill into it, recovery stalls")
            else:
                sev, past = Severity.WARNING, f"nearfull ratio {near:.0%}"
            yield Check(
                target=osd_id, fire=fire, clear=u < near - float(ctx.p("hysteresis")),
                severity=sev,
                summary=f"{osd_id} {u:.1%} used, past the {past}"
                        + (f" (next: backfillfull {backfill:.0%})" if u < backfill else
                           f" (next: full {full:.0%})" if u < full else ""),
                evidence=(ctx.evidence("used", ctx.daemon_values(osd_id, "utilization"),
                                       "ratio"),
                          ctx.evidence("ratios near/backfill/full", [],
                                       now=f"{near:.2f}/{backfill:.2f}/{full:.2f}")),
                procedure=(
                    "`ceph osd df tree`: is it one OSD (uneven placement) or all (the "
                    "cluster is full)?",
                    "Uneven: `ceph balancer status` (upmap mode evens PGs out); "
                    "`ceph osd test-reweight-by-utilization` shows what "
                    "`reweight-by-utilization` would move before it moves it.",
                    "All full: add OSDs, or delete data and snapshots (deleting frees space "
                    "only as the PGs trim).",
                    f"Only as a short emergency, to let deletes through: `ceph osd "
                    f"set-full-ratio {min(full + 0.02, 0.97):.2f}`, and back to {full:.2f} "
                    "after; never past osd_failsafe_full_ratio (0.97), where the OSD "
                    "refuses writes itself."),
                badness=u)


class PoolFullness(Rule):
    id = "ceph.pool.fullness"
    title = "Pool filling up: full now or within days at its growth"
    source = "ceph-mixin-alerts"
    explanation = (
        "A pool's %used (`ceph df`) is what it stores against what it may still hold "
        "before its fullest OSD reaches the full ratio (max_avail). ceph-mixin's "
        "CephPoolGrowthWarning fits a line to a pool's %used and warns when it would pass "
        "95% within 5 days (predict_linear); this fits the same line to what "
        "stormdeck's history holds, which is minutes to hours, not Prometheus' days: a "
        "burst of writes reads as growth, so the figure is a first warning to check "
        "against the pool's long-term trend, not a date. At 95% and more it is a "
        "warning now: the next OSD past the full ratio stops writes.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        horizon = float(ctx.p("horizon_days"))
        limit = float(ctx.p("forecast_used"))
        min_span = float(ctx.p("min_span_seconds"))
        every = all_pool_points(ctx.window)
        for p in c.pools:
            if p.used_ratio is None:
                continue
            points = every.get(p.name, [])
            k = slope(points) if points and points[-1][0] - points[0][0] >= min_span \
                else None
            forecast = p.used_ratio + k * horizon * DAY if k is not None and k > 0 else \
                p.used_ratio
            days = days_to_full(points, min_span)
            now_full = p.used_ratio >= limit
            fire = now_full or forecast >= limit
            target = f"pool {p.name}"
            if not ctx.matters(target, fire):
                continue
            when = (f"; at its growth over the last {ctx.span / 60:.0f} min it reaches "
                    f"{limit:.0%} in {horizon:g} days or less"
                    + (f" (full in {days:.1f} days)" if days is not None else "")
                    if not now_full else "")
            yield Check(
                target=target, fire=fire, clear=not fire, severity=Severity.WARNING,
                summary=f"pool {p.name} {p.used_ratio:.1%} used" + when,
                evidence=(ctx.evidence("used", [v for _, v in points] or [p.used_ratio],
                                       "ratio"),
                          ctx.evidence(f"forecast in {horizon:g} days", [], now=forecast,
                                       unit="ratio")),
                procedure=(
                    "`ceph df detail`: STORED, %USED and MAX AVAIL per pool; MAX AVAIL "
                    "shrinks with the fullest OSD under the pool's CRUSH rule, so an uneven "
                    "OSD (`ceph osd df`) fills a pool early.",
                    "Check the trend over days (ceph-mixin's CephPoolGrowthWarning in "
                    "Prometheus) before acting on a forecast from minutes.",
                    "Add capacity, move or delete data, or set a quota "
                    "(`ceph osd pool set-quota POOL max_bytes N`) so one tenant cannot fill "
                    "the OSDs every pool shares."),
                badness=forecast)


RULES = (OsdFullness, PoolFullness)
