"""An incident report for a time window, in Markdown and JSON: the PG-state timeline, what
happened, what the advisors found, and the changes made."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stormdeck.advisors.findings import Finding, Severity
from stormdeck.advisors.lock import secure_dir
from stormdeck.advisors.timeline import Event, answered_at, flapping, pg_classes, source_out
from stormdeck.base.secrets import write_private
from stormdeck.base.text import printable
from stormdeck.collectors.model import Snapshot

TIMELINE_ROWS = 40


@dataclass
class _Seen:
    finding: Finding
    first_firing: float | None = None
    last_seen: float = 0.0
    worst: int = 0


@dataclass
class Report:
    source: str
    start: float
    end: float
    snapshots: int
    cluster: str | None
    health_start: str | None
    health_end: str | None
    timeline: list[dict[str, Any]]  # {"time": t, "inactive": n, ...}: the worst in each slice
    peaks: dict[str, dict[str, float]]  # class -> {"count": n, "time": t}
    not_clean_from: float | None
    clean_again_at: float | None
    events: list[Event]
    flapping: dict[str, int]
    findings: list[dict[str, Any]]
    changes: list[dict[str, Any]] = field(default_factory=list)
    # Sources that stopped answering: {"source", "start", "end" (None: still out at the
    # window's end), "seconds", "error"}. What the report shows of that time is stale.
    outages: list[dict[str, Any]] = field(default_factory=list)
    pg_data: bool = True  # did any snapshot carry PG states at all?


def build(steps: Iterable[tuple[Snapshot, Sequence[Finding]]], events: Iterable[Event],
          changes: Iterable[Any] = (), source: str = "live session",
          start: float | None = None, end: float | None = None) -> Report:
    """`steps` in time order; only those between `start` and `end` (epoch seconds) count."""
    rows: list[tuple[float, dict[str, int]]] = []
    gaps: list[tuple[str, ...]] = []  # per row: the sources out in that snapshot
    outages: list[dict[str, Any]] = []
    open_: dict[str, dict[str, Any]] = {}
    seen: dict[tuple[str, str], _Seen] = {}
    first: Snapshot | None = None
    last: Snapshot | None = None
    not_clean_from: float | None = None
    clean_again: float | None = None
    for snap, findings in steps:
        if (start is not None and snap.time < start) or (end is not None and snap.time > end):
            continue
        first = first or snap
        last = snap
        rows.append((snap.time, pg_classes(snap.cluster)))
        out = tuple(sorted(n for n, h in snap.sources.items() if source_out(h)))
        gaps.append(out)
        for name, h in snap.sources.items():
            o = open_.get(name)
            if name in out and o is None:
                o = open_[name] = {"source": name, "start": answered_at(h, snap.time),
                                   "end": None, "seconds": None, "error": h.error}
                outages.append(o)
            elif name in out:
                o["error"] = h.error or o["error"]
            elif o is not None:
                o["end"] = max(o["start"], answered_at(h, snap.time))
                o["seconds"] = round(o["end"] - o["start"], 1)
                del open_[name]
        c = snap.cluster
        if c is not None and c.pgs_not_clean is not None:
            if c.pgs_not_clean > 0:
                not_clean_from = not_clean_from or snap.time
                clean_again = None
            elif not_clean_from is not None and clean_again is None:
                clean_again = snap.time
        for f in findings:
            s = seen.setdefault(f.key, _Seen(f))
            s.finding = f
            s.last_seen = snap.time
            if f.state == "firing":
                s.first_firing = s.first_firing or snap.time
                s.worst = max(s.worst, int(f.severity))
    if first is None or last is None:
        raise ValueError("no snapshot in the window")
    lo, hi = first.time, last.time
    for o in open_.values():  # still out when the window ends: it lasted at least this
        o["seconds"] = round(hi - o["start"], 1)
    # An outage's start is its source's last answer, earlier than the snapshot that
    # showed it: the events are put back in time order.
    evs = sorted((e for e in events if lo - 1 <= e.time <= hi + 1 or
                  (e.kind in ("config", "source") and e.time < lo)), key=lambda e: e.time)
    peaks: dict[str, dict[str, float]] = {}
    for t, classes in rows:
        for name, n in classes.items():
            if n > peaks.get(name, {"count": -1})["count"]:
                peaks[name] = {"count": n, "time": t}
    return Report(
        source=source, start=lo, end=hi, snapshots=len(rows),
        cluster=first.cluster.fsid if first.cluster else None,
        health_start=first.cluster.health if first.cluster else None,
        health_end=last.cluster.health if last.cluster else None,
        timeline=_slices(rows, gaps), peaks=peaks, not_clean_from=not_clean_from,
        clean_again_at=clean_again, events=evs,
        flapping=flapping(evs, hi, window=hi - lo + 1),
        findings=[_finding(s) for s in sorted(seen.values(), key=lambda s: (
            -s.worst, s.first_firing or 0, s.finding.rule)) if s.first_firing is not None],
        changes=[_change(e) for e in changes if lo - 1 <= e.started <= hi + 1],
        outages=outages, pg_data=any(classes for _, classes in rows))


def _slices(rows: list[tuple[float, dict[str, int]]],
            gaps: list[tuple[str, ...]] | None = None) -> list[dict[str, Any]]:
    """At most TIMELINE_ROWS rows, each the worst of its slice: a short peak is not lost,
    and neither is a short outage ("no_data": the sources out in any of its snapshots)."""
    if not rows:
        return []
    gaps = gaps or [()] * len(rows)
    per = max(1, -(-len(rows) // TIMELINE_ROWS))
    out = []
    for i in range(0, len(rows), per):
        chunk = rows[i:i + per]
        merged: dict[str, Any] = {"time": chunk[0][0]}
        for _, classes in chunk:
            for k, v in classes.items():
                merged[k] = max(merged.get(k, 0), v)
        missing = sorted({n for g in gaps[i:i + per] for n in g})
        if missing:
            merged["no_data"] = missing
        out.append(merged)
    return out


def _finding(s: _Seen) -> dict[str, Any]:
    f = s.finding
    return {"rule": f.rule, "target": f.target, "severity": Severity(s.worst).name.lower(),
            "first_firing": s.first_firing, "last_seen": s.last_seen, "summary": f.summary,
            "source": f.source, "changes": [c.command for c in f.changes]}


def _change(e: Any) -> dict[str, Any]:
    return {"id": e.id, "started": e.started, "rule": e.rule, "command": e.change.command,
            "before": e.before, "after": e.after, "outcome": e.status}


def _ts(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _hms(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def md_text(text: object, limit: int = 300) -> str:
    """Cluster text in Markdown: no control characters (a report is also printed to a
    terminal), no pipes that break a table, no markup, no line breaks; cut to `limit`."""
    return printable(text, limit).replace("|", "\\|").replace("`", "'").replace("<", "&lt;")


def to_markdown(r: Report) -> str:
    out = [f"# Incident report: {_ts(r.start)} to {_hms(r.end)}", "",
           f"- Source: {md_text(r.source)}, {r.snapshots} snapshots over {r.end - r.start:.0f} s",
           f"- Cluster: {md_text(r.cluster or 'unknown')}; health {md_text(r.health_start)} at the "
           f"start, {md_text(r.health_end)} at the end"]
    for o in r.outages:
        span = (f"{_hms(o['start'])} to {_hms(o['end'])}" if o["end"] is not None
                else f"{_hms(o['start'])} to the end of the window, at least")
        why = f"; it said: {md_text(o['error'], 120)}" if o.get("error") else ""
        out.append(f"- **Data gap**: {md_text(o['source'])} did not answer from {span} "
                   f"({o['seconds']:.0f} s): what this report shows of that time is its last "
                   f"answer, not the cluster then{why}")
    if not r.pg_data:
        out.append("- No PG states in this window (no Ceph source answered)")
    elif r.not_clean_from is not None:
        back = (f"active+clean again at {_hms(r.clean_again_at)} "
                f"({r.clean_again_at - r.not_clean_from:.0f} s)" if r.clean_again_at
                else "not clean at the end of the window")
        out.append(f"- PGs not active+clean from {_hms(r.not_clean_from)}; {back}")
    elif r.outages:  # a gap hides whatever happened in it
        out.append("- Every PG stayed active+clean in what was seen (not in the gap above)")
    else:
        out.append("- Every PG stayed active+clean")
    worst = {k: v for k, v in r.peaks.items() if v["count"] > 0}
    if worst:
        out.append("- Peaks: " + ", ".join(f"{k} {v['count']:.0f} at {_hms(v['time'])}"
                                           for k, v in worst.items()))
    downs = sorted({e.target for e in r.events if e.kind == "osd" and " down" in e.text})
    out.append(f"- Went down: {md_text(', '.join(downs)) if downs else 'no OSD'}"
               + (f"; flapping: {', '.join(f'{k} x{n}' for k, n in r.flapping.items())}"
                  if r.flapping else ""))
    out.append(f"- Changes made through stormdeck: {len(r.changes)}")
    out += ["", "## PG states", ""]
    if r.timeline:
        cols = [k for k in r.timeline[0] if k not in ("time", "no_data")]
        gap = any("no_data" in row for row in r.timeline)
        out.append("| time | " + " | ".join(cols) + (" | no data from |" if gap else " |"))
        out.append("|---|" + "---:|" * len(cols) + ("---|" if gap else ""))
        for row in r.timeline:
            out.append(f"| {_hms(row['time'])} | "
                       + " | ".join(str(row.get(k, 0)) for k in cols)
                       + (f" | {md_text(', '.join(row.get('no_data', ())))} |" if gap
                          else " |"))
    out += ["", "## What happened", ""]
    if not r.events:
        out.append("Nothing: no OSD, health, flag, pool, config or map change.")
    out += [f"- {_hms(e.time)} {md_text(e.text)}" for e in r.events]
    out += ["", "## Findings", ""]
    if not r.findings:
        out.append("No advisor fired.")
    else:
        out.append("| severity | rule | target | first firing | summary | source |")
        out.append("|---|---|---|---|---|---|")
        for f in r.findings:
            out.append(f"| {f['severity']} | {f['rule']} | {md_text(f['target'])} | "
                       f"{_hms(f['first_firing'])} | {md_text(f['summary'])} | {f['source']} |")
    out += ["", "## Changes made", ""]
    if not r.changes:
        out.append("None.")
    for c in r.changes:
        out.append(f"- {_hms(c['started'])} `{md_text(c['command'])}` ({c['outcome']}; was "
                   f"{md_text(c['before'] if c['before'] is not None else 'unset')})")
    return "\n".join(out) + "\n"


def to_json(r: Report) -> str:
    from dataclasses import asdict

    d = asdict(r)
    return json.dumps({"format": 1, **d}, indent=1, allow_nan=False, default=str)


def save(r: Report, directory: Path) -> Path:
    """Write the report as Markdown and JSON side by side; the path without its suffix."""
    base = directory / time.strftime("report-%Y%m%d-%H%M%S", time.localtime(r.end))
    secure_dir(base.parent)
    write_private(base.with_suffix(".md"), to_markdown(r))
    write_private(base.with_suffix(".json"), to_json(r))
    return base
