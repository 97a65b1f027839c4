"""A clock a test steps by hand, so that no verdict rests on the host's speed or the hour."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

# 2027-01-15 08:00 UTC: a fixed instant, far from any daylight-saving change in the zones
# the suite is run under, and never "now".
EPOCH = 1_800_000_000.0


class ManualClock:
    """Monotonic seconds that move only when the test says so, and the wall time that
    goes with them (EPOCH at zero). Hand `clock` where code reads time.monotonic and
    `wall` where it reads time.time."""

    def __init__(self, start: float = 1000.0, epoch: float = EPOCH) -> None:
        self.now = start
        self._offset = epoch - start

    def __call__(self) -> float:
        return self.now

    def clock(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.now + self._offset

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


@contextmanager
def zone(name: str) -> Iterator[None]:
    """Local time in zone `name` for the block (screens draw local times), and the zone the
    suite was started in after it: glibc keeps a zone until tzset() is called again, so a
    test that set one and only restored $TZ would leave it to the tests after it."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = name
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()
