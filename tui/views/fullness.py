"""The fullness view: Ceph's health checks with their detail, each OSD's use as a bar against
the monitors' ratios, and each pool's fill with its days to full at its growth; sortable."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from stormdeck.advisors.rules.fullness import DAY, days_to_full, pool_points, ratios, slope
from stormdeck.collectors.model import Cluster, Daemon, Pool, Snapshot
from stormdeck.tui.feed import Frame
from stormdeck.tui.format import inert, num, pct, rate
from stormdeck.tui.table import Cells, Column, VirtualTable
from stormdeck.tui.views.base import View

BAR = 30  # cells for 0..100%
CHECK_DETAIL = 5  # detail lines shown per health check (`ceph health detail` has them all)


def level(u: float | None, c: Cluster | None) -> tuple[str, str]:
    """The ratio a use is past, and its style: ("", "") below nearfull."""
    if u is None:
        return "", ""
    near, backfill, full = ratios(c)
    if u >= full:
        return "full", "bold red"
    if u >= backfill:
        return "backfillfull", "red"
    if u >= near:
        return "nearfull", "yellow"
    return "", ""


def ratio_bar(u: float | None, c: Cluster | None, width: int = BAR,
              ascii_only: bool = False, marks: bool = True) -> Text:
    """Use as a bar, the nearfull, backfillfull and full ratios marked on it (n, b, f);
    without marks for a pool, whose %used already counts to its fullest OSD's full ratio."""
    if u is None:
        return Text("-")
    at = {min(width - 1, int(r * width)): m for r, m in zip(ratios(c), "nbf", strict=True)} \
        if marks else {}
    filled = min(width, round(u * width))
    full_char, empty = ("#", ".") if ascii_only else ("█", "░")
    style = (level(u, c)[1] if marks else "yellow" if u >= 0.85 else "") or "green"
    out = Text()
    for i in range(width):
        if i in at and i >= filled:
            out.append(at[i], style="bold")
        elif i < filled:
            out.append(full_char, style=style)
        else:
            out.append(empty, style="dim")
    return out


def health_lines(c: Cluster | None) -> Text:
    """Ceph's status, its ratios, and every check with its first detail lines (muted marked)."""
    out = Text()
    if c is None:
        return Text("no Ceph cluster in this session", style="dim")
    near, backfill, full = ratios(c)
    known = c.full_ratio is not None
    out.append(f"{c.health or 'health unknown'}", style="bold")
    out.append(f"   ratios: nearfull {near:.0%}  backfillfull {backfill:.0%}  full {full:.0%}"
               + ("" if known else " (Ceph's defaults: osd dump not read)"))
    for h in c.checks:
        out.append("\n")
        style = "dim" if h.muted else "bold red" if h.severity == "HEALTH_ERR" else "yellow"
        out.append_text(inert(f"{h.code}: {h.summary}", style, 200))
        if h.muted:
            out.append(" (muted)", style="dim")
        for line in h.detail[:CHECK_DETAIL]:
            out.append("\n")
            out.append_text(inert(f"    {line}", "dim", 200))
        if len(h.detail) > CHECK_DETAIL:
            out.append(f"\n    ... {len(h.detail) - CHECK_DETAIL} more (ceph health detail)",
                       style="dim")
    return out


class OsdFullTable(VirtualTable):
    EMPTY = "no OSDs yet: their use comes from `ceph osd df` with the first polls of Ceph"
    COLUMNS = (Column("osd", 9), Column("used", 6, 0, True), Column("against the ratios", 31),
               Column("past", 12, 1), Column("host", 14, 2), Column("class", 6, 3),
               Column("pgs", 5, 4, True), Column("up/in", 6, 5))

    def show(self, frame: Frame, ascii_only: bool = False) -> None:
        c = frame.snapshot.cluster
        self.set_records(((d.id, (d, c)) for d in frame.snapshot.daemons.values()
                          if d.kind == "osd"),
                         lambda r: self.cells(r[0], r[1], ascii_only))

    @staticmethod
    def cells(d: Daemon, c: Cluster | None, ascii_only: bool = False) -> Cells:
        past, style = level(d.utilization, c)
        updown = ("up" if d.up else "down" if d.up is False else "?") + "/" + \
            ("in" if d.in_ else "out" if d.in_ is False else "?")
        return (inert(d.id), inert(pct(d.utilization), style), ratio_bar(d.utilization, c, BAR,
                                                                 ascii_only),
                inert(past or "-", style), inert(d.host or "-"), inert(d.device_class or "-"),
                inert(num(d.pgs)), inert(updown))


class PoolFullTable(VirtualTable):
    EMPTY = "no pools yet: their fill comes from `ceph df` with the first polls of Ceph"
    COLUMNS = (Column("pool", 20), Column("used", 6, 0, True), Column("fill", 31, 3),
               Column("stored", 10, 2, True), Column("max avail", 10, 2, True),
               Column("days to full", 12, 0, True), Column("growth/day", 10, 1, True))

    def show(self, frame: Frame, min_span: float, ascii_only: bool = False) -> None:
        c = frame.snapshot.cluster
        history = frame.history
        self.set_records(((p.name, (p, c, frame.snapshot.time)) for p in (c.pools if c else ())),
                         lambda r: self.cells(r[0], r[1], history, min_span, ascii_only))

    @staticmethod
    def cells(p: Pool, c: Cluster | None, history: Sequence[Snapshot], min_span: float,
              ascii_only: bool = False) -> Cells:
        points = pool_points(history, p.name)
        days = days_to_full(points, min_span)
        growth = None
        if len(points) >= 2 and points[-1][0] - points[0][0] >= min_span:
            k = slope(points)
            growth = k * DAY if k is not None else None
        u = p.used_ratio
        style = "yellow" if u is not None and u >= 0.85 else ""
        return (inert(p.name, limit=40), inert(pct(u), style),
                ratio_bar(u, None, BAR, ascii_only, marks=False),
                inert(rate(p.stored_bytes) if p.stored_bytes is not None else "-"),
                inert(rate(p.max_avail_bytes) if p.max_avail_bytes is not None else "-"),
                inert(f"{days:.1f}" if days is not None else "-",
                  "yellow" if days is not None and days < 5 else ""),
                inert(f"{growth:+.2%}" if growth is not None else "-"))


class FullnessView(View, Vertical):
    """Ceph's health checks above the OSDs' use against the ratios and the pools' fill."""

    view_id = "fullness"
    DEFAULT_CSS = """
    FullnessView #fullness-health { height: auto; max-height: 40%; }
    FullnessView OsdFullTable { height: 1fr; border-top: solid $primary; }
    FullnessView PoolFullTable { height: 1fr; border-top: solid $primary; }
    """

    def compose(self) -> ComposeResult:
        yield Static(id="fullness-health")
        yield OsdFullTable(id="fullness-osds")
        yield PoolFullTable(id="fullness-pools")

    def show(self, frame: Frame) -> None:
        self.query_one("#fullness-health", Static).update(health_lines(frame.snapshot.cluster))
        self.query_one(OsdFullTable).show(frame, self.ascii_only)
        self.query_one(PoolFullTable).show(
            frame, self.threshold("ceph.pool.fullness", "min_span_seconds"), self.ascii_only)
