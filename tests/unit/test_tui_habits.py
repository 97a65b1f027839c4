"""The console as operators' habits expect it: a docked header that tells time, filter and
stale sources; a key bar that fits 80 columns; sort marker, reverse and column menu; `:`;
help made from the key registry the bindings come from."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.binding import Binding
from textual.command import CommandPalette
from textual.widgets import Static

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.session import Session
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.model import SourceHealth
from stormdeck.tui.app import StormdeckApp, source_state
from stormdeck.tui.feed import Frame, StaticFeed
from stormdeck.tui.keybar import fit
from stormdeck.tui.keys import KEYS, VIEWS, help_sections, key_display, keys_display
from stormdeck.tui.views import DaemonTable, DiskTable
from tests.captured import history
from tests.unit.test_tui import palette_settled, spread, waited

SIZE = (80, 24)


def frames(n: int = 5, step: float = 10.0, edit=None) -> list[Frame]:
    """Frames `step` seconds apart (40 s of them by default: room to go 30 s back)."""
    session = Session(Engine(load_settings()))
    snaps = history(n, step=step, edit=edit)
    out = []
    for i in range(1, len(snaps) + 1):
        step_ = session.step(snaps[i - 1], snaps[:i])
        out.append(Frame(step_.snapshot, step_.findings, tuple(snaps[:i]), events=step_.events))
    return out


def screen_text(app: StormdeckApp) -> str:
    """What the terminal shows, line by line, as text (as export_screenshot draws it)."""
    import io

    from rich.console import Console

    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      record=True, legacy_windows=False)
    console.print(app.screen._compositor.render_update(
        full=True, screen_stack=app._background_screens))
    return console.export_text()


def header(app: StormdeckApp) -> str:
    return str(app.query_one("#status", Static).render())


def header_on_screen(app: StormdeckApp) -> bool:
    """The header is drawn on the first line of the terminal, not scrolled away."""
    region = app.query_one("#status").region
    return region.y == 0 and region.height >= 1 and app.screen.scroll_offset.y == 0


@pytest.mark.asyncio
async def test_the_header_stays_and_tells_the_filter_and_the_time_gone_back() -> None:
    app = StormdeckApp(StaticFeed(frames()), cluster_name="lab")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2", "slash", *"osd.1", "enter")
        await pilot.pause()
        assert app.query_one(DaemonTable).keys == ["osd.1"]
        assert header_on_screen(app)
        assert "filter 'osd.1'" in header(app)
        await pilot.press("g", *"-30", "enter")
        await pilot.pause()
        assert header_on_screen(app)
        text = header(app)
        assert "30 s back" in text and "filter 'osd.1'" in text, text
        assert "30 s back" in screen_text(app).splitlines()[0]
        await pilot.press("p")
        await pilot.pause()
        assert "PAUSED" in header(app)
        await pilot.press("n")  # back to now, from a table (where End is the last row)
        await pilot.pause()
        assert "LIVE" in header(app) and "back" not in header(app)
        await pilot.press("escape")
        await pilot.pause()
        assert "filter" not in header(app)
        assert app.query_one(DaemonTable).row_count == 3


@pytest.mark.asyncio
async def test_a_source_that_misses_its_poll_is_stale_at_once() -> None:
    """The hub calls a poll hung only after its timeout; the header must not wait for it."""
    def mon_gone(s, i):
        if i < 4:
            return s
        ceph = s.sources["ceph"]
        late = replace(ceph, last_success=s.time - 3.0, poll_seconds=0.2)
        return replace(s, sources={**s.sources, "ceph": late})

    app = StormdeckApp(StaticFeed(frames(step=1.0, edit=mon_gone)), cluster_name="lab")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = header(app)
        assert "ceph STALE 3s" in text and "host ok" in text, text
        assert "ceph STALE 3s" in screen_text(app)


def test_source_states() -> None:
    now = 1000.0
    ok = SourceHealth("ceph", True, now - 0.5, poll_seconds=0.2)
    assert source_state(ok, now, 1.0)[1] == "ok"
    assert source_state(replace(ok, last_success=now - 2.5), now, 1.0)[1] == "STALE 2s"
    # A slow source (Curve fans out) is not stale while within its own poll time.
    slow = replace(ok, last_success=now - 4.0, poll_seconds=3.0)
    assert source_state(slow, now, 1.0)[1] == "ok"
    hung = replace(ok, ok=False, stale=True, last_success=now - 12, error="no answer")
    assert source_state(hung, now, 1.0)[1] == "STALE 12s"
    assert source_state(SourceHealth("ceph", False, None, error="refused"), now, 1.0)[1] \
        == "ERROR"


@pytest.mark.asyncio
async def test_the_key_bar_shows_help_and_quit_in_every_view_at_80_columns() -> None:
    app = StormdeckApp(StaticFeed(frames()), cluster_name="lab")
    async with app.run_test(size=SIZE) as pilot:
        for view in VIEWS:
            await pilot.press(view.key)
            await pilot.pause()
            bottom = screen_text(app).rstrip("\n").splitlines()[-1]
            assert "?Help" in bottom and "qQuit" in bottom, (view.id, bottom)
            assert header_on_screen(app), view.id


def test_the_key_bar_fits_any_width_and_keeps_help_and_quit() -> None:
    for width in range(30, 201):
        slots = fit(KEYS, width)
        labels = [s.label for s in slots]
        assert "Help" in labels and "Quit" in labels, width
        used = sum(len(key_display(s.key.keys.split(",")[0])) + len(s.label) + 1
                   for s in slots) - 1
        assert used <= width, (width, labels)
    assert len(fit(KEYS, 80)) >= 12  # at 80: every view's key, filter, pause and more


@pytest.mark.asyncio
async def test_the_sorted_column_has_an_arrow_and_I_reverses_it() -> None:
    app = StormdeckApp(StaticFeed(frames(edit=spread)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        table = app.query_one(DaemonTable)
        assert table.sort_marker() == ""
        for _ in range(3):  # host, cores, IOPS
            await pilot.press("s")
        assert table.sort_marker() == "IOPS▼"
        assert table.keys == ["osd.2", "osd.1", "osd.0"]
        await pilot.press("I")
        assert table.sort_marker() == "IOPS▲" and table.sort_ascending
        assert table.keys == ["osd.0", "osd.1", "osd.2"]
        assert "IOPS▲" in screen_text(app)


@pytest.mark.asyncio
async def test_a_column_menu_picks_the_sort_column() -> None:
    from textual.widgets import OptionList

    from stormdeck.tui.screens import ColumnMenu

    app = StormdeckApp(StaticFeed(frames()))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5", "S")
        await pilot.pause()
        assert isinstance(app.screen, ColumnMenu)
        menu = app.screen.query_one(OptionList)
        names = [c.name for c in DiskTable.COLUMNS]
        menu.highlighted = names.index("w/s")
        await pilot.press("enter")
        await pilot.pause()
        table = app.query_one(DiskTable)
        assert table.COLUMNS[table.sort_column].name == "w/s"
        assert table.sort_marker() == "w/s▼"
        writes = [float(table.cell(k, "w/s").plain) for k in table.keys]
        assert writes == sorted(writes, reverse=True)


@pytest.mark.asyncio
async def test_colon_opens_the_command_palette() -> None:
    app = StormdeckApp(StaticFeed(frames()))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("colon")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"view triage")
        await palette_settled(pilot)
        await pilot.press("down", "enter")
        await pilot.pause()
        from textual.widgets import ContentSwitcher

        assert app.query_one(ContentSwitcher).current == "triage"


def bindings_of_the_console() -> list[tuple[str, Binding]]:
    """Every binding the console's own classes declare, wherever they declare it."""
    from stormdeck.tui.table import VirtualTable
    from stormdeck.tui.views import FindingsView, JournalTable

    out = []
    for cls in (StormdeckApp, VirtualTable, DaemonTable, FindingsView, JournalTable):
        for b in cls.__dict__.get("BINDINGS", []):
            assert isinstance(b, Binding)
            out.append((cls.__name__, b))
    return out


def test_every_binding_comes_from_the_registry() -> None:
    registered = {(k.keys, k.action) for k in KEYS}
    for owner, b in bindings_of_the_console():
        assert (b.key, b.action) in registered, (owner, b.key, b.action)


@pytest.mark.asyncio
async def test_help_lists_every_key_mouse_action_and_palette_command_and_scrolls() -> None:
    from stormdeck.tui.screens import Help

    app = StormdeckApp(StaticFeed(frames()))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, Help)
        # Words as on screen, wrapped lines joined.
        text = " ".join(app.screen.plain(76).split())
        for _, b in bindings_of_the_console():
            assert f"{keys_display(b.key)}" in text and b.description in text, b
        for needed in ("Ctrl+P", "PgDn", "click a column header", " I ", "F6",
                       "Review the change: RULE on TARGET", "View: Triage", "Mouse"):
            assert needed in text, needed
        # At 80x24 it cannot all fit: it scrolls to its last line.
        last = help_sections()[-1][1][-1][0]
        assert last not in screen_text(app)
        await pilot.press("end")
        await pilot.pause()
        assert last in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, Help)


@pytest.mark.asyncio
async def test_keys_typed_in_one_burst_after_slash_land_in_the_filter() -> None:
    """Over a slow SSH link keys arrive together: "/vm:/dev/loop1" at once filters by it
    ("/" and "g" are text once a box has the keys), and the palette takes "g" as text."""
    from textual import events

    app = StormdeckApp(StaticFeed(frames()))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = "5/vm:/dev/loop1"  # the view's key, then the filter, in one burst
        for ch in text:
            key = {"/": "slash", ":": "colon"}.get(ch, ch)
            app.post_message(events.Key(key, ch))  # no pause between them
        # However long a busy host takes to handle the burst; the asserts below say what
        # was wrong if it never lands.
        await waited(pilot, lambda: app.query_one("#filter").value == "vm:/dev/loop1")
        await pilot.press("enter")
        await pilot.pause()
        from textual.widgets import ContentSwitcher

        assert app.query_one(ContentSwitcher).current == "disks"
        assert app.query_one("#filter").value == "vm:/dev/loop1"
        assert app.query_one(DiskTable).keys == ["vm:/dev/loop1"]
        await pilot.press("slash", *"g")
        assert app.query_one("#filter").value == "vm:/dev/loop1g"
        assert not app.query_one("#goto").has_class("shown")
        await pilot.press("escape", "colon")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"go to")
        await pilot.pause()
        assert not app.query_one("#goto").has_class("shown")
        assert app.screen.query_one("Input").value == "go to"


class LiveLike(StaticFeed):
    """Frames given in advance, taken for live ones (a live Feed has its loop)."""

    loop = None


@pytest.mark.asyncio
async def test_a_live_frame_ages_on_screen_while_no_new_one_comes(monkeypatch) -> None:
    """The data loop itself stalled: the header still turns a source STALE within
    seconds, from the time the frame has been on screen."""
    import time
    from types import SimpleNamespace

    from stormdeck.tui import app as app_mod
    from tests.clock import ManualClock

    # The header reads the age of its frame off a clock the test steps: the figure it
    # shows is exact, however late the host runs the header's once-a-second look.
    clock = ManualClock()
    monkeypatch.setattr(app_mod, "time", SimpleNamespace(
        monotonic=clock, localtime=time.localtime, strftime=time.strftime))
    app = StormdeckApp(LiveLike(frames(step=1.0)), cluster_name="lab")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "ceph ok" in header(app)
        clock.advance(6)  # six seconds with no frame
        await waited(pilot, lambda: "ceph STALE" in header(app))  # on its own look
        assert "ceph STALE 6s" in header(app), header(app)


@pytest.mark.asyncio
async def test_a_click_on_the_key_bar_runs_the_key_even_from_the_filter_box() -> None:
    from textual.widgets import ContentSwitcher

    from stormdeck.tui.keybar import KeyBar
    from stormdeck.tui.screens import Help

    app = StormdeckApp(StaticFeed(frames()))
    async with app.run_test(size=SIZE) as pilot:
        bottom = screen_text(app).rstrip("\n").splitlines()[-1]
        await pilot.click(KeyBar, offset=(bottom.index("5Disk") + 1, 0))
        assert app.query_one(ContentSwitcher).current == "disks"
        await pilot.press("slash", *"loop")
        await pilot.click(KeyBar, offset=(1, 0))  # ?Help
        await pilot.pause()
        assert isinstance(app.screen, Help)


@pytest.mark.asyncio
async def test_at_80_columns_tables_keep_what_matters() -> None:
    from stormdeck.tui.views import FindingTable, LatencyTable

    app = StormdeckApp(StaticFeed(frames()))
    async with app.run_test(size=SIZE) as pilot:
        kept = {}
        for key, table in (("2", DaemonTable), ("4", LatencyTable), ("5", DiskTable),
                           ("6", FindingTable)):
            await pilot.press(key)
            await pilot.pause()
            kept[table.__name__] = [c.name for c in app.query_one(table).layout()]
    assert {"daemon", "host", "cores used/allowed", "latency"} <= set(kept["DaemonTable"])
    assert {"disk", "util", "daemons", "cache kernel/device"} <= set(kept["DiskTable"])
    assert {"daemon", "op r/w", "p99"} <= set(kept["LatencyTable"])
    assert {"severity", "rule", "target"} <= set(kept["FindingTable"])


@pytest.mark.asyncio
async def test_empty_views_say_what_to_do() -> None:
    from dataclasses import replace as change

    from stormdeck.tui.views import Overview

    def idle(s, i):
        assert s.cluster is not None
        return change(s, cluster=change(s.cluster, client_read_iops=0.0,
                                        client_write_iops=0.0))

    app = StormdeckApp(StaticFeed(frames(edit=idle)))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        overview = app.query_one(Overview).text.plain
        assert "idle: on the lab, `stormdeck lab load` makes client IO" in overview
        await pilot.press("7")
        await pilot.pause()
        assert "no changes yet" in screen_text(app)
        await pilot.press("2", "slash", *"nothing-like-this", "enter")
        await pilot.pause()
        assert "no row matches the filter 'nothing-like-this': Esc clears it" in \
            screen_text(app)
