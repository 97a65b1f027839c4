"""Times as operators type them: a clock time near a reference, or seconds from it."""

from __future__ import annotations

import time


def parse_when(text: str, now: float) -> float:
    """"HH:MM[:SS]" nearest to `now` (the frame shown), "-90" / "+90" seconds from it,
    or epoch seconds."""
    text = text.strip()
    if text.startswith(("-", "+")):
        try:
            return now + float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number of seconds") from None
    if text.replace(".", "", 1).isdigit() and float(text) > 1e9:
        return float(text)  # epoch seconds, as the JSON report gives them
    parts = text.split(":")
    try:
        h, m, sec = (int(p) for p in [*parts, "0"][:3]) if len(parts) in (2, 3) else (0, 0, -1)
    except ValueError:
        h, m, sec = 0, 0, -1
    if not (0 <= h < 24 and 0 <= m < 60 and 0 <= sec < 60):
        raise ValueError(f"{text!r} is not a time: give HH:MM:SS, or -SECONDS")
    day = time.localtime(now)
    when = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, h, m, sec, 0, 0, -1))
    return min((when - 86400, when, when + 86400), key=lambda w: abs(w - now))
