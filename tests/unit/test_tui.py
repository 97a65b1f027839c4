"""The console driven by Textual's Pilot on frames built from lab captures."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import ContentSwitcher

from stormdeck.advisors.apply import Executor
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.session import Session
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.model import HealthCheck, Pool, pg_flags_from_states
from stormdeck.tui.app import PlanReview, StormdeckApp
from stormdeck.tui.feed import Frame, StaticFeed
from stormdeck.tui.views import (
    DaemonTable,
    DiskTable,
    FindingTable,
    JournalTable,
    LatencyTable,
    Leaders,
    Triage,
)
from tests.captured import history, with_cluster, with_daemon
from tests.executors import AsPlanned

EVIL = "[bold red]x[/] \x1b[31mred\x1b[0m"


def frames(edit=None, scrub: bool = True) -> list[Frame]:
    settings = load_settings()
    settings["ceph.scrub.during_load"] = replace(settings["ceph.scrub.during_load"],
                                                 for_seconds=0, warmup_samples=1)
    session = Session(Engine(settings))

    def scrubbing(s, i):
        # Three PGs scrub under the capture's load all along, so ceph.scrub.during_load
        # has its change to propose (it speaks only while a scrub runs, issue 31).
        s = edit(s, i) if edit else s
        assert s.cluster is not None
        states = {**s.cluster.pg_states}
        states["active+clean+scrubbing"] = states.get("active+clean+scrubbing", 0) + 3
        return with_cluster(s, pg_states=states, num_pgs=(s.cluster.num_pgs or 0) + 3,
                            pg_flags=pg_flags_from_states(states))
    snaps = history(5, step=1.0, edit=scrubbing if scrub else edit)
    out = []
    for i in range(1, len(snaps) + 1):
        step = session.step(snaps[i - 1], snaps[:i])
        out.append(Frame(step.snapshot, step.findings, tuple(snaps[:i]), events=step.events))
    return out


def incident(s, i):
    """osd.1 goes down at the third snapshot; its PGs peer, then recover degraded."""
    if i < 2:
        return s
    states = {"active+clean": 180, "peering": 30, "active+undersized+degraded": 15} if i == 2 \
        else {"active+clean": 185, "active+recovering+undersized+degraded": 40}
    checks = (HealthCheck("OSD_DOWN", "HEALTH_WARN", "1 osds down"),
              HealthCheck("SLOW_OPS", "HEALTH_WARN", "12 slow ops, oldest one blocked for "
                          "31 sec, osd.0 has slow ops"))
    s = with_daemon(s, "osd.1", up=False)
    return with_cluster(s, num_pgs=sum(states.values()), pg_states=states,
                        pg_flags=pg_flags_from_states(states),
                        checks=checks, slow_ops=12, slow_ops_daemons=("osd.0",),
                        osdmap_epoch=100 + i, health="HEALTH_WARN",
                        recovering_bps=48e6, recovering_objects_per_sec=12.0)


def heard(app: StormdeckApp) -> list[str]:
    """Every toast the app shows from now on, kept: a toast is gone from the screen after
    a few seconds, and a test that failed later must still say what it said."""
    said: list[str] = []
    real = app.notify

    def notify(message: str, *args, **kwargs):
        said.append(f"{kwargs.get('title') or ''}: {message}")
        return real(message, *args, **kwargs)

    app.notify = notify  # type: ignore[method-assign]
    return said


async def open_review(app: StormdeckApp, pilot, key: str) -> PlanReview:
    """Findings view, the finding `key` selected, Enter: its plan review."""
    said = heard(app)
    await pilot.press("6")
    table = app.query_one(FindingTable)
    table.move_cursor(row=table.keys.index(key))
    await pilot.press("enter")
    # A change that moves data is predicted in a worker first (advisors/blast/).
    try:
        await until(pilot, lambda: isinstance(app.screen, PlanReview), 120)
    except AssertionError:
        raise AssertionError(f"no review of {key} opened; the console said {said}") from None
    return app.screen


async def open_undo(app: StormdeckApp, pilot, timeout: float = 60.0) -> PlanReview:
    """u on the journal view's selected entry: its review, made in a worker first (the
    checks, the inverse and what it moves, as `stormdeck undo` makes them)."""
    said = heard(app)
    await pilot.press("u")
    try:
        await until(pilot, lambda: isinstance(app.screen, PlanReview), timeout)
    except AssertionError:
        raise AssertionError(f"no undo review opened; the console said {said}") from None
    return app.screen


async def until(pilot, check, timeout: float) -> None:
    """Let the app run until `check()` is true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.2)
        if check():
            return
    raise AssertionError("not within the time")


async def waited(pilot, check, timeout: float = 30.0) -> None:
    """Let the app run until `check()` holds or `timeout` seconds pass, whichever first:
    the asserts after it say what is wrong, on a host of any speed."""
    deadline = time.monotonic() + timeout
    await pilot.pause()
    while not check() and time.monotonic() < deadline:
        await pilot.pause(0.05)


def palette_searched(app) -> bool:
    """The command palette has no search under way for what was typed into it (it
    searches in a worker, which a busy host may not have run yet)."""
    from textual.command import CommandPalette
    from textual.worker import WorkerState

    screen = app.screen
    return isinstance(screen, CommandPalette) and not any(
        w.node is screen and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
        for w in app.workers)


async def palette_settled(pilot, timeout: float = 30.0) -> None:
    """Wait, however long the host takes, for the palette's search of what was typed."""
    await pilot.pause()
    deadline = time.monotonic() + timeout
    while not palette_searched(pilot.app):
        if time.monotonic() > deadline:
            raise AssertionError("the command palette's search did not end")
        await pilot.pause(0.05)
    await pilot.pause()


async def confirm_with_phrase(app: StormdeckApp, pilot, review: PlanReview) -> None:
    """Type the review's phrase, press Apply, wait for the change to be done."""
    review.query_one("#phrase").focus()
    await pilot.press(*review.plan.phrase)
    assert not review.query_one("#apply").disabled
    await pilot.click("#apply")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def confirm_review(app: StormdeckApp, pilot, review: PlanReview) -> None:
    """Confirm the review as it asks: the typed phrase where it asks for one, else the
    Apply button alone (an undo asks the phrase only where it fills an OSD past nearfull,
    as `stormdeck undo` does)."""
    if review.needs_phrase:
        await confirm_with_phrase(app, pilot, review)
        return
    await pilot.click("#apply")
    await app.workers.wait_for_complete()
    await pilot.pause()


class Recording:
    """An executor factory that records what the console asked of it."""

    def __init__(self, tmp_path: Path, read_only: bool) -> None:
        self.calls = 0
        self.executor = AsPlanned(Journal(tmp_path / "j.jsonl"), read_only=read_only)

    def __call__(self) -> Executor:
        self.calls += 1
        return self.executor


@pytest.mark.asyncio
async def test_views_switch_with_digits_and_rows_are_keyed(tmp_path: Path) -> None:
    app = StormdeckApp(StaticFeed(frames()), journal=Journal(tmp_path / "j.jsonl"))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        table = app.query_one(DaemonTable)
        assert table.keys == ["osd.0", "osd.1", "osd.2"]
        await pilot.press("3")
        assert "primary PGs per OSD" in app.query_one(Leaders).render_frame(app.frame).plain
        await pilot.press("4")
        assert app.query_one(LatencyTable).keys == ["osd.0", "osd.1", "osd.2"]
        await pilot.press("5")
        assert "vm:/dev/loop0" in app.query_one(DiskTable).keys
        await pilot.press("6")
        rules = {k.split("|")[0] for k in app.query_one(FindingTable).keys}
        assert "ceph.scrub.during_load" in rules
        await pilot.press("slash")
        await pilot.press(*"osd.1")
        await pilot.press("enter", "2")
        assert app.query_one(DaemonTable).keys == ["osd.1"]
        await pilot.press("7")
        assert app.query_one(ContentSwitcher).current == "journal"


def tuned_host(tmp_path: Path, monkeypatch) -> Path:
    """A tuned-adm of the test's own on PATH (tests/unit/test_changes.py), and this machine
    taken to be host vm, where the frames were captured: host.tuned_profile's change is
    then reviewed and carried out with no cluster at all. The tool's state file."""
    from tests.unit.test_changes import TUNED, tool

    bin_dir = tmp_path / "bin"
    tool(bin_dir, "tuned-adm", TUNED)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setattr("stormdeck.advisors.actuators.host._short_hostname", lambda: "vm")
    return bin_dir / "tuned.state"


def balanced(s, i):
    return replace(s, hosts={"vm": replace(s.hosts["vm"], tuned_profile="balanced")})


@pytest.mark.asyncio
async def test_review_opens_with_cancel_focused_and_cancel_changes_nothing(
        tmp_path: Path, monkeypatch) -> None:
    """The review is made on the executor before it opens (its checks read what runs now,
    as `stormdeck apply` does); Cancel changes nothing and journals nothing."""
    state = tuned_host(tmp_path, monkeypatch)
    factory = Recording(tmp_path, read_only=False)
    app = StormdeckApp(StaticFeed(frames(balanced)), executor_factory=factory)
    async with app.run_test(size=(160, 48)) as pilot:
        await open_review(app, pilot, "host.tuned_profile|host vm")
        assert app.focused is not None and app.focused.id == "cancel"
        assert app.screen.query_one("#apply").disabled, "a whole host: phrase first"
        await pilot.press("enter")  # on Cancel
        assert not isinstance(app.screen, PlanReview)
    assert factory.calls == 1
    assert not state.exists() or state.read_text().strip() == "balanced"
    assert not (tmp_path / "j.jsonl").exists(), "nothing journaled, nothing changed"


@pytest.mark.asyncio
async def test_read_only_refuses_from_the_console(tmp_path: Path) -> None:
    """Read-only is the first check of a review: refused before anything is asked, as
    `stormdeck apply --read-only` refuses."""
    factory = Recording(tmp_path, read_only=True)
    app = StormdeckApp(StaticFeed(frames()), executor_factory=factory, read_only=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("6")
        table = app.query_one(FindingTable)
        table.move_cursor(row=table.keys.index("ceph.scrub.during_load|osd"))
        await pilot.press("enter")
        await until(pilot, lambda: any("read-only mode" in n.message
                                       for n in app._notifications), 30)
        assert not isinstance(app.screen, PlanReview)
        assert "[RO]" in str(app.query_one("#status").render())
    assert factory.calls == 1
    assert not (tmp_path / "j.jsonl").exists(), "nothing journaled, nothing changed"


@pytest.mark.asyncio
async def test_cluster_text_is_data_not_markup(tmp_path: Path) -> None:
    def evil(s, i):
        s = with_daemon(s, "osd.0", host=EVIL)
        assert s.cluster is not None
        pool = Pool(id=99, name=EVIL, type="replicated", size=3, min_size=2, pg_num=100)
        return with_cluster(s, pools=(*s.cluster.pools, pool))

    app = StormdeckApp(StaticFeed(frames(evil)))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        cell = app.query_one(DaemonTable).cell("osd.0", "host")
        assert cell.plain == "[bold red]x[/] \\x1b[31mred\\x1b[0m"
        await pilot.press("6")
        keys = app.query_one(FindingTable).keys
        assert f"ceph.pool.pg_not_power_of_two|pool {EVIL}" in keys
        screen = app.export_screenshot()
        assert "[bold red]x[/]" in screen.replace("&#160;", " ")


@pytest.mark.asyncio
async def test_finding_review_apply_journal_undo(tmp_path: Path, monkeypatch) -> None:
    state = tuned_host(tmp_path, monkeypatch)
    journal = Journal(tmp_path / "j.jsonl")
    executor = Executor(journal)
    app = StormdeckApp(StaticFeed(frames(balanced)), executor_factory=lambda: executor,
                       journal=journal)
    async with app.run_test(size=(160, 48)) as pilot:
        review = await open_review(app, pilot, "host.tuned_profile|host vm")
        assert "tuned-adm profile latency-performance" in review.review
        await confirm_with_phrase(app, pilot, review)
        assert state.read_text().strip() == "latency-performance"
        await pilot.press("7")
        (entry,) = journal.entries()
        journal_table = app.query_one(JournalTable)
        assert journal_table.keys == [entry.id]
        undo = await open_undo(app, pilot)
        assert app.focused.id == "cancel"
        # The exact command the executor will run, not a placeholder.
        assert "tuned-adm profile balanced" in undo.review
        assert not undo.needs_phrase, "an undo asks a phrase only past nearfull"
        await confirm_review(app, pilot, undo)
    assert state.read_text().strip() == "balanced"
    assert journal.entries()[0].undone_by


@pytest.mark.asyncio
async def test_drill_into_one_daemon(tmp_path: Path) -> None:
    from stormdeck.tui.app import DaemonDetail

    app = StormdeckApp(StaticFeed(frames()))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        table = app.query_one(DaemonTable)
        table.move_cursor(row=table.keys.index("osd.1"))
        await pilot.press("enter")
        assert isinstance(app.screen, DaemonDetail)
        plain = str(app.screen.query_one("#detail-body").render())
        assert "osd.1" in plain and "commit latency" in plain and "vm:/dev/loop1" in plain
        await pilot.press("escape")
        assert not isinstance(app.screen, DaemonDetail)


@pytest.mark.asyncio
async def test_a_config_change_under_the_operator_is_a_toast() -> None:
    from tests.captured import with_config

    def later(s, i):
        return with_config(s, "osd_scrub_sleep", "osd", "0.1" if i >= 2 else "0.3")

    app = StormdeckApp(StaticFeed(frames(later)))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert "osd_scrub_sleep for osd: 0.3 -> 0.1" in messages


@pytest.mark.asyncio
async def test_low_bandwidth_draws_ascii() -> None:
    app = StormdeckApp(StaticFeed(frames()), low_bandwidth=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        cell = app.query_one(DaemonTable).cell("osd.0", "cores used/allowed").plain
        assert cell.startswith("#") and "█" not in cell and "░" not in cell
        await pilot.press("1")
        from stormdeck.tui.views import Overview

        overview = app.query_one(Overview).text.plain
        assert not set(overview) & set("▁▂▃▄▅▆▇█")


def spread(s, i):
    """Three OSDs whose IOPS sort differently as numbers and as text."""
    for n, iops in (("osd.0", 50.0), ("osd.1", 900.0), ("osd.2", 7000.0)):
        s = with_daemon(s, n, write_iops=iops, read_iops=0.0)
    return s


@pytest.mark.asyncio
async def test_sort_cycles_columns_numerically() -> None:
    app = StormdeckApp(StaticFeed(frames(spread)))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        table = app.query_one(DaemonTable)
        assert table.keys == ["osd.0", "osd.1", "osd.2"]
        for _ in range(3):  # host, cores, IOPS
            await pilot.press("s")
        assert table.COLUMNS[table.sort_column].name == "IOPS"
        assert table.keys == ["osd.2", "osd.1", "osd.0"], "7000 > 900 > 50, not as text"


@pytest.mark.asyncio
async def test_triage_tells_the_incident_in_order() -> None:
    app = StormdeckApp(StaticFeed(frames(incident)))
    async with app.run_test(size=(160, 60)) as pilot:
        await pilot.press("8")
        await pilot.pause()
        text = app.query_one(Triage).render_frame(app.frame).plain
    assert "osd.1 down" in text and "raised OSD_DOWN" in text
    assert "-> e102" in text and "osdmap e103 -> e104" in text
    assert "slow ops on osd.0" in text
    peering = next(line for line in text.splitlines() if line.strip().startswith("peering"))
    assert "peak     30" in peering  # seen at the third snapshot, gone since
    assert "Cluster log" in text and "OSDMAP_FLAGS" in text  # the lab's `log last`


@pytest.mark.asyncio
async def test_looking_back_keeps_the_frame_and_returns_to_now() -> None:
    feed = StaticFeed(frames(incident, scrub=False))
    app = StormdeckApp(feed)
    async with app.run_test() as pilot:
        newest = app.frame.snapshot.time
        await pilot.press("left_square_bracket", "left_square_bracket")
        await pilot.pause()
        assert app.frame.snapshot.time == newest - 2
        assert "2 s back" in app.status_line(app.frame).plain
        # n, not End: an overview taller than the screen (Ceph's own checks listed too)
        # scrolls on End, as a table does (tui/keys.py).
        await pilot.press("n")
        await pilot.pause()
        assert app.frame.snapshot.time == newest and not app.frame.position


def test_times_to_go_to() -> None:
    from stormdeck.base.when import parse_when

    now = 1_800_000_000.0
    assert parse_when("-90", now) == now - 90
    hms = time.strftime("%H:%M:%S", time.localtime(now - 30))
    assert parse_when(hms, now) == now - 30
    for bad in ("25:00", "x", "12:61:00", "-x"):
        with pytest.raises(ValueError):
            parse_when(bad, now)


@pytest.mark.asyncio
async def test_views_draw_the_thresholds_the_engine_judges_by(tmp_path: Path) -> None:
    """A user's rules.toml that moves a threshold moves the line the screen draws too."""
    from stormdeck.collectors.model import CurveCluster, CurvePool
    from stormdeck.tui.views import Leaders, Overview

    def curve(s, i):
        return replace(s, curve=CurveCluster(pools=(CurvePool("pool1", leader_range=7.0),)))

    settings = load_settings()
    settings["curve.leaders.spread"] = replace(
        settings["curve.leaders.spread"],
        params={**settings["curve.leaders.spread"].params, "max_range": 9})
    feed = StaticFeed(frames(curve))
    feed.engine = Engine(settings)  # as a live Feed carries its engine
    app = StormdeckApp(feed)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        overview = app.query_one(Overview).render_frame(app.frame).plain
        assert "range 7 (threshold 9)" in overview
        await pilot.press("3")
        assert "(threshold 9)" in app.query_one(Leaders).render_frame(app.frame).plain
    default = StormdeckApp(StaticFeed(frames(curve)))
    async with default.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert "range 7 (threshold 5)" in default.query_one(Overview).render_frame(
            default.frame).plain


@pytest.mark.asyncio
async def test_tables_sort_and_select_with_the_mouse() -> None:
    """As htop and btop users do: a header sorts, again the other way; a row is chosen, and a
    double click opens it."""
    from stormdeck.tui.views import DaemonDetail

    app = StormdeckApp(StaticFeed(frames(spread)))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        table = app.query_one(DaemonTable)
        x = sum(c.width + 1 for c in table.COLUMNS[:3]) + 2  # inside the IOPS header
        await pilot.click(DaemonTable, offset=(x, 0))
        assert table.COLUMNS[table.sort_column].name == "IOPS"
        assert table.keys == ["osd.2", "osd.1", "osd.0"]
        await pilot.click(DaemonTable, offset=(x, 0))
        assert table.keys == ["osd.0", "osd.1", "osd.2"] and table.sort_ascending
        await pilot.click(DaemonTable, offset=(3, 2))
        assert table.selected_key == "osd.1"
        await pilot.click(DaemonTable, offset=(3, 3), times=2)
        await pilot.pause()
        assert isinstance(app.screen, DaemonDetail) and app.screen.daemon_id == "osd.2"


@pytest.mark.asyncio
async def test_the_command_palette_finds_views_and_the_findings_reviews(tmp_path: Path) -> None:
    from stormdeck.tui.commands import StormdeckCommands

    app = StormdeckApp(StaticFeed(frames()),
                       executor_factory=Recording(tmp_path, read_only=False))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        provider = StormdeckCommands(app.screen)
        texts = [text for text, _, _, _ in provider.commands()]
        assert "View: Leaders" in texts and "Write an incident report of the session" in texts
        assert any(t.startswith("Review the change: ceph.scrub.during_load on ") for t in texts)
        hits = [h async for h in provider.search("view lead")]
        assert hits and max(hits, key=lambda h: h.score).text == "View: Leaders"
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"view leaders")
        await palette_settled(pilot)
        await pilot.press("down", "enter")
        await pilot.pause()
        assert app.query_one(ContentSwitcher).current == "leaders"
        review = next(run for text, run, _, _ in provider.commands()
                      if text.startswith("Review the change: "))
        review()
        await until(pilot, lambda: isinstance(app.screen, PlanReview), 10)


@pytest.mark.asyncio
async def test_a_chosen_theme_is_kept(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    app = StormdeckApp(StaticFeed(frames()))
    async with app.run_test(size=(120, 40)) as pilot:
        app.theme = "nord"
        await pilot.pause()
    again = StormdeckApp(StaticFeed(frames()))
    async with again.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert again.theme == "nord"
    (tmp_path / "stormdeck" / "console.json").write_text("{not json")
    broken = StormdeckApp(StaticFeed(frames()))
    async with broken.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert broken.theme != "nord"  # a torn file is the default theme, not a crash


@pytest.mark.asyncio
async def test_an_executor_that_cannot_be_made_is_a_toast_not_a_crash(tmp_path: Path) -> None:
    """The executor factory asks the cluster (a read-only cluster's fsid) and reads the
    config: its failure is said, and the console goes on."""
    from stormdeck.base.errors import UserError

    def factory():
        raise UserError("the cluster did not answer (timed out)")

    app = StormdeckApp(StaticFeed(frames()), executor_factory=factory)
    async with app.run_test(size=(160, 48)) as pilot:
        said = heard(app)
        await pilot.press("6")
        table = app.query_one(FindingTable)
        table.move_cursor(row=table.keys.index("ceph.scrub.during_load|osd"))
        await pilot.press("enter")
        await until(pilot, lambda: any("did not answer" in s for s in said), 10)
        assert app.is_running and not isinstance(app.screen, PlanReview)
