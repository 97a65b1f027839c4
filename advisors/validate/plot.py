"""A response curve drawn with plotext: latency against IOPS, the knee (K) and the 70% point (H).

Plain text, so the same lines serve the guided screen, the headless report
and the Markdown file.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from stormdeck.advisors.validate.judge import Point

# plotext draws on one module-level figure: one plot at a time.
_LOCK = threading.Lock()


def curve_plot(points: Sequence[Point], knee: int | None, headroom: Point | None,
               width: int = 64, height: int = 16) -> list[str]:
    """Rows of text, the top row first, then one caption line naming the marks."""
    if not points:
        return []
    import plotext as plt

    xs = [p.iops for p in points]
    ys = [p.latency * 1000 for p in points]
    with _LOCK:
        plt.clear_figure()
        plt.plotsize(width, height)
        plt.theme("clear")
        plt.plot(xs, ys, marker="dot")
        if knee is not None:
            plt.scatter([xs[knee]], [ys[knee]], marker="K")
        if headroom is not None:
            plt.scatter([headroom.iops], [headroom.latency * 1000], marker="H")
        plt.xlabel("IOPS")
        plt.ylabel("ms")
        text = plt.uncolorize(plt.build())
        plt.clear_figure()
    rows = [line.rstrip() for line in text.splitlines() if line.strip()]
    marks = []
    if knee is not None:
        p = points[knee]
        marks.append(f"K knee: {p.x:g} in flight, {p.iops:.0f} IOPS at "
                     f"{p.latency * 1000:.2f} ms")
    if headroom is not None:
        marks.append(f"H 70% of the maximum: {headroom.iops:.0f} IOPS at "
                     f"{headroom.latency * 1000:.2f} ms")
    return [*rows, "   ".join(marks)] if marks else rows
