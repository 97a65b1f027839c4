"""The executor: read-only guard, stale-plan check, apply, read back, journal; and undo.

Generic over the actuators (advisors/actuators.py): each kind of change says
how it is read, applied, verified and inverted; this module only orders those
steps and journals around them. Every change is journaled (intent fsync'd)
before it is made and ended after. Undo applies the targeted inverse of one
entry, never `config reset`, which would roll back everyone's later changes (K7.4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from stormdeck.advisors.actuators import Backends, actuator, same
from stormdeck.advisors.ceph_admin import CephAdmin
from stormdeck.advisors.journal import Entry, Journal
from stormdeck.advisors.model import Change
from stormdeck.advisors.plan import Plan, validate_change
from stormdeck.base.errors import UserError

__all__ = ["CephAdmin", "Executor", "Outcome", "ReadOnlyError", "StaleError", "journal_path"]


class ReadOnlyError(UserError):
    pass


class StaleError(UserError):
    pass


@dataclass(frozen=True, slots=True)
class Outcome:
    entry: str
    change: Change
    outcome: str  # "applied" | "pending" | "pending restart" | "overridden by <reason>"
    after: str | None
    detail: str = ""


class Executor:
    """Applies plans and undoes journal entries; refuses everything in read-only mode."""

    def __init__(self, journal: Journal, ceph: CephAdmin | None = None,
                 read_only: bool = False, curve_tool: list[str] | None = None,
                 verify_seconds: float = 15.0, curve_follow: Callable[[str], Any] | None = None
                 ) -> None:
        self.journal = journal
        self.read_only = read_only
        self.backends = Backends(ceph=ceph, curve_tool=tuple(curve_tool or ["curve_ops_tool"]),
                                 curve_follow=curve_follow, verify_seconds=verify_seconds)

    @property
    def ceph(self) -> CephAdmin | None:
        return self.backends.ceph

    def close(self) -> None:
        """Close the cluster connection (each apply from the console makes its own)."""
        if self.backends.ceph is not None:
            self.backends.ceph.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _guard(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"read-only mode: {what} refused (start without --read-only, "
                                "or set read_only = false for this cluster, to make changes)")

    # -- reading --

    def current(self, c: Change) -> str | None:
        """The value now, in the same terms as the plan's `current`."""
        return actuator(c.kind).read(self.backends, c)

    # -- applying --

    def check_stale(self, plan: Plan) -> None:
        ceph = self.backends.ceph
        if plan.fsid and ceph is not None and ceph.fsid() != plan.fsid:
            raise StaleError(f"the plan was made for cluster {plan.fsid}, not this one "
                             f"({ceph.fsid()})")
        moved = []
        for c in plan.changes:
            if not actuator(c.kind).has_value:
                continue
            now = self.current(c)
            if not same(now, c.current):
                moved.append(f"{c.key} on {c.target} was {c.current} when planned and is "
                             f"{now} now")
        if moved:
            raise StaleError("refused, the cluster moved since the plan: " + "; ".join(moved)
                             + "; make a new plan")

    def apply(self, plan: Plan) -> list[Outcome]:
        self._guard(f"applying {plan.rule}")
        for c in plan.changes:
            validate_change(c)
        self.check_stale(plan)
        return [self._one(c, c.proposed, plan=plan.id, rule=plan.rule, cluster=plan.fsid)
                for c in plan.changes]

    def _one(self, c: Change, value: str | None, plan: str | None = None,
             rule: str | None = None, cluster: str | None = None,
             undoes: str | None = None) -> Outcome:
        """Set what `c` names to `value` (None: back to unset), journaled around it."""
        act = actuator(c.kind)
        before = act.before(self.backends, c)
        entry = self.journal.intent(c, before, plan=plan, rule=rule, cluster=cluster,
                                    undoes=undoes)
        try:
            act.apply(self.backends, c, value)
            v = act.verify(self.backends, c, value)
        except UserError as exc:
            self.journal.end(entry, "failed", str(exc))
            raise
        except Exception as exc:  # journal first, then let it be one sentence above
            self.journal.end(entry, "failed", f"{type(exc).__name__}: {exc}")
            raise UserError(f"{c.command} failed: {type(exc).__name__}: {exc}") from None
        self.journal.end(entry, v.outcome, v.detail, v.after)
        return Outcome(entry, c, v.outcome, v.after, v.detail)

    # -- undo --

    def inverse(self, entry: Entry) -> Change:
        """The change that undoes `entry`, with the exact command: shown before confirming.

        Raises UserError when the entry has no way back, before anything is touched.
        """
        c = entry.change
        if entry.undone_by:
            raise UserError(f"{entry.id} is already undone by {', '.join(entry.undone_by)}")
        if entry.undoes is not None:
            raise UserError(f"{entry.id} is itself an undo; undo {entry.undoes} is done")
        act = actuator(c.kind)
        reason = act.cannot_undo(c)
        if reason:
            raise UserError(f"{entry.id}: {reason}")
        if entry.status == "failed":
            raise UserError(f"{entry.id} failed and changed nothing to undo")
        return act.inverse(c, entry.before)

    def undo(self, entry: Entry) -> Outcome:
        self._guard(f"undoing {entry.id}")
        inverse = self.inverse(entry)
        ceph = self.backends.ceph
        if entry.cluster and ceph is not None and ceph.fsid() != entry.cluster:
            raise UserError(f"{entry.id} was made on cluster {entry.cluster}, not on this one "
                            f"({ceph.fsid()}): undo it there")
        return self._one(inverse, entry.before, rule=entry.rule, cluster=entry.cluster,
                         undoes=entry.id)


def journal_path() -> Path:
    from stormdeck.advisors.settings import state_dir

    return state_dir() / "journal.jsonl"
