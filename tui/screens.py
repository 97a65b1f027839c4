"""The console's dialogs: the plan review (Cancel focused, typed phrase), a confirmation,
the mutes in force, help and the column menu."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option

from stormdeck.advisors.blast import Prediction
from stormdeck.advisors.plan import Plan, Runtime
from stormdeck.base.text import printable
from stormdeck.tui.keys import in_scope


def dialog_bindings(*actions: str) -> list[BindingType]:
    """The registry's dialog keys for these actions (keys.py declares every binding)."""
    return [Binding(k.keys, k.action, k.description, show=False)
            for k in in_scope("dialog") if k.action in actions]


class PlanReview(ModalScreen[bool]):
    """The exact change, and a deliberate yes: Cancel has the focus; wide, restart-needing
    or irreversible changes also need the typed phrase."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, plan: Plan, review: str, runtime: Runtime | None = None,
                 reasons: Sequence[str] | None = None, refused: str | None = None) -> None:
        super().__init__()
        self.plan = plan
        self.review = review
        # The review's (advisors/review.py), else computed from the changes and the
        # cluster's `config help` (runtime), never from what the plan states about itself.
        self.reasons = list(reasons) if reasons is not None else plan.phrase_reasons(runtime)
        self.needs_phrase = bool(self.reasons)
        # What the change moves (advisors/blast/), when it was predicted: the review text
        # shows it; a refused outcome (inactive PGs, an OSD past backfillfull) cannot be
        # applied from here, only read.
        self.refused = refused or (Prediction.from_dict(plan.prediction).refusal()
                                   if plan.prediction is not None else None)

    def compose(self) -> ComposeResult:
        with Vertical(id="review"):
            yield Static(Text(self.review), id="review-text")
            if self.refused:
                yield Static(Text(f"Refused: {printable(self.refused, 600)}.", style="bold red"),
                             id="review-refused")
            if self.needs_phrase and not self.refused:
                yield Static(Text(f"{'; '.join(self.reasons)}.\n"
                                  f"Type {printable(self.plan.phrase)!r} to apply:"))
                # Focused after letters typed on Cancel, the box keeps them (no select-all
                # that the next letter would replace).
                yield Input(id="phrase", select_on_focus=False)
                yield Static(id="phrase-why")
            with Horizontal(id="review-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button("Apply", id="apply", variant="warning",
                             disabled=self.needs_phrase or bool(self.refused))

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Input.Changed, "#phrase")
    def phrase_typed(self, event: Input.Changed) -> None:
        self.query_one("#apply", Button).disabled = event.value != self.plan.phrase
        self.query_one("#phrase-why", Static).update("")

    def on_key(self, event: events.Key) -> None:
        """What is typed is the phrase wherever the focus is: Cancel keeps the focus (Enter
        still cancels) and the letters land in the box, not nowhere."""
        if not self.needs_phrase or self.refused:
            return
        box = self.query_one("#phrase", Input)
        if self.focused is box:
            return
        if event.key == "backspace":  # a slip mended where it was made
            box.action_delete_left()
        elif event.is_printable and event.character is not None:
            box.insert_text_at_cursor(event.character)
        else:
            return
        event.stop()
        event.prevent_default()

    @on(Input.Submitted, "#phrase")
    def phrase_entered(self, event: Input.Submitted) -> None:
        if event.value == self.plan.phrase:
            self.dismiss(True)
            return
        why = "the box is empty" if not event.value else "what is typed is not the phrase"
        self.query_one("#phrase-why", Static).update(
            Text(f"Not applied: {why}; type {printable(self.plan.phrase)!r} exactly "
                 "(Esc cancels).", style="bold"))

    @on(Button.Pressed, "#apply")
    def apply(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


class Confirm(ModalScreen[bool]):
    """Yes or no before a command changes something (as k9s asks): Cancel has the focus,
    Enter on it or Esc changes nothing."""

    BINDINGS: ClassVar[list[BindingType]] = dialog_bindings("close")
    DEFAULT_CSS = """
    Confirm { align: center middle; }
    #confirm { width: 90%; max-width: 90; height: auto; border: thick $warning;
               background: $surface; padding: 1 2; }
    #confirm-buttons { height: 3; align-horizontal: right; }
    """

    def __init__(self, question: str, verb: str) -> None:
        super().__init__()
        self.question = question
        self.verb = verb

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(Text(self.question), id="confirm-text")
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button(self.verb, id="ok", variant="warning")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#ok")
    def ok(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_close(self) -> None:
        self.dismiss(False)


class MutesList(ModalScreen[None]):
    """The mutes in force on one cluster (its own, and those made with no cluster known);
    x or Delete lifts the selected one, through the store (under the writer lock)."""

    BINDINGS: ClassVar[list[BindingType]] = dialog_bindings("close", "lift")
    DEFAULT_CSS = """
    MutesList { align: center middle; }
    #mutes { width: 90%; max-width: 120; height: auto; max-height: 90%;
             border: thick $primary; background: $surface; }
    """

    def __init__(self, store: Any, fsid: str | None, cluster: str) -> None:
        super().__init__()
        self.store = store
        self.fsid = fsid
        self.cluster = cluster
        self.mutes: list[Any] = []

    def compose(self) -> ComposeResult:
        menu = OptionList(id="mutes")
        menu.border_title = f"Mutes on {printable(self.cluster, 60)}"
        menu.border_subtitle = "x or Delete: lift   Esc: close"
        yield menu

    def on_mount(self) -> None:
        self.refresh_list()
        self.query_one(OptionList).focus()

    def refresh_list(self) -> None:
        import time

        from stormdeck.base.errors import UserError

        menu = self.query_one(OptionList)
        try:
            self.mutes = sorted(self.store.for_cluster(self.fsid),
                                key=lambda m: (m.rule, m.target))
        except UserError as exc:  # a file stormdeck would not write: said, not a crash
            self.mutes = []
            self.notify(printable(str(exc), 300), title="mutes", severity="error",
                        markup=False)
        menu.clear_options()
        if not self.mutes:
            menu.add_option(Option(Text("no mutes in force on this cluster (m mutes the "
                                        "selected finding)", style="dim"), disabled=True))
            return
        for m in self.mutes:
            until = time.strftime("%H:%M", time.localtime(m.until))
            where = "" if m.fsid else "  (every cluster: made before mutes named theirs)"
            reason = f"  {printable(m.reason, 80)}" if m.reason else ""
            menu.add_option(Option(Text.assemble(
                (printable(m.rule, 60), "bold"), f"  {printable(m.target, 40)}",
                f"  until {until}", (reason, "italic"), (where, "dim"))))
        menu.highlighted = 0

    def action_lift(self) -> None:
        from stormdeck.base.errors import UserError

        index = self.query_one(OptionList).highlighted
        if index is None or not self.mutes or index >= len(self.mutes):
            return
        m = self.mutes[index]
        try:
            lifted = self.store.remove(m.rule, m.target, m.fsid)
        except UserError as exc:  # another writer holds the lock, a full disk
            self.notify(printable(str(exc), 300), title="not lifted", severity="error",
                        markup=False)
            return
        self.notify(printable(f"unmuted {m.rule} on {m.target}" if lifted
                              else f"{m.rule} on {m.target} was no longer muted", 200),
                    markup=False)
        self.refresh_list()

    def action_close(self) -> None:
        self.dismiss(None)


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
