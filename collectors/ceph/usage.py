"""What Ceph says of fullness and flags: `df` per pool, `osd dump` ratios and flags, audit."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from stormdeck.collectors.model import LogEntry

# Flags an operator sets on one OSD, a CRUSH node or a device class (OSDMap.h CEPH_OSD_NOUP
# ...: `ceph osd add-noout`, `ceph osd set-group noout host1`).
OSD_STATE_FLAGS = frozenset({"noup", "nodown", "noin", "noout"})


def _ratio(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def parse_df(d: Mapping[str, Any]) -> dict[str, tuple[int | None, float | None, int | None]]:
    """`df`: pool name -> (stored bytes, used ratio 0..1, max avail bytes).

    Since Nautilus `stored` is the data before replication and `percent_used` a ratio
    (stored / (stored + max_avail)), whatever its name says.
    """
    out = {}
    for p in d.get("pools", []) or []:
        s = p.get("stats", {}) or {}
        stored = s.get("stored", s.get("bytes_used"))
        used = _ratio(s.get("percent_used"))
        avail = s.get("max_avail")
        out[str(p.get("name", ""))] = (
            int(stored) if isinstance(stored, int | float) else None,
            min(1.0, max(0.0, used)) if used is not None else None,
            int(avail) if isinstance(avail, int | float) else None)
    return out


def parse_dump_usage(d: Mapping[str, Any]) -> dict[str, Any]:
    """`osd dump`: the three fullness ratios and the flags set per OSD, CRUSH node and
    device class ("osd.3" / "host1" / "class:hdd" -> flags)."""
    flags: dict[str, tuple[str, ...]] = {}
    for o in d.get("osds", []) or []:
        mine = tuple(f for f in o.get("state", []) or [] if f in OSD_STATE_FLAGS)
        if mine and "osd" in o:
            flags[f"osd.{o['osd']}"] = mine
    for name, fl in (d.get("crush_node_flags") or {}).items():
        if fl:
            flags[str(name)] = tuple(str(f) for f in fl)
    for name, fl in (d.get("device_class_flags") or {}).items():
        if fl:
            flags[f"class:{name}"] = tuple(str(f) for f in fl)
    return {"nearfull_ratio": _ratio(d.get("nearfull_ratio")),
            "backfillfull_ratio": _ratio(d.get("backfillfull_ratio")),
            "full_ratio": _ratio(d.get("full_ratio")), "osd_state_flags": flags}


def audit_tail(kept: tuple[LogEntry, ...], fresh: Iterable[LogEntry],
               keep: int) -> tuple[LogEntry, ...]:
    """The audit channel's entries that changed something, newest last, kept across polls.

    The monitors keep only the newest entries per channel whatever their level, and every
    read command (stormdeck's own polls included) is audited at [DBG]: within seconds the
    `osd set` that matters is gone from `log last`, so it is kept here when first seen.
    """
    out = {(e.who, e.seq, e.stamp): e for e in kept}
    for e in fresh:
        if e.priority != "[DBG]" and e.channel == "audit":
            out[(e.who, e.seq, e.stamp)] = e
    tail = tuple(sorted(out.values(), key=lambda e: (e.stamp, e.seq))[-keep:])
    return kept if tail == kept else tail
