"""Making text from the cluster safe to print: it is data, never terminal control."""

from __future__ import annotations

import re

# C0 controls (but tab), DEL, C1 controls: ESC starts ANSI/OSC sequences,
# CR and BS can overwrite what was printed before them.
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def printable(value: object, limit: int = 200) -> str:
    """`value` as text with control characters shown as escapes and cut to `limit`."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"
