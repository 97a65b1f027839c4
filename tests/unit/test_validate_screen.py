"""The guided validation screen, driven by Pilot: ticked steps run, verdicts show, a typed
phrase guards what must be confirmed."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import Button, Checkbox, Input, Static

from stormdeck.advisors.validate.context import Options
from stormdeck.tui.validate import TypePhrase, ValidateApp
from tests.captured import lab_snapshot, with_config


@pytest.mark.asyncio
async def test_the_ticked_steps_run_and_their_verdicts_show(tmp_path: Path) -> None:
    # Below Ceph's own default: scrubs wait (K8.4). Ceph's defaults themselves pass.
    snap = with_config(lab_snapshot(), "osd_scrub_load_threshold", "osd", "0.1")
    options = Options(conf=None, quick=True, state_dir=tmp_path)
    app = ValidateApp(options, admin=None, snapshot=snap)
    async with app.run_test(size=(160, 40)) as pilot:
        assert not app.query_one("#use-cpu", Checkbox).value  # the sweep is opt-in
        for step in ("hosts", "curve", "peering"):
            app.query_one(f"#use-{step}", Checkbox).value = False
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        verdict = str(app.query_one("#verdict-settings", Static).render())
        assert "done: WARN" in verdict  # osd_scrub_load_threshold 0.1
        assert "skipped" in str(app.query_one("#verdict-curve", Static).render())
        assert app.exit_code == 1 and app.report is not None
        assert app.query_one("#cancel", Button).disabled
    assert list(tmp_path.glob("report-*.md")) and (tmp_path / "last.json").exists()


@pytest.mark.asyncio
async def test_going_on_needs_the_phrase_typed() -> None:
    answers: list[bool] = []

    class Host(App[None]):
        def on_mount(self) -> None:
            self.push_screen(TypePhrase("Type 'sweep osd.0' to go on:", "sweep osd.0"),
                             answers.append)

    app = Host()
    async with app.run_test() as pilot:
        screen = app.screen
        assert isinstance(screen, TypePhrase)
        assert screen.query_one("#yes", Button).disabled
        assert app.focused is screen.query_one("#no", Button)  # Cancel has the focus
        screen.query_one("#phrase", Input).focus()
        await pilot.press(*"sweep osd.1")
        assert screen.query_one("#yes", Button).disabled
        await pilot.press("backspace", "0")
        assert not screen.query_one("#yes", Button).disabled
        await pilot.click("#yes")
        await pilot.pause()
    assert answers == [True]


@pytest.mark.asyncio
async def test_read_only_unticks_and_locks_the_steps_that_write(tmp_path: Path) -> None:
    # admin=None: a step that reached the cluster to write would fail the run.
    options = Options(conf=None, quick=True, state_dir=tmp_path, read_only=True,
                      cpu_sweep=True)
    app = ValidateApp(options, admin=None, snapshot=lab_snapshot())
    async with app.run_test(size=(160, 40)) as pilot:
        for step in ("curve", "peering", "cpu"):
            box = app.query_one(f"#use-{step}", Checkbox)
            assert not box.value and box.disabled, step
        assert app.query_one("#use-settings", Checkbox).value
        app.query_one("#use-hosts", Checkbox).value = False
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.report is not None
        steps = {s.id: s for s in app.report.steps}
        assert steps["settings"].status == "done"
        for step in ("curve", "peering", "cpu"):
            assert steps[step].status == "skipped" and "read-only" in \
                steps[step].verdicts[0].summary, step
