"""Prediction against outcome: the time until active+clean journaled after a data-moving change,
shown beside the prediction; and undo guarded as apply is."""

from __future__ import annotations

from pathlib import Path

import pytest

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.apply import Executor, NothingChanged, merge_settled, pool_stepping
from stormdeck.advisors.blast import Prediction, against_outcome
from stormdeck.advisors.journal import Journal
from tests.executors import Predicting

PREDICTED = Prediction(what="pg_num of rbd 32 -> 64", pgs_remapped=["1.0", "1.1", "1.2"],
                       copies_to_create=3, bytes_to_move=30 << 20, eta_seconds=40.0,
                       eta_note="at the current rate").to_dict()


def applied(j: Journal, observed: dict | None, outcome: str = "applied") -> str:
    c = change("pool_set", "rbd", "pg_num", "32", "64")
    entry = j.intent(c, "32", prediction=PREDICTED)
    j.end(entry, outcome, after="64", observed=observed)
    return entry


def read(status: float, remapped: int = 0, misplaced: int = 0, clean: bool = False) -> dict:
    return {"time": status, "pgs_remapped": remapped, "misplaced_objects": misplaced,
            "misplaced_bytes": misplaced * 4 << 20, "degraded_objects": 0,
            "pgs_inactive": 0, "clean": clean}


def test_a_watch_records_the_seconds_until_active_clean_and_the_most_seen(
        tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.jsonl")
    entry_id = applied(j, read(1000.0, remapped=12, misplaced=300))
    e = j.find(entry_id)
    assert e.awaiting_clean and e.settled is None
    samples = [read(1002.0, remapped=20, misplaced=500), read(1030.0, remapped=3, misplaced=40)]
    record = merge_settled(e, [*samples, read(1032.0, clean=True)], "apply --follow")
    assert record["seconds"] == 32.0 and record["seconds_at_least"] == 30.0
    assert record["pgs_remapped_max"] == 20 and record["misplaced_objects_max"] == 500
    j.end(entry_id, e.status, e.detail, e.after, observed=e.observed, settled=record)
    e = j.find(entry_id)
    # The later end keeps the outcome and what was seen right after.
    assert e.status == "applied" and e.after == "64" and e.observed["pgs_remapped"] == 12
    assert not e.awaiting_clean
    line = against_outcome(e.prediction, e.observed, e.settled)
    assert "predicted: 3 PGs remapped" in line and "eta 40 s" in line
    assert "seen right after: 12 PGs remapped" in line
    assert "active+clean after 32 s (apply --follow)" in line and "at most 20 PGs" in line


def test_a_watch_that_gives_up_is_completed_by_a_later_read(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.jsonl")
    entry_id = applied(j, read(1000.0, remapped=12, misplaced=300))
    e = j.find(entry_id)
    gave_up = merge_settled(e, [read(1010.0, remapped=30, misplaced=900)], "apply --follow")
    assert gave_up["clean_at"] is None and gave_up["seconds_so_far"] == 10.0
    j.end(entry_id, e.status, e.detail, e.after, observed=e.observed, settled=gave_up)
    e = j.find(entry_id)
    assert e.awaiting_clean  # still watched: a later read finishes it
    assert "not active+clean after 10 s" in against_outcome(e.prediction, e.observed,
                                                            e.settled)
    later = merge_settled(e, [read(1600.0, clean=True)], "a later read of the journal")
    # Clean somewhere between the last busy read and this one: both bounds kept, maxima too.
    assert later["seconds_at_least"] == 10.0 and later["seconds"] == 600.0
    assert later["misplaced_objects_max"] == 900
    line = against_outcome(e.prediction, e.observed, later)
    assert "active+clean between 10 s and 10 min after" in line


def test_old_journals_read_and_only_made_data_moving_changes_are_watched(
        tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.jsonl")
    c = change("pool_set", "rbd", "pg_num", "32", "64")
    old = j.intent(c, "32")  # before predictions: nothing to watch
    j.end(old, "applied", after="64")
    refused = applied(j, None, outcome="refused")
    pending = applied(j, read(5.0, remapped=1))
    noup = j.intent(change("osd_flag", "osd.3", "noup", "unset", "set"), "unset",
                    prediction=PREDICTED)
    j.end(noup, "applied", after="set", observed=read(5.0))
    by_id = {e.id: e for e in j.entries()}
    assert by_id[old].settled is None and not by_id[old].awaiting_clean
    # noup moves nothing until the OSD next goes down: no movement of its own to follow.
    assert not by_id[noup].awaiting_clean
    # An undo that put pg_num back (a merge, predicted and guarded) is followed as well.
    back = j.intent(change("pool_set", "rbd", "pg_num", "64", "32"), "64", undoes=old,
                    prediction=PREDICTED)
    j.end(back, "applied", after="32", observed=read(6.0, remapped=4))
    assert j.find(back).awaiting_clean
    assert not by_id[refused].awaiting_clean  # nothing was made
    assert by_id[pending].awaiting_clean
    # A pending pg_num is not done moving, whatever `ceph status` says between steps.
    j.end(pending, "pending", after="40", observed=read(5.0, remapped=1))
    e = j.find(pending)
    ex = Executor(j)
    assert ex.settle([e], read(9.0, clean=True), final=False, by="t") == []
    assert ex.settle([j.find(old)], read(9.0, clean=True), final=False, by="t") == []


def test_undo_of_a_pg_num_change_is_predicted_and_guarded_as_apply(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.jsonl")
    entry = j.find(applied(j, None))
    inactive = Prediction(what="pg_num of rbd 64 -> 32", pgs_inactive=["1.3"])
    ex = Predicting(j, inactive)
    inverse = ex.inverse(entry)
    assert ex.undo_prediction(entry, inverse) is inactive
    (plan,) = ex.asked
    assert plan.changes == (inverse,) and inverse.proposed == "32"
    with pytest.raises(NothingChanged, match="inactive"):
        ex.guard_undo(entry, inverse, inactive)
    near = Prediction(what="pg_num of rbd 64 -> 32", osds_past_nearfull=[2],
                      ratios={"nearfull": 0.85})
    with pytest.raises(NothingChanged, match="past nearfull"):
        ex.guard_undo(entry, inverse, near)
    ex.guard_undo(entry, inverse, near, told=near)  # the operator typed the phrase for it
    ex.guard_undo(entry, inverse, None)  # moves no data: nothing to guard


def test_a_split_is_done_only_when_pg_num_and_pgp_num_reached_their_targets() -> None:
    def dump(pg: int, pgp: int, pg_target: int, pgp_target: int) -> dict:
        # `osd dump`'s own keys (Pacific 16.2.15): pgp_num is pg_placement_num.
        return {"pools": [{"pool_name": "rbd", "pg_num": pg, "pg_placement_num": pgp,
                           "pg_num_target": pg_target,
                           "pg_placement_num_target": pgp_target}]}

    assert pool_stepping(dump(64, 32, 64, 64), "rbd")  # split made, pgp_num not moved yet
    assert pool_stepping(dump(40, 40, 32, 32), "rbd")  # a merge still stepping down
    assert not pool_stepping(dump(64, 64, 64, 64), "rbd")
    # pgp_num kept below pg_num on purpose is where it is going: not stepping.
    assert not pool_stepping(dump(64, 32, 64, 32), "rbd")
    assert not pool_stepping(dump(64, 32, 64, 64), "gone")
