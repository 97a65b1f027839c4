"""The console's views, one widget each; they render Frames and never touch the network.

Cluster text (pool names, hosts, summaries) reaches Rich only inside Text
objects, which are never parsed as markup: a pool named `[bold red]x[/]` shows
as those characters, and control characters are shown as escapes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text
from stormdeck.advisors.model import Finding, Severity
from stormdeck.base.text import printable
from stormdeck.collectors.model import Daemon, Disk, Snapshot
from stormdeck.tui.feed import Frame, clock
from stormdeck.tui.lines import LinesView
from stormdeck.tui.table import Column, VirtualTable

BLOCKS = " ▁▂▃▄▅▆▇█"
ASCII = " .:-=+*#%"
SEVERITY_STYLE = {Severity.INFO: "cyan", Severity.WARNING: "yellow", Severity.CRITICAL: "bold red"}
BAD_PG_WORDS = ("peering", "activating", "unknown", "creating", "down", "incomplete", "stale",
                "degraded", "undersized")


def t(value: object, style: str = "", limit: int = 200) -> Text:
    """Cluster text as an inert Text: no markup, control characters escaped."""
    return Text(printable(value, limit), style=style)


def spark(values: Sequence[float], width: int = 20, ascii_only: bool = False) -> str:
    chars = ASCII if ascii_only else BLOCKS
    vals = list(values)[-width:]
    if not vals:
        return ""
    top = max(vals) or 1.0
    return "".join(chars[max(0, min(len(chars) - 1, int(v / top * (len(chars) - 1))))]
                   for v in vals)


def bar(used: float | None, allowed: float | None, width: int = 8, ascii_only: bool = False) -> str:
    if used is None or not allowed:
        return "-"
    filled = min(width, round(used / allowed * width))
    full, empty = ("#", ".") if ascii_only else ("█", "░")
    return f"{full * filled}{empty * (width - filled)} {used:.2f}/{allowed:g}"


def num(v: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.1f}ms"


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.0f}%"


class FrameText(LinesView):
    """A view that is one rendered text of the frame, repainted line by line."""

    ascii_only = False

    def show(self, frame: Frame) -> None:
        self.update(self.render_frame(frame))

    def render_frame(self, frame: Frame) -> Text:
        raise NotImplementedError


class Overview(FrameText):
    """What limits the cluster, at a glance, each figure with its short history."""

    def render_frame(self, frame: Frame) -> Text:
        s, hist = frame.snapshot, frame.history
        out = Text()
        c = s.cluster
        sp = lambda fn: spark([v for v in (fn(x) for x in hist) if v is not None],  # noqa: E731
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
                       f"{sp(lambda x: sum(d.cores_used or 0 for d in x.daemons.values()))}\n")
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
            for pool in s.curve.pools:
                over = (pool.leader_range or 0) > 5
                out.append("leaders ")
                out.append_text(t(f"{pool.name} range {num(pool.leader_range, '{:g}')} "
                                  f"(threshold 5)", "bold yellow" if over else ""))
                out.append(f"   {sp(lambda x, n=pool.name: _pool_range(x, n))}\n")
        out.append("\nfindings\n")
        live = [f for f in frame.findings if f.state == "firing"][:6]
        if not live:
            out.append("  none firing\n", style="green")
        for f in live:
            out.append_text(finding_line(f))
            out.append("\n")
        return out


def _pool_range(s: Snapshot, name: str) -> float | None:
    if s.curve is None:
        return None
    return next((p.leader_range for p in s.curve.pools if p.name == name), None)


def finding_line(f: Finding) -> Text:
    line = Text("  ")
    line.append(f"{str(f.severity).upper():<8}", style=SEVERITY_STYLE[f.severity])
    line.append_text(t(f" {f.target}: {f.summary}", "dim" if f.muted else "", 150))
    if f.muted:
        line.append(" (muted)", style="dim")
    return line


class DaemonTable(VirtualTable):
    COLUMNS = (Column("daemon", 14), Column("host", 12, 4), Column("cores used/allowed", 20),
               Column("IOPS", 7, 1, True), Column("IOPS/core", 9, 5, True),
               Column("latency", 15, 2), Column("prim|lead", 9, 3, True),
               Column("device", 10, 6), Column("util", 5, 2, True))
    ascii_only = False

    def show(self, frame: Frame) -> None:
        s = frame.snapshot
        disks = s.disks

        def record(d: Daemon) -> tuple:
            return (d, tuple(disks.get(f"{d.host}:/dev/{x}") for x in d.devices or ()))

        self.set_records(((d.id, record(d)) for d in s.daemons.values()),
                         lambda r: self.cells(r[0], s))

    def cells(self, d: Daemon, s: Snapshot) -> tuple[Text, ...]:
        iops = d.iops
        per_core = iops / d.cores_used if iops is not None and d.cores_used else None
        if d.kind == "osd":
            lat = f"{ms(d.commit_latency)}/{ms(d.apply_latency)}"
            share = d.primary_pgs
        else:
            lat = f"{ms(d.raft_append_latency)}/{ms(d.raft_send_latency)}"
            share = d.leaders
        devs = d.devices or ()
        disks = [s.disks.get(f"{d.host}:/dev/{x}") for x in devs]
        utils = [k.util for k in disks if k is not None and k.util is not None]
        busy = bool(d.cores_used is not None and d.cores_allowed
                    and d.cores_used / d.cores_allowed > 0.85)
        return (t(d.id, "bold red" if d.up is False else ""), t(d.host or "-"),
                t(bar(d.cores_used, d.cores_allowed, ascii_only=self.ascii_only),
                  "yellow" if busy else ""),
                t(num(iops)), t(num(per_core)), t(lat), t(num(share)),
                t(",".join(devs) or "-"), t(pct(max(utils)) if utils else "-"))


class DiskTable(VirtualTable):
    COLUMNS = (Column("disk", 22), Column("util", 5, 0, True), Column("r/s", 7, 2, True),
               Column("w/s", 7, 1, True), Column("r_await", 8, 4, True),
               Column("w_await", 8, 3, True), Column("queue", 6, 5, True),
               Column("cache kernel/device", 26, 1), Column("transport", 15, 6),
               Column("daemons", 14, 3))

    def show(self, frame: Frame) -> None:
        self.set_records(((k.key, k) for k in frame.snapshot.disks.values()), self.cells)

    @staticmethod
    def cells(k: Disk) -> tuple[Text, ...]:
        cache = f"{k.write_cache or '-'}/{k.device_cache or '-'}"
        risky = bool(k.daemons) and not k.virtual and (k.write_cache or "").startswith("write back")
        return (t(k.key), t(pct(k.util), "yellow" if (k.util or 0) > 0.9 else ""),
                t(num(k.read_iops)), t(num(k.write_iops)), t(ms(k.read_await)),
                t(ms(k.write_await)), t(num(k.queue_depth, "{:.1f}")),
                t(cache, "yellow" if risky else ""),
                t((k.transport or "-") + (" (virtual)" if k.virtual else "")),
                t(",".join(k.daemons) or "-"))


class FindingTable(VirtualTable):
    COLUMNS = (Column("severity", 8), Column("state", 13, 2), Column("rule", 30, 1),
               Column("target", 20), Column("summary", 80, 3))

    def show(self, frame: Frame) -> None:
        self.findings = {f"{f.rule}|{f.target}": f for f in frame.findings}
        self.set_records(self.findings.items(), self.cells)

    @staticmethod
    def cells(f: Finding) -> tuple[Text, ...]:
        state = f.state + (" muted" if f.muted else "")
        return (t(str(f.severity).upper(), SEVERITY_STYLE[f.severity]), t(state), t(f.rule),
                t(f.target, limit=60), t(f.summary, "dim" if f.muted else "", 120))

    def selected(self) -> Finding | None:
        key = self.selected_key
        return getattr(self, "findings", {}).get(key) if key else None


def finding_detail(f: Finding | None) -> Text:
    if f is None:
        return Text("no finding selected")
    out = Text()
    out.append_text(t(f"{f.title}  [{f.source}]", "bold"))
    out.append("\n")
    out.append_text(t(f.summary, limit=400))
    out.append("\n\n")
    out.append_text(t(f.explanation, "dim", limit=1200))
    out.append("\n")
    for e in f.evidence:
        line = (f"{e.metric}: now {e.now}, min {e.min:.4g}, avg {e.avg:.4g}, max {e.max:.4g} "
                f"{e.unit} over {e.window:.0f} s" if e.min is not None and e.avg is not None
                and e.max is not None else f"{e.metric}: {e.now} {e.unit}")
        out.append_text(t("  " + line, limit=300))
        out.append("\n")
    for c in f.changes:
        out.append_text(t(f"  change: {c.command}", "cyan", 300))
        out.append("\n")
    for step in f.procedure:
        out.append_text(t(f"  - {step}", limit=500))
        out.append("\n")
    for note in f.notes:
        out.append_text(t(f"  note: {note}", "yellow", 300))
        out.append("\n")
    if f.changes:
        out.append("\nEnter: review the change   m: mute for an hour\n", style="bold")
    return out


class JournalTable(VirtualTable):
    COLUMNS = (Column("id", 10), Column("when", 14, 3), Column("status", 15),
               Column("change", 50, 1), Column("before -> after", 24, 2),
               Column("undo", 20, 4))

    def show_entries(self, entries: Sequence[Any], clock: Callable[[float], str]) -> None:
        self.entries = {e.id: e for e in entries}
        self.sync((e.id, (t(e.id), t(clock(e.started)),
                          t(e.status, "bold red" if e.status in ("INCOMPLETE", "failed") else ""),
                          t(e.change.command, limit=80),
                          t(f"{e.before if e.before is not None else 'unset'} -> {e.after}"),
                          t(", ".join(e.undone_by) or (f"undoes {e.undoes}" if e.undoes else ""))))
                  for e in entries)

    def selected(self) -> Any:
        key = self.selected_key
        return getattr(self, "entries", {}).get(key) if key else None


class Leaders(FrameText):
    """Leader spread per Curve logical pool and primary spread per Ceph OSD, as bars."""

    def render_frame(self, frame: Frame) -> Text:
        s = frame.snapshot
        out = Text()
        full = "#" if self.ascii_only else "█"
        css = [d for d in s.daemons.values() if d.kind == "chunkserver" and d.leaders is not None]
        if s.curve is not None:
            for pool in s.curve.pools:
                over = (pool.leader_range or 0) > 5
                out.append_text(t(f"Curve pool {pool.name}: leadernum range "
                                  f"{num(pool.leader_range, '{:g}')} (threshold 5)",
                                  "bold yellow" if over else "bold"))
                series = [v for v in (_pool_range(x, pool.name) for x in frame.history)
                          if v is not None]
                out.append(f"   {spark(series, 40, self.ascii_only)}\n")
        if css:
            top = max(d.leaders or 0 for d in css) or 1
            moving = sum(1 for d in css if d.leader_delta)
            rises = sum(d.term_rises or 0 for d in css)
            out.append(f"elections: leaders moved on {moving} chunkservers, raft terms rose "
                       f"{rises} times since the last look\n")
            for d in css:
                width = round((d.leaders or 0) / top * 40)
                out.append_text(t(f"  {d.id:<22}"))
                out.append(full * width, style="cyan")
                out.append(f" {d.leaders}")
                if d.leader_delta:
                    out.append(f" ({d.leader_delta:+d})", style="yellow")
                out.append("\n")
        osds = [d for d in s.daemons.values() if d.kind == "osd" and d.primary_pgs is not None]
        if osds:
            top = max(d.primary_pgs or 0 for d in osds) or 1
            avg = sum(d.primary_pgs or 0 for d in osds) / len(osds)
            out.append(f"Ceph primary PGs per OSD (mean {avg:.1f})\n", style="bold")
            for d in osds:
                width = round((d.primary_pgs or 0) / top * 40)
                off = avg and abs((d.primary_pgs or 0) - avg) / avg > 0.3
                out.append_text(t(f"  {d.id:<22}"))
                out.append(full * width, style="yellow" if off else "cyan")
                out.append(f" {d.primary_pgs}\n")
            if s.cluster is not None:
                out.append("Primaries per OSD, per pool\n", style="bold")
                for pool in s.cluster.pools:
                    out.append_text(pool_primaries(pool, self.ascii_only))
                    out.append("\n")
        if not out.plain:
            out.append("no leader or primary counts yet")
        return out


def pool_primaries(pool: Any, ascii_only: bool = False) -> Text:
    """One pool's primaries per OSD: mean, the extremes, and the spread as a small chart."""
    counts = dict(pool.primaries)
    line = t(f"  pool {pool.name}", "bold", 60)
    if not counts:
        line.append("  no primaries counted yet")
        return line
    avg = sum(counts.values()) / len(counts)
    lo = min(counts, key=counts.__getitem__)
    hi = max(counts, key=counts.__getitem__)
    off = avg and (counts[hi] - avg) / avg > 0.3
    line.append(f"  mean {avg:.1f}, min {counts[lo]} ({lo}), max {counts[hi]} ({hi})  ")
    line.append(spark(sorted(counts.values()), 30, ascii_only), style="yellow" if off else "cyan")
    if pool.read_balance_score is not None:
        line.append(f"  read_balance_score {pool.read_balance_score:g}")
    return line


class LatencyTable(VirtualTable):
    COLUMNS = (Column("daemon", 14), Column("kind", 11, 4), Column("commit|append", 13),
               Column("apply|send", 11, 1), Column("p99", 9, 2), Column("op r/w", 17, 3),
               Column("history", 24, 5))
    ascii_only = False

    def show(self, frame: Frame) -> None:
        rows = []
        for d in frame.snapshot.daemons.values():
            if d.kind == "osd":
                first, second, p99 = d.commit_latency, d.apply_latency, None
                attr = "commit_latency"
            else:
                first, second = d.raft_append_latency, d.raft_send_latency
                p99, attr = d.raft_append_latency_p99, "raft_append_latency"
            series = [getattr(x.daemons[d.id], attr) for x in frame.history
                      if d.id in x.daemons and getattr(x.daemons[d.id], attr) is not None]
            rows.append((d.id, (t(d.id), t(d.kind), t(ms(first)), t(ms(second)), t(ms(p99)),
                                t(f"{ms(d.op_read_latency)}/{ms(d.op_write_latency)}"),
                                t(spark(series, 24, self.ascii_only)))))
        self.sync(rows)


def daemon_detail(frame: Frame, daemon_id: str, ascii_only: bool = False) -> Text:
    """One daemon: its figures with their history, its disks, its findings."""
    s = frame.snapshot
    d = s.daemons.get(daemon_id)
    if d is None:
        return t(f"{daemon_id} is no longer reported")
    out = Text()
    out.append_text(t(f"{d.id}  ({d.kind} on {d.host or 'unknown host'})", "bold"))
    out.append("\n")
    state = "up" if d.up else "DOWN" if d.up is False else "?"
    out.append_text(t(f"  {state}, {'in' if d.in_ else 'out' if d.in_ is False else '?'}, "
                      f"{d.objectstore or ''} {d.device_class or ''}  pid {d.pid or '-'}  "
                      f"threads {num(d.threads)}  RSS {num((d.rss_bytes or 0) / 2**20)} MiB"))
    out.append("\n\n")

    def line(label: str, attr: str, fmt: Callable[[float | None], str]) -> None:
        series = [getattr(x.daemons[d.id], attr) for x in frame.history
                  if d.id in x.daemons and getattr(x.daemons[d.id], attr) is not None]
        out.append(f"  {label:<18} {fmt(getattr(d, attr)):>12}  ")
        out.append(spark(series, 40, ascii_only), style="cyan")
        out.append("\n")

    allowed = num(d.cores_allowed, "{:g}")
    line("cores used", "cores_used", lambda v: f"{num(v, '{:.2f}')}/{allowed}")
    line("write IOPS", "write_iops", num)
    line("read IOPS", "read_iops", num)
    if d.kind == "osd":
        line("commit latency", "commit_latency", ms)
        line("apply latency", "apply_latency", ms)
        line("primary PGs", "primary_pgs", num)
    else:
        line("raft append", "raft_append_latency", ms)
        line("raft send", "raft_send_latency", ms)
        line("leaders", "leaders", num)
        line("bthread usage", "bthread_usage", lambda v: num(v, "{:.1f}"))
    out.append("\n  disks\n", style="bold")
    for dev in d.devices or ():
        k = s.disks.get(f"{d.host}:/dev/{dev}")
        if k is None:
            out.append_text(t(f"    /dev/{dev}: not seen by a host source"))
        else:
            out.append_text(t(f"    {k.key}: {pct(k.util)} busy, {num(k.write_iops)} w/s, "
                              f"await {ms(k.write_await)}, cache {k.write_cache or '-'}/"
                              f"{k.device_cache or '-'}, {k.transport or '-'}"))
        out.append("\n")
    mine = {d.id, *(f"{d.host}:/dev/{x}" for x in d.devices or ())}
    related = [f for f in frame.findings if f.target in mine]
    out.append("\n  findings\n", style="bold")
    if not related:
        out.append("    none\n", style="green")
    for f in related:
        out.append_text(finding_line(f))
        out.append("\n")
    return out


TRIAGE_RULES = ("ceph.peering.storm", "ceph.osd.flapping", "ceph.slow_ops", "ceph.osd.slowest",
                "ceph.scrub.during_load", "curve.leaders.flapping", "curve.raft.network")
EVENT_STYLE = {0: "", 1: "yellow", 2: "bold red"}


class Triage(FrameText):
    """The incident on one screen: PG states over time, what changed, who is slow, the log."""

    def render_frame(self, frame: Frame) -> Text:
        from stormdeck.advisors.timeline import flapping, pg_classes

        s, hist = frame.snapshot, frame.history
        c = s.cluster
        out = Text()
        span = hist[-1].time - hist[0].time if len(hist) > 1 else 0.0
        out.append(f"PG states, last {span:.0f} s", style="bold")
        if c is not None and c.num_pgs is not None:
            out.append(f"   of {c.num_pgs} PGs   osdmap e{num(c.osdmap_epoch)}   "
                       f"OSDs {num(c.num_up_osds)} up / {num(c.num_osds)}\n")
        else:
            out.append("\n")
        series = [pg_classes(x.cluster) for x in hist]
        now = pg_classes(c)
        for name in now:
            vals = [float(p.get(name, 0)) for p in series]
            peak = max(vals, default=0.0)
            style = "bold red" if now[name] and name in ("inactive", "peering", "activating",
                                                         "stale") else \
                "yellow" if now[name] else ""
            out.append(f"  {name:<12}{now[name]:>7}  peak {peak:>6.0f}  ", style=style)
            out.append(spark(vals, width=60, ascii_only=self.ascii_only) if peak else "")
            out.append("\n")
        if c is not None:
            rec = [x.cluster.recovering_bps or 0.0 for x in hist if x.cluster]
            out.append(f"  recovery    {_rate(c.recovering_bps)}/s  "
                       f"{num(c.recovering_objects_per_sec)} obj/s  degraded "
                       f"{num(c.degraded_objects)}  misplaced {num(c.misplaced_objects)}  ")
            out.append(spark(rec, width=40, ascii_only=self.ascii_only) if any(rec) else "")
            out.append("\n")
        out.append("\nWhat happened", style="bold")
        out.append("  (OSDs, health, flags, config log, osdmap; newest last)\n")
        events = frame.events[-14:]
        if not events:
            out.append("  nothing yet\n", style="green")
        for e in events:
            out.append(f"  {clock(e.time)}  ")
            out.append_text(t(e.text, EVENT_STYLE.get(e.level, ""), 150))
            out.append("\n")
        flaps = flapping(frame.events, s.time)
        slow = [d for d in s.daemons.values() if d.has_slow_ops]
        out.append("\nWho", style="bold")
        out.append("\n  flapping  ")
        out.append_text(t(", ".join(f"{k} x{n}" for k, n in flaps.items()) or "none",
                          "bold red" if flaps else ""))
        out.append("\n  slow ops  ")
        if c is not None and c.slow_ops:
            out.append_text(t(f"{c.slow_ops} on " + (", ".join(d.id for d in slow)
                                                      or ", ".join(c.slow_ops_daemons)
                                                      or "unnamed daemons"), "yellow"))
        else:
            out.append("none")
        if c is not None:
            for chk in c.checks:
                out.append("\n  ")
                out.append_text(t(f"{chk.code}: {chk.summary}",
                                  "bold red" if chk.severity == "HEALTH_ERR" else "yellow", 150))
        out.append("\n\nAdvisors on the incident\n", style="bold")
        mine = [f for f in frame.findings if f.rule in TRIAGE_RULES]
        if not mine:
            out.append("  none\n", style="green")
        for f in mine:
            out.append_text(finding_line(f))
            out.append("\n")
        if c is not None and c.log:
            out.append("\nCluster log", style="bold")
            out.append("  (as ceph -w shows it)\n")
            for entry in c.log[-10:]:
                style = {"[WRN]": "yellow", "[ERR]": "bold red"}.get(entry.priority, "")
                out.append_text(t(f"  {clock(entry.stamp)} {entry.who} {entry.priority} "
                                  f"{entry.message}", style, 180))
                out.append("\n")
        return out


def _rate(bps: float | None) -> str:
    if bps is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if bps < 1024:
            return f"{bps:.0f} {unit}"
        bps /= 1024
    return f"{bps:.0f} TiB"
