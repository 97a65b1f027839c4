"""The triage view: an incident on one screen (PG states over time, what changed, who)."""

from __future__ import annotations

from rich.text import Text

from stormdeck.advisors.rules import TRIAGE
from stormdeck.base import pgstate, units
from stormdeck.tui.feed import Frame, clock, stale_part
from stormdeck.tui.format import finding_line, inert, num, rate, spark
from stormdeck.tui.views.base import FrameText
from stormdeck.tui.views.overview import LAB_HINT

TRIAGE_RULES = frozenset(r.id for r in TRIAGE)
EVENT_STYLE = {0: "", 1: "yellow", 2: "bold red"}
# Incident classes (advisors/timeline.py) of PGs that serve no IO: red.
SERVES_NO_IO = frozenset({"inactive"}) | pgstate.NOT_SERVING


class Triage(FrameText):
    """The incident on one screen: PG states over time, what changed, who is slow, the log."""

    view_id = "triage"

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
        old = stale_part(frame, "cluster")
        if old is not None:
            out.append(f"  STALE: the cluster's figures are {units.age(old)} old "
                       f"({clock(s.time - old)}); not current\n", style="bold reverse")
        begin = len(out)
        if c is not None and c.num_pgs is not None:
            # Judged by base/pgstate.py, as the overview's headline and the report are.
            bad = c.pgs_not_clean or 0
            vals = [float(x.cluster.pgs_not_clean or 0) for x in hist if x.cluster]
            out.append(f"  {'unhealthy':<12}{bad:>7}  peak {max(vals, default=0.0):>6.0f}  ",
                       style="bold red" if bad else "")
            out.append(spark(vals, width=60, ascii_only=self.ascii_only) if any(vals) else "")
            out.append("\n")
        series = [pg_classes(x.cluster) for x in hist]
        now = pg_classes(c)
        for name in now:
            vals = [float(p.get(name, 0)) for p in series]
            peak = max(vals, default=0.0)
            style = "bold red" if now[name] and name in SERVES_NO_IO else \
                "yellow" if now[name] else ""
            out.append(f"  {name:<12}{now[name]:>7}  peak {peak:>6.0f}  ", style=style)
            out.append(spark(vals, width=60, ascii_only=self.ascii_only) if peak else "")
            out.append("\n")
        if c is not None:
            rec = [x.cluster.recovering_bps or 0.0 for x in hist if x.cluster]
            out.append(f"  recovery    {rate(c.recovering_bps)}/s  "
                       f"{num(c.recovering_objects_per_sec)} obj/s  degraded "
                       f"{num(c.degraded_objects)}  misplaced {num(c.misplaced_objects)}  ")
            out.append(spark(rec, width=40, ascii_only=self.ascii_only) if any(rec) else "")
            out.append("\n")
        if old is not None:
            out.stylize("dim strike", begin, len(out))
        out.append("\nWhat happened", style="bold")
        out.append("  (OSDs, health, flags, config log, osdmap; newest last)\n")
        events = frame.events[-14:]
        if not events:
            out.append(f"  nothing yet ({LAB_HINT}, `stormdeck lab storm --restart-osd 0` "
                       "an OSD restart)\n", style="green")
        for e in events:
            out.append(f"  {clock(e.time)}  ")
            out.append_text(inert(e.text, EVENT_STYLE.get(e.level, ""), 150))
            out.append("\n")
        flaps = flapping(frame.events, s.time)
        slow = [d for d in s.daemons.values() if d.has_slow_ops]
        out.append("\nWho", style="bold")
        out.append("\n  flapping  ")
        out.append_text(inert(", ".join(f"{k} x{n}" for k, n in flaps.items()) or "none",
                          "bold red" if flaps else ""))
        out.append("\n  slow ops  ")
        if c is not None and c.slow_ops:
            out.append_text(inert(f"{c.slow_ops} on " + (", ".join(d.id for d in slow)
                                                      or ", ".join(c.slow_ops_daemons)
                                                      or "unnamed daemons"), "yellow"))
        else:
            out.append("none")
        if c is not None:
            for chk in c.checks:
                out.append("\n  ")
                out.append_text(inert(f"{chk.code}: {chk.summary}",
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
                out.append_text(inert(f"  {clock(entry.stamp)} {entry.who} {entry.priority} "
                                  f"{entry.message}", style, 180))
                out.append("\n")
        return out
