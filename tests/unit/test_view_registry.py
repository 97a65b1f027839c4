"""A view is one module and one registration: help, palette, keys and compose follow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.text import Text
from textual.widgets import ContentSwitcher

from stormdeck.advisors.journal import Journal
from stormdeck.cli import build_parser
from stormdeck.cli_completion import manpage
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.commands import StormdeckCommands
from stormdeck.tui.feed import Frame, StaticFeed
from stormdeck.tui.keybar import KeyBar
from stormdeck.tui.keys import VIEWS, ViewInfo, help_sections, register_view, unregister_view
from stormdeck.tui.views import FrameText, view_class
from tests.unit.test_tui import frames


class Pools(FrameText):
    """The whole of a new view's module: its class, drawing the frame it is given."""

    view_id = "pools"

    def render_frame(self, frame: Frame) -> Text:
        return Text(f"pools view: {len(frame.snapshot.cluster.pools)} pools")


@pytest.fixture
def pools_view() -> Iterator[ViewInfo]:
    # The one registration (in tui/keys.py's _BUILT_IN for a view of stormdeck's own).
    # Key 0: 1-9 are stormdeck's own (9 the fullness view).
    info = register_view(ViewInfo("0", "pools", "Pools", "Pool", "every pool at a glance",
                                  "each pool's size, PGs and IO", f"{__name__}:Pools"))
    yield info
    unregister_view("pools")


def test_a_registered_view_is_in_help_the_palette_and_the_man_page(pools_view) -> None:
    sections = dict(help_sections())
    assert ("0", "Pools: every pool at a glance") in sections["Everywhere in the console"]
    palette = sections["Command palette (: or Ctrl+P, then type part of a name)"]
    assert ("View: Pools", "key 0") in palette
    assert "each pool's size, PGs and IO" in manpage(build_parser())
    assert view_class(pools_view) is Pools


@pytest.mark.asyncio
async def test_a_registered_view_has_its_key_its_place_and_its_palette_command(
        pools_view, tmp_path: Path) -> None:
    app = StormdeckApp(StaticFeed(frames()), journal=Journal(tmp_path / "j.jsonl"))
    async with app.run_test(size=(200, 48)) as pilot:
        await pilot.press("0")
        assert app.query_one(ContentSwitcher).current == "pools"
        await pilot.pause()
        assert app.query_one(Pools).render_frame(app.frame).plain.startswith("pools view: ")
        assert "Pools" in app.query_one(KeyBar).render().plain
        commands = [c[0] for c in StormdeckCommands(app.screen).commands()]
        assert "View: Pools" in commands
        await pilot.press("1")
        assert app.query_one(ContentSwitcher).current == "overview"


def test_a_key_or_id_taken_is_refused() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_view(ViewInfo("1", "again", "Again", "Ag", "x", "x", f"{__name__}:Pools"))
    with pytest.raises(ValueError, match="already registered"):
        register_view(ViewInfo("0", "overview", "Again", "Ag", "x", "x", f"{__name__}:Pools"))
    assert [v.id for v in VIEWS] == ["overview", "daemons", "leaders", "latency", "disks",
                                     "findings", "journal", "triage", "fullness"]
