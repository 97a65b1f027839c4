"""An experiment's result in words, the same for the CLI, the console and the journal."""

from __future__ import annotations

from typing import Any

from stormdeck.advisors.experiment.figures import shown
from stormdeck.base.text import printable


def report_lines(r: Any) -> list[str]:
    """A `runner.Result` as its report: one line per figure (levels, change, 95% interval,
    verdict), what was not judged and why, and where the change stands now."""
    lines = [f"experiment {r.id}: {printable('; '.join(c.command for c in r.plan.changes), 300)}"]
    ba = getattr(r, "before_after", None)
    if ba:
        took = getattr(r, "settled_seconds", None)
        lines.append(f"  before and after, not alternated: {printable(ba, 200)}; settled "
                     f"{'?' if took is None else f'{took:.0f}'} s after it was made, and a "
                     "drift of the load over that time is in the ratios")
    for e in r.effects:
        f = r.figures[e.figure]
        lines.append(f"  {e.figure:<14} {shown(f, e.before):>14} -> {shown(f, e.after):<14} "
                     f"{(e.ratio - 1) * 100:+6.1f}%  (95%: {(e.ci_low - 1) * 100:+.1f}% to "
                     f"{(e.ci_high - 1) * 100:+.1f}%)  {e.verdict}"
                     + (f", smallest it could see: {e.smallest_effect:.0%}"
                        if e.verdict == "no effect" else ""))
    for why in r.not_judged:
        lines.append(f"  not judged: {printable(why, 200)}")
    if r.load_moved:
        lines.append(f"  {printable(r.load_moved, 300)}")
    made = list(r.entries[-len(r.plan.changes):]) if r.kept else []
    if made:
        lines.append(f"  made: the change stays (journal {', '.join(made)}, its measure "
                     "beside it)")
        if any(e.verdict == "worse" for e in r.effects):
            undo = " and ".join(f"stormdeck undo {e}" for e in made)
            lines.append(f"  it made a figure worse: {undo} puts it back")
    elif ba and ba.endswith("moves data"):
        lines.append(f"  undone: its data moves back now (journal {', '.join(r.entries)})")
    elif ba:
        lines.append("  undone in the configuration: the OSDs run with the change until "
                     f"they restart again (journal {', '.join(r.entries)})")
    else:
        lines.append("  undone: the cluster is as it was (journal "
                     f"{', '.join(r.entries[:2])}{' ...' if len(r.entries) > 2 else ''})")
    return lines


def run_line(run: dict[str, Any]) -> str:
    """One run from the record of runs (record.ExperimentLog.runs) in one line: its id,
    when, how it ended, the change, and its verdicts or why it was cut."""
    import time

    when = run.get("time")
    at = time.strftime("%Y-%m-%d %H:%M", time.localtime(when)) \
        if isinstance(when, int | float) else "?"
    head = (f"{printable(str(run.get('id', '?')), 20)}  {at}  "
            f"{printable(str(run.get('outcome', '?')), 10):<7} "
            f"{printable(str(run.get('what', '')), 200)}")
    result = run.get("result")
    if isinstance(result, dict):
        said = measure_line({**result, "experiment": run.get("id")})
        return f"{head}\n    {printable(said.partition(': ')[2], 600)}"
    reason = run.get("reason")
    return f"{head}\n    {printable(str(reason), 600)}" if reason else head


def measure_line(measured: dict[str, Any]) -> str:
    """A journal entry's measure in one line: each figure's change, interval and verdict."""
    parts = []
    figures = measured.get("figures")
    for f in figures if isinstance(figures, list) else ():
        try:
            parts.append(f"{f['figure']} {(f['ratio'] - 1) * 100:+.0f}% (95%: "
                         f"{(f['ci_low'] - 1) * 100:+.0f}% to {(f['ci_high'] - 1) * 100:+.0f}%)"
                         f" {f['verdict']}")
        except (KeyError, TypeError):
            continue
    said = "; ".join(parts) or "no figure"
    moved = measured.get("load_moved")
    return f"measured by {measured.get('experiment', '?')}: {said}" + \
        (f"; {moved}" if moved else "")
