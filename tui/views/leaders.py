"""The leaders view: leader spread per Curve pool and primary spread per Ceph OSD and pool."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from stormdeck.tui.feed import Frame
from stormdeck.tui.format import inert, num, spark
from stormdeck.tui.views.base import FrameText
from stormdeck.tui.views.overview import pool_range


class Leaders(FrameText):
    """Leader spread per Curve logical pool and primary spread per Ceph OSD, as bars."""

    view_id = "leaders"

    def render_frame(self, frame: Frame) -> Text:
        s = frame.snapshot
        out = Text()
        full = "#" if self.ascii_only else "█"
        css = [d for d in s.daemons.values() if d.kind == "chunkserver" and d.leaders is not None]
        if s.curve is not None:
            limit = self.threshold("curve.leaders.spread", "max_range")
            for pool in s.curve.pools:
                over = (pool.leader_range or 0) > limit
                out.append_text(inert(f"Curve pool {pool.name}: leadernum range "
                                  f"{num(pool.leader_range, '{:g}')} (threshold {limit:g})",
                                  "bold yellow" if over else "bold"))
                series = [v for v in (pool_range(x, pool.name) for x in frame.history)
                          if v is not None]
                out.append(f"   {spark(series, 40, self.ascii_only)}\n")
        if css:
            top = max(d.leaders or 0 for d in css) or 1
            moving = sum(1 for d in css if d.leader_delta)
            rises = sum(d.term_rises or 0 for d in css)
            elections = sum(d.elections or 0 for d in css)
            candidates = sum(d.candidates or 0 for d in css)
            # A transfer (the MDS's scheduler, a rapid schedule) raises terms too: only the
            # rises no transfer explains are elections (K2.3, K8.8).
            # term_rises is None where no raft page was read (only the MDS's counts): then
            # there are no terms to speak of, and "0 elections" would be a false all-clear.
            if any(d.term_rises is not None for d in css):
                out.append(f"since the last look: leaders moved on {moving} chunkservers; raft "
                           f"terms rose {rises} times, {elections} of them elections; "
                           f"{candidates} copysets electing now\n",
                           style="bold yellow" if elections or candidates else "")
            else:
                out.append(f"since the last look: leaders moved on {moving} chunkservers "
                           "(no raft pages read, so no terms or elections to show)\n",
                           style="bold yellow" if moving else "")
            for d in css:
                width = round((d.leaders or 0) / top * 40)
                out.append_text(inert(f"  {d.id:<22}"))
                out.append(full * width, style="cyan")
                out.append(f" {d.leaders}")
                if d.leader_delta:
                    out.append(f" ({d.leader_delta:+d})", style="yellow")
                out.append("\n")
        osds = [d for d in s.daemons.values() if d.kind == "osd" and d.primary_pgs is not None]
        if osds:
            deviation = self.threshold("ceph.primary.spread", "max_deviation")
            top = max(d.primary_pgs or 0 for d in osds) or 1
            avg = sum(d.primary_pgs or 0 for d in osds) / len(osds)
            out.append(f"Ceph primary PGs per OSD (mean {avg:.1f})\n", style="bold")
            for d in osds:
                width = round((d.primary_pgs or 0) / top * 40)
                off = avg and abs((d.primary_pgs or 0) - avg) / avg > deviation
                out.append_text(inert(f"  {d.id:<22}"))
                out.append(full * width, style="yellow" if off else "cyan")
                out.append(f" {d.primary_pgs}\n")
            if s.cluster is not None:
                out.append("Primaries per OSD, per pool\n", style="bold")
                for pool in s.cluster.pools:
                    out.append_text(pool_primaries(pool, deviation, self.ascii_only))
                    out.append("\n")
        if not out.plain:
            out.append("no leader or primary counts yet: Curve's come with --curve-mds, "
                       "Ceph's primaries with the first PG dump")
        return out


def pool_primaries(pool: Any, deviation: float, ascii_only: bool = False) -> Text:
    """One pool's primaries per OSD: mean, the extremes, and the spread as a small chart."""
    counts = dict(pool.primaries)
    line = inert(f"  pool {pool.name}", "bold", 60)
    if not counts:
        line.append("  no primaries counted yet")
        return line
    avg = sum(counts.values()) / len(counts)
    lo = min(counts, key=counts.__getitem__)
    hi = max(counts, key=counts.__getitem__)
    off = avg and (counts[hi] - avg) / avg > deviation
    line.append(f"  mean {avg:.1f}, min {counts[lo]} ({lo}), max {counts[hi]} ({hi})  ")
    line.append(spark(sorted(counts.values()), 30, ascii_only), style="yellow" if off else "cyan")
    if pool.read_balance_score is not None:
        line.append(f"  read_balance_score {pool.read_balance_score:g}")
    return line
