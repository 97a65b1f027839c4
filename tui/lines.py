"""A view of rendered text that repaints line by line: only the lines that changed since the
last frame reach the terminal, so a figure that moves costs one line, not the screen."""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


class LinesView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    LinesView { height: 1fr; }
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.text = Text()
        self._lines: list[list[Segment]] = []
        self._width = -1

    def update(self, text: Text) -> None:
        """Show `text`; repaint only the visible lines that differ from what is shown."""
        self.text = text
        width = self._wrap_width()
        new = self._render(text, width)
        old, self._lines = self._lines, new
        if len(new) != len(old) or width != self._width:
            self._width = width
            self.virtual_size = Size(width, len(new))
            self.refresh()
            return
        top = int(self.scroll_offset.y)
        for y in range(top, min(len(new), top + self.size.height)):
            if new[y] != old[y]:
                self.refresh_lines(y)

    def _wrap_width(self) -> int:
        return max(1, self.scrollable_content_region.width or self.size.width or 80)

    def _render(self, text: Text, width: int) -> list[list[Segment]]:
        if not self.is_mounted:
            return []
        console = self.app.console
        options = console.options.update_width(width)
        return console.render_lines(text, options, pad=False)

    def on_resize(self) -> None:
        self._width = -1
        self.update(self.text)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.size.width
        if index >= len(self._lines):
            return Strip.blank(width, self.rich_style)
        strip = Strip(Segment.apply_style(self._lines[index], self.rich_style))
        return strip.crop(scroll_x, scroll_x + width).extend_cell_length(width,
                                                                         self.rich_style)
