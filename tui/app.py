"""The stormdeck console: a Textual app that renders Frames and acts only through the Executor."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar

from rich.text import Text
from stormdeck.advisors.plan import Plan, plan_from_finding, review
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.base.when import parse_when
from stormdeck.tui.feed import Frame
from stormdeck.tui.table import VirtualTable
from stormdeck.tui.views import (
    DaemonTable,
    DiskTable,
    FindingTable,
    JournalTable,
    LatencyTable,
    Leaders,
    Overview,
    Triage,
    daemon_detail,
    finding_detail,
    t,
)
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, ContentSwitcher, Footer, Input, Static, Tab, Tabs


@dataclass
class ClusterTab:
    """One watched cluster: its feed, and an executor bound to it alone."""

    name: str
    feed: Any
    executor_factory: Callable[[], Any] | None = None
    mutes: Any = None
    read_only: bool = False
    frame: Frame | None = None
    config_seen: dict[tuple[str, str], str] = field(default_factory=dict)


VIEWS = ("overview", "daemons", "leaders", "latency", "disks", "findings", "journal", "triage")


class PlanReview(ModalScreen[bool]):
    """The exact change, and a deliberate yes: Cancel has the focus; wide, restart-needing
    or irreversible changes also need the typed phrase."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, plan: Plan, review: str) -> None:
        super().__init__()
        self.plan = plan
        self.review = review

    def compose(self) -> ComposeResult:
        with Vertical(id="review"):
            yield Static(Text(self.review), id="review-text")
            if self.plan.needs_phrase:
                yield Static(t(f"Type {self.plan.phrase!r} to apply:"))
                yield Input(id="phrase")
            with Horizontal(id="review-buttons"):
                yield Button("Cancel", id="cancel", variant="primary")
                yield Button("Apply", id="apply", variant="warning",
                             disabled=self.plan.needs_phrase)

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Input.Changed, "#phrase")
    def phrase_typed(self, event: Input.Changed) -> None:
        self.query_one("#apply", Button).disabled = event.value != self.plan.phrase

    @on(Button.Pressed, "#apply")
    def apply(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


class DaemonDetail(ModalScreen[None]):
    """Drill-down into one daemon; it follows the frames while open."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "Close")]

    def __init__(self, daemon_id: str, frame: Frame, ascii_only: bool) -> None:
        super().__init__()
        self.daemon_id = daemon_id
        self.frame = frame
        self.ascii_only = ascii_only

    def compose(self) -> ComposeResult:
        yield VerticalScroll(Static(daemon_detail(self.frame, self.daemon_id, self.ascii_only),
                                    id="detail-body"), id="help")

    def show(self, frame: Frame) -> None:
        self.frame = frame
        self.query_one("#detail-body", Static).update(
            daemon_detail(frame, self.daemon_id, self.ascii_only))

    def action_close(self) -> None:
        self.dismiss(None)


class Help(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,question_mark,q", "close", "Close")]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.lines = bindings

    def compose(self) -> ComposeResult:
        text = Text("Keys\n\n", style="bold")
        for key, what in self.lines:
            text.append(f"  {key:<12}", style="bold")
            text.append(f"{what}\n")
        yield VerticalScroll(Static(text), id="help")

    def action_close(self) -> None:
        self.dismiss(None)


class StormdeckApp(App[None]):
    CSS = """
    #status { height: 1; background: $boost; }
    #clusters { height: 2; }
    #filter, #goto { display: none; height: 3; }
    #filter.shown, #goto.shown { display: block; }
    #finding-detail { height: auto; max-height: 50%; border-top: solid $primary; }
    PlanReview, Help, DaemonDetail { align: center middle; }
    #review, #help { width: 90%; max-width: 110; height: auto; max-height: 90%;
                     border: thick $warning; background: $surface; padding: 1 2; }
    #review-buttons { height: 3; align-horizontal: right; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("1", "view('overview')", "Overview"),
        Binding("2", "view('daemons')", "Daemons"),
        Binding("3", "view('leaders')", "Leaders"),
        Binding("4", "view('latency')", "Latency"),
        Binding("5", "view('disks')", "Disks"),
        Binding("6", "view('findings')", "Findings"),
        Binding("7", "view('journal')", "Journal"),
        Binding("8", "view('triage')", "Triage"),
        Binding("p", "pause", "Pause"),
        Binding("left_square_bracket", "step(-1)", "Back one frame (collection goes on)",
                show=False),
        Binding("right_square_bracket", "step(1)", "Forward one frame", show=False),
        Binding("left_curly_bracket", "jump(-60)", "Back 60 s", show=False),
        Binding("right_curly_bracket", "jump(60)", "Forward 60 s", show=False),
        Binding("end", "follow", "Back to now (the newest frame)", show=False),
        Binding("g", "goto", "Go to a time (HH:MM:SS)", show=False),
        Binding("R", "report", "Write an incident report of the session", show=False),
        Binding("less_than_sign", "cluster(-1)", "The previous cluster's tab", show=False),
        Binding("greater_than_sign", "cluster(1)", "The next cluster's tab", show=False),
        Binding("plus,equals_sign", "faster", "Faster", show=False),
        Binding("minus", "slower", "Slower", show=False),
        Binding("slash", "filter", "Filter"),
        Binding("enter", "review", "On a daemon: its detail; on a finding: review its change",
                show=False),
        Binding("m", "mute", "On a finding: mute it for an hour", show=False),
        Binding("u", "undo", "On a journal entry: undo it", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, feed: Any, executor_factory: Callable[[], Any] | None = None,
                 mutes: Any = None, journal: Any = None, read_only: bool = False,
                 cluster_name: str = "", low_bandwidth: bool = False,
                 tabs: Sequence[ClusterTab] = ()) -> None:
        super().__init__()
        self.journal = journal
        self.low_bandwidth = low_bandwidth
        self.tabs = list(tabs) or [ClusterTab(cluster_name, feed, executor_factory, mutes,
                                              read_only)]
        self.active = 0
        self._use(self.tabs[0])

    def _use(self, tab: ClusterTab) -> None:
        """What the actions and views work on: the active cluster's, and only its."""
        self.feed = tab.feed
        self.executor_factory = tab.executor_factory
        self.mutes = tab.mutes
        self.read_only = tab.read_only
        self.cluster_name = tab.name
        self.frame = tab.frame
        self._config_seen = tab.config_seen

    def compose(self) -> ComposeResult:
        if len(self.tabs) > 1:
            yield Tabs(*(Tab(t.name, id=f"cluster-{i}") for i, t in enumerate(self.tabs)),
                       id="clusters")
        yield Static(id="status")
        yield Input(placeholder="filter rows (Esc to clear)", id="filter")
        yield Input(placeholder="go to a time: HH:MM:SS, or -90 (seconds back); Esc to cancel",
                    id="goto")
        with ContentSwitcher(initial="overview"):
            yield Overview(id="overview")
            yield DaemonTable(id="daemons")
            yield Leaders(id="leaders")
            yield LatencyTable(id="latency")
            yield DiskTable(id="disks")
            with Vertical(id="findings"):
                yield FindingTable(id="finding-table")
                yield Static(id="finding-detail")
            yield JournalTable(id="journal")
            yield Triage(id="triage")
        yield Footer()

    def on_mount(self) -> None:
        if self.low_bandwidth:
            for view in (Overview, DaemonTable, Leaders, LatencyTable, Triage):
                self.query_one(view).ascii_only = True
        self.title = "stormdeck"
        # Hidden, the filter box must not hold the focus: it would swallow the keys.
        self.query_one("#filter", Input).disabled = True
        self.query_one("#goto", Input).disabled = True
        self.focus_view()
        for tab in self.tabs:
            tab.feed.start(partial(self._from_feed, tab))
        self.refresh_journal()

    def _from_feed(self, tab: ClusterTab, frame: Frame) -> None:
        """Called on the feed's thread (or directly by a StaticFeed)."""
        try:
            self.call_from_thread(self._arrive, tab, frame)
        except RuntimeError:  # already on the app's thread
            self._arrive(tab, frame)

    def _arrive(self, tab: ClusterTab, frame: Frame) -> None:
        tab.frame = frame
        if tab is self.tabs[self.active]:
            self.show(frame)

    def on_unmount(self) -> None:
        for tab in self.tabs:
            tab.feed.stop()

    # -- clusters --

    @on(Tabs.TabActivated, "#clusters")
    def cluster_chosen(self, event: Tabs.TabActivated) -> None:
        if event.tab.id is not None:
            self.activate(int(event.tab.id.removeprefix("cluster-")))

    def action_cluster(self, step: int) -> None:
        if len(self.tabs) > 1:
            self.query_one("#clusters", Tabs).active = \
                f"cluster-{(self.active + step) % len(self.tabs)}"

    def activate(self, index: int) -> None:
        if index == self.active:
            return
        self.active = index
        self._use(self.tabs[index])
        if self.frame is not None:
            self.show(self.frame)
        else:
            self._status(t(f" stormdeck {self.cluster_name}: waiting for the first poll"))
        self.refresh_journal()

    # -- rendering --

    def show(self, frame: Frame) -> None:
        self.frame = frame
        if isinstance(self.screen, DaemonDetail):
            self.screen.show(frame)
        self._status(self.status_line(frame))
        self.watch_config(frame)
        current = self.query_one(ContentSwitcher).current
        if current == "overview":
            self.query_one(Overview).show(frame)
        elif current == "daemons":
            self.query_one(DaemonTable).show(frame)
        elif current == "leaders":
            self.query_one(Leaders).show(frame)
        elif current == "latency":
            self.query_one(LatencyTable).show(frame)
        elif current == "disks":
            self.query_one(DiskTable).show(frame)
        elif current == "findings":
            self.query_one(FindingTable).show(frame)
            self.show_detail()
        elif current == "triage":
            self.query_one(Triage).show(frame)

    def _status(self, line: Text) -> None:
        """Repaint the header only when it says something new: over SSH every byte counts."""
        if line != getattr(self, "_last_status", None):
            self._last_status = line
            self.query_one("#status", Static).update(line)

    def status_line(self, frame: Frame) -> Text:
        line = Text(" stormdeck ", style="bold")
        c = frame.snapshot.cluster
        name = self.cluster_name or (c.fsid[:8] if c and c.fsid else "")
        line.append_text(t(name))
        if self.read_only:
            line.append(" [RO]", style="bold yellow")
        now = time.time()
        for s in frame.snapshot.sources.values():
            if s.ok:
                style, word = "green", "ok"
            elif s.stale and s.last_success:
                style, word = "yellow", f"stale {now - s.last_success:.0f}s"
            else:
                style, word = "bold red", "error"
            line.append(f"  {s.name} ")
            line.append(word, style=style)
        if frame.position:
            line.append(f"   {frame.position}", style="bold magenta")
        if not frame.position.startswith("REPLAY"):
            line.append(f"   every {self.feed.interval:g}s")
        if self.feed.paused:
            line.append("  PAUSED", style="bold yellow")
        return line

    def watch_config(self, frame: Frame) -> None:
        """A toast when a config value changes under the operator: someone else changed it."""
        c = frame.snapshot.cluster
        if c is None:
            return
        for name, opt in c.config.items():
            for who, value in opt.values.items():
                key = (name, who)
                old = self._config_seen.get(key)
                if old is not None and old != value:
                    self.notify(printable(f"{name} for {who}: {old} -> {value}", 200),
                                title="config changed", severity="warning", markup=False)
                self._config_seen[key] = value

    def show_detail(self) -> None:
        table = self.query_one(FindingTable)
        self.query_one("#finding-detail", Static).update(finding_detail(table.selected()))

    @on(VirtualTable.RowHighlighted, "#finding-table")
    def finding_moved(self) -> None:
        self.show_detail()

    @on(VirtualTable.RowSelected, "#daemons")
    def daemon_chosen(self, event: VirtualTable.RowSelected) -> None:
        if event.key is not None and self.frame is not None:
            self.push_screen(DaemonDetail(event.key, self.frame, self.low_bandwidth))

    @on(VirtualTable.RowSelected, "#finding-table")
    def finding_chosen(self) -> None:
        self.action_review()  # the table takes Enter as "select this row"

    # -- actions --

    def focus_view(self) -> None:
        switcher = self.query_one(ContentSwitcher)
        current = switcher.get_child_by_id(switcher.current or "overview")
        target = current if current.can_focus else next(
            (w for w in current.query("*") if w.can_focus), None)
        self.set_focus(target)

    def action_view(self, name: str) -> None:
        self.query_one(ContentSwitcher).current = name
        self.focus_view()
        if name == "journal":
            self.refresh_journal()
        elif self.frame is not None:
            self.show(self.frame)

    def action_pause(self) -> None:
        self.feed.toggle_pause()
        if self.frame is not None:
            self._status(self.status_line(self.frame))

    def action_step(self, n: int) -> None:
        self.feed.step(n)

    def action_jump(self, seconds: float) -> None:
        self.feed.jump(seconds)

    def action_follow(self) -> None:
        self.feed.follow()

    def action_faster(self) -> None:
        self._pace(0.5)

    def action_slower(self) -> None:
        self._pace(2.0)

    def _pace(self, factor: float) -> None:
        interval = self.feed.set_interval(self.feed.interval * factor)
        if hasattr(self.feed, "speed"):
            self.notify(f"replaying at x{self.feed.speed:g}")
        else:
            self.notify(f"polling every {interval:g} s")

    def action_goto(self) -> None:
        self._reveal(self.query_one("#goto", Input))

    @on(Input.Submitted, "#goto")
    def goto_done(self, event: Input.Submitted) -> None:
        self._hide(self.query_one("#goto", Input))
        if self.frame is None:
            return
        try:
            when = parse_when(event.value, self.frame.snapshot.time)
        except ValueError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        if hasattr(self.feed, "seek"):
            self.feed.seek(when)
        else:
            self.feed.jump(when - self.frame.snapshot.time)

    def _hide(self, box: Input) -> None:
        box.value = ""
        box.remove_class("shown")
        box.disabled = True
        self.focus_view()

    def action_report(self) -> None:
        """The session so far (or the replay so far) as Markdown and JSON, in the state dir."""
        from stormdeck.advisors import report
        from stormdeck.advisors.settings import state_dir

        frames = self.feed.frames()
        if not frames:
            return
        session = getattr(self.feed, "session", None)
        events = list(session.timeline.events) if session else list(frames[-1].events)
        changes = self.journal.entries() if self.journal is not None else []
        try:
            r = report.build(((f.snapshot, f.findings) for f in frames), events, changes,
                             source="live session" if session else "replay")
            base = state_dir() / "reports" / time.strftime(
                "report-%Y%m%d-%H%M%S", time.localtime(r.end))
            base.parent.mkdir(parents=True, exist_ok=True)
            base.with_suffix(".md").write_text(report.to_markdown(r))
            base.with_suffix(".json").write_text(report.to_json(r))
        except (OSError, ValueError, UserError) as exc:
            self.notify(printable(f"no report: {exc}", 300), severity="error", markup=False)
            return
        self.notify(printable(f"report written: {base}.md and .json", 300), markup=False)

    def action_filter(self) -> None:
        self._reveal(self.query_one("#filter", Input))

    def _reveal(self, box: Input) -> None:
        box.disabled = False
        box.add_class("shown")
        box.focus()

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        for table in self.query(VirtualTable):
            table.filter = event.value
        if self.frame is not None:
            self.show(self.frame)

    def key_escape(self) -> None:
        for box in self.query("#filter, #goto").results(Input):
            if box.has_class("shown"):
                self._hide(box)

    @on(Input.Submitted, "#filter")
    def filter_done(self) -> None:
        self.focus_view()  # keep the filter, give the keys back to the view

    def action_help(self) -> None:
        # Keys as Textual itself shows them (the footer's way): "<", not less_than_sign;
        # a binding of several keys ("plus,equals_sign") shows each of them.
        keys = [(" or ".join(self.get_key_display(k) for k in Binding.make_bindings([b])),
                 b.description)
                for b in self.BINDINGS if isinstance(b, Binding)]
        self.push_screen(Help([*keys, ("s", "in a table: sort by the next column, largest first"),
                               ("Esc", "clear the filter; close a dialog")]))

    def action_review(self) -> None:
        if self.query_one(ContentSwitcher).current != "findings":
            return
        finding = self.query_one(FindingTable).selected()
        if finding is None:
            return
        if not finding.changes:
            self.notify("this finding proposes no change stormdeck can make", markup=False)
            return
        fsid = self.frame.snapshot.cluster.fsid if self.frame and self.frame.snapshot.cluster \
            else None
        # The plan freezes its targets now, before the dialog opens.
        plan = plan_from_finding(finding, fsid)
        self.push_screen(PlanReview(plan, review(plan)),
                         lambda ok: self.apply_plan(plan) if ok else None)

    @work(thread=True, exclusive=True)
    def apply_plan(self, plan: Plan) -> None:
        if self.executor_factory is None:
            self.call_from_thread(self.notify, "no executor: changes are off in this session",
                                  severity="error")
            return
        try:
            outcomes = self.executor_factory().apply(plan)
        except UserError as exc:
            self.call_from_thread(self.notify, printable(str(exc), 400), title="refused",
                                  severity="error", markup=False)
            return
        text = "; ".join(f"{o.outcome}: {o.change.command}" for o in outcomes)
        self.call_from_thread(self.notify, printable(text, 400), title="applied",
                              markup=False)
        self.call_from_thread(self.refresh_journal)

    def action_mute(self) -> None:
        if self.query_one(ContentSwitcher).current != "findings" or self.mutes is None:
            return
        finding = self.query_one(FindingTable).selected()
        if finding is None:
            return
        badness = self.feed.engine.badness(finding) if hasattr(self.feed, "engine") else 0.0
        self.mutes.add(finding, ttl=3600, badness=badness)
        self.notify(printable(f"muted {finding.rule} on {finding.target} for 1 h", 200),
                    markup=False)

    def action_undo(self) -> None:
        if self.query_one(ContentSwitcher).current != "journal":
            return
        entry = self.query_one(JournalTable).selected()
        if entry is None:
            return
        from stormdeck.advisors.model import Change

        inverse = Change(kind=entry.change.kind, target=entry.change.target,
                         key=entry.change.key, current=entry.change.proposed,
                         proposed=entry.before or "unset", command=f"undo {entry.id}",
                         runtime=entry.change.runtime, reversible=entry.change.reversible,
                         blast_radius=entry.change.blast_radius)
        plan = Plan(id=f"undo-{entry.id}", created=time.time(), rule=entry.rule or "undo",
                    target=entry.change.target, summary=f"undo {entry.change.command}",
                    source="journal", fsid=entry.cluster, changes=(inverse,))
        self.push_screen(PlanReview(plan, review(plan)),
                         lambda ok: self.undo_entry(entry) if ok else None)

    @work(thread=True, exclusive=True)
    def undo_entry(self, entry: Any) -> None:
        if self.executor_factory is None:
            return
        try:
            o = self.executor_factory().undo(entry)
        except UserError as exc:
            self.call_from_thread(self.notify, printable(str(exc), 400), title="refused",
                                  severity="error", markup=False)
            return
        self.call_from_thread(self.notify, printable(f"{o.outcome}: {o.change.command}", 300),
                              markup=False)
        self.call_from_thread(self.refresh_journal)

    def refresh_journal(self) -> None:
        if self.journal is None:
            return
        try:
            entries = self.journal.entries()
        except UserError as exc:
            self.notify(printable(str(exc), 300), severity="error", markup=False)
            return
        fsid = self.frame.snapshot.cluster.fsid if self.frame and self.frame.snapshot.cluster \
            else None
        if len(self.tabs) > 1 and fsid:
            # With several clusters open, each tab's journal is its own cluster's.
            entries = [e for e in entries if e.cluster in (None, fsid)]
        self.query_one(JournalTable).show_entries(
            entries, lambda ts: time.strftime("%m-%d %H:%M:%S", time.localtime(ts)))

