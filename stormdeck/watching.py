"""Watching a cluster for a while without a screen: the hub polls, the engine judges."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any


def watch(sources: Sequence[Any], engine: Any, duration: float, interval: float = 1.0,
          timeout: float = 10.0, first_polls: int = 1) -> tuple[list, Any]:
    """Poll `sources` for `duration` seconds, judging every snapshot with `engine`.

    Returns the last findings and the last Snapshot. `first_polls` polls of every
    source come first (2 when rates must be real from the start).
    """
    from stormdeck.collectors.hub import Hub

    hub = Hub(sources, interval=interval, timeout=timeout)
    started = time.monotonic()
    hub.start()
    try:
        hub.wait_polls(first_polls, timeout=hub.longest_poll * first_polls + interval + 1)
        findings = engine.evaluate([hub.snapshot()])
        while time.monotonic() - started < duration:
            time.sleep(interval)
            hub.snapshot()
            findings = engine.evaluate(hub.history)
        return findings, hub.history.latest
    finally:
        hub.stop()
