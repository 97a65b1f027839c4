"""`stormdeck check`: the advisors without a screen, for scripts, cron and CI.

Exit 0: nothing firing above info; 1: warnings; 2: critical; 3: could not
run (a usage error, an unreadable conf, no cluster, nothing collected), as
monitoring plugins expect: a fault of the input never reads as a finding.
Muted findings are shown as muted and do not count, but the output always says how many
there are and the exit code had none held ("muted" in JSON): a run green only because of
its mutes is never silently green. The JSON output follows docs/check.schema.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from stormdeck.advisors.plan import reach_of
from stormdeck.advisors.rules import ALL
from stormdeck.assembly import assemble, settings_of
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.collectors.model import plain
from stormdeck.collectors.registry import cluster_sources
from stormdeck.output import add_format_options, dump, is_json
from stormdeck.sources import add_source_options

SCHEMA = "stormdeck.check/1"


def register(sub: Any) -> None:
    p = sub.add_parser("check", help="run the advisors once, without a screen",
                       description="Watch the cluster for --for seconds, run every advisor, "
                                   "print the findings. Exit 0 clean (info at most), "
                                   "1 warnings, 2 critical, 3 could not run (a usage error, an "
                                   "unreadable conf, no cluster, nothing collected).")
    add_format_options(p, "the findings (JSON schema: docs/check.schema.json)")
    p.add_argument("--for", dest="duration", type=float, default=10.0, metavar="SECONDS",
                   help="how long to watch before judging (default 10); rules that need "
                        "longer to fire are reported as pending")
    p.add_argument("--interval", type=float, default=1.0,
                   help="seconds between polls (default 1)")
    p.add_argument("--rules", type=Path, default=None,
                   help="a rules.toml overriding thresholds (default "
                        "~/.config/stormdeck/rules.toml, or $STORMDECK_RULES)")
    p.add_argument("--list-rules", action="store_true",
                   help="list every rule with its source and exit")
    add_source_options(p)
    p.set_defaults(handler=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    from stormdeck.advisors.engine import worst

    settings = settings_of(args)
    if args.list_rules:
        # Sources are docs/knowledge.md section ids (stormdeck explain RULE shows them):
        # several per rule, so they come last, where their width pushes nothing.
        wide = max(len(r.id) for r in ALL)
        for r in ALL:
            s = settings[r.id]
            state = "  (disabled)" if not s.enabled else ""
            print(f"{r.id:<{wide}}  {r.title}{state}  [{r.source}]")
        return 0
    if args.duration < 0 or args.interval <= 0:
        raise UserError("--for must be zero or more and --interval above zero")

    from stormdeck.watching import watch

    pieces = assemble(args, settings=settings)
    engine = pieces.engine
    started = time.monotonic()
    findings, snap = watch(pieces.sources, engine, args.duration, args.interval, args.timeout)
    assert snap is not None
    cluster = [s for n, s in snap.sources.items() if n in cluster_sources()]
    collected = bool(cluster) and any(s.last_success for s in cluster)
    code = worst(findings) if collected else 3
    muted = muted_summary(findings, code)
    if is_json(args):
        dump(report(snap, findings, engine.errors, time.monotonic() - started, code, muted),
             args, allow_nan=False)
    else:
        print(render(findings, engine.errors, snap, muted))
    if not collected:
        errors = "; ".join(f"{s.name}: {s.error}" for s in cluster)
        print(f"stormdeck: could not read the cluster ({printable(errors, 400)})",
              file=sys.stderr)
    return code


def muted_summary(findings: list, code: int) -> dict[str, int]:
    """How many findings a mute silenced, and the exit code had none held: a run green only
    because of its mutes says so (mutes are judgement, allowed in read-only mode too)."""
    from stormdeck.advisors.engine import worst

    muted = [f for f in findings if f.muted]
    unmuted = worst([replace(f, muted=False) for f in findings]) if code != 3 else 3
    return {"count": len(muted), "exit_without_mutes": unmuted}


def report(snap: Any, findings: list, errors: dict[str, str], duration: float,
           code: int, muted: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "time": snap.time,
        "duration": round(duration, 3),
        "exit": code,
        "muted": muted if muted is not None else muted_summary(findings, code),
        "sources": {n: plain(s) for n, s in snap.sources.items()},
        "findings": [finding_json(f) for f in findings],
        "rule_errors": dict(errors),
    }


def finding_json(f: Any) -> dict[str, Any]:
    out = plain(f)
    out["severity"] = str(f.severity)
    # Computed, as the review shows it (the hand-written label went with issue 30); the key
    # stays for the readers of docs/check.schema.json.
    for ch, raw in zip(f.changes, out.get("changes") or (), strict=False):
        if isinstance(raw, dict):
            raw["blast_radius"] = reach_of(ch)
    return out


def render(findings: list, errors: dict[str, str], snap: Any,
           muted: dict[str, int] | None = None) -> str:
    p = printable
    lines = []
    sources = ", ".join(f"{s.name} {'ok' if s.ok else 'stale' if s.stale else 'error'}"
                        for s in snap.sources.values())
    lines.append(f"sources: {sources}")
    if not findings:
        lines.append("no findings")
    for f in findings:
        flags = f.state + (" muted" if f.muted else "")
        lines.append(f"{str(f.severity).upper():<8} {flags:<13} {f.rule:<30} {p(f.target, 60)}")
        lines.append(f"    {p(f.summary, 300)}  [{f.source}]")
        for e in f.evidence:
            # A down daemon's figure is its last, not its figure now.
            now = "last" if e.down_since is not None else "now"
            if e.samples > 1 and e.min is not None:
                lines.append(f"    {e.metric}: {now} {_fmt(e.now)}, min {_fmt(e.min)}, avg "
                             f"{_fmt(e.avg)}, max {_fmt(e.max)} {e.unit} over {e.window:.0f} s"
                             + e.down_note())
            else:
                lines.append(f"    {e.metric}: {p(_fmt(e.now), 120)} {e.unit}".rstrip()
                             + e.down_note())
        for ch in f.changes:
            how = "runtime" if ch.runtime else "restart" if ch.runtime is False else "?"
            lines.append(f"    change: {p(ch.command, 200)}   ({p(ch.current)} -> "
                         f"{p(ch.proposed)}; {how}; "
                         f"{'reversible' if ch.reversible else 'IRREVERSIBLE'}; "
                         f"{reach_of(ch)})")
        for line in f.detail:  # Ceph's own health detail lines
            lines.append(f"    | {p(line, 300)}")
        for step in f.procedure:
            lines.append(f"    - {p(step, 400)}")
        for note in f.notes:
            lines.append(f"    note: {p(note, 300)}")
    for rule, err in errors.items():
        lines.append(f"rule {rule} could not judge: {p(err, 200)}")
    lines.append(muted_line(muted if muted is not None else muted_summary(findings, 0)))
    return "\n".join(lines)


def muted_line(muted: dict[str, int]) -> str:
    n = muted["count"]
    if not n:
        return "muted: none"
    return (f"muted: {n} finding{'s' if n != 1 else ''}; without the mutes check would exit "
            f"{muted['exit_without_mutes']} (stormdeck mute --list)")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)
