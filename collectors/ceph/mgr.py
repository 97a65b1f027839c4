"""What the mons say of the mgr: whether one serves (`mgr stat`), and whom they dropped."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from stormdeck.collectors.model import LogEntry


def parse_mgr_stat(d: Mapping[str, Any]) -> tuple[bool | None, str | None, int | None]:
    """`mgr stat` (a mon command): (an active mgr serves, its name, standbys). The name is
    empty while none is active; None when not said."""
    available = d.get("available")
    name = d.get("active_name")
    standbys = d.get("num_standby")
    return (bool(available) if isinstance(available, bool) else None,
            str(name) if name else None,
            int(standbys) if isinstance(standbys, int) else None)


# The mons' own words in the cluster log when they drop an active mgr or a mgr takes over
# (MgrMonitor::drop_active, MgrMonitor::prepare_beacon in src/mon/MgrMonitor.cc).
_MGR_LOG = re.compile(r"Manager daemon (\S+) is (unresponsive|now available)"
                      r"|Activating manager daemon (\S+)")


def mgr_dropped(log: Iterable[LogEntry]) -> tuple[str, float] | None:
    """(name, when) of the mgr the mons last dropped as unresponsive, unless a mgr became
    active after it: who was down, for a console that starts during the outage."""
    for e in reversed(tuple(log)):
        m = _MGR_LOG.search(e.message)
        if m is None or e.who.split(".")[0] != "mon":
            continue
        return (m.group(1), e.stamp) if m.group(2) == "unresponsive" else None
    return None
