"""A running experiment on screen: its windows as they pass, then each figure's verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Static

from stormdeck.tui.format import inert
from stormdeck.tui.screens import dialog_bindings


@dataclass
class ExperimentOffer:
    """A finding's change offered as an experiment: the review the operator confirms
    (advisors/review.py) and the experiment that carries it out, its OSDs and load read."""

    review: Any
    experiment: Any
    load: float

    @property
    def plan(self) -> Any:
        return self.review.plan

    @property
    def reasons(self) -> Any:
        return self.review.reasons

    @property
    def refused(self) -> str | None:
        return self.review.refused  # type: ignore[no-any-return]

    @property
    def text(self) -> str:
        s = self.experiment.settings
        osds = self.experiment.reader.osds if self.experiment.reader else ()
        ba = self.experiment.before_after
        if ba:
            wait = self.experiment.waits_for()
            return (f"{self.review.text}\n\nAs an experiment: {ba}, so it is measured once, "
                    f"before and after, not alternated: {s.rounds} windows of {s.window:g} s "
                    f"without it, the change, a wait (at most {s.wait:g} s) until {wait}, "
                    f"{s.rounds} windows with it, under the load it serves now "
                    f"({self.load:,.0f} client ops/s). Each apply and undo is journaled; it "
                    "ends undone.")
        return (f"{self.review.text}\n\nAs an experiment: {2 * s.rounds} windows of "
                f"{s.window:g} s in ABBA order, without (A) and with (B) the change, under the "
                f"load it serves now ({self.load:,.0f} client ops/s), reading "
                f"{', '.join(osds[:6])}{' ...' if len(osds) > 6 else ''}. Each apply and "
                "undo is journaled; slow ops, an OSD down or PGs inactive stop it and undo "
                "the change; it ends undone.")

    def close(self) -> None:
        self.review.close()


def offer(executor: Any, plan: Any, changed: Any, settings: Any = None) -> ExperimentOffer:
    """From a worker thread: the plan as an experiment, reviewed (every check first, as
    Enter's review) and its baseline read; a UserError says why not, nothing changed."""
    from stormdeck.advisors.experiment.record import beside
    from stormdeck.advisors.experiment.runner import Experiment, Settings

    exp = Experiment(executor, plan, settings or Settings(), beside(executor.journal),
                     changed=changed)
    rv = exp.review()
    return ExperimentOffer(rv, exp, exp.baseline())


class ExperimentScreen(ModalScreen[None]):
    """The run's progress (the worker reports each window), then its report; Esc goes
    back to the console while it runs on, c stops it (the change is undone)."""

    # Opaque: a translucent modal has Textual redraw the console beneath it, dimmed,
    # every time the console ticks; over a run that cost the console more than the run's
    # own reads (profiled with bench/experiment_bench.py --profile).
    DEFAULT_CSS = """
    ExperimentScreen { align: center middle; background: $background; }
    #experiment { width: 96%; height: auto; max-height: 90%; border: thick $primary;
                  background: $surface; padding: 1 2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = dialog_bindings("close", "cut")

    def __init__(self, title: str, stop: Any = None) -> None:
        super().__init__()
        self.title_text = title
        self.stop = stop  # threading.Event the run reads
        self.lines: list[Text] = [inert("starting: a baseline of the load", "dim")]
        self.result: list[str] | None = None
        self.ended: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="experiment"):
            yield Static(inert(self.title_text, "bold", 300), id="experiment-title")
            yield Static(id="experiment-body")

    def on_mount(self) -> None:
        self.redraw()

    def progress(self, message: str) -> None:
        self.lines = [inert(message, limit=200)]
        self.redraw()

    def finished(self, lines: list[str]) -> None:
        # The report's first line is the title already shown above it.
        self.result = lines[1:] if lines and lines[0] == self.title_text else lines
        self.redraw()

    def cut(self, why: str) -> None:
        self.ended = why
        self.redraw()

    def redraw(self) -> None:
        try:
            target = self.query_one("#experiment-body", Static)
        except NoMatches:  # gone back to the console: the run goes on unseen
            return
        body = Text()
        if self.result is not None:
            for line in self.result:
                style = "red" if line.rstrip().endswith("worse") else \
                    "green" if line.rstrip().endswith("better") else ""
                body.append_text(inert(line, style, 400))
                body.append("\n")
        elif self.ended is not None:
            body.append_text(inert(self.ended, "bold red", 600))
            body.append("\n")
        else:
            for line in self.lines:
                body.append_text(line)
                body.append("\n")
            body.append_text(inert("c: stop it (the change is undone)   Esc: back to the "
                                   "console (it runs on)", "dim"))
        target.update(body)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_cut(self) -> None:
        if self.stop is not None and self.result is None and self.ended is None:
            self.stop.set()
            self.lines.append(inert("stopping: the change is being undone", "yellow"))
            self.redraw()
