"""When stormdeck's own Curve leader schedules ran, from the journal, for the source to stamp."""

# The Curve source calls this as it collects, so that each snapshot carries the times;
# the rules never read the journal.

from __future__ import annotations

from pathlib import Path

from stormdeck.advisors.actuators.table import moves_leaders
from stormdeck.advisors.apply import journal_path
from stormdeck.advisors.journal import Journal


def own_schedule_times(path: Path | None = None) -> tuple[tuple[float, float | None], ...]:
    """When stormdeck's own leader schedules ran, from the journal: (started, ended or None
    while running). The Curve source stamps these on each snapshot at collection time, so
    the rules judge what was known then (a replay is not judged by today's journal)."""
    path = path or journal_path()
    try:
        st = path.stat()
    except OSError:
        return ()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if _READ.get("key") != key:
        try:
            entries = Journal(path).entries()
        except Exception:  # a journal that does not read explains nothing; say nothing
            entries = []
        _READ["key"] = key
        _READ["times"] = tuple((e.started, e.ended) for e in entries
                               if moves_leaders(e.change.kind))
    return _READ["times"]


# The journal as last read (its path, mtime and size, and what it said): a poll a second
# must not parse a long journal each time. It is a reader's cache, never the rules' input.
_READ: dict = {}
