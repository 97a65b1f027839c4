"""A table that paints only what is visible (Textual's line API) and caches rendered lines.

Rows are kept as records (frozen dataclasses, cheap to compare); a row's cells
are formatted only when it scrolls into view, and its rendered line is reused
until its record, the column layout or the cursor changes. Replacing ten
thousand records is a dict update; painting is the rows on screen. When the
terminal is narrow, the lowest-priority columns are dropped whole, so nothing
is cut mid-word.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from stormdeck.tui.keys import in_scope


class Column(NamedTuple):
    name: str
    width: int
    priority: int = 0  # dropped first when narrow: highest number
    right: bool = False


Cells = tuple[Text, ...]


class VirtualTable(ScrollView, can_focus=True):
    COLUMNS: ClassVar[tuple[Column, ...]] = ()
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(k.keys, k.action, k.description, show=False) for k in in_scope("table")]
    # What an empty table says: what would fill it, or how to make something happen.
    EMPTY: ClassVar[str] = "no rows yet"
    DEFAULT_CSS = """
    VirtualTable { height: 1fr; }
    """
    cursor: reactive[int] = reactive(0)

    class RowMessage(Message):
        """About one row (its key), from one table: `@on(..., "#id")` matches the table."""

        def __init__(self, table: VirtualTable, key: str | None) -> None:
            super().__init__()
            self.table, self.key = table, key

        @property
        def control(self) -> VirtualTable:
            return self.table

    class RowHighlighted(RowMessage):
        pass

    class RowSelected(RowMessage):
        pass

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filter = ""
        self.sort_column: int | None = None  # into COLUMNS; None: the source's order
        self.sort_ascending = False  # largest first, unless the header was clicked again
        self._records: dict[str, Any] = {}
        self._keys: list[str] = []  # the rows shown, in order (filtered)
        self._format: Callable[[Any], Cells] = lambda r: r
        self._cells: dict[str, tuple[Any, Cells]] = {}  # key -> (record, cells)
        self._sort_keys: dict[str, tuple[Any, int, tuple[int, float, str]]] = {}
        self._given: Mapping[str, Any] | None = None  # the mapping set_records had last
        self._order: tuple[str, int | None, bool] = ("", None, False)
        self._lines: dict[tuple[str, int, bool], tuple[Any, Strip]] = {}
        self._layout: tuple[Column, ...] = self.COLUMNS
        self._layout_width = -1

    # -- data --

    def set_records(self, records: Iterable[tuple[str, Any]] | Mapping[str, Any],
                    format_row: Callable[[Any], Cells]) -> None:
        """Replace every row; only rows on screen are formatted, and only if they changed.

        A mapping given again (the very same object, not modified since) with the same
        filter and sort changes nothing: ten thousand rows cost nothing per frame.
        """
        self._format = format_row
        order = (self.filter.lower(), self.sort_column, self.sort_ascending)
        if isinstance(records, Mapping):
            if records is self._given and order == self._order:
                return
            self._given = records
        else:
            self._given = None
        self._order = order
        old_records, old_keys = self._records, self._keys
        self._records = dict(records)
        needle = self.filter.lower()
        if needle:
            self._keys = [k for k, r in self._records.items()
                          if needle in " ".join(c.plain for c in self.row_cells(k)).lower()]
        else:
            self._keys = list(self._records)
        if self.sort_column is not None:
            col = self.sort_column
            # Sorting needs every row's cells: formatted once, then cached by record, as
            # is each row's sort key (a regular expression per cell, 10,000 per frame).
            self._keys.sort(key=lambda k: self._sort_key(k, col),
                            reverse=not self.sort_ascending)
        if self._keys != old_keys:
            self._resize()
            return
        # Same rows in the same order: repaint only the cells on screen that changed,
        # so a steady cluster costs the terminal (and the SSH link) next to nothing.
        top = int(self.scroll_offset.y)
        for y, key in enumerate(self._keys[top: top + max(0, self.size.height - 1)], start=1):
            old = old_records.get(key)
            new = self._records[key]
            if old is new or old == new:
                continue
            before = self._cells.get(key)
            if before is None or not (before[0] is old or before[0] == old):
                self.refresh_lines(top + y)
                continue
            self._refresh_cells(y, before[1], self.row_cells(key))

    def _sort_key(self, key: str, col: int) -> tuple[int, float, str]:
        record = self._records[key]
        hit = self._sort_keys.get(key)
        if hit is not None and hit[1] == col and (hit[0] is record or hit[0] == record):
            return hit[2]
        sk = sort_key(self.row_cells(key)[col].plain)
        self._sort_keys[key] = (record, col, sk)
        return sk

    def _refresh_cells(self, y: int, old: Cells, new: Cells) -> None:
        """Repaint, on line y of the widget, only the columns whose text or style moved."""
        names = [c.name for c in self.COLUMNS]
        x = -int(self.scroll_offset.x)
        for c in self.layout():
            i = names.index(c.name)
            a, b = old[i], new[i]
            if a.plain != b.plain or a.style != b.style:
                self.refresh(Region(x, y, c.width + 1, 1))
            x += c.width + 1

    def sync(self, rows: Iterable[tuple[str, Cells]]) -> None:
        """Rows whose cells are already made (small tables)."""
        self.set_records(rows, lambda cells: cells)

    def row_cells(self, key: str) -> Cells:
        record = self._records[key]
        hit = self._cells.get(key)
        if hit is not None and (hit[0] is record or hit[0] == record):
            return hit[1]
        cells = self._format(record)
        self._cells[key] = (record, cells)
        return cells

    @property
    def keys(self) -> list[str]:
        return list(self._keys)

    @property
    def row_count(self) -> int:
        return len(self._keys)

    def cell(self, key: str, column: str) -> Text:
        names = [c.name for c in self.COLUMNS]
        return self.row_cells(key)[names.index(column)]

    @property
    def selected_key(self) -> str | None:
        return self._keys[self.cursor] if 0 <= self.cursor < len(self._keys) else None

    def move_cursor(self, row: int) -> None:
        self.cursor = max(0, min(row, len(self._keys) - 1))

    # -- layout and painting --

    def _resize(self) -> None:
        if len(self._cells) > 4 * max(1, len(self._records)) + 1000:
            self._cells = {k: v for k, v in self._cells.items() if k in self._records}
        if len(self._sort_keys) > 4 * max(1, len(self._records)) + 1000:
            self._sort_keys = {k: v for k, v in self._sort_keys.items() if k in self._records}
        if self.cursor >= len(self._keys):
            self.cursor = max(0, len(self._keys) - 1)
        self.virtual_size = Size(self._content_width(), len(self._keys) + 1)
        self.refresh()

    def _content_width(self) -> int:
        return sum(c.width + 1 for c in self.layout())

    def layout(self) -> tuple[Column, ...]:
        """The columns that fit, dropping the highest priority numbers first."""
        width = self.size.width or 200
        if width == self._layout_width:
            return self._layout
        cols = list(self.COLUMNS)
        while len(cols) > 1 and sum(c.width + 1 for c in cols) > width:
            cols.remove(max(cols, key=lambda c: (c.priority, self.COLUMNS.index(c))))
        self._layout, self._layout_width = tuple(cols), width
        self._lines.clear()
        return self._layout

    def on_resize(self) -> None:
        self._layout_width = -1
        self._resize()

    def render_line(self, y: int) -> Strip:
        cols = self.layout()
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        if y == 0:
            strip = self._header(cols)
        else:
            index = scroll_y + y - 1
            if index >= len(self._keys):
                if index == 0 and y == 1:
                    return self._empty_line(width)
                return Strip.blank(width, self.rich_style)
            strip = self._row(self._keys[index], index, cols)
        return strip.crop(scroll_x, scroll_x + width).extend_cell_length(width, self.rich_style)

    def _header(self, cols: tuple[Column, ...]) -> Strip:
        """Column names; the sorted one lit, with an arrow (k9s) pointing the way it runs:
        down, largest first; up, smallest first."""
        style = self.rich_style + Style(bold=True, underline=True)
        sorted_name = self.COLUMNS[self.sort_column].name if self.sort_column is not None \
            else None
        segs = []
        for c in cols:
            if c.name != sorted_name:
                segs.append(Segment(self._fit(c.name, c) + " ", style))
                continue
            ascii_only = getattr(self.app, "low_bandwidth", False)
            arrow = ("^" if ascii_only else "▲") if self.sort_ascending else \
                ("v" if ascii_only else "▼")
            name = c.name if len(c.name) < c.width else c.name[: c.width - 2] + "…"
            segs.append(Segment(self._fit(name + arrow, c), style + Style(reverse=True)))
            segs.append(Segment(" ", style))
        return Strip(segs)

    def sort_marker(self) -> str:
        """The sorted column's header as drawn ("IOPS▼"), or "" when unsorted."""
        strip = self._header(self.layout())
        for seg in strip:
            if seg.style is not None and seg.style.reverse:
                return seg.text.strip()
        return ""

    def _row(self, key: str, index: int, cols: tuple[Column, ...]) -> Strip:
        record = self._records[key]
        selected = index == self.cursor and self.has_focus
        slot = (key, index % 2, selected)
        hit = self._lines.get(slot)
        if hit is not None and (hit[0] is record or hit[0] == record):
            return hit[1]
        base = self.rich_style
        if selected:
            base = base + Style(reverse=True)
        elif index % 2:
            base = base + Style(bgcolor="grey11")
        names = [c.name for c in self.COLUMNS]
        cells = self.row_cells(key)
        segs = []
        for c in cols:
            cell = cells[names.index(c.name)]
            style = base + Style.parse(str(cell.style)) if cell.style else base
            segs.append(Segment(self._fit(cell.plain, c) + " ", style))
        # Neighbouring cells of one style become one segment: fewer escape codes to send.
        strip = Strip(segs).simplify()
        if len(self._lines) > 20_000:
            self._lines.clear()
        self._lines[slot] = (record, strip)
        return strip

    def empty_text(self) -> str:
        if self.filter and self._records:
            return f"no row matches the filter {self.filter!r}: Esc clears it"
        return self.EMPTY

    def _empty_line(self, width: int) -> Strip:
        text = Text(self.empty_text(), style=self.rich_style + Style(italic=True, dim=True))
        lines = text.wrap(self.app.console, max(1, width))
        return Strip(lines[0].render(self.app.console) if lines else [])

    @staticmethod
    def _fit(text: str, col: Column) -> str:
        text = text if len(text) <= col.width else text[: col.width - 1] + "…"
        return text.rjust(col.width) if col.right else text.ljust(col.width)

    # -- keys --

    def watch_cursor(self, old: int, new: int) -> None:
        visible = self.size.height - 1
        top = int(self.scroll_offset.y)
        if new < top:
            self.scroll_to(y=new, animate=False)
        elif new >= top + visible:
            self.scroll_to(y=new - visible + 1, animate=False)
        self.refresh()
        self.post_message(self.RowHighlighted(self, self.selected_key))

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    def action_move(self, delta: int) -> None:
        self.move_cursor(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor + direction * max(1, self.size.height - 2))

    def action_jump(self, where: int) -> None:
        self.move_cursor(0 if where == 0 else len(self._keys) - 1)

    def action_sort(self) -> None:
        """Cycle the sort: each column in turn, largest first, then the source's order."""
        n = len(self.COLUMNS)
        column = 1 if self.sort_column is None else self.sort_column + 1
        self.sort_by(column if column < n else None, ascending=False)

    def action_reverse(self) -> None:
        """htop's I: the same column the other way (unsorted: the first column, largest
        first, which reverses the source's order of names)."""
        if self.sort_column is None:
            self.sort_by(0, ascending=False)
        else:
            self.sort_by(self.sort_column, ascending=not self.sort_ascending)

    def action_sort_menu(self) -> None:
        from stormdeck.tui.screens import ColumnMenu

        names = [c.name for c in self.COLUMNS]
        shown = {c.name for c in self.layout()}
        menu = ColumnMenu(names, self.sort_column, self.sort_ascending,
                          frozenset(n for n in names if n not in shown))

        def chosen(column: int | None) -> None:
            if column is None:
                return
            again = column == self.sort_column
            self.sort_by(column, ascending=again and not self.sort_ascending)

        self.app.push_screen(menu, chosen)

    def sort_by(self, column: int | None, ascending: bool) -> None:
        self.sort_column, self.sort_ascending = column, ascending
        self.set_records(list(self._records.items()), self._format)
        self.refresh()  # the header's arrow moves even when the order did not
        name = self.COLUMNS[column].name if column is not None else "none"
        way = ", smallest first" if ascending and column is not None else ""
        self.notify(f"sorted by {name}{way}", timeout=2)

    def on_click(self, event: events.Click) -> None:
        """As in htop: a header sorts by its column (again: the other way); a row is
        selected, and a double click opens it as Enter does."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            x = offset.x + int(self.scroll_offset.x)
            names = [c.name for c in self.COLUMNS]
            for c in self.layout():
                if x < c.width + 1:
                    column = names.index(c.name)
                    again = column == self.sort_column
                    self.sort_by(column, ascending=again and not self.sort_ascending)
                    return
                x -= c.width + 1
            return
        row = int(self.scroll_offset.y) + offset.y - 1
        if 0 <= row < len(self._keys):
            self.focus()
            self.move_cursor(row)
            if event.chain >= 2:
                self.action_select()

    def action_select(self) -> None:
        self.post_message(self.RowSelected(self, self.selected_key))


def sort_key(text: str) -> tuple[int, float, str]:
    """Numbers (the first one in the cell: '0.36/2', '71%', '4.0ms/4.0ms') by value,
    then text; '-' and empty cells last."""
    import re

    m = re.search(r"-?\d+(?:\.\d+)?", text)
    if m and text.strip() not in ("-", ""):
        return (2, float(m.group()), text)
    return (1 if text.strip() not in ("-", "") else 0, 0.0, text)
