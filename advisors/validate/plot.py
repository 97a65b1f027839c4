"""A response curve drawn in text: latency against IOPS, the knee and the 70% point marked."""

from __future__ import annotations

from collections.abc import Sequence

from stormdeck.advisors.validate.judge import Point


def curve_plot(points: Sequence[Point], knee: int | None, headroom: Point | None,
               width: int = 56, height: int = 12) -> list[str]:
    """Rows of text, the top row first: y latency (ms), x IOPS."""
    if not points:
        return []
    xs = [p.iops for p in points]
    ys = [p.latency * 1000 for p in points]
    x_hi, y_hi = max(xs) or 1.0, max(ys) or 1.0
    grid = [[" "] * width for _ in range(height)]

    def put(x: float, y: float, ch: str) -> None:
        col = min(width - 1, int(x / x_hi * (width - 1)))
        row = height - 1 - min(height - 1, int(y / y_hi * (height - 1)))
        if grid[row][col] in (" ", "*") or ch in "KH":
            grid[row][col] = ch

    for i, p in enumerate(points):
        put(p.iops, p.latency * 1000, "K" if i == knee else "*")
    if headroom is not None:
        put(headroom.iops, headroom.latency * 1000, "H")
    label = len(f"{y_hi:.1f}")
    rows = []
    for r, line in enumerate(grid):
        y = y_hi * (height - 1 - r) / (height - 1)
        tick = f"{y:.1f}" if r in (0, height // 2, height - 1) else ""
        rows.append(f"{tick:>{label}} |{''.join(line)}")
    rows.append(" " * label + " +" + "-" * width)
    rows.append(" " * label + f"  0{'IOPS':^{width - len(f'{x_hi:.0f}') - 1}}{x_hi:.0f}")
    return rows
