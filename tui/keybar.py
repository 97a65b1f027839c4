"""The key bar at the foot of the console: fits the terminal's width, as htop's does, and
always shows help and quit; made from the key registry (tui/keys.py)."""

from __future__ import annotations

from typing import Any, NamedTuple

from rich.style import Style
from rich.text import Text
from textual import events
from textual.widget import Widget
from textual.widgets import Input

from stormdeck.tui.keys import KEYS, Key, key_display


class Slot(NamedTuple):
    key: Key
    label: str


def fit(keys: tuple[Key, ...], width: int) -> list[Slot]:
    """The keys of the bar that fit `width`: long labels if all fit, else short ones, then
    the highest ranks dropped one by one (rank 0, help and quit, never)."""
    # Quit at the right end, as htop's F10.
    chosen = sorted((k for k in keys if k.bar), key=lambda k: k.action == "quit")
    for short in (False, True):
        slots = [Slot(k, k.short if short and k.short else k.bar) for k in chosen]
        while slots and _width(slots) > width:
            droppable = [s for s in slots if s.key.rank > 0]
            if not short or not droppable:
                break
            # The highest rank goes first; among equals, the rightmost.
            worst = max(reversed(droppable), key=lambda s: s.key.rank)
            slots.remove(worst)
        if _width(slots) <= width or short:
            return slots
    return []


def _first_key(k: Key) -> str:
    return key_display(k.keys.split(",")[0])


def _width(slots: list[Slot]) -> int:
    return sum(len(_first_key(s.key)) + len(s.label) + 1 for s in slots) - 1 if slots else 0


class KeyBar(Widget):
    """One line of keys; the current view's is lit, a click on a key does what it does."""

    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; background: $panel; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.current = ""  # the action of the view shown, lit in the bar
        self._spans: list[tuple[int, int, str]] = []

    def light(self, action: str) -> None:
        if action != self.current:
            self.current = action
            self.refresh()

    def slots(self) -> list[Slot]:
        return fit(KEYS, self.size.width or 80)

    def render(self) -> Text:
        out = Text(no_wrap=True, overflow="crop")
        self._spans = []
        key_style = Style(bold=True, color=self.app.current_theme.accent or "yellow")
        for i, s in enumerate(self.slots()):
            if i:
                out.append(" ")
            start = len(out)
            lit = s.key.action == self.current
            out.append(_first_key(s.key), key_style + Style(reverse=lit))
            out.append(s.label, Style(reverse=lit))
            self._spans.append((start, len(out), s.key.action))
        return out

    async def on_click(self, event: events.Click) -> None:
        app: Any = self.app
        for start, end, action in self._spans:
            if start <= event.x < end:
                if isinstance(app.focused, Input) and len(app.screen_stack) == 1:
                    # A click is no typing: the box gives the keys back, the key runs.
                    app.focus_view()
                await app.run_action(action)
                return
