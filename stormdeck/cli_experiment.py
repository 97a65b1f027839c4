"""`stormdeck experiment`: did a change help? Alternated windows on the live cluster."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.output import add_format_options, dump, is_json
from stormdeck.sources import add_source_options

USAGE = ("give the change as `set WHO OPTION VALUE` (a config option), `flag FLAG` (a "
         "cluster-wide OSD flag), or a plan file")


def register(sub: Any) -> None:
    from stormdeck.cli_change import _change_options

    p = sub.add_parser(
        "experiment", help="measure what a change does, in alternated rounds",
        description="Apply a change and undo it in windows without (A) and with (B) it, in "
                    "ABBA order so a drift of the load cancels; read the OSDs' op counters "
                    "each second; report each figure's change as a ratio with its 95% "
                    "interval and a verdict: better, worse, no effect (with the smallest "
                    "effect the run could have seen), or not separable (the load moved). "
                    "Every apply and undo is journaled as `apply`'s are. Slow ops, an OSD "
                    "down or PGs inactive stop it and undo the change. The change is undone "
                    "at the end unless --keep and it helped. A change that moves data or "
                    "takes effect only at a restart is measured once, before and after: "
                    "--rounds windows without it, the change, a wait until its data has "
                    "moved (or the OSDs read have been restarted, by you), --rounds with it.")
    p.add_argument("change", nargs="*", metavar="CHANGE",
                   help="set WHO OPTION VALUE | flag FLAG | PLAN.json")
    p.add_argument("--list", action="store_true",
                   help="the experiments run from here, oldest first: the change, how each "
                        "ended (done, cut, running) and its verdicts")
    p.add_argument("--for", dest="window", type=float, default=10.0, metavar="SECONDS",
                   help="seconds each window is measured (default 10)")
    p.add_argument("--rounds", type=int, default=6,
                   help="A/B pairs, an even number (default 6: 12 windows)")
    p.add_argument("--settle", type=float, default=3.0, metavar="SECONDS",
                   help="seconds after each change before its window (default 3)")
    p.add_argument("--settled-within", dest="settled_within", type=float, default=1800.0,
                   metavar="SECONDS",
                   help="a change that moves data or takes a restart: how long to wait for "
                        "the cluster to settle (or the OSDs to restart) before the run stops "
                        "and undoes it (default 1800)")
    p.add_argument("--keep", action="store_true",
                   help="keep the change at the end when a figure got better and none worse")
    _change_options(p)
    add_format_options(p, "the result")
    add_source_options(p)
    p.set_defaults(handler=cmd_experiment)


def plan_of(words: list[str], ex: Any) -> Any:
    """The plan an experiment runs: from a file, or one change written on the line (its
    current value read from the cluster, as a rule's proposal carries it)."""
    from stormdeck.advisors.actuators.table import actuator, change
    from stormdeck.advisors.plan import Plan

    if len(words) == 1:
        return Plan.load(Path(words[0]))
    verb, rest = words[0], words[1:]
    if verb == "set" and len(rest) == 3:
        c = change("ceph_config", rest[0], rest[1], None, rest[2])
    elif verb == "flag" and len(rest) == 1:
        c = change("osd_flag", "cluster", rest[0], None, "set")
    else:
        raise UserError(USAGE)
    # What the cluster holds now (the plan's stale check compares against it), and
    # whether it applies at runtime, as its `config help` says.
    c = replace(c, current=ex.current(c))
    live = actuator(c.kind).runtime(ex.ceph, c)
    if live is not None:
        c = replace(c, runtime=live)
    fsid = ex.ceph.fsid() if ex.ceph is not None else None
    return Plan(id="experiment", created=time.time(), rule="experiment", target=c.target,
                summary=f"experiment: {c.command}", source="experiment", fsid=fsid,
                changes=(c,))


def cmd_experiment(args: argparse.Namespace) -> int:
    from stormdeck.advisors.experiment.runner import Settings

    if args.list:
        if args.change:
            raise UserError("--list shows the experiments run before: it takes no change")
        return list_runs(args)
    if not args.change:
        raise UserError(USAGE)

    settings = Settings(window=args.window, rounds=args.rounds, settle=args.settle,
                        keep=args.keep, wait=args.settled_within)
    return _run(args, settings, lambda ex: plan_of(args.change, ex), lead=False)


def list_runs(args: argparse.Namespace) -> int:
    """`experiment --list`: the record of runs beside the change journal."""
    from stormdeck.advisors.apply import journal_path
    from stormdeck.advisors.experiment.record import ExperimentLog
    from stormdeck.advisors.experiment.text import run_line

    runs = ExperimentLog(journal_path().with_name("experiments.jsonl")).runs()
    if is_json(args):
        dump(runs, args)
    elif not runs:
        print("no experiment has run here")
    else:
        print("\n".join(run_line(r) for r in runs))
    return 0


def apply_measured(args: argparse.Namespace, plan: Any) -> int:
    """`apply --measure SECONDS`: the plan applied as the first window of an experiment
    whose windows run BAAB..., so it ends made, with its measure journaled beside it."""
    from stormdeck.advisors.experiment.runner import Settings

    if args.follow:
        raise UserError("--measure and --follow do not go together: --measure waits for a "
                        "change that moves data to settle, and measures it then")
    rounds = getattr(args, "rounds", None)
    settings = Settings(window=args.measure, **({"rounds": rounds} if rounds else {}))
    settings.check("--measure")
    return _run(args, settings, lambda _ex: plan, lead=True)


def _run(args: argparse.Namespace, settings: Any, plan_for: Any, lead: bool) -> int:
    from stormdeck.advisors.experiment.record import beside
    from stormdeck.advisors.experiment.runner import Experiment
    from stormdeck.advisors.experiment.text import report_lines
    from stormdeck.cli_change import confirm, executor

    settings.check()
    # `apply` has no --format: its measure is said in words.
    as_json = getattr(args, "format", None) is not None and is_json(args)
    with executor(args, needs_ceph=True) as ex:
        exp = Experiment(ex, plan_for(ex), settings, beside(ex.journal),
                         progress=lambda m: print(f"  {m}", file=sys.stderr, flush=True))
        rv = exp.review()
        load = exp.baseline()
        # With -f json the review goes to stderr: stdout holds the result alone.
        out = sys.stderr if as_json else sys.stdout
        print(rv.text, file=out)
        print(announce(exp, load, lead), file=out, flush=True)
        confirm(rv, args.yes)
        result = exp.run(rv, lead_with_change=lead)
    if as_json:
        dump(result.as_dict(), args)
    else:
        print("\n".join(report_lines(result)))
    return 0


def announce(exp: Any, load: float, lead: bool) -> str:
    """What the run will do, said before it is confirmed."""
    s = exp.settings
    reading = (f"reading {', '.join(exp.reader.osds[:6])}"
               f"{' ...' if len(exp.reader.osds) > 6 else ''}; the load now {load:,.0f} "
               "client ops/s; each apply and undo journaled")
    if exp.before_after:
        wait = exp.waits_for()
        end = "made" if lead else "undone (unless --keep and it helped)"
        return (f"experiment {exp.id}: {exp.before_after}, so it is measured once, before "
                f"and after, not alternated: {s.rounds} windows of {s.window:g} s without "
                f"it, the change, a wait (at most {s.wait:g} s) until {wait}, {s.rounds} "
                f"windows with it; {reading}, the change {end} at the end")
    windows = 2 * s.rounds
    total = windows * s.window + (s.rounds + 1) * s.settle
    order, end = ("BAAB", "made") if lead else ("ABBA", "undone")
    return (f"experiment {exp.id}: {windows} windows of {s.window:g} s in {order} order "
            f"(about {total:.0f} s), {reading}, the change {end} at the end")
