"""The journal view: every change stormdeck made, how it ended, and its undo."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from stormdeck.tui.format import t
from stormdeck.tui.table import Column, VirtualTable


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
