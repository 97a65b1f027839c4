"""PG states judged by their parts: the one place that says whether a PG is healthy.

Ceph prints a PG's state as its set bits joined by "+" (pg_state_string in
src/osd/osd_types.cc), "unknown" when no bit is set. A PG is healthy only when
it is active and clean and every other part is one of HARMLESS: Ceph's docs
(rados/operations/pg-states) describe scrubbing, deep and snaptrim(_wait) as
background work on a PG that serves IO, while laggy, wait and premerge pause
its IO, repair and snaptrim_error follow a fault, and stale means nobody has
heard from the primary: the rest of the string is old news. Nothing here reads
a substring: "stale+active+clean" is stale, not active+clean.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

# Every part pg_state_string can print, in its order; "unknown" is what it prints for 0.
PARTS = (
    "stale", "creating", "active", "activating", "clean", "recovery_wait", "recovery_toofull",
    "recovering", "forced_recovery", "down", "recovery_unfound", "backfill_unfound",
    "undersized", "degraded", "remapped", "premerge", "scrubbing", "deep", "inconsistent",
    "peering", "repair", "backfill_wait", "backfilling", "forced_backfill", "backfill_toofull",
    "incomplete", "peered", "snaptrim", "snaptrim_wait", "snaptrim_error", "failed_repair",
    "laggy", "wait", "unknown",
)
# Background work on a PG that serves IO with every copy in place (pg-states docs).
HARMLESS = frozenset({"scrubbing", "deep", "snaptrim", "snaptrim_wait"})
HEALTHY_CORE = frozenset({"active", "clean"})
# Parts that make the rest of the state unknowable or say the PG serves no IO now.
NOT_SERVING = frozenset({"stale", "unknown", "down", "incomplete", "peering", "activating",
                         "creating", "peered", "premerge", "laggy", "wait"})


@lru_cache(maxsize=4096)
def parts(state: str) -> frozenset[str]:
    """The parts of a state string; an empty string is Ceph's "unknown"."""
    found = frozenset(p for p in state.strip().split("+") if p)
    return found or frozenset({"unknown"})


def is_healthy(state: str) -> bool:
    """Exactly active+clean, give or take harmless background work."""
    p = parts(state)
    return p >= HEALTHY_CORE and p - HEALTHY_CORE <= HARMLESS


def is_active(state: str) -> bool:
    """Active as far as anyone knows now: a stale PG's "active" is what it was."""
    p = parts(state)
    return "active" in p and "stale" not in p


def problems(state: str) -> tuple[str, ...]:
    """What is wrong with a PG in this state, in Ceph's order; () for a healthy one."""
    p = parts(state)
    out = [w for w in PARTS if w in p and w not in HEALTHY_CORE and w not in HARMLESS]
    out += sorted(w for w in p if w not in PARTS)  # a part newer than this list: not harmless
    if "active" not in p and "unknown" not in p:
        out.insert(0, "inactive")
    elif "clean" not in p and not out:
        out.append("not clean")
    return tuple(out)


def count_unhealthy(states: Mapping[str, int]) -> int:
    return sum(n for state, n in states.items() if not is_healthy(state))


def count_with(states: Mapping[str, int], *words: str) -> int:
    """PGs having any of `words` among their parts."""
    want = frozenset(words)
    return sum(n for state, n in states.items() if parts(state) & want)


def unhealthy_from_flags(num_pgs: int, flags: Mapping[str, int]) -> int | None:
    """Where only per-part counts are known (Prometheus' ceph_pg_*), a lower bound of the
    unhealthy PGs: those not active, not clean, or with any other harmful part."""
    if "clean" not in flags and "active" not in flags:
        return None
    bound = max(num_pgs - flags.get("clean", num_pgs), num_pgs - flags.get("active", num_pgs))
    for word, n in flags.items():
        # Only state parts: the exporter has other ceph_pg_* series too.
        if word in PARTS and word not in HEALTHY_CORE and word not in HARMLESS:
            bound = max(bound, n)
    return min(num_pgs, bound)
