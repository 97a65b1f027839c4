"""The real console on a real pseudo-terminal: with NO_COLOR, and with 16 colours."""

from __future__ import annotations

import os
import re
import sys

import pytest

from tests.terminal import on_pty


def console_output(env: dict[str, str], seconds: float = 4.0) -> bytes:
    """What the console writes to a terminal in `seconds`, fed 20 synthetic OSDs."""
    raw, _ = on_pty([sys.executable, "bench/console_bench.py", "--osds", "20", "--child",
                     "daemons"], {**os.environ, **env, "TERM": "xterm-256color"}, seconds)
    return raw


@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1"}, {"TEXTUAL_COLOR_SYSTEM": "standard"}],
                         ids=["default", "NO_COLOR", "16-colours"])
def test_the_console_draws_in_every_colour_mode(env: dict[str, str]) -> None:
    out = console_output(env)
    assert b"osd.19" in out and b"stormdeck" in out, "the screen was drawn"
    indexed = {int(x) for x in re.findall(rb"(?:38|48);5;(\d+)", out)}
    truecolor = re.findall(rb"(?:38|48);2;\d+;\d+;\d+", out)
    if "NO_COLOR" in env:
        # Monochrome: black and the grey ramp only.
        assert indexed <= {0, 15, 16, 231, *range(232, 256)}, indexed
        assert not truecolor
    elif "TEXTUAL_COLOR_SYSTEM" in env:
        assert not indexed and not truecolor, "only the 16 standard colours"
        assert re.search(rb"\x1b\[[0-9;]*(3[0-7]|9[0-7])[;m]", out)
    else:
        assert indexed or truecolor
