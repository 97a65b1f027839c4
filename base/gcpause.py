"""Python's cyclic garbage collector held off while many objects with no cycles are made."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a million PG objects (or a poll's
    10,000 OSD records) are made or walked: they hold no cycles, and each collection
    run meanwhile walks all of them again (measured at 10,000 OSDs: most of a PG dump's
    parse time, and a third of a stats period's rebuild of every OSD). Left as it was
    found: a caller that had it off keeps it off."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
