"""What every view is: a widget that renders a Frame, and the text views' common base."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.message import Message

from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.tui.feed import Frame
from stormdeck.tui.lines import LinesView


class JournalChanged(Message):
    """A change was applied or undone: the journal view reads the journal again."""


class View:
    """A view of the console: shown in the ContentSwitcher under `view_id`, given frames.

    `settings` are the rules' settings the engine judges by (the app hands them
    over), so a threshold a view draws is the one the advisors use, user
    overrides included.
    """

    view_id: ClassVar[str]
    ascii_only = False
    settings: dict[str, Any] | None = None
    # A view of the change journal rather than of frames: the app hands it the journal's
    # entries (show_entries) when it is shown and whenever a change is made.
    follows_journal: ClassVar[bool] = False

    def show(self, frame: Frame) -> None:
        raise NotImplementedError

    def show_entries(self, entries: Any, clock: Callable[[float], str]) -> None:
        """The journal's newest entries, for a view that follows_journal."""

    def threshold(self, rule_id: str, key: str) -> float:
        if self.settings is None:
            from stormdeck.advisors.settings import load_settings

            self.settings = load_settings()
        return float(self.settings[rule_id].params[key])


class FrameText(View, LinesView):
    """A view that is one rendered text of the frame, repainted line by line."""

    def show(self, frame: Frame) -> None:
        self.update(self.render_frame(frame))

    def render_frame(self, frame: Frame) -> Text:
        raise NotImplementedError


def change_in_worker(widget: Any, done: str, action: Callable[[Any], str]) -> None:
    """From a worker thread: `action(executor)` on the active cluster's executor, closed
    after; what it did, or why it was refused, as a toast; the journal view told."""
    factory = widget.app.tab.executor_factory
    say = widget.app.call_from_thread
    if factory is None:
        say(widget.notify, "no executor: changes are off in this session", severity="error")
        return
    executor = None
    try:
        with factory() as executor:
            text = action(executor)
    except UserError as exc:
        if executor is not None:
            exc = executor.told(exc)
        if exc.exit_code == 0:  # e.g. nothing to undo: the cluster is as wanted
            say(widget.notify, printable(str(exc), 400), title=done, markup=False)
            widget.post_message(JournalChanged())
            return
        say(widget.notify, printable(str(exc), 400), title="refused", severity="error",
            markup=False)
        widget.post_message(JournalChanged())  # a refusal may still have been journaled
        return
    say(widget.notify, printable(text, 400), title=done, markup=False)
    widget.post_message(JournalChanged())

