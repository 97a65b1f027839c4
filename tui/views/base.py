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


def review_in_worker(widget: Any, make: Callable[[Any], Any],
                     show: Callable[[Any], None]) -> None:
    """From a worker thread: `make(executor)` (Executor.review or review_undo: every check
    and the prediction before the operator is asked), then `show(review)` on the screen's
    thread. The executor stays open for the review's carry_out, closed if refused."""
    factory = widget.app.tab.executor_factory
    say = widget.app.call_from_thread
    if factory is None:
        say(widget.notify, "no executor: changes are off in this session", severity="error")
        return
    executor = None
    try:
        executor = factory()  # it may ask the cluster (a read-only cluster's fsid)
        rv = make(executor)
    except UserError as exc:
        if executor is not None:
            executor.close()
        say(widget.notify, printable(str(exc), 400), title="refused", severity="error",
            markup=False)
        return
    except BaseException:
        if executor is not None:
            executor.close()
        raise
    try:
        say(show, rv)
    except BaseException:  # the app is going: nobody will confirm or cancel it
        rv.close()
        raise


def carry_out_in_worker(widget: Any, done: str, rv: Any) -> None:
    """From a worker thread: the confirmed review carried out on its own executor (the
    connection its checks used), closed after; the outcome as a toast."""
    try:
        _told(widget, done, rv.executor, lambda: "; ".join(
            f"{o.outcome}: {o.change.command}" for o in rv.carry_out()))
    finally:
        rv.close()


def _told(widget: Any, done: str, executor: Any, action: Callable[[], str]) -> None:
    say = widget.app.call_from_thread
    try:
        text = action()
    except UserError as exc:
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
