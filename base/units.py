"""Figures as operators read them: SI inside the program, milliseconds and percent on screen."""

from __future__ import annotations


def num(v: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if v is None else fmt.format(v)


def ms(v: float | None) -> str:
    """Seconds shown as milliseconds."""
    return "-" if v is None else f"{v * 1000:.1f}ms"


def pct(v: float | None) -> str:
    """A ratio 0..1 shown as percent."""
    return "-" if v is None else f"{v * 100:.0f}%"


def age(seconds: float) -> str:
    """A span as an operator says it: "45 s", "12 min", "3.5 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
