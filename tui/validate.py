"""The guided validation screen: steps to tick, a progress bar each, verdicts as they come,
a cancel that cleans up, typed confirmations, and the report at the end."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Footer, Input, ProgressBar, RichLog, Static

from stormdeck.advisors.validate import judge, runner
from stormdeck.advisors.validate.runner import STEPS
from stormdeck.base.text import printable

STYLE = {judge.PASS: "bold green", judge.WARN: "bold yellow", judge.FAIL: "bold red",
         judge.SKIP: "dim"}


class TypePhrase(ModalScreen[bool]):
    """A deliberate yes: the phrase typed, or nothing happens (Cancel has the focus)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "no", "Cancel")]

    def __init__(self, prompt: str, phrase: str) -> None:
        super().__init__()
        self.prompt = prompt
        self.phrase = phrase

    def compose(self) -> ComposeResult:
        with Vertical(id="ask"):
            yield Static(Text(printable(self.prompt, 400)))
            yield Input(id="phrase")
            with Horizontal(id="ask-buttons"):
                yield Button("Cancel", id="no", variant="primary")
                yield Button("Go on", id="yes", variant="warning", disabled=True)

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Input.Changed, "#phrase")
    def typed(self, event: Input.Changed) -> None:
        self.query_one("#yes", Button).disabled = event.value != self.phrase

    @on(Button.Pressed, "#yes")
    def yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def action_no(self) -> None:
        self.dismiss(False)


class ValidateApp(App[None]):
    CSS = """
    .step { height: 3; }
    .step Checkbox { width: 74; }
    .step ProgressBar { width: 40; padding: 1 1 0 1; }
    .step Static { width: 1fr; padding: 1 1 0 1; }
    #log { height: 1fr; border-top: solid $primary; }
    #buttons { height: 3; }
    TypePhrase { align: center middle; }
    #ask { width: 80%; height: auto; border: thick $warning; background: $surface;
           padding: 1 2; }
    #ask-buttons { height: 3; align-horizontal: right; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "start", "Start"),
        Binding("c", "cancel", "Cancel (cleans up)"),
        Binding("q", "quit_safely", "Quit"),
    ]

    def __init__(self, options: Any, admin: Any, snapshot: Any, skip: Any = ()) -> None:
        super().__init__()
        self.options = options
        self.admin = admin
        self.snapshot = snapshot
        self.skip = set(skip)
        if not options.cpu_sweep:
            self.skip.add("cpu")
        self.validation: runner.Validation | None = None
        self.report: runner.Report | None = None
        self.exit_code = 0

    def compose(self) -> ComposeResult:
        yield Static(Text("stormdeck validate: tick the steps, then Start (s). Each step "
                          "removes what it creates, also when cancelled (c).", style="bold"))
        held = bool(getattr(self.options, "read_only", False))
        if held:
            yield Static(Text("read-only mode: the steps that write (a pool, rados bench, an "
                              "OSD's cores, fio) are not run", style="bold yellow"))
        for step, title in STEPS:
            with Horizontal(classes="step"):
                writes = held and step in runner.WRITES
                yield Checkbox(title, value=step not in self.skip and not writes,
                               disabled=writes, id=f"use-{step}")
                yield ProgressBar(total=1.0, show_eta=False, id=f"bar-{step}")
                yield Static("", id=f"verdict-{step}")
        with Horizontal(id="buttons"):
            yield Button("Start", id="start", variant="primary")
            yield Button("Cancel", id="cancel", variant="error", disabled=True)
        yield RichLog(id="log", wrap=True)
        yield Footer()

    @on(Button.Pressed, "#start")
    def action_start(self) -> None:
        if self.validation is not None:
            return
        skip = {step for step, _ in STEPS
                if not self.query_one(f"#use-{step}", Checkbox).value}
        for box in self.query(Checkbox):
            box.disabled = True
        self.query_one("#start", Button).disabled = True
        self.query_one("#cancel", Button).disabled = False
        self.options.cpu_sweep = "cpu" not in skip
        self.validation = runner.Validation(self.options, self.admin, self.snapshot, skip=skip,
                                            progress=self._progress, confirm=self._confirm)
        self.run_validation()

    @work(thread=True, exclusive=True)
    def run_validation(self) -> None:
        assert self.validation is not None
        report = self.validation.run()
        self.call_from_thread(self._finished, report)

    def _progress(self, step: str, fraction: float, text: str) -> None:
        self.call_from_thread(self._show_progress, step, fraction, text)

    def _show_progress(self, step: str, fraction: float, text: str) -> None:
        if step != "cleanup":
            self.query_one(f"#bar-{step}", ProgressBar).update(progress=fraction)
        self.query_one("#log", RichLog).write(Text(printable(f"{step}: {text}", 300)))

    def _confirm(self, prompt: str, phrase: str) -> bool:
        """Called on the validation's thread: it waits for the operator's typed answer."""
        answered = threading.Event()
        result = {"ok": False}

        def done(ok: bool | None) -> None:
            result["ok"] = bool(ok)
            answered.set()

        self.call_from_thread(self.push_screen, TypePhrase(prompt, phrase), done)
        while not answered.wait(0.2):
            if self.validation is not None and self.validation.ctx.cancel.is_set():
                return False
        return result["ok"]

    def _finished(self, report: runner.Report) -> None:
        self.report = report
        self.exit_code = report.exit_code()
        for rep in report.steps:
            self.query_one(f"#verdict-{rep.id}", Static).update(
                Text(f"{rep.status}: {runner.MARK[rep.verdict]}"
                     + (f" ({rep.error})" if rep.error else ""), style=STYLE[rep.verdict]))
        log = self.query_one("#log", RichLog)
        try:
            saved = runner.save(report, self.options.state_dir)
            log.write(Text(f"report saved as {saved} (and .json)", style="bold"))
        except OSError as exc:
            log.write(Text(f"could not save the report: {exc}", style="bold red"))
        for line in runner.to_markdown(report).splitlines():
            log.write(Text(line))
        self.query_one("#cancel", Button).disabled = True

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        if self.validation is not None and self.report is None:
            self.validation.cancel()
            self.query_one("#log", RichLog).write(
                Text("cancelling: removing what the validation created", style="bold yellow"))

    def action_quit_safely(self) -> None:
        if self.validation is not None and self.report is None:
            self.notify("a step is running: cancel it first (c); it cleans up", markup=False)
            return
        self.exit()
