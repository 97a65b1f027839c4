"""The console's dialogs: the plan review (Cancel focused, typed phrase), help and the
column menu."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from stormdeck.advisors.plan import Plan, Runtime
from stormdeck.base.text import printable
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option


class PlanReview(ModalScreen[bool]):
    """The exact change, and a deliberate yes: Cancel has the focus; wide, restart-needing
    or irreversible changes also need the typed phrase."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, plan: Plan, review: str, runtime: Runtime | None = None) -> None:
        super().__init__()
        self.plan = plan
        self.review = review
        # Computed from the changes and the cluster's `config help` (runtime), never from
        # what the plan states about itself.
        self.reasons = plan.phrase_reasons(runtime)
        self.needs_phrase = bool(self.reasons)

    def compose(self) -> ComposeResult:
        with Vertical(id="review"):
            yield Static(Text(self.review), id="review-text")
            if self.needs_phrase:
                yield Static(Text(f"{'; '.join(self.reasons)}.\n"
                                  f"Type {printable(self.plan.phrase)!r} to apply:"))
                yield Input(id="phrase")
            with Horizontal(id="review-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button("Apply", id="apply", variant="warning",
                             disabled=self.needs_phrase)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Input.Changed, "#phrase")
    def phrase_typed(self, event: Input.Changed) -> None:
        self.query_one("#apply", Button).disabled = event.value != self.plan.phrase

    @on(Button.Pressed, "#apply")
    def apply(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


class Help(ModalScreen[None]):
    """Every key, mouse action and palette command, by where it works; scrolls (arrows,
    PgUp/PgDn, the wheel) when the terminal is short."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q,f1", "close",
                                                     "Close")]

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        yield VerticalScroll(Static(self.body(), id="help-text"), id="help")

    def body(self) -> Group:
        """A heading per section, then its keys beside what they do (wrapped in its own
        column, so a long line never runs under the keys)."""
        parts: list[Any] = [Text.assemble(("stormdeck console", "bold"),
                                          ("   Up/Down/PgUp/PgDn scroll, Esc closes", "dim"))]
        for title, rows in self.sections:
            parts.append(Text(f"\n{title}", style="bold underline"))
            width = max((len(k) for k, _ in rows if len(k) <= 14), default=4)
            for key, what in rows:
                if len(key) > 14:
                    # A palette command's long name: on its own line, what it does below.
                    parts.append(Text(key, style="bold"))
                    key = ""
                grid = Table.grid(padding=(0, 2))
                grid.add_column(style="bold", no_wrap=True, width=width)
                grid.add_column()
                grid.add_row(Text(key), Text(what))
                parts.append(grid)
        return Group(*parts)

    def plain(self, width: int = 80) -> str:
        """The help as text, laid out as on screen at `width` columns."""
        import io

        from rich.console import Console

        console = Console(width=width, file=io.StringIO(), record=True)
        console.print(self.body())
        return console.export_text()

    def on_mount(self) -> None:
        self.query_one("#help", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)


class ColumnMenu(ModalScreen[int | None]):
    """Pick the column to sort by (htop's F6): Enter sorts by it; Esc leaves the sort."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, names: list[str], current: int | None, ascending: bool,
                 hidden: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.names = names
        self.current = current
        self.ascending = ascending
        self.hidden = hidden

    def compose(self) -> ComposeResult:
        arrow = " (ascending)" if self.ascending else " (descending)"
        options = [Option(Text(name + (arrow if i == self.current else "")
                               + ("  [not shown at this width]" if name in self.hidden
                                  else "")), id=str(i))
                   for i, name in enumerate(self.names)]
        menu = OptionList(*options, id="columns")
        menu.border_title = "Sort by"
        yield menu

    def on_mount(self) -> None:
        menu = self.query_one(OptionList)
        menu.highlighted = self.current or 0
        menu.focus()

    @on(OptionList.OptionSelected)
    def chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int(event.option.id or 0))

    def action_close(self) -> None:
        self.dismiss(None)
