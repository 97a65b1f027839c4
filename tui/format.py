"""Formatting shared by the console's views: inert cluster text, bars, sparklines, units.

Cluster text (pool names, hosts, summaries) reaches Rich only inside Text
objects, which are never parsed as markup: a pool named `[bold red]x[/]` shows
as those characters, and control characters are shown as escapes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text

from stormdeck.advisors.findings import Finding, Severity
from stormdeck.base.text import printable
from stormdeck.base.units import ms, num, pct
from stormdeck.collectors.model import Daemon

# num, ms and pct live at the ground floor (the CLI prints with them too).
__all__ = ["ASCII", "BLOCKS", "SEVERITY_STYLE", "bar", "cores_now", "finding_line", "inert",
           "ms", "num", "pct", "rate", "spark"]

BLOCKS = " ▁▂▃▄▅▆▇█"
ASCII = " .:-=+*#%"
SEVERITY_STYLE = {Severity.INFO: "cyan", Severity.WARNING: "yellow", Severity.CRITICAL: "bold red"}


def inert(value: object, style: str = "", limit: int = 200) -> Text:
    """Cluster text as an inert Text: no markup, control characters escaped (whatever a
    cluster names a pool or a host is shown, never interpreted)."""
    return Text(printable(value, limit), style=style)


def spark(values: Sequence[float], width: int = 20, ascii_only: bool = False) -> str:
    chars = ASCII if ascii_only else BLOCKS
    vals = list(values)[-width:]
    if not vals:
        return ""
    top = max(vals) or 1.0
    return "".join(chars[max(0, min(len(chars) - 1, int(v / top * (len(chars) - 1))))]
                   for v in vals)


def cores_now(d: Daemon) -> float | None:
    """The cores a daemon uses, where that is a current figure. A down OSD's or offline
    chunkserver's counts only when this host read its live process this poll (it has a
    pid): a hung OSD still burns CPU; else the figure is a rate over a window that ends
    before it died (Prometheus' rate() reads on past the series' end)."""
    return d.cores_used if not d.down or d.pid is not None else None


def bar(used: float | None, allowed: float | None, width: int = 8, ascii_only: bool = False) -> str:
    if used is None or not allowed:
        return "-"
    filled = min(width, round(used / allowed * width))
    full, empty = ("#", ".") if ascii_only else ("█", "░")
    return f"{full * filled}{empty * (width - filled)} {used:.2f}/{allowed:g}"


def finding_line(f: Finding) -> Text:
    line = Text("  ")
    line.append(f"{str(f.severity).upper():<8}", style=SEVERITY_STYLE[f.severity])
    line.append_text(inert(f" {f.target}: {f.summary}", "dim" if f.muted else "", 150))
    if f.muted:
        line.append(" (muted)", style="dim")
    return line


def rate(bps: float | None) -> str:
    if bps is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if bps < 1024:
            return f"{bps:.0f} {unit}"
        bps /= 1024
    return f"{bps:.0f} TiB"


def newest(hist: Sequence[Any], fn: Callable[[Any], float | None],
           n: int) -> list[float]:
    """The last `n` known values of `fn` over `hist`, oldest first (all a sparkline of
    width `n` shows), read from the newest snapshot back."""
    out: list[float] = []
    for x in reversed(hist):
        v = fn(x)
        if v is not None:
            out.append(v)
            if len(out) == n:
                break
    out.reverse()
    return out
