"""The overview: what limits the cluster at a glance, each figure with its short history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.text import Text

from stormdeck.advisors.rules.mgr import mgr_name
from stormdeck.advisors.timeline import off_since, turned_off
from stormdeck.base import pgstate, units
from stormdeck.collectors.model import Cluster, Daemon, Snapshot
from stormdeck.collectors.packing import values_of
from stormdeck.tui.feed import (
    Frame,
    clock,
    part_sources,
    poll_interval,
    stale_part,
    stale_sources,
)
from stormdeck.tui.format import finding_line, inert, ms, newest, num, pct, rate, spark
from stormdeck.tui.views.base import FrameText

# What an idle cluster's screen says (views' empty states): how to make something happen.
LAB_HINT = ("on the lab, `stormdeck lab load` makes client IO and `stormdeck lab storm` "
            "a peering storm")

SPARK = 20  # a sparkline's width: the newest values it shows
NAMED = 5  # down OSDs, bad PG states, slow OSDs named before "and N more"
RATE_WINDOW = 60.0  # seconds of History a recovery rate (and a stall's "before") is read from
# Client IO that falls to 0 from at least this (ops/s, the minute before) is a stall.
STALL_FROM = 1.0


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
        stale = stale_sources(frame)
        said: set[str] = set()  # sources whose staleness a label already told
        sp = lambda fn: spark(newest(hist, fn, SPARK), SPARK,  # noqa: E731
                              ascii_only=self.ascii_only)
        osds = [d for d in s.daemons.values() if d.kind == "osd"]
        if c is not None:
            begin = len(out)
            self._cluster(out, frame, osds, sp)
            _mark_stale(out, begin, frame, "cluster", stale, said)
        if osds:
            begin = len(out)
            used = sum(d.cores_used or 0 for d in osds)
            allowed = sum(d.cores_allowed or 0 for d in osds)
            out.append(f"cores   {used:.1f} used of {allowed:g} allowed across {len(osds)} OSDs   "
                       f"{sp(self._cores_used)}\n")
            _mark_stale(out, begin, frame, "cores", stale, said)
            # A down OSD's latency is from before it died: never the slowest now.
            up = [d for d in osds if d.up is not False]
            if up:
                begin = len(out)
                worst = max(up, key=lambda d: d.commit_latency or 0)
                out.append("slowest ")
                out.append_text(inert(f"{worst.id} commit {ms(worst.commit_latency)}"))
                out.append("\n")
                _mark_stale(out, begin, frame, "osd", stale, said)
        disks = [k for k in s.disks.values() if k.util is not None and k.daemons]
        if disks:
            begin = len(out)
            hot = max(disks, key=lambda k: k.util or 0)
            out.append("hottest ")
            out.append_text(inert(f"{hot.key} {pct(hot.util)} busy ({', '.join(hot.daemons)})"))
            out.append("\n")
            _mark_stale(out, begin, frame, "disks", stale, said)
        if s.curve is not None:
            begin = len(out)
            css = [d for d in s.daemons.values() if d.kind == "chunkserver"]
            for line, style in _incidents(css, frame, "chunkserver"):
                out.append_text(inert(line, style))
                out.append("\n")
            limit = self.threshold("curve.leaders.spread", "max_range")
            for pool in s.curve.pools:
                over = (pool.leader_range or 0) > limit
                out.append("leaders ")
                out.append_text(inert(f"{pool.name} range {num(pool.leader_range, '{:g}')} "
                                  f"(threshold {limit:g})", "bold yellow" if over else ""))
                out.append(f"   {sp(lambda x, n=pool.name: pool_range(x, n))}\n")
            _mark_stale(out, begin, frame, "curve", stale, said)
        out.append("\nfindings\n")
        live = [f for f in frame.findings if f.state == "firing"][:6]
        if not live:
            out.append("  none firing\n", style="green")
        for f in live:
            out.append_text(finding_line(f))
            out.append("\n")
        # No client IO is idle only if none was flowing the minute before: else a stall.
        if c is not None and c.client_write_iops is not None and \
                not (c.client_read_iops or c.client_write_iops) and io_stall(hist) is None:
            out.append(f"\nidle: {LAB_HINT}\n", style="dim")
        return out

    def _cluster(self, out: Text, frame: Frame, osds: list[Daemon], sp: Any) -> None:
        """The cluster's headline: health, PGs by bad state, OSDs down or out and since
        when, slow ops and where, client IO (a stall named), recovery with its ETA."""
        s, hist = frame.snapshot, frame.history
        c = s.cluster
        assert c is not None
        style = {"HEALTH_OK": "green", "HEALTH_WARN": "yellow"}.get(c.health or "", "bold red")
        out.append("health  ")
        out.append_text(inert(c.health or "unknown", style))
        if c.release:
            out.append_text(inert(f"   {c.release} {c.version}"))
        out.append("\n")
        for chk in c.checks:
            out.append_text(inert(f"  {chk.code}: {chk.summary}", "yellow", 160))
            out.append("\n")
        unhealthy = c.pgs_not_clean
        # Above the figures it dates: the PG states below are the mgr's last ones.
        for line in _mgr_down(c, s.time):
            out.append_text(inert(line, "bold red"))
            out.append("\n")
        out.append(f"pgs     {num(c.num_pgs)}   ")
        # Judged by base/pgstate.py: stale+active+clean counts here, scrubbing does not.
        out.append(f"not active+clean {num(unhealthy)}", style="bold red" if unhealthy else "")
        out.append(f"   {sp(lambda x: x.cluster.pgs_not_clean if x.cluster else None)}\n")
        bad = c.pgs_by_problem()
        if not c.pg_states:
            # Per-part counts only (Prometheus): the harmful parts, each on its own line.
            bad = {w: n for w, n in sorted(c.pg_flags.items(), key=lambda kv: -kv[1])
                   if n and w in pgstate.PARTS and w not in pgstate.HEALTHY_CORE
                   and w not in pgstate.HARMLESS}
        for state, n in list(bad.items())[:NAMED]:
            serving = not (pgstate.parts(state) & pgstate.NOT_SERVING)
            # Every bad state red; bold where the PGs serve no IO (stale, peering, down...).
            out.append_text(inert(f"  {n:>6} {state}", "red" if serving else "bold red"))
            out.append("\n")
        if len(bad) > NAMED:
            out.append(f"  {sum(list(bad.values())[NAMED:]):>6} in {len(bad) - NAMED} other "
                       "states\n", style="red")
        if c.num_osds is not None:
            out.append(f"osds    {num(c.num_osds)}   up {num(c.num_up_osds)}   "
                       f"in {num(c.num_in_osds)}\n")
        for line, style in _incidents(osds, frame, "osd"):
            out.append_text(inert(line, style))
            out.append("\n")
        out.append(f"slow ops {num(c.slow_ops)}")
        if c.slow_ops:
            out.append_text(inert(_slow_text(c.slow_ops_daemons, c.slow_ops_oldest, s), "yellow"))
        out.append("\n")
        writes = sp(lambda x: x.cluster.client_write_iops if x.cluster else None)
        out.append(f"client  {num(c.client_read_iops)} rd/s {num(c.client_write_iops)} wr/s   "
                   f"{writes}")
        stall = io_stall(hist)
        out.append("\n")
        if stall is not None:
            since, was = stall
            # A line of its own: it fits 80 columns whole.
            out.append(f"  STALLED since {clock(since)} ({s.time - since:.0f} s): client IO "
                       f"fell to 0 from {was:.0f} op/s", style="bold white on red")
            out.append("\n")
        rec = recovery(hist)
        if rec is not None:
            remaining, per_sec, eta = rec
            out.append(f"recovery {rate(c.recovering_bps)}/s {num(per_sec, '{:.0f}')} obj/s   "
                       f"{num(remaining)} objects degraded or misplaced   ", style="yellow")
            if eta is not None:
                out.append(f"ETA {units.age(eta)}", style="bold")
            elif remaining:
                out.append("ETA unknown: no progress in the last minute", style="bold red")
            out.append("\n")
        if c.osd_flags:
            out.append_text(inert(f"flags   {', '.join(c.osd_flags)}", "yellow"))
            out.append("\n")


def _mark_stale(out: Text, begin: int, frame: Frame, part: str, stale: dict[str, float],
                said: set[str]) -> None:
    """Strike and dim what was written since `begin` when a source of `part` missed its
    poll, under a label with its age (once per source: the next blocks are struck only)."""
    age = stale_part(frame, part, stale)
    if age is None or len(out) <= begin:
        return
    names = [n for n in part_sources().get(part, ()) if n in stale]
    out.stylize("dim strike", begin, len(out))
    if set(names) <= said:
        return
    said.update(names)
    label = Text(f"  STALE: {', '.join(names)} last answered {units.age(age)} ago "
                 f"({clock(frame.snapshot.time - age)}); not current\n", style="bold reverse")
    # The label goes first, so it is seen before the figures it is about.
    tail = out[begin:]
    out.right_crop(len(out) - begin)
    out.append_text(label)
    out.append_text(tail)


def _mgr_down(c: Cluster, now: float) -> list[str]:
    """The dead or silent mgr, named like a down OSD, and how old its parts are."""
    m = c.mgr
    if m is None or m.serving or m.down_since is None:
        return []
    why = ("none active in the mgr map" if m.available is False
           else f"no answer to `{m.silent}`" if m.silent else "")
    standby = f", {m.standbys} standby" if m.standbys else ""
    # Two short lines, each whole at 80 columns; `explain ceph.mgr.down` names every part.
    aged = [f"        PGs, latency and fill below are from {clock(m.answered_at)}"] \
        if m.answered_at is not None else []
    return [f"  down  {mgr_name(m)} since {clock(m.down_since)} "
            f"({units.age(max(0.0, now - m.down_since))}), {why}{standby}", *aged]


def _since(d: Daemon, frame: Frame, attr: str) -> tuple[float, bool] | None:
    """When the daemon's `attr` turned False (an OSD down or marked out, a chunkserver
    offline), and whether that is only a bound ("since before"): Ceph's down stamp where
    the console's own timeline does not contradict it, else the tick that saw it change,
    else the oldest tick the History has it so."""
    kind, text = turned_off(attr, d.id)
    seen = next((e.time for e in reversed(frame.events)
                 if e.kind == kind and e.target == d.id and e.text.startswith(text)), None)
    if attr == "up" and d.down_since is not None:
        # Pacific keeps the down_stamp of an earlier `ceph osd down` when the mons mark an
        # OSD down on failure reports: a stamp older than a tick that saw it up is stale.
        # The tick before the one that saw it down saw it up.
        up_after = seen is not None and d.down_since < seen - 2 * poll_interval(frame)
        if not up_after:
            return d.down_since, False
    if seen is not None:
        return seen, False
    # No event saw it turn (the events kept start later, or a replay began mid-incident).
    run = off_since(frame.history, d.id, attr)
    return (run[0], True) if run is not None else None


# What the overview names per kind of daemon: (word, flag that is False, style).
_INCIDENTS = {"osd": (("down", "up", "bold red"), ("out", "in_", "yellow")),
              "chunkserver": (("offline", "online", "bold red"),)}
_PLURAL = {"osd": "OSDs", "chunkserver": "chunkservers"}


def _incidents(daemons: Sequence[Daemon], frame: Frame, kind: str) -> list[tuple[str, str]]:
    """One line per daemon down, out or offline (the first NAMED of each), naming its host
    and since when, as the Dashboard's OSD list shows up/down and in/out."""
    now = frame.snapshot.time
    lines = []
    turns = _INCIDENTS[kind]
    # One pass over every daemon (10,000 at scale), not one per flag; Ceph's own up/in
    # counts are not trusted to skip it: they come from another command than the states.
    odd = [d for d in daemons if any(getattr(d, attr) is False for _, attr, _ in turns)]
    for what, attr, style in turns:
        hit = [d for d in odd if getattr(d, attr) is False]
        for d in hit[:NAMED]:
            found = _since(d, frame, attr)
            when = ""
            if found is not None:
                since, bound = found
                when = f" since {'before ' if bound else ''}{clock(since)} " \
                       f"({units.age(max(0.0, now - since))})"
            pgs = f", {d.pgs} PGs" if d.pgs is not None else ""
            lines.append((f"  {what:<5} {d.id} on {d.host or 'an unknown host'}{when}{pgs}",
                          style))
        if len(hit) > NAMED:
            lines.append((f"  {what:<5} and {len(hit) - NAMED} more {_PLURAL[kind]}", style))
    return lines


def _slow_text(daemons: Sequence[str], oldest: float | None, s: Snapshot) -> str:
    named = []
    for name in daemons[:NAMED]:
        d = s.daemons.get(name)
        where = [x for x in (d.host if d else None,
                             f"{d.pgs} PGs" if d is not None and d.pgs is not None else None)
                 if x]
        named.append(f"{name} ({', '.join(where)})" if where else name)
    more = f" and {len(daemons) - NAMED} more" if len(daemons) > NAMED else ""
    age = f", oldest blocked {oldest:.0f} s" if oldest is not None else ""
    return f" on {', '.join(named) or 'unnamed daemons'}{more}{age}"


def _client_ops(x: Snapshot) -> float | None:
    c = x.cluster
    if c is None or (c.client_read_iops is None and c.client_write_iops is None):
        return None
    return (c.client_read_iops or 0.0) + (c.client_write_iops or 0.0)


def io_stall(hist: Sequence[Snapshot], window: float = RATE_WINDOW,
             floor: float = STALL_FROM) -> tuple[float, float] | None:
    """(since when, ops/s before) when client IO fell to 0 while clients were active: the
    mean of the minute before the drop at least `floor`. An idle cluster has no stall."""
    if not hist or _client_ops(hist[-1]) != 0.0:
        return None
    since = hist[-1].time
    last_active = None
    for x in reversed(hist[:-1]):
        v = _client_ops(x)
        if v is None:
            continue
        if v > 0:
            last_active = x.time
            break
        since = x.time
    if last_active is None:
        return None
    before = [v for x in hist if last_active - window <= x.time <= last_active
              and (v := _client_ops(x)) is not None]
    was = sum(before) / len(before) if before else 0.0
    return (since, was) if was >= floor else None


def recovery(hist: Sequence[Snapshot], window: float = RATE_WINDOW
             ) -> tuple[int, float, float | None] | None:
    """(objects left to recover or move, objects/s over the last minute, seconds to go) while
    objects are degraded or misplaced; the rate is Ceph's own recovering objects/s, else
    how fast what is left fell, over the last `window` seconds of the History."""
    if not hist or hist[-1].cluster is None:
        return None
    c = hist[-1].cluster
    left = (c.degraded_objects or 0) + (c.misplaced_objects or 0)
    if left <= 0 and not c.recovering_bps and not c.recovering_objects_per_sec:
        return None
    now = hist[-1].time
    recent = [x.cluster for x in hist if x.cluster is not None and now - x.time <= window]
    rates = [r.recovering_objects_per_sec for r in recent
             if r.recovering_objects_per_sec is not None]
    per_sec = sum(rates) / len(rates) if rates else 0.0
    if per_sec <= 0:
        first = next((x for x in hist if x.cluster is not None and now - x.time <= window), None)
        if first is not None and first.time < now:
            was = (first.cluster.degraded_objects or 0) + (first.cluster.misplaced_objects or 0)
            per_sec = max(0.0, (was - left) / (now - first.time))
    return left, per_sec, (left / per_sec if per_sec > 0 and left else None)


def pool_range(s: Snapshot, name: str) -> float | None:
    if s.curve is None:
        return None
    return next((p.leader_range for p in s.curve.pools if p.name == name), None)
