"""Figures from a source that missed its poll, marked in the tables: struck, dimmed, aged."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rich.text import Text

from stormdeck.base import units
from stormdeck.tui.feed import Frame, clock, part_sources, stale_sources

STALE_STYLE = "dim strike"


def struck(cells: tuple[Text, ...], columns: Iterable[int]) -> tuple[Text, ...]:
    """The cells, those at `columns` struck and dimmed (copies: cached cells stay whole)."""
    cols = set(columns)
    out = []
    for i, cell in enumerate(cells):
        if i in cols:
            # On the cell's own style: a table draws a cell's plain text in that style.
            cell = Text(cell.plain, style=f"{cell.style or ''} {STALE_STYLE}".strip())
        out.append(cell)
    return tuple(out)


def stale_parts(frame: Frame, parts: Iterable[str]) -> dict[str, float]:
    """part -> age, for each of `parts` fed by a source that missed its poll."""
    stale = stale_sources(frame)
    out = {}
    feeds = part_sources()
    for part in parts:
        ages = [stale[n] for n in feeds.get(part, ()) if n in stale]
        if ages:
            out[part] = max(ages)
    return out


def note(frame: Frame, parts: Iterable[str]) -> str:
    """One line naming the late sources of `parts` and how old their figures are; "" if none."""
    stale = stale_sources(frame)
    feeds = part_sources()
    names = dict.fromkeys(n for p in parts for n in feeds.get(p, ()) if n in stale)
    if not names:
        return ""
    now = frame.snapshot.time
    said = ", ".join(f"{n} last answered {units.age(stale[n])} ago ({clock(now - stale[n])})"
                     for n in names)
    return f"STALE: {said}; struck figures are not current"


def wrapped(records: Mapping[str, Any], key: Any) -> Mapping[str, Any]:
    """The records, each paired with `key` while something is stale: a table compares
    records to know which rows to draw again, so a row changes when its marking does."""
    if key is None:
        return records
    return {k: (r, key) for k, r in records.items()}


def show_note(widget: Any, text: str) -> None:
    """The note as the widget's top border title (a line above a table), gone when ""."""
    if getattr(widget, "_stale_note", "") == text:
        return
    widget._stale_note = text
    widget.styles.border_top = ("heavy", "red") if text else None
    widget.border_title = Text(text, style="bold") if text else None
