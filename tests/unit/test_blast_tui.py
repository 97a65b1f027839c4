"""The console's plan review with a prediction: what it moves is shown; refused, it cannot apply."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import Button, Static

from stormdeck.advisors import blast
from stormdeck.advisors.plan import plan_from_finding, review
from stormdeck.tui.app import PlanReview, StormdeckApp
from stormdeck.tui.feed import StaticFeed
from tests.unit.test_blast import MIB, REP, noup_finding, pg, state
from tests.unit.test_tui import Recording, frames


def plan_predicted(refused: bool):
    s = state([REP], [pg("1.0", (0, 1, 2), 10 * MIB), pg("1.1", (3, 4, 5), 10 * MIB)])
    down = [0, 1] if refused else [5]
    plan = plan_from_finding(noup_finding([0]), "fsid-1")
    predicted = blast.predict_down(s, None, down)
    return replace(plan, prediction=predicted.to_dict())


@pytest.mark.asyncio
@pytest.mark.parametrize("refused", [True, False])
async def test_the_review_shows_the_prediction_and_a_refusal_disables_apply(
        tmp_path: Path, refused: bool) -> None:
    plan = plan_predicted(refused)
    app = StormdeckApp(StaticFeed(frames()), executor_factory=Recording(tmp_path,
                                                                        read_only=False))
    async with app.run_test(size=(160, 48)) as pilot:
        app.push_screen(PlanReview(plan, review(plan)))
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlanReview)
        text = str(screen.query_one("#review-text", Static).render())
        assert "predicted: down" in text and "ceph osd set-group noup osd.0" in text
        apply = screen.query_one("#apply", Button)
        if refused:
            assert "inactive" in str(screen.query_one("#review-refused", Static).render())
            assert apply.disabled
        else:
            assert not screen.query("#review-refused")
            assert not apply.disabled


@pytest.mark.asyncio
async def test_o_in_an_osds_detail_predicts_in_a_worker_and_says_why_not(tmp_path: Path) -> None:
    """Without a Ceph connection (the canned frames' executor has none), `o` says so in the
    detail instead of predicting; the lab test shows it predicting."""
    from stormdeck.tui.views import DaemonDetail, DaemonTable

    app = StormdeckApp(StaticFeed(frames()),
                       executor_factory=Recording(tmp_path, read_only=False))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        table = app.query_one(DaemonTable)
        table.move_cursor(row=table.keys.index("osd.1"))
        await pilot.press("enter")
        assert isinstance(app.screen, DaemonDetail)
        await pilot.press("o")
        await app.workers.wait_for_complete()
        await pilot.pause()
        said = str(app.screen.query_one("#detail-whatif", Static).render())
        assert "not predicted" in said and "no Ceph connection" in said


@pytest.mark.asyncio
async def test_the_journal_view_shows_prediction_and_outcome(tmp_path: Path) -> None:
    from stormdeck.advisors.actuators.table import change
    from stormdeck.advisors.journal import Journal
    from stormdeck.tui.views import JournalTable

    journal = Journal(tmp_path / "j.jsonl")
    c = change("pool_set", "rbd", "pg_num", "32", "64")
    plain = journal.intent(c, "32")
    journal.end(plain, "applied", after="64")
    moved = journal.intent(c, "32", prediction=plan_predicted(True).prediction)
    journal.end(moved, "applied", after="64",
                observed={"pgs_remapped": 7, "misplaced_objects": 40, "pgs_inactive": 0},
                settled={"clean_at": 2000.0, "seconds": 95.0, "seconds_at_least": 93.0,
                         "by": "apply --follow", "pgs_remapped_max": 9,
                         "misplaced_objects_max": 60, "misplaced_bytes_max": 60 << 22,
                         "degraded_objects_max": 0, "pgs_inactive_max": 0})
    app = StormdeckApp(StaticFeed(frames()), journal=journal)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        table = app.query_one(JournalTable)
        shown = table.cell(moved, "change").plain
        assert "predicted:" in shown and "1 inactive" in shown
        assert "seen right after: 7 PGs remapped, 40 objects misplaced" in shown
        # Beside the prediction's eta: the real time until active+clean, and the most seen.
        assert "active+clean after 2 min (apply --follow)" in shown
        assert "at most 9 PGs remapped, 60 objects misplaced (about 240.0 MiB)" in shown
        assert "predicted" not in table.cell(plain, "change").plain


@pytest.mark.asyncio
async def test_the_consoles_undo_of_a_split_opens_with_its_prediction(tmp_path: Path) -> None:
    """u on a pg_num entry: the merge back is predicted in a worker, and the review opens
    with it; one that makes PGs inactive is refused there, Apply off."""
    from stormdeck.advisors.actuators.table import change
    from stormdeck.advisors.journal import Journal
    from stormdeck.tui.views import JournalTable
    from tests.executors import Predicting
    from tests.unit.test_tui import until

    journal = Journal(tmp_path / "j.jsonl")
    entry = journal.intent(change("pool_set", "rbd", "pg_num", "32", "64"), "32",
                           prediction=blast.Prediction(what="pg_num").to_dict())
    journal.end(entry, "applied", after="64")
    merge = blast.Prediction(what="pg_num of rbd 64 -> 32", pgs_inactive=["1.3"])
    executor = Predicting(journal, merge)
    app = StormdeckApp(StaticFeed(frames()), journal=journal,
                       executor_factory=lambda: executor)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("7")
        await until(pilot, lambda: app.query_one(JournalTable).keys == [entry], 10)
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, PlanReview), 10)
        screen = app.screen
        assert "predicted: pg_num of rbd 64 -> 32" in screen.review
        assert "ceph osd pool set rbd pg_num 32" in screen.review
        assert "inactive" in str(screen.query_one("#review-refused", Static).render())
        assert screen.query_one("#apply", Button).disabled
    (plan,) = executor.asked
    assert plan.changes[0].proposed == "32"
