"""Watching a cluster for a while without a screen: the data loop, judging every snapshot."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from stormdeck.base.errors import UserError


def watch(sources: Sequence[Any], engine: Any, duration: float, interval: float = 1.0,
          timeout: float = 10.0, first_polls: int = 1) -> tuple[list, Any]:
    """Poll `sources` for `duration` seconds, judging every snapshot with `engine`.

    Returns the last findings and the last Snapshot. `first_polls` polls of every
    source come first (2 when rates must be real from the start).
    """
    from stormdeck.advisors.loop import Loop

    # NaN passes every `< 0` test and then never ends a wait: refuse it by name.
    if not (duration >= 0 and math.isfinite(duration)):
        raise UserError("--for takes a number of seconds, zero or more")
    if not (interval > 0 and math.isfinite(interval)):
        raise UserError("--interval takes a number of seconds above zero")

    started = time.monotonic()
    loop = Loop(sources, engine, interval=interval, timeout=timeout)
    last: list[Any] = []
    try:
        loop.start(first_polls)
        loop.run(lambda step: last.__setitem__(slice(None), [step]),
                 duration=max(0.0, duration - (time.monotonic() - started)))
        step = last[0]
        return list(step.findings), step.snapshot
    finally:
        loop.stop()
