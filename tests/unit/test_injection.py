"""Cluster-supplied text with Rich markup, ANSI and OSC escapes, control characters and huge
lengths stays inert everywhere it goes: views, the triage timeline, toasts, the journal,
incident and validation reports."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.advisors import report
from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.validate import judge, runner
from stormdeck.collectors.model import ConfigChange, ConfigOption, HealthCheck, LogEntry, Pool
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import StaticFeed
from stormdeck.tui.views import JournalTable, Triage
from tests.captured import with_cluster, with_daemon
from tests.unit.test_tui import frames

# Markup, a colour, an OSC 8 hyperlink, a title change, CR/BS overwrites, a bell, NUL,
# a C1 control, and 20,000 characters.
EVIL = ("[bold red]x[/] \x1b[31mred\x1b[0m \x1b]8;;http://evil/\x07link\x1b]8;;\x07 "
        "\x1b]0;owned\x07 over\rwrite\b\x07\x00\x9b" + "A" * 20_000)
RAW = ("\x1b", "\x07", "\r", "\b", "\x00", "\x9b")


def inert(text: str, limit: int = 20_000) -> None:
    assert not any(c in text for c in RAW), repr(text[:200])
    assert len(text) < limit


def evil_incident(s, i):
    s = with_daemon(s, "osd.1", host=EVIL, up=i < 2)
    c = s.cluster
    assert c is not None
    pool = Pool(id=77, name=EVIL, type="replicated", size=3, min_size=2, pg_num=64 + 36 * (i > 2))
    return with_cluster(
        s, pools=(*c.pools, pool) if i >= 1 else c.pools,
        checks=(HealthCheck("EVIL", "HEALTH_WARN", EVIL),) if i >= 2 else (),
        log=(LogEntry(s.time, 1, EVIL, "[WRN]", EVIL),),
        config_log=(ConfigChange(9, s.time, EVIL, EVIL, EVIL),) if i >= 3 else (),
        slow_ops=3, slow_ops_daemons=(EVIL,), health=EVIL)


@pytest.mark.asyncio
async def test_the_triage_view_shows_evil_text_inertly() -> None:
    app = StormdeckApp(StaticFeed(frames(evil_incident)))
    async with app.run_test(size=(160, 60)) as pilot:
        await pilot.press("8")
        await pilot.pause()
        text = app.query_one(Triage).render_frame(app.frame).plain
        screen = app.export_screenshot()
    inert(text, 40_000)
    assert "[bold red]x[/]" in text  # shown as the characters it is
    assert "\\x1b[31m" in text
    assert "\x1b]8;;http://evil" not in screen


@pytest.mark.asyncio
async def test_a_config_change_toast_is_inert() -> None:
    def later(s, i):
        c = s.cluster
        assert c is not None
        opt = ConfigOption("osd_scrub_sleep", True, values={"osd": EVIL if i else "0"})
        return with_cluster(s, config={**c.config, "osd_scrub_sleep": opt})

    app = StormdeckApp(StaticFeed(frames(later)))
    async with app.run_test() as pilot:
        await pilot.pause()
        toasts = [n.message for n in app._notifications]
    assert toasts and any("osd_scrub_sleep" in m for m in toasts)
    for m in toasts:
        inert(m, 500)


@pytest.mark.asyncio
async def test_the_journal_view_is_inert(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    ch = Change(kind="ceph_config", target="osd", key="osd_scrub_sleep", current="0",
                proposed="0.1", command="ceph config set osd osd_scrub_sleep 0.1")
    journal.end(journal.intent(ch, EVIL, rule=EVIL, cluster=EVIL), "failed", EVIL, EVIL)
    app = StormdeckApp(StaticFeed(frames()), journal=journal)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("7")
        table = app.query_one(JournalTable)
        (key,) = table.keys
        cells = [c.plain for c in table.row_cells(key)]
    for cell in cells:
        inert(cell, 1000)


def test_the_incident_report_is_inert() -> None:
    fs = frames(evil_incident)
    events = list(fs[-1].events)
    assert any(EVIL[:10] in e.text for e in events)
    r = report.build(((f.snapshot, f.findings) for f in fs), events)
    md = report.to_markdown(r)
    inert(md, 40_000)
    rows = [line.replace("\\|", "") for line in md.splitlines() if line.startswith("|")]
    headers = {r.count("|") for r in rows if r.startswith(("| time |", "| severity |"))}
    assert len(headers) == 2
    # A pipe in cluster text must not add a column to a table.
    assert all(r.count("|") in headers for r in rows)
    js = report.to_json(r)
    inert(js, 400_000)  # JSON escapes control characters itself


def test_the_validation_report_is_inert() -> None:
    step = runner.StepReport("settings", "Cluster settings", status="error", error=EVIL,
                             verdicts=[judge.pg_num(EVIL, 100),
                                       replace(judge.tuned(EVIL, EVIL), evidence=(EVIL,))])
    r = runner.Report(started=time.time(), ended=time.time(), cluster=EVIL, quick=True,
                      steps=[step], cleanup_done=[EVIL], changes=[EVIL])
    md = runner.to_markdown(r)
    inert(md, 40_000)
    assert "[bold red]x[/]" in md
