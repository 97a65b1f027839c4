"""The console's dialogs under fire: the phrase takes what is typed wherever the focus is,
a palette command that changes something asks first, and M lists and lifts mutes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.widgets import Input, OptionList

from stormdeck.advisors.journal import Journal
from stormdeck.advisors.mutes import MuteStore
from stormdeck.tui.app import PlanReview, StormdeckApp
from stormdeck.tui.feed import StaticFeed
from stormdeck.tui.screens import Confirm, MutesList
from stormdeck.tui.views import FindingTable
from tests.unit.test_tui import (
    Recording,
    frames,
    open_review,
    palette_searched,
    palette_settled,
    until,
)

SCRUB = "ceph.scrub.during_load|osd"


@pytest.mark.asyncio
async def test_the_phrase_typed_with_cancel_focused_fills_the_box_and_enter_applies_on_a_match(
        tmp_path: Path) -> None:
    factory = Recording(tmp_path, read_only=False)
    app = StormdeckApp(StaticFeed(frames()), executor_factory=factory)
    async with app.run_test(size=(160, 48)) as pilot:
        review = await open_review(app, pilot, SCRUB)
        box = review.query_one("#phrase", Input)
        assert app.focused.id == "cancel"
        phrase = review.plan.phrase
        await pilot.press(*phrase[:-1], "z")  # one letter short, spaces and all, a slip
        assert box.value == phrase[:-1] + "z"
        await pilot.press("backspace")
        assert box.value == phrase[:-1]
        assert app.focused.id == "cancel", "the focus stays on Cancel"
        box.focus()
        await pilot.press("enter")  # in the box, not the phrase yet: says why, stays
        await pilot.pause()
        assert app.screen is review
        assert "Not applied: what is typed is not the phrase" in str(
            review.query_one("#phrase-why").render())
        assert factory.calls == 1, "the review's executor, made before it opened"
        await pilot.press(phrase[-1], "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not isinstance(app.screen, PlanReview)
    assert factory.calls == 1


@pytest.mark.asyncio
async def test_enter_on_cancel_still_cancels_after_typing(tmp_path: Path) -> None:
    factory = Recording(tmp_path, read_only=False)
    app = StormdeckApp(StaticFeed(frames()), executor_factory=factory)
    async with app.run_test(size=(160, 48)) as pilot:
        review = await open_review(app, pilot, SCRUB)
        await pilot.press(*review.plan.phrase)
        assert not review.query_one("#apply").disabled
        await pilot.press("enter")  # Cancel has the focus
        await pilot.pause()
        assert not isinstance(app.screen, PlanReview)
    assert factory.calls == 1, "the review's own, closed unused"
    assert not (tmp_path / "j.jsonl").exists(), "nothing journaled, nothing changed"


async def palette(app: StormdeckApp, pilot, query: str) -> None:
    await pilot.press("colon")
    await pilot.pause()
    assert isinstance(app.screen, CommandPalette)
    await pilot.press(*query)
    await palette_settled(pilot)
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(app.screen, CommandPalette), 30)
    await pilot.pause()


def memory_frames() -> list:
    """The scrub finding on a target whose name holds t-h-e-m-e in order once "Mute for an
    hour: " is before it, as a lab's ceph.mon.* findings do: a fuzzy match for "theme"."""
    out = []
    for fr in frames():
        found = tuple(replace(f, target="osd memory") if f.rule == "ceph.scrub.during_load"
                      else f for f in fr.findings)
        out.append(replace(fr, findings=found))
    return out


@pytest.mark.asyncio
async def test_theme_and_enter_in_the_palette_mutes_nothing(tmp_path: Path) -> None:
    from textual.fuzzy import Matcher

    from stormdeck.tui.commands import StormdeckCommands

    store = MuteStore(tmp_path / "mutes.json")
    app = StormdeckApp(StaticFeed(memory_frames()), mutes=store)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        provider = StormdeckCommands(app.screen)
        mute_text = next(text for text, *_ in provider.commands()
                         if text.startswith("Mute for") and "memory" in text)
        assert Matcher("theme").match(mute_text) > 0, mute_text
        hits = [h.text async for h in provider.search("theme")]
        assert not any(str(h).startswith("Mute for") for h in hits), hits
        assert [h.text async for h in provider.search("mute memory")] == [mute_text]
        # At 3 a.m. speed: Enter as soon as the word is typed.
        await pilot.press("colon", *"theme", "enter")
        # Whatever the Enter led to, once the palette's search for "theme" has ended.
        await until(pilot, lambda: not isinstance(app.screen, CommandPalette)
                    or palette_searched(app), 30)
        await pilot.pause()
        assert not isinstance(app.screen, Confirm)
        for _ in range(3):
            if len(app.screen_stack) == 1:
                break
            await pilot.press("escape")
            await pilot.pause()
    assert MuteStore(tmp_path / "mutes.json").list() == []


@pytest.mark.asyncio
async def test_a_mute_from_the_palette_asks_first_with_cancel_focused(tmp_path: Path) -> None:
    store = MuteStore(tmp_path / "mutes.json")
    app = StormdeckApp(StaticFeed(frames()), mutes=store)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("6")
        await palette(app, pilot, "mute scrub.during_load")
        assert isinstance(app.screen, Confirm)
        assert app.focused.id == "cancel"
        assert MuteStore(tmp_path / "mutes.json").list() == [], "nothing yet"
        await pilot.press("enter")  # Cancel
        await pilot.pause()
        assert not isinstance(app.screen, Confirm)
        assert MuteStore(tmp_path / "mutes.json").list() == []
        await palette(app, pilot, "mute scrub.during_load")
        await pilot.click("#ok")
        await pilot.pause()
    (m,) = MuteStore(tmp_path / "mutes.json").list()
    assert (m.rule, m.target) == ("ceph.scrub.during_load", "osd")


@pytest.mark.asyncio
async def test_M_lists_this_clusters_mutes_and_lifts_the_selected_one(tmp_path: Path) -> None:
    shown = frames()
    fsid = shown[-1].snapshot.cluster.fsid
    path = tmp_path / "mutes.json"
    scrub = next(f for f in shown[-1].findings if f.key == ("ceph.scrub.during_load", "osd"))
    MuteStore(path).add(scrub, ttl=600, reason="planned scrub", fsid=fsid)
    other = "1b2c3d4e-0000-4000-8000-00000000000b"
    MuteStore(path).add(scrub, ttl=600, reason="elsewhere", fsid=other)
    app = StormdeckApp(StaticFeed(shown), mutes=MuteStore(path),
                       journal=Journal(tmp_path / "j.jsonl"))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("M")
        await pilot.pause()
        assert isinstance(app.screen, MutesList)
        menu = app.screen.query_one(OptionList)
        assert menu.option_count == 1, "the other cluster's mute is not this tab's"
        text = str(menu.get_option_at_index(0).prompt)
        assert "ceph.scrub.during_load" in text and "planned scrub" in text
        assert "until" in text
        await pilot.press("x")
        await pilot.pause()
        assert "no mutes in force" in str(menu.get_option_at_index(0).prompt)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, MutesList)
    assert [m.fsid for m in MuteStore(path).list()] == [other]


@pytest.mark.asyncio
async def test_the_finding_table_keeps_m_for_its_own_mute(tmp_path: Path) -> None:
    """m still mutes at once from the findings view (a key pressed on purpose)."""
    app = StormdeckApp(StaticFeed(frames()), mutes=MuteStore(tmp_path / "mutes.json"))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("6")
        table = app.query_one(FindingTable)
        table.move_cursor(row=table.keys.index(SCRUB))
        await pilot.press("m")
        await pilot.pause()
    assert len(MuteStore(tmp_path / "mutes.json").list()) == 1


@pytest.mark.asyncio
async def test_the_undo_of_a_pg_num_increase_says_merge_and_asks_for_undo(
        tmp_path: Path) -> None:
    from stormdeck.advisors.actuators.table import change
    from stormdeck.tui.views import JournalTable
    from tests.executors import AsPlanned

    journal = Journal(tmp_path / "j.jsonl")
    split = change("pool_set", "rbd", "pg_num", "100", "128",
                   note="moves data: PGs split in the background")
    entry = journal.intent(split, "100", rule="ceph.pool.pg_not_power_of_two")
    journal.end(entry, "applied", after="128")
    executor = AsPlanned(journal)  # the cluster as the entry left it; nothing is confirmed
    app = StormdeckApp(StaticFeed(frames()), executor_factory=lambda: executor,
                       journal=journal)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("7")
        await pilot.pause()
        assert app.query_one(JournalTable).keys == [entry]
        await pilot.press("u")
        # Reviewed in a worker first (checks and prediction, as `stormdeck undo`).
        await until(pilot, lambda: isinstance(app.screen, PlanReview), 10)
        undo = app.screen
        assert "ceph osd pool set rbd pg_num 100" in undo.review
        assert "merge back to 100" in undo.review and "split" not in undo.review
        assert undo.plan.phrase == f"undo {entry}"
        await pilot.press("escape")
    assert journal.entries()[0].undone_by == []
