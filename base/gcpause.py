"""Python's cyclic garbage collector held off while many objects with no cycles are made."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# The pause is the process's, the callers are threads (each source polls on its own): one
# count for all of them, so the last to leave restores what the first found. Read and set
# under the lock; a thread switch between reading isenabled() and disable() once left
# the collector off for good (a caller that found it off, left after one that found it on).
_LOCK = threading.Lock()
_depth = 0
_was_enabled = True


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a million PG objects (or a poll's
    10,000 OSD records) are made or walked: they hold no cycles, and each collection
    run meanwhile walks all of them again (measured at 10,000 OSDs: most of a PG dump's
    parse time, and a third of a stats period's rebuild of every OSD). Left as it was
    found when the last pause, in any thread, ends: a process that had it off keeps it
    off."""
    global _depth, _was_enabled
    with _LOCK:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _LOCK:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
