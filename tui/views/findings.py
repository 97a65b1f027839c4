"""The findings view: the advisors' findings, and the selected one's evidence and change."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static

from stormdeck.advisors import knowledge
from stormdeck.advisors.blast import moves_data
from stormdeck.advisors.experiment.text import report_lines
from stormdeck.advisors.findings import Finding
from stormdeck.advisors.plan import (
    Plan,
    plan_from_finding,
)
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.tui.feed import Frame
from stormdeck.tui.format import SEVERITY_STYLE, inert
from stormdeck.tui.keys import in_scope
from stormdeck.tui.screens import MutesList, PlanReview
from stormdeck.tui.table import Column, VirtualTable
from stormdeck.tui.views.base import (
    JournalChanged,
    View,
    carry_out_in_worker,
    review_in_worker,
)
from stormdeck.tui.views.experiment import ExperimentOffer, ExperimentScreen, offer
from stormdeck.tui.views.overview import LAB_HINT


class FindingTable(VirtualTable):
    EMPTY = f"no findings: every rule is quiet. Idle? {LAB_HINT}"
    COLUMNS = (Column("severity", 8), Column("state", 13, 2), Column("rule", 30, 1),
               Column("target", 20), Column("summary", 80, 3))

    def show(self, frame: Frame) -> None:
        self.findings = {f"{f.rule}|{f.target}": f for f in frame.findings}
        self.set_records(self.findings.items(), self.cells)

    @staticmethod
    def cells(f: Finding) -> tuple[Text, ...]:
        state = f.state + (" muted" if f.muted else "")
        return (inert(str(f.severity).upper(), SEVERITY_STYLE[f.severity]), inert(state),
                inert(f.rule), inert(f.target, limit=60),
                inert(f.summary, "dim" if f.muted else "", 120))

    def selected(self) -> Finding | None:
        key = self.selected_key
        return getattr(self, "findings", {}).get(key) if key else None


def finding_detail(f: Finding | None) -> Text:
    if f is None:
        return Text("no finding selected")
    out = Text()
    out.append_text(inert(f"{f.title}  [{f.source}]", "bold"))
    out.append("\n")
    out.append_text(inert(f.summary, limit=400))
    out.append("\n\n")
    out.append_text(inert(knowledge.readable(f.explanation, prefer=knowledge.cited(f.source)),
                          "dim", limit=1200))
    out.append("\n")
    for e in f.evidence:
        # A down daemon's figure is its last, not its figure now.
        now = "last" if e.down_since is not None else "now"
        line = (f"{e.metric}: {now} {e.now}, min {e.min:.4g}, avg {e.avg:.4g}, max {e.max:.4g} "
                f"{e.unit} over {e.window:.0f} s" if e.min is not None and e.avg is not None
                and e.max is not None else f"{e.metric}: {e.now} {e.unit}") + e.down_note()
        out.append_text(inert("  " + line, limit=300))
        out.append("\n")
    for line in f.detail:  # Ceph's own health detail lines: data, inert text
        out.append_text(inert(f"  | {line}", limit=300))
        out.append("\n")
    for c in f.changes:
        out.append_text(inert(f"  change: {c.command}", "cyan", 300))
        out.append("\n")
    for step in f.procedure:
        out.append_text(inert(f"  - {step}", limit=500))
        out.append("\n")
    for note in f.notes:
        out.append_text(inert(f"  note: {note}", "yellow", 300))
        out.append("\n")
    if f.changes:
        out.append("\nEnter: review the change   e: measure it (an experiment)   m: mute "
                   "for an hour\n", style="bold")
    # Last, so that what to do stays in view on a small terminal.
    out.append("\n")
    out.append_text(sources_detail(f))
    return out


def sources_detail(f: Finding) -> Text:
    """The docs/knowledge.md sections the finding's rule cites: each one's title, the start
    of its reasoning and its public links (`stormdeck explain RULE` prints them whole)."""
    index = knowledge.sections()
    out = Text()
    ids = knowledge.cited(f.source)
    if not ids:
        return out
    out.append_text(inert(f"Why (docs/knowledge.md; stormdeck explain {f.rule}):", "bold"))
    out.append("\n")
    for sid in ids:
        s = index.get(sid)
        if s is None:
            out.append_text(inert(f"  {sid}", "dim"))
            out.append("\n")
            continue
        out.append_text(inert(f"  {sid}: {s.title}", limit=300))
        out.append("\n")
        out.append_text(inert(f"    {s.text}", "dim", limit=240))
        out.append("\n")
        for link in s.links:
            out.append_text(inert(f"    {link.url}", "cyan", limit=300))
            out.append("\n")
    return out


class FindingsView(View, Vertical):
    """The findings table above the selected finding's detail, which follows the cursor;
    Enter reviews the selected finding's change, m mutes it."""

    view_id = "findings"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(k.keys, k.action, k.description, show=False) for k in in_scope("findings")]

    def compose(self) -> ComposeResult:
        yield FindingTable(id="finding-table")
        yield Static(id="finding-detail")

    def show(self, frame: Frame) -> None:
        self.query_one(FindingTable).show(frame)
        self.show_detail()

    def show_detail(self) -> None:
        self.query_one("#finding-detail", Static).update(
            finding_detail(self.query_one(FindingTable).selected()))

    @on(VirtualTable.RowHighlighted, "#finding-table")
    def finding_moved(self) -> None:
        self.show_detail()

    @on(VirtualTable.RowSelected, "#finding-table")
    def finding_chosen(self) -> None:
        self.action_review()  # the table takes Enter as "select this row"

    def action_review(self) -> None:
        finding = self.query_one(FindingTable).selected()
        if finding is not None:
            self.review(finding)

    def review(self, finding: Finding) -> None:
        """The finding's change in the plan review, every check and the prediction made
        first (as `stormdeck apply` makes them); applied only if confirmed."""
        plan = self.plan_of(finding, "make")
        if plan is None:
            return
        if any(moves_data(c) for c in plan.changes):
            self.notify("predicting what it moves...", markup=False)
        # The checks read the cluster (values, osdmap, pg dump, osdmaptool): never on the
        # screen's thread; the review opens when they pass.
        self.review_plan(plan)

    def plan_of(self, finding: Finding, verb: str) -> Plan | None:
        """The finding's plan, its targets frozen now, before any dialog opens; None (and
        said) when there is none."""
        if not finding.changes:
            self.notify(f"this finding proposes no change stormdeck can {verb}",
                        markup=False)
            return None
        frame = self.app.tab.frame
        fsid = frame.snapshot.cluster.fsid if frame and frame.snapshot.cluster else None
        try:
            return plan_from_finding(finding, fsid)
        except UserError as exc:
            self.notify(printable(str(exc), 400), title="refused", severity="error",
                        markup=False)
            return None

    @work(thread=True, exclusive=True)
    def review_plan(self, plan: Plan) -> None:
        review_in_worker(self, lambda executor: executor.review(plan), self.open_review)

    def open_review(self, rv: Any) -> None:
        self.app.push_screen(PlanReview(rv.plan, rv.text, reasons=rv.reasons,
                                        refused=rv.refused),
                             lambda ok: self.carry_out(rv) if ok else self.dismissed(rv))

    @work(thread=True, exclusive=True)
    def carry_out(self, rv: Any) -> None:
        carry_out_in_worker(self, "applied", rv)

    @work(thread=True)
    def dismissed(self, rv: Any) -> None:
        rv.close()  # a connection's shutdown is not the screen's to wait on

    def action_experiment(self) -> None:
        """e: the selected finding's change measured in alternated rounds (advisors/
        experiment), reviewed first as Enter's is; the run on a screen of its own."""
        running = getattr(self, "running", None)
        if running is not None:
            # One at a time: two runs would measure each other's changes.
            if running not in self.app.screen_stack:
                self.app.push_screen(running)
            self.notify("an experiment runs already: its screen again (c stops it)",
                        markup=False)
            return
        finding = self.query_one(FindingTable).selected()
        if finding is None:
            return
        plan = self.plan_of(finding, "measure")
        if plan is None:
            return
        self.notify("reading the load the experiment would measure against...", markup=False)
        self.offer_experiment(plan)

    @work(thread=True, exclusive=True, group="experiment-offer")
    def offer_experiment(self, plan: Plan) -> None:
        settings = getattr(self.app, "experiment_settings", None)
        review_in_worker(self, lambda executor: offer(executor, plan, self.journal_moved,
                                                      settings), self.open_offer)

    def journal_moved(self) -> None:
        self.post_message(JournalChanged())

    def open_offer(self, o: ExperimentOffer) -> None:
        self.app.push_screen(PlanReview(o.plan, o.text, reasons=o.reasons, refused=o.refused),
                             lambda ok: self.start_experiment(o) if ok else self.dismissed(o))

    def start_experiment(self, o: ExperimentOffer) -> None:
        screen = ExperimentScreen(f"experiment {o.experiment.id}: "
                                  + "; ".join(c.command for c in o.plan.changes),
                                  stop=o.experiment.stopping)
        self.running: ExperimentScreen | None = screen
        self.app.push_screen(screen)
        self.run_experiment(o, screen)

    def on_unmount(self) -> None:
        # The console going: the run stops at its next read and undoes its change.
        if getattr(self, "running", None) is not None and self.running.stop is not None:
            self.running.stop.set()

    @work(thread=True, group="experiment")
    def run_experiment(self, o: ExperimentOffer, screen: ExperimentScreen) -> None:
        say = self.app.call_from_thread
        o.experiment.progress = lambda m: say(screen.progress, m)
        try:
            result = o.experiment.run(o.review)
        except UserError as exc:
            say(screen.cut, str(exc))
            say(self.notify, printable(str(exc), 400), title="experiment stopped",
                severity="error", markup=False)
            return
        finally:
            o.close()
            self.post_message(JournalChanged())
            say(setattr, self, "running", None)
        lines = report_lines(result)
        say(screen.finished, lines)
        verdicts = ", ".join(f"{e.figure} {e.verdict}" for e in result.effects[:3])
        say(self.notify, printable(f"{result.id}: {verdicts or 'nothing judged'}", 300),
            title="experiment done", markup=False)

    def action_mute(self) -> None:
        finding = self.query_one(FindingTable).selected()
        if finding is not None:
            self.mute(finding)

    def show_mutes(self) -> None:
        """M: the mutes in force on this tab's cluster, to lift one."""
        tab = self.app.tab
        if tab.mutes is None:
            self.notify("this console keeps no mutes: nothing is muted here", markup=False)
            return
        frame = tab.frame
        fsid = frame.snapshot.cluster.fsid if frame and frame.snapshot.cluster else None
        self.app.push_screen(MutesList(tab.mutes, fsid, tab.name or fsid or "this cluster"))

    def mute(self, finding: Finding) -> None:
        tab = self.app.tab
        if tab.mutes is None:
            return
        engine = getattr(tab.feed, "engine", None)
        badness = engine.badness(finding) if engine is not None else 0.0
        frame = tab.frame
        # This tab's cluster only: the same finding on another cluster stays loud.
        fsid = frame.snapshot.cluster.fsid if frame and frame.snapshot.cluster else None
        try:
            tab.mutes.add(finding, ttl=3600, badness=badness, fsid=fsid)
        except UserError as exc:  # another writer, a full disk: said, not a crash
            self.notify(printable(str(exc), 300), title="not muted", severity="error",
                        markup=False)
            return
        self.notify(printable(f"muted {finding.rule} on {finding.target} for 1 h", 200),
                    markup=False)
