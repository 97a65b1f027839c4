"""The one PG-state judge, on every state part Ceph can print, alone and combined."""

from __future__ import annotations

import itertools

import pytest

from stormdeck.advisors.report import build
from stormdeck.advisors.timeline import pg_classes
from stormdeck.base import pgstate
from stormdeck.collectors.model import Cluster, Snapshot

# Provenance: ceph/ceph, src/osd/osd_types.cc, pg_state_string(uint64_t state) (the order
# it prints the PG_STATE_* bits of src/osd/osd_types.h), read on 2026-11-25 from the main
# branch; "unknown" is what it prints when no bit is set. pg_string_state() in the same
# file parses exactly these names back.
CEPH_PG_STATE_STRING = (
    "stale", "creating", "active", "activating", "clean", "recovery_wait", "recovery_toofull",
    "recovering", "forced_recovery", "down", "recovery_unfound", "backfill_unfound",
    "undersized", "degraded", "remapped", "premerge", "scrubbing", "deep", "inconsistent",
    "peering", "repair", "backfill_wait", "backfilling", "forced_backfill", "backfill_toofull",
    "incomplete", "peered", "snaptrim", "snaptrim_wait", "snaptrim_error", "failed_repair",
    "laggy", "wait",
)
CEPH_EMPTY_STATE = "unknown"
# What Ceph's pg-states page says serves IO with every copy in place while it runs.
DOCUMENTED_HARMLESS = {"scrubbing", "deep", "snaptrim", "snaptrim_wait"}
BAD = [p for p in CEPH_PG_STATE_STRING if p not in {"active", "clean"} | DOCUMENTED_HARMLESS]


def test_the_judge_knows_every_part_ceph_prints() -> None:
    assert set(pgstate.PARTS) == set(CEPH_PG_STATE_STRING) | {CEPH_EMPTY_STATE}
    assert pgstate.HARMLESS == DOCUMENTED_HARMLESS


def test_only_active_clean_and_harmless_background_is_healthy() -> None:
    assert pgstate.is_healthy("active+clean")
    for extra in itertools.chain.from_iterable(
            itertools.combinations(sorted(DOCUMENTED_HARMLESS), k) for k in range(1, 5)):
        state = "+".join(["active", "clean", *extra])
        assert pgstate.is_healthy(state), state
        assert pgstate.problems(state) == ()
    assert pgstate.is_healthy("active+clean+scrubbing+deep")


@pytest.mark.parametrize("part", [*BAD, CEPH_EMPTY_STATE])
def test_every_other_part_makes_active_clean_unhealthy(part: str) -> None:
    # Built in Ceph's own order, as pg_state_string would print it.
    state = "+".join(p for p in (*CEPH_PG_STATE_STRING, CEPH_EMPTY_STATE)
                     if p in {"active", "clean", part})
    assert not pgstate.is_healthy(state), state
    assert part in pgstate.problems(state)
    alone = part
    assert not pgstate.is_healthy(alone)
    assert pgstate.problems(alone)


@pytest.mark.parametrize("state,healthy,active,problems", [
    ("stale+active+clean", False, False, ("stale",)),
    ("active+clean+scrubbing+deep", True, True, ()),
    ("unknown", False, False, ("unknown",)),
    ("", False, False, ("unknown",)),
    ("peering", False, False, ("inactive", "peering")),
    ("active+undersized+degraded", False, True, ("undersized", "degraded")),
    ("stale+undersized+degraded+peered", False, False,
     ("inactive", "stale", "undersized", "degraded", "peered")),
    ("active+clean+laggy", False, True, ("laggy",)),
    ("active+clean+wait", False, True, ("wait",)),
    ("active+clean+inconsistent", False, True, ("inconsistent",)),
    ("active+remapped+backfill_wait", False, True, ("remapped", "backfill_wait")),
    ("active+recovering+degraded", False, True, ("recovering", "degraded")),
    ("active", False, True, ("not clean",)),
    ("clean", False, False, ("inactive",)),
    ("creating+activating", False, False, ("inactive", "creating", "activating")),
    ("down", False, False, ("inactive", "down")),
    ("incomplete", False, False, ("inactive", "incomplete")),
    ("active+clean+snaptrim_error", False, True, ("snaptrim_error",)),
    ("active+clean+premerge", False, True, ("premerge",)),
    ("active+clean+some_future_part", False, True, ("some_future_part",)),
    ("active+clean+clean", True, True, ()),  # the parts are a set
])
def test_combinations(state: str, healthy: bool, active: bool,
                      problems: tuple[str, ...]) -> None:
    assert pgstate.is_healthy(state) is healthy
    assert pgstate.is_active(state) is active
    assert pgstate.problems(state) == problems


def test_no_pair_of_parts_fools_it() -> None:
    # Every pair of parts on top of active+clean: healthy only when both are harmless.
    for a, b in itertools.combinations((*CEPH_PG_STATE_STRING, CEPH_EMPTY_STATE), 2):
        state = "+".join(dict.fromkeys(("active", "clean", a, b)))
        expected = {a, b} <= DOCUMENTED_HARMLESS | {"active", "clean"}
        assert pgstate.is_healthy(state) is expected, state


def test_the_cluster_counts_stale_pgs_as_not_clean_and_not_active() -> None:
    c = Cluster(num_pgs=128, pg_states={"active+clean": 75, "stale+active+clean": 53})
    assert c.pgs_not_clean == 53
    assert c.pgs_inactive == 53
    assert c.pgs_by_problem() == {"stale+active+clean": 53}
    assert pg_classes(c)["inactive"] == 53 and pg_classes(c)["stale"] == 53
    scrub = Cluster(num_pgs=10, pg_states={"active+clean": 8, "active+clean+scrubbing+deep": 2})
    assert scrub.pgs_not_clean == 0 and scrub.pgs_inactive == 0


def test_flag_counts_give_a_lower_bound() -> None:
    # Prometheus' per-part counts: every stale PG still counts as active and clean there.
    c = Cluster(num_pgs=128, pg_flags={"active": 128, "clean": 128, "stale": 53,
                                       "scrubbing": 3, "objects": 999})
    assert c.pgs_not_clean == 53 and c.pgs_inactive == 53
    assert Cluster(num_pgs=128, pg_flags={}).pgs_not_clean is None


def test_the_report_starts_the_incident_when_the_first_pg_went_stale() -> None:
    def snap(t: float, states: dict[str, int]) -> Snapshot:
        return Snapshot(time=t, cluster=Cluster(num_pgs=128, pg_states=states), daemons={},
                        disks={}, sources={})
    steps = [(snap(100.0, {"active+clean": 128}), ()),
             (snap(101.0, {"active+clean": 75, "stale+active+clean": 53}), ()),
             (snap(110.0, {"active+clean": 75, "active+undersized+degraded": 53}), ()),
             (snap(130.0, {"active+clean": 128}), ())]
    r = build(steps, [])
    assert r.not_clean_from == 101.0 and r.clean_again_at == 130.0
    assert r.peaks["stale"] == {"count": 53, "time": 101.0}


def test_the_peering_rule_counts_stale_pgs_as_not_active() -> None:
    from stormdeck.advisors.rules.peering import _inactive

    s = Snapshot(time=1.0, cluster=Cluster(num_pgs=128, pg_states={
        "active+clean": 75, "stale+active+clean": 53}), daemons={}, disks={}, sources={})
    assert _inactive(s) == 53.0
