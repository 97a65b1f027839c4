"""`stormdeck plan | apply | journal | undo`: reviewed, confirmed, journaled changes."""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from stormdeck.advisors.actuators.table import actuator
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.plan import Plan, plan_from_finding, review
from stormdeck.advisors.rules import BY_ID
from stormdeck.assembly import add_executor_options, assemble, settings_of
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.output import add_format_options, dump, is_json
from stormdeck.sources import add_source_options, ceph_admin


def register(sub: Any) -> None:
    plan = sub.add_parser("plan", help="a reviewed change from a rule's finding, saved",
                          description="Read the cluster now, run RULE, and save the change its "
                                      "finding proposes as a plan file to review and apply.")
    plan.add_argument("rule", help="the rule id (stormdeck check --list-rules)")
    plan.add_argument("--target", help="which finding, when the rule fires on several")
    plan.add_argument("-o", "--output", type=Path, help="plan file (default plan-<id>.json)")
    plan.add_argument("--for", dest="duration", type=float, default=3.0, metavar="SECONDS",
                      help="seconds to read the cluster first (default 3)")
    add_source_options(plan)
    plan.set_defaults(handler=cmd_plan)

    apply = sub.add_parser("apply", help="apply a saved plan",
                           description="Review and apply a plan: refused in read-only mode, "
                                       "or when anything it changes moved since it was made.")
    apply.add_argument("file", type=Path)
    apply.add_argument("--follow", type=float, metavar="SECONDS", default=0.0,
                       help="after a change that moves data, follow `ceph status` for up to "
                            "SECONDS until active+clean and journal how long it took (by "
                            "default apply returns at once and a later `stormdeck journal "
                            "--refresh` or the console's journal records it)")
    apply.add_argument("--measure", type=float, metavar="SECONDS", default=None,
                       help="then measure what it does: windows of SECONDS with and without "
                            "it, in BAAB order under the live load, ending with it made; "
                            "the effect is journaled beside it (see stormdeck experiment)")
    apply.add_argument("--rounds", type=int, default=None,
                       help="with --measure: A/B pairs, an even number (default 6)")
    _change_options(apply)
    add_source_options(apply)
    apply.set_defaults(handler=cmd_apply)

    journal = sub.add_parser("journal", help="every change stormdeck made, and how it ended",
                             description="The change journal, oldest first. Exits 3 when a "
                                         "line of it is damaged (the rest is still shown).")
    journal.add_argument("--last", type=int, metavar="N",
                         help="only the newest N entries (read from the end of the journal)")
    journal.add_argument("--refresh", action="store_true",
                         help="first read again, on the cluster, every entry whose outcome is "
                              "open (unknown, incomplete, pending) and journal what is known")
    add_format_options(journal, "the entries")
    add_source_options(journal)
    journal.set_defaults(handler=cmd_journal)

    undo = sub.add_parser("undo", help="undo one journaled change (the latest by default)",
                          description="Apply the inverse of one journal entry: the old value "
                                      "set again (or removed), a flag unset, a profile or "
                                      "cache restored; itself journaled. Never `config reset`.")
    undo.add_argument("id", nargs="?", help="the entry's id (or its start), from "
                                            "`stormdeck journal`")
    _change_options(undo)
    add_source_options(undo)
    undo.set_defaults(handler=cmd_undo)


def _change_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--yes", action="store_true",
                   help="do not ask: for automation, after reviewing the plan")
    p.add_argument("--read-only", action="store_true",
                   help="refuse every change (also $STORMDECK_READ_ONLY=1)")
    add_executor_options(p)


# ---- review ------------------------------------------------------------------------


def confirm(rv: Any, yes: bool) -> None:
    """y/N, or a typed phrase when a change is wide, needs a restart, cannot be undone or
    its runtime is unknown: the review's reasons, computed from the changes and the
    cluster's own `config help`, never from what the plan file states."""
    if yes:
        return
    if not sys.stdin.isatty() and not os.environ.get("STORMDECK_CONFIRM_STDIN"):
        raise UserError("no terminal to confirm on: review the plan, then use --yes")
    if rv.reasons:
        want = rv.phrase
        print(f"This plan needs a typed confirmation: {'; '.join(rv.reasons)}. Type "
              f"{printable(want)!r} to apply it, anything else to cancel:", flush=True)
        answer = sys.stdin.readline().strip()
        if answer != want:
            raise UserError("cancelled: the phrase did not match; nothing was changed")
        return
    print("Apply it? [y/N] ", end="", flush=True)
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise UserError("cancelled; nothing was changed")


def read_only(args: argparse.Namespace) -> bool:
    return bool(args.read_only or os.environ.get("STORMDECK_READ_ONLY", "") not in ("", "0"))


def executor(args: argparse.Namespace, needs_ceph: bool) -> Any:
    """The Executor, as the assembly makes it for every entry point (the console's too);
    used in a `with`, which closes its connection."""
    return assemble(args, judge=False, sources=False).executor(journal(), needs_ceph)


def journal() -> Any:
    from stormdeck.advisors.apply import journal_path

    return Journal(journal_path(), warn=lambda m: print(f"stormdeck: {m}", file=sys.stderr))


def _began(ex: Any, exc: UserError) -> UserError:
    """A failure after a change of this run was sent exits 1 (see stormdeck journal); one
    before anything was sent, or that Ceph refused, keeps its own code (3)."""
    from stormdeck.advisors.apply import NothingChanged

    if exc.exit_code == 3 and ex.began and not isinstance(exc, NothingChanged):
        return UserError(f"{exc} (journal {', '.join(ex.began)}: see stormdeck journal for "
                         "what was changed)", exit_code=1)
    return ex.told(exc)


def needs_ceph(changes: Any) -> bool:
    return any(actuator(c.kind).needs_ceph for c in changes)


# ---- commands -------------------------------------------------------------------------


def findings_now(args: argparse.Namespace, rule_id: str, duration: float):
    """One rule judged on a fresh read, its for-window waived: (engine, findings, snapshot).
    The engine is the console's (the same evidence and mutes), so a plan proposes what the
    console proposes."""
    from stormdeck.watching import watch

    if rule_id not in BY_ID:
        raise UserError(f"there is no rule {rule_id!r} (see stormdeck check --list-rules)")
    settings = settings_of(args)
    settings[rule_id] = replace(settings[rule_id], for_seconds=0.0, warmup_samples=1,
                                enabled=True)
    pieces = assemble(args, settings=settings, rules=[BY_ID[rule_id]])
    findings, snap = watch(pieces.sources, pieces.engine, duration, timeout=args.timeout,
                           first_polls=2)
    return pieces.engine, findings, snap


def one_finding(findings: list, rule_id: str, target: str | None):
    found = [f for f in findings if target in (None, f.target)]
    if not found:
        raise UserError(f"{rule_id} finds nothing on this cluster now"
                        + (f" for {target}" if target else ""))
    if len(found) > 1:
        raise UserError(f"{rule_id} fires on {len(found)} targets; choose one with --target: "
                        + ", ".join(f.target for f in found))
    return found[0]


def cmd_plan(args: argparse.Namespace) -> int:
    # Where the plan goes is said wrong before the cluster is read, not after.
    if args.output is not None and not args.output.parent.is_dir():
        raise UserError(f"cannot write the plan to {printable(args.output, 200)}: no "
                        "such directory")
    # A plan is made from what holds now: the rule's for-window does not apply.
    _, findings, snap = findings_now(args, args.rule, args.duration)
    finding = one_finding(findings, args.rule, args.target)
    plan = planned(args, finding, snap.cluster.fsid if snap and snap.cluster else None)
    out = args.output or Path(f"plan-{plan.id}.json")
    try:
        plan.save(out)
    except OSError as exc:  # a directory named, a full disk, no permission
        raise UserError(f"cannot write the plan to {printable(out, 200)}: "
                        f"{(exc.strerror or str(exc)).lower()}") from None
    print(review(plan))
    print(f"saved to {out}; apply it with: stormdeck apply {out}")
    return 0


def planned(args: argparse.Namespace, finding: Any, fsid: str | None) -> Any:
    """The finding's plan with what it moves predicted from the cluster (advisors/blast.py);
    a refused prediction prints the plan, then exits 3 with the reason."""
    from stormdeck.advisors.blast import moves_data, plan_prediction
    from stormdeck.advisors.plan import Refused

    if not any(moves_data(c) for c in finding.changes):
        return plan_from_finding(finding, fsid)
    admin = ceph_admin(args)
    try:
        return plan_from_finding(finding, fsid,
                                 predict=lambda ch: plan_prediction(admin.connection, ch))
    except Refused as exc:
        print(review(exc.plan))
        raise
    finally:
        admin.close()


def cmd_apply(args: argparse.Namespace) -> int:
    from stormdeck.advisors.apply import NothingChanged
    from stormdeck.advisors.blast import moves_data

    if not 0 <= args.follow <= 86400:
        raise UserError(f"--follow takes 0 to 86400 seconds, not {args.follow:g}")
    if args.rounds is not None and args.measure is None:
        raise UserError("--rounds is for --measure: apply alone makes the change once")
    plan = Plan.load(args.file)
    if args.measure is not None:
        from stormdeck.cli_experiment import apply_measured

        return apply_measured(args, plan)
    print(review(plan))
    with executor(args, needs_ceph(plan.changes)) as ex:
        # Every check before asking (read-only, stale, runtime, what it moves and the
        # guard), as the console makes them: the file's prediction is only what was shown.
        rv = ex.review(plan)
        if rv.prediction is not None:
            print("\n".join(f"  {printable(line, 400)}" for line in rv.prediction.lines()))
        if rv.refused:
            raise NothingChanged(rv.refused)
        confirm(rv, args.yes)
        try:
            outcomes = rv.carry_out()
        except UserError as exc:
            raise _began(ex, exc) from None
        for o in outcomes:
            extra = f" ({printable(o.detail, 200)})" if o.detail else ""
            print(f"{o.outcome}: {printable(o.change.command, 200)} -> {printable(o.after)}"
                  f"{extra}  [journal {o.entry}]", flush=True)
        moving = [o.entry for o in outcomes if rv.prediction is not None
                  and moves_data(o.change)]
        if moving and args.follow > 0:
            follow(ex, moving, args.follow)
    return 0


def follow(ex: Any, entry_ids: list[str], seconds: float) -> None:
    """apply --follow: the data movement followed to active+clean, bounded, Ctrl-C safe."""
    print(f"following the data movement for up to {seconds:g} s (Ctrl-C stops following; "
          "the change stays made)", flush=True)
    try:
        entries = ex.watch(entry_ids, seconds)
    except KeyboardInterrupt:
        entries = [journal().find(i) for i in entry_ids]
    except UserError as exc:  # the change is made: a lost read ends the following only
        print(f"stopped following: {printable(str(exc), 300)}; stormdeck journal --refresh "
              "reads it later", file=sys.stderr)
        entries = [journal().find(i) for i in entry_ids]
    for e in entries:
        print(f"  {e.id}: {printable(predicted_against_observed(e), 600)}")


# What an outcome means to whoever reads the journal after a fault.
EXPLAIN = {
    "INCOMPLETE": "no end was journaled (stormdeck stopped in between): the change may or "
                  "may not have been made; undo reads it again and puts back the value before",
    "unknown": "sent, but no answer or read-back said whether it was made; undo reads it "
               "again and puts back the value before",
    "pending": "on its way to its target; undo (or a later read) follows it on",
}


def cmd_journal(args: argparse.Namespace) -> int:
    from stormdeck.advisors.apply import journal_path

    j = journal()
    if args.last is not None and args.last < 1:
        raise UserError(f"--last takes a positive number of entries, not {args.last}")
    if args.refresh:
        with assemble(args, judge=False, sources=False).executor(j, read_only=False) as ex:
            settled = ex.refresh_open(j.entries(last=args.last) if args.last else None)
        print(f"read open entries again: {settled} settled", file=sys.stderr)
    entries = j.entries(last=args.last)
    damaged = [d for d in j.damaged if "last line is torn" not in d]
    if is_json(args):
        dump([{**asdict(e), "status": e.status} for e in entries], args)
    else:
        if not entries:
            print(f"no changes journaled in {journal_path()}")
        for e in entries:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.started))
            tail = f"  undone by {', '.join(e.undone_by)}" if e.undone_by else \
                f"  undoes {e.undoes}" if e.undoes else ""
            if e.plan and e.plan.startswith("exp-"):
                tail += f"  (experiment {printable(e.plan, 20)})"
            print(f"{e.id}  {when}  {e.status:<15} {printable(e.change.command, 120)}  "
                  f"({printable(e.before) if e.before is not None else 'unset'} -> "
                  f"{printable(e.after)}){tail}")
            if e.detail and e.status not in ("applied",):
                print(f"    {printable(e.detail, 300)}")
            if e.status in EXPLAIN and not e.undone_by:
                print(f"    {EXPLAIN[e.status]}")
            if e.prediction is not None:
                print(f"    {printable(predicted_against_observed(e), 400)}")
            if e.measured is not None:
                from stormdeck.advisors.experiment.text import measure_line

                print(f"    {printable(measure_line(e.measured), 600)}")
    for note in j.damaged:
        print(f"stormdeck: {note}", file=sys.stderr)
    return 3 if damaged else 0


def predicted_against_observed(e: Any) -> str:
    from stormdeck.advisors.blast import against_outcome

    text = against_outcome(e.prediction, e.observed, e.settled)
    if e.awaiting_clean:
        text += " (stormdeck journal --refresh reads it again)"
    return text


def cmd_undo(args: argparse.Namespace) -> int:
    from stormdeck.advisors.apply import NothingChanged

    entry = journal().find(args.id)
    with executor(args, needs_ceph([entry.change])) as ex:
        rv = ex.review_undo(entry)  # refuses an entry with no way back before asking
        for line in rv.text.splitlines():
            print(printable(line, 400))
        if rv.refused:
            raise NothingChanged(rv.refused)
        if not args.yes:
            confirm_undo(rv.reasons[0] if rv.reasons else None, entry.id)
        try:
            (o,) = rv.carry_out()
        except UserError as exc:
            raise _began(ex, exc) from None
    extra = f" ({printable(o.detail, 200)})" if o.detail else ""
    print(f"{o.outcome}: {printable(o.change.command)} -> {printable(o.after)}{extra}"
          f"  [journal {o.entry}]")
    return 0


def confirm_undo(nearfull: str | None = None, entry_id: str = "") -> None:
    if not sys.stdin.isatty() and not os.environ.get("STORMDECK_CONFIRM_STDIN"):
        raise UserError("no terminal to confirm on: use --yes")
    if nearfull:
        want = f"undo {entry_id}"
        print(f"This undo needs a typed confirmation: {nearfull}. Type {want!r} to undo it, "
              "anything else to cancel:", flush=True)
        if sys.stdin.readline().strip() != want:
            raise UserError("cancelled: the phrase did not match; nothing was changed")
        return
    print("Undo it? [y/N] ", end="", flush=True)
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise UserError("cancelled; nothing was changed")
