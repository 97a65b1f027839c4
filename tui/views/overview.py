"""The overview: what limits the cluster at a glance, each figure with its short history."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from stormdeck.collectors.model import Snapshot
from stormdeck.collectors.packing import values_of
from stormdeck.tui.feed import Frame
from stormdeck.tui.format import finding_line, ms, newest, num, pct, spark, t
from stormdeck.tui.views.base import FrameText

# What an idle cluster's screen says (views' empty states): how to make something happen.
LAB_HINT = ("on the lab, `stormdeck lab load` makes client IO and `stormdeck lab storm` "
            "a peering storm")

SPARK = 20  # a sparkline's width: the newest values it shows

BAD_PG_WORDS = ("peering", "activating", "unknown", "creating", "down", "incomplete", "stale",
                "degraded", "undersized")


class Overview(FrameText):
    """What limits the cluster, at a glance, each figure with its short history."""

    view_id = "overview"
    # Cores used per daemons mapping, for the sparkline: snapshots share a mapping while
    # no daemon moved, and 10,000 daemons are not summed again for each of them.
    _cores: dict[int, tuple[Any, float]] | None = None

    def _cores_used(self, x: Snapshot) -> float:
        daemons = x.daemons
        memo = self._cores if self._cores is not None else {}
        hit = memo.get(id(daemons))
        if hit is not None and hit[0] is daemons:
            return hit[1]
        used = sum(v or 0 for v in values_of(daemons, "cores_used"))
        if len(memo) > 4 * SPARK:
            memo = {}
        memo[id(daemons)] = (daemons, used)
        self._cores = memo
        return used

    def render_frame(self, frame: Frame) -> Text:
        s, hist = frame.snapshot, frame.history
        out = Text()
        c = s.cluster
        sp = lambda fn: spark(newest(hist, fn, SPARK), SPARK,  # noqa: E731
                              ascii_only=self.ascii_only)
        if c is not None:
            style = {"HEALTH_OK": "green", "HEALTH_WARN": "yellow"}.get(c.health or "",
                                                                        "bold red")
            out.append("health  ")
            out.append_text(t(c.health or "unknown", style))
            if c.release:
                out.append_text(t(f"   {c.release} {c.version}"))
            out.append("\n")
            for chk in c.checks:
                out.append_text(t(f"  {chk.code}: {chk.summary}", "yellow", 160))
                out.append("\n")
            bad = c.pgs_in(*BAD_PG_WORDS)
            out.append(f"pgs     {num(c.num_pgs)}   ")
            out.append(f"not active+clean {num(c.pgs_not_clean)}",
                       style="bold red" if bad else "")
            out.append(f"   {sp(lambda x: x.cluster.pgs_not_clean if x.cluster else None)}\n")
            for state, n in sorted(c.pg_states.items(), key=lambda kv: -kv[1])[:6]:
                if state != "active+clean":
                    hot = any(w in state.split("+") for w in BAD_PG_WORDS)
                    out.append_text(t(f"  {n:>6} {state}", "bold yellow" if hot else ""))
                    out.append("\n")
            out.append(f"slow ops {num(c.slow_ops)}")
            if c.slow_ops_daemons:
                out.append_text(t(f" on {', '.join(c.slow_ops_daemons)}", "yellow"))
            writes = sp(lambda x: x.cluster.client_write_iops if x.cluster else None)
            out.append(f"   client {num(c.client_read_iops)} rd/s {num(c.client_write_iops)} "
                       f"wr/s   {writes}\n")
            if c.osd_flags:
                out.append_text(t(f"flags   {', '.join(c.osd_flags)}", "yellow"))
                out.append("\n")
        osds = [d for d in s.daemons.values() if d.kind == "osd"]
        if osds:
            worst = max(osds, key=lambda d: d.commit_latency or 0)
            used = sum(d.cores_used or 0 for d in osds)
            allowed = sum(d.cores_allowed or 0 for d in osds)
            out.append(f"cores   {used:.1f} used of {allowed:g} allowed across {len(osds)} OSDs   "
                       f"{sp(self._cores_used)}\n")
            out.append("slowest ")
            out.append_text(t(f"{worst.id} commit {ms(worst.commit_latency)}"))
            out.append("\n")
        disks = [k for k in s.disks.values() if k.util is not None and k.daemons]
        if disks:
            hot = max(disks, key=lambda k: k.util or 0)
            out.append("hottest ")
            out.append_text(t(f"{hot.key} {pct(hot.util)} busy ({', '.join(hot.daemons)})"))
            out.append("\n")
        if s.curve is not None:
            limit = self.threshold("curve.leaders.spread", "max_range")
            for pool in s.curve.pools:
                over = (pool.leader_range or 0) > limit
                out.append("leaders ")
                out.append_text(t(f"{pool.name} range {num(pool.leader_range, '{:g}')} "
                                  f"(threshold {limit:g})", "bold yellow" if over else ""))
                out.append(f"   {sp(lambda x, n=pool.name: pool_range(x, n))}\n")
        out.append("\nfindings\n")
        live = [f for f in frame.findings if f.state == "firing"][:6]
        if not live:
            out.append("  none firing\n", style="green")
        for f in live:
            out.append_text(finding_line(f))
            out.append("\n")
        if c is not None and c.client_write_iops is not None and \
                not (c.client_read_iops or c.client_write_iops):
            out.append(f"\nidle: {LAB_HINT}\n", style="dim")
        return out


def pool_range(s: Snapshot, name: str) -> float | None:
    if s.curve is None:
        return None
    return next((p.leader_range for p in s.curve.pools if p.name == name), None)
