"""The console on the real lab: a finding's change applied from the screen, then undone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.advisors.apply import CephAdmin, Executor
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.host.source import HostSource
from stormdeck.tui.app import PlanReview, StormdeckApp
from stormdeck.tui.feed import Feed
from stormdeck.tui.views import FindingTable, JournalTable
from tests.conftest import LabCluster, ceph_json
from tests.integration.test_changes_lab import scrubbing
from tests.unit.test_tui import confirm_with_phrase, open_review, until

pytestmark = pytest.mark.integration


def stored(lab: LabCluster, who: str, key: str) -> str | None:
    cluster = lab.rados()
    try:
        rows = ceph_json(cluster, "config dump")
    finally:
        cluster.shutdown()
    return next((r["value"] for r in rows if r["section"] == who and r["name"] == key
                 and not r.get("mask")), None)


@pytest.mark.asyncio
async def test_apply_and_undo_from_the_console(lab_cluster: LabCluster, tmp_path: Path) -> None:
    settings = load_settings()
    rule = "ceph.scrub.during_load"
    # A window long enough to hold the scrubs started below (the rule speaks only while a
    # scrub runs, issue 31).
    settings[rule] = replace(settings[rule], for_seconds=0, warmup_samples=1,
                             params={**settings[rule].params, "window_seconds": 60})
    journal = Journal(tmp_path / "journal.jsonl")
    conf = str(lab_cluster.conf)
    feed = Feed([CephSource(conffile=conf), HostSource(ceph_conf=conf)], Engine(settings),
                interval=1.0)
    app = StormdeckApp(feed, journal=journal,
                       executor_factory=lambda: Executor(journal, ceph=CephAdmin(conf)))
    assert lab_cluster.cli("lab", "load", "--threads", "8").rc == 0
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("6")
            table = app.query_one(FindingTable)
            # Scrubs until the finding shows; its window keeps it after they end, and the
            # OSDs then all run the value applied (none keeps a slow scrub of its own).
            with scrubbing(lab_cluster):
                await until(pilot, lambda: f"{rule}|osd" in table.keys, 90)
            review = await open_review(app, pilot, f"{rule}|osd")
            assert app.focused.id == "cancel"
            await confirm_with_phrase(app, pilot, review)
            assert float(stored(lab_cluster, "osd", "osd_scrub_sleep") or 0) == 0.1
            (entry,) = journal.entries()
            assert entry.status == "applied"
            await pilot.press("7")
            assert app.query_one(JournalTable).keys == [entry.id]
            await pilot.press("u")
            undo = app.screen
            assert isinstance(undo, PlanReview)
            await confirm_with_phrase(app, pilot, undo)
    finally:
        lab_cluster.cli("lab", "load", "--stop")
    assert stored(lab_cluster, "osd", "osd_scrub_sleep") is None
    assert journal.entries()[0].undone_by
