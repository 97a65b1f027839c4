"""One reviewed change, for the CLI and the console alike: what runs, what was checked, what
it moves, what must be confirmed, and the one call that carries it out."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Entry
from stormdeck.advisors.plan import Plan, review, validate_change
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable


def undo_plan(entry: Entry, inverse: Change, told: dict[str, Any] | None = None) -> Plan:
    """The plan of undoing `entry` with `inverse`: what an undo is reviewed, predicted and
    guarded as (the one place it is built)."""
    return Plan(id=f"undo-{entry.id}", created=time.time(), rule=entry.rule or "undo",
                target=inverse.target, summary=f"undo {entry.change.command}",
                source="journal", fsid=entry.cluster, changes=(inverse,), prediction=told)


@dataclass
class Review:
    """A change as the operator is asked to confirm it, made by `Executor.review` (a plan)
    or `Executor.review_undo` (a journal entry) with every check run first, in the same
    order for the CLI and the console: read-only, the changes' shape, the cluster, stale
    values, what the cluster says of applying at runtime, the prediction of what it moves,
    and the guard. It holds the executor (and its one connection) until carried out."""

    plan: Plan  # with the prediction made now, when the change moves data
    executor: Any  # advisors.apply.Executor (not imported: apply imports this module)
    prediction: Any = None  # advisors.blast.Prediction, or None: nothing moves data
    checks: tuple[str, ...] = ()  # the checks that ran, in order
    reasons: tuple[str, ...] = ()  # why a typed phrase is asked; none: a yes is enough
    runtimes: dict[int, bool | None] = field(default_factory=dict)  # per change, as asked
    entry: Entry | None = None  # the entry an undo undoes
    inverse: Change | None = None
    # Why it cannot be carried out (the guard: PGs made inactive, an OSD past
    # backfillfull): shown with the prediction, never applied.
    refused: str | None = None

    @property
    def text(self) -> str:
        """The review as shown: the plan with what it moves (when predicted); for an undo,
        the entry it undoes and the exact inverse first."""
        if self.entry is None or self.inverse is None:
            return review(self.plan)
        c, p = self.inverse, printable
        return "\n".join((f"undo {p(self.entry.id)}: {p(self.entry.change.command, 300)}",
                          f"  runs: {p(c.command, 300)}  ({p(c.key)}: {p(c.current)} -> "
                          f"{p(c.proposed)})", review(self.plan)))

    @property
    def needs_phrase(self) -> bool:
        return bool(self.reasons)

    @property
    def phrase(self) -> str:
        return f"undo {self.entry.id}" if self.entry is not None else self.plan.phrase

    def runtime(self, c: Change) -> bool | None:
        """What the cluster said, at review, of `c` applying at runtime (asked once)."""
        return self.runtimes.get(id(c))

    def carry_out(self) -> list[Any]:
        """The confirmed change, journaled, sent and read back (advisors/apply.py), on the
        executor the review was made with; its outcomes. Under the writer's lock it is
        checked and predicted again: a cluster that moved meanwhile refuses it there."""
        if self.refused:
            raise UserError(self.refused)
        if self.entry is not None:
            return [self.executor.undo(self.entry, told=self.prediction)]
        return self.executor.apply(self.plan)

    def close(self) -> None:
        self.executor.close()


def review_plan(ex: Any, plan: Plan, runtime: Callable[[Change], bool | None]) -> Review:
    """`Executor.review`: every check a plan gets before the operator is asked, in order;
    the first that fails raises (UserError: nothing was changed)."""
    checks = []
    ex.refuse_if_read_only(f"applying {plan.rule}")
    checks.append("read-only")
    for c in plan.changes:
        validate_change(c)
    checks.append("changes")
    ex.check_stale(plan)  # the cluster it was made for, and values moved since
    checks.append("stale")
    runtimes = {id(c): runtime(c) for c in plan.changes}
    for c in plan.changes:
        # A plan that says "at runtime" where the cluster says "restart" understates what
        # it does: refused like any other plan that lies.
        if c.runtime is True and runtimes[id(c)] is False:
            raise UserError(f"the plan says {printable(c.key)} on {printable(c.target)} "
                            "applies at runtime, but the cluster says it needs a restart: "
                            "refused; make a new plan")
    checks.append("runtime")
    prediction = ex.prediction(plan)
    checks.append("prediction")
    if prediction is not None:
        plan = replace(plan, prediction=prediction.to_dict())
    # The plan now carries what the operator is shown: past nearfull is what they confirm.
    refused = _guarded(ex, plan, prediction)
    checks.append("guard")
    reasons = tuple(plan.phrase_reasons(lambda c: runtimes.get(id(c))))
    return Review(plan, ex, prediction, tuple(checks), reasons, runtimes, refused=refused)


def _guarded(ex: Any, plan: Plan, prediction: Any) -> str | None:
    """The guard's refusal, kept to be shown beside the prediction (the console's review
    shows what would happen and disables Apply; the CLI prints it and exits 3)."""
    try:
        ex.guard(plan, prediction)
    except UserError as exc:
        return str(exc)
    return None


def review_undo(ex: Any, entry: Entry) -> Review:
    """`Executor.review_undo`: the same checks for undoing a journal entry (its inverse
    built here once); a typed phrase only where the undo fills an OSD past nearfull."""
    checks = []
    ex.refuse_if_read_only(f"undoing {entry.id}")
    checks.append("read-only")
    inverse = ex.inverse(entry)  # an entry with no way back is refused before asking
    checks.append("changes")
    ex.check_undo_cluster(entry)  # another cluster's entry: "undo it there", not "stale"
    ex.check_undo_stale(entry, inverse)
    checks.append("stale")
    checks.append("runtime")  # an undo puts back what was: no runtime claim to check
    plan = undo_plan(entry, inverse)
    prediction = ex.prediction(plan)
    checks.append("prediction")
    if prediction is not None:
        plan = replace(plan, prediction=prediction.to_dict())
    refused = _guarded(ex, plan, prediction)  # past nearfull: the phrase below confirms it
    checks.append("guard")
    near = prediction.phrase_reason() if prediction is not None else None
    return Review(plan, ex, prediction, tuple(checks), (near,) if near else (),
                  entry=entry, inverse=inverse, refused=refused)
