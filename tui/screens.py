"""The console's dialogs: the plan review (Cancel focused, typed phrase) and help."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from stormdeck.advisors.plan import Plan, Runtime
from stormdeck.base.text import printable
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static


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
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "close", "Close")]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.lines = bindings

    def compose(self) -> ComposeResult:
        text = Text("Keys\n\n", style="bold")
        for key, what in self.lines:
            text.append(f"  {key:<12}", style="bold")
            text.append(f"{what}\n")
        yield VerticalScroll(Static(text), id="help")

    def action_close(self) -> None:
        self.dismiss(None)
