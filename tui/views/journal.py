"""The journal view: every change stormdeck made, how it ended, and its undo (u)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from textual import work
from textual.binding import Binding, BindingType

from stormdeck.advisors.blast import against_outcome
from stormdeck.advisors.experiment.text import measure_line
from stormdeck.advisors.overrides import is_overridden
from stormdeck.base.errors import UserError
from stormdeck.tui.format import inert
from stormdeck.tui.keys import in_scope
from stormdeck.tui.screens import PlanReview
from stormdeck.tui.table import Column, VirtualTable
from stormdeck.tui.views.base import (
    JournalChanged,
    View,
    carry_out_in_worker,
    review_in_worker,
)


def _status(status: str) -> Any:
    if is_overridden(status):
        # The daemons run something else, whatever is stored: the reason goes beside
        # the values, where there is room for it.
        return inert("overridden", "yellow")
    if status in ("pending", "pending restart"):
        return inert(status, "yellow")
    return inert(status, "bold red" if status in ("INCOMPLETE", "failed", "unknown") else "")


def _in_experiment(e: Any) -> bool:
    return bool(e.plan and e.plan.startswith("exp-"))


def _told(e: Any) -> str:
    """What the row adds to the command: the prediction against the outcome, the
    experiment it is a round of, and what an experiment measured it to do."""
    out = ""
    if e.prediction is not None:
        out += f"  [{against_outcome(e.prediction, e.observed, e.settled)}]"
    if e.measured is not None:
        out += f"  [{measure_line(e.measured)}]"
    elif _in_experiment(e):
        out += f"  [a round of {e.plan}]"
    return out


# An entry whose outcome is still open: read again on the cluster while the view shows it.
OPEN = ("INCOMPLETE", "unknown", "pending")
REREAD_EVERY = 10.0


class JournalTable(View, VirtualTable):
    view_id = "journal"
    follows_journal = True
    EMPTY = ("no changes yet: a finding's change, reviewed (6, then Enter) and applied, is "
             "journaled here, and u undoes it")
    COLUMNS = (Column("id", 10), Column("when", 14, 3), Column("status", 15),
               Column("change", 50, 1), Column("before -> after", 24, 2),
               Column("undo", 20, 4))
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(k.keys, k.action, k.description, show=False) for k in in_scope("journal")]

    def show(self, frame: Any) -> None:
        """The journal follows the journal file (show_entries), not the frames."""

    def show_entries(self, entries: Sequence[Any], clock: Callable[[float], str]) -> None:
        self.entries = {e.id: e for e in entries}
        # Open outcomes, and data movement not yet seen active+clean, are read again.
        if any((e.status in OPEN and not e.undone_by) or e.awaiting_clean for e in entries):
            self.reread_open()
        self.sync((e.id, (inert(e.id), inert(clock(e.started)), _status(e.status),
                          inert(e.change.command + _told(e),
                                limit=80 if e.prediction is None and e.measured is None
                                and not _in_experiment(e) else 300),
                          inert(f"{e.before if e.before is not None else 'unset'} -> {e.after}"
                            + (f" ({e.status.removeprefix('overridden by ')})"
                               if is_overridden(e.status) else "")),
                          inert(", ".join(e.undone_by)
                                or (f"undoes {e.undoes}" if e.undoes else ""))))
                  for e in entries)

    def selected(self) -> Any:
        key = self.selected_key
        return getattr(self, "entries", {}).get(key) if key else None

    def action_undo(self) -> None:
        entry = self.selected()
        if entry is None or self.app.tab.executor_factory is None:
            return
        # Every check, the inverse and what it moves, before the review opens (as
        # `stormdeck undo` makes them), on the connection the undo is then made with.
        self.review_undo(entry)

    @work(thread=True, exclusive=True, group="undo-review")
    def review_undo(self, entry: Any) -> None:
        review_in_worker(self, lambda executor: executor.review_undo(entry),
                         self.open_review)

    def open_review(self, rv: Any) -> None:
        self.app.push_screen(PlanReview(rv.plan, rv.text, reasons=rv.reasons,
                                        refused=rv.refused),
                             lambda ok: self.undo_entry(rv) if ok else self.dismissed(rv))

    @work(thread=True)
    def dismissed(self, rv: Any) -> None:
        rv.close()

    def reread_open(self) -> None:
        """Converging changes followed to their end, unknown outcomes read again: so the
        journal shows what Ceph did (pg_num reached), not the last step seen."""
        factory = getattr(self.app.tab, "executor_factory", None)
        now = time.monotonic()
        if factory is None or now - getattr(self, "_reread_at", -REREAD_EVERY) < REREAD_EVERY:
            return
        self._reread_at = now
        self._reread(factory)

    @work(thread=True, exclusive=True, group="reread")
    def _reread(self, factory: Callable[[], Any]) -> None:
        try:
            with factory() as executor:
                settled = executor.refresh_open()
        except UserError:
            return  # the cluster does not answer now: the next look tries again
        if settled:
            self.post_message(JournalChanged())

    @work(thread=True, exclusive=True)
    def undo_entry(self, rv: Any) -> None:
        carry_out_in_worker(self, "undone", rv)
