"""The stormdeck console: a Textual app that renders Frames and acts only through the Executor."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import ContentSwitcher, Input, Static, Tab, Tabs

from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.base.when import parse_when
from stormdeck.tui.commands import StormdeckCommands
from stormdeck.tui.feed import Frame, is_late
from stormdeck.tui.format import inert
from stormdeck.tui.keybar import KeyBar
from stormdeck.tui.keys import VIEWS, help_sections, in_scope
from stormdeck.tui.screens import Help, PlanReview
from stormdeck.tui.table import VirtualTable
from stormdeck.tui.views import JournalChanged, View, view_class
from stormdeck.tui.views.detail import DaemonDetail
from stormdeck.tui.views.findings import FindingsView

# The journal view's rows: the newest changes (a journal of years is read from its end).
JOURNAL_ROWS = 1000

__all__ = ["ClusterTab", "DaemonDetail", "FrameArrived", "PlanReview", "StormdeckApp"]


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
    arrived: float = 0.0  # when its frame came (monotonic): a live frame ages on screen


class FrameArrived(Message):
    """A feed made a new frame for one cluster's tab (posted from the feed's thread)."""

    def __init__(self, tab: ClusterTab, frame: Frame) -> None:
        super().__init__()
        self.tab = tab
        self.frame = frame


def source_state(s: Any, now: float, interval: float) -> tuple[str, str]:
    """A source's word in the header and its style. A source whose last answer is older
    than its poll should take is STALE at once: the hub calls a poll hung only after its
    timeout (10 s), and a mon that went away keeps a poll waiting that long."""
    age = now - s.last_success if s.last_success is not None else None
    if is_late(s, now, interval):  # the body's figures are struck by the same test
        return "bold reverse red", f"STALE {max(0.0, age or 0.0):.0f}s"
    if s.last_success is None:
        return "bold red", "ERROR" if s.error else "waiting"
    if not s.ok:
        # Answered, with some commands failing (a dead mgr's parts, one command refused):
        # its figures are current but for those parts, which the body marks. "error"
        # stays for a poll that failed as a whole.
        if not s.stale and s.last_success is not None:
            return "yellow", "partial"
        return "bold red", "error"
    return "green", "ok"


def priority_actions() -> frozenset[str]:
    """The console's priority actions, as the registry holds them now (a view registered
    late included)."""
    return frozenset(k.action for k in in_scope("console") if k.priority)


class StormdeckApp(App[None]):
    # Absolute: Textual reads a relative path beside the module of a subclass.
    CSS_PATH = Path(__file__).with_name("stormdeck.tcss")
    COMMANDS = App.COMMANDS | {StormdeckCommands}
    # Made from the key registry, as help, the key bar, the palette and the man page are.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(k.keys, k.action, k.description, show=bool(k.bar), priority=k.priority)
        for k in in_scope("console")
    ]

    def __init__(self, feed: Any, executor_factory: Callable[[], Any] | None = None,
                 mutes: Any = None, journal: Any = None, read_only: bool = False,
                 cluster_name: str = "", low_bandwidth: bool = False,
                 tabs: Sequence[ClusterTab] = ()) -> None:
        super().__init__()
        # The bindings of views registered after this class was made (the class's own came
        # from the registry as it was then): every view key the registry holds is bound.
        bound = {b.action for bs in self._bindings.key_to_bindings.values() for b in bs}
        for k in in_scope("console"):
            if k.action not in bound:
                self._bindings.bind(k.keys, k.action, k.description, show=bool(k.bar),
                                    priority=k.priority)
        self._priority = priority_actions()
        self.journal = journal
        self.low_bandwidth = low_bandwidth
        # The windows an experiment from the findings view (e) runs with: the engine's
        # own defaults unless set (a test's lab wants them short).
        self.experiment_settings: Any = None
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
        # Docked: the header never scrolls away, whatever the body or a box below it does.
        with Vertical(id="top"):
            if len(self.tabs) > 1:
                yield Tabs(*(Tab(t.name, id=f"cluster-{i}") for i, t in enumerate(self.tabs)),
                           id="clusters")
            yield Static(id="status")
            # "/" again goes on editing the filter in force (as htop's), not over it.
            yield Input(placeholder="filter rows (Enter keeps it, Esc clears it)", id="filter",
                        select_on_focus=False)
            yield Input(placeholder="go to a time: HH:MM:SS, or -90 (seconds back); Esc to "
                                    "cancel", id="goto")
        # Every registered view, in its keys' order (tui/keys.py VIEWS): nothing listed here.
        with ContentSwitcher(initial=VIEWS[0].id):
            for info in VIEWS:
                yield view_class(info)(id=info.id)
        yield KeyBar(id="keybar")

    def on_mount(self) -> None:
        engine = getattr(self.feed, "engine", None)
        # View is a plain mixin, which Textual's type selectors do not see.
        for view in self.query_one(ContentSwitcher).children:
            if not isinstance(view, View):
                continue
            view.ascii_only = self.low_bandwidth
            # The thresholds a view draws are the ones the engine judges by.
            view.settings = getattr(engine, "settings", None)
        self.title = "stormdeck"
        self._keep_theme()
        # Hidden, the filter box must not hold the focus: it would swallow the keys.
        self.query_one("#filter", Input).disabled = True
        self.query_one("#goto", Input).disabled = True
        self.focus_view()
        for tab in self.tabs:
            tab.feed.start(partial(self._from_feed, tab))
        self.refresh_journal()
        self.set_interval(1.0, self.refresh_status)
        self.query_one(KeyBar).light(f"view('{VIEWS[0].id}')")

    def _from_feed(self, tab: ClusterTab, frame: Frame) -> None:
        """Called on the feed's thread: post_message is safe from any thread."""
        self.post_message(FrameArrived(tab, frame))

    def on_frame_arrived(self, message: FrameArrived) -> None:
        message.tab.frame = message.frame
        message.tab.arrived = time.monotonic()
        if message.tab is self.tabs[self.active]:
            self.show(message.frame)

    def on_unmount(self) -> None:
        for tab in self.tabs:
            tab.feed.stop()

    # -- clusters --

    @on(Tabs.TabActivated, "#clusters")
    def cluster_chosen(self, event: Tabs.TabActivated) -> None:
        if event.tab.id is not None:
            self.activate(int(event.tab.id.removeprefix("cluster-")))

    def action_cluster(self, step: int) -> None:
        self.activate_tab(self.active + step)

    def activate_tab(self, index: int) -> None:
        """Through the tab bar, so that it shows the cluster chosen."""
        if len(self.tabs) > 1:
            self.query_one("#clusters", Tabs).active = f"cluster-{index % len(self.tabs)}"

    def review_finding(self, finding: Any) -> None:
        self.action_view("findings")
        self.query_one(FindingsView).review(finding)

    def mute_finding(self, finding: Any) -> None:
        self.query_one(FindingsView).mute(finding)

    def action_mutes(self) -> None:
        self.query_one(FindingsView).show_mutes()

    def activate(self, index: int) -> None:
        if index == self.active:
            return
        self.active = index
        self._use(self.tabs[index])
        if self.frame is not None:
            self.show(self.frame)
        else:
            self._status(inert(f" stormdeck {self.cluster_name}: waiting for the first poll"))
        self.refresh_journal()

    # -- rendering --

    def show(self, frame: Frame) -> None:
        self.frame = frame
        if isinstance(self.screen, DaemonDetail):
            self.screen.show(frame)
        self._status(self.status_line(frame))
        self.watch_config(frame)
        switcher = self.query_one(ContentSwitcher)
        # Not visible_content: while the app closes, a frame still queued may find the
        # switcher's children already gone.
        view = next((w for w in switcher.children if w.id == switcher.current), None)
        if isinstance(view, View):  # the journal follows the journal file, not frames
            view.show(frame)

    def refresh_status(self) -> None:
        """Once a second: a source that misses its poll is named at once, even while no
        new frame arrives."""
        if self.frame is not None:
            self._status(self.status_line(self.frame))

    def _status(self, line: Text) -> None:
        """Repaint the header only when it says something new: over SSH every byte counts."""
        if line != getattr(self, "_last_status", None):
            self._last_status = line
            self.query_one("#status", Static).update(line)

    def status_line(self, frame: Frame) -> Text:
        """Where in time the screen is, paused or not, the filter, each source's state."""
        line = Text(" stormdeck ", style="bold")
        c = frame.snapshot.cluster
        name = self.cluster_name or (c.fsid[:8] if c and c.fsid else "")
        line.append_text(inert(name, "bold"))
        if self.read_only:
            line.append(" [RO]", style="bold yellow")
        line.append("  ")
        if frame.position:
            line.append(frame.position, style="bold reverse magenta")
        else:
            line.append("LIVE", style="bold green")
            line.append(f" every {self.feed.interval:g}s")
        if self.feed.paused:
            line.append("  ")
            line.append("PAUSED", style="bold reverse yellow")
        needle = self.query_one("#filter", Input).value if self.is_mounted else ""
        if needle:
            line.append("  filter ")
            line.append_text(inert(repr(needle), "bold cyan", 30))
        live = hasattr(self.feed, "loop") and not frame.position and not self.feed.paused
        # A live frame ages while it is on screen; a past or replayed one is judged at
        # its own time (a replay's sources are not stale today).
        now = frame.snapshot.time + (time.monotonic() - self.tab.arrived if live else 0.0)
        for s in frame.snapshot.sources.values():
            style, word = source_state(s, now, self.feed.interval)
            line.append(f"  {s.name} ")
            if s.mode:  # Prometheus: through its recording rules or the raw queries
                line.append(f"({s.mode}) ", style="dim")
            line.append(word, style=style)
        c = frame.snapshot.cluster
        if c is not None and c.mgr is not None and not c.mgr.serving and \
                c.mgr.down_since is not None:
            # On every view: the mgr's parts (PGs, latency, fill) are old while it is down.
            line.append("  mgr ")
            line.append("DOWN", style="bold reverse red")
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

    @on(VirtualTable.RowSelected, "#daemons")
    def daemon_chosen(self, event: VirtualTable.RowSelected) -> None:
        if event.key is not None and self.frame is not None:
            self.push_screen(DaemonDetail(event.key, self.frame, self.low_bandwidth))

    # -- actions --

    def focus_view(self) -> None:
        switcher = self.query_one(ContentSwitcher)
        current = switcher.get_child_by_id(switcher.current or VIEWS[0].id)
        target = current if current.can_focus else next(
            (w for w in current.query("*") if w.can_focus), None)
        self.set_focus(target)

    def action_view(self, name: str) -> None:
        self.query_one(ContentSwitcher).current = name
        self.query_one(KeyBar).light(f"view('{name}')")
        self.focus_view()
        shown = self.query_one(ContentSwitcher).get_child_by_id(name)
        if isinstance(shown, View) and shown.follows_journal:
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

    def _typing(self) -> bool:
        """A box or a dialog has the keys: the console's keys are then its text."""
        return isinstance(self.focused, Input) or len(self.screen_stack) > 1

    async def run_action(self, action: Any, default_namespace: Any = None) -> bool:
        """The console's keys are priority bindings, run as each key arrives: over a slow
        SSH link (or a paste, or tmux) keys come in one burst, and "2/osd" must switch the
        view, then open the filter, then type into it, in that order; without priority
        the whole burst is handed to the view before "2" or "/" has run. While a box or a
        dialog has the keys, the binding steps aside and the key is theirs."""
        if isinstance(action, str) and action in self._priority and self._typing():
            return False
        return await super().run_action(action, default_namespace)

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
            base = report.save(r, state_dir() / "reports")
        except (OSError, ValueError, UserError) as exc:
            self.notify(printable(f"no report: {exc}", 300), severity="error", markup=False)
            return
        self.notify(printable(f"report written: {base}.md and .json", 300), markup=False)

    def action_filter(self) -> None:
        self._reveal(self.query_one("#filter", Input))

    def _reveal(self, box: Input) -> None:
        box.disabled = False
        box.add_class("shown")
        # At once, not later (focus() waits for the queue): keys typed in one burst after
        # "/" (a fast typist, a paste, tmux send-keys) are the filter's, not the view's.
        self.screen.set_focus(box)

    @on(Input.Changed, "#filter")
    def filter_changed(self, event: Input.Changed) -> None:
        for table in self.query(VirtualTable):
            table.filter = event.value
        if self.frame is not None:
            self.show(self.frame)

    def action_clear(self) -> None:
        """Esc: the filter cleared and the time box closed, whichever is open."""
        for box in self.query("#filter, #goto").results(Input):
            if box.has_class("shown") or box.value:
                self._hide(box)

    @on(Input.Submitted, "#filter")
    def filter_done(self) -> None:
        # The filter stays (the header shows it; / edits it, Esc clears it); the box goes,
        # and the keys go back to the view.
        box = self.query_one("#filter", Input)
        box.remove_class("shown")
        box.disabled = True
        self.focus_view()

    def action_help(self) -> None:
        # From the registry the bindings are made from: every key, mouse action and
        # palette command, never a list kept by hand beside them.
        self.push_screen(Help(help_sections()))

    def _keep_theme(self) -> None:
        """The theme an operator chose (palette: Change theme) is the one they get next time."""
        import json

        from stormdeck.advisors.settings import state_dir
        from stormdeck.base.secrets import write_private

        path = state_dir() / "console.json"
        try:
            saved = json.loads(path.read_text()).get("theme")
        except (OSError, ValueError, AttributeError):
            saved = None
        if isinstance(saved, str) and saved in self.available_themes:
            self.theme = saved

        def save(theme: Any) -> None:
            try:
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                write_private(path, json.dumps({"theme": theme.name}) + "\n")
            except OSError as exc:
                self.notify(f"the theme is not kept: {exc.strerror}", severity="warning")

        self.theme_changed_signal.subscribe(self, save)

    @property
    def tab(self) -> ClusterTab:
        """The active cluster's tab: what the views' actions work on."""
        return self.tabs[self.active]

    def on_journal_changed(self, message: JournalChanged) -> None:
        self.refresh_journal()

    def refresh_journal(self) -> None:
        if self.journal is None:
            return
        try:
            # The newest entries: a journal of years is read from its end, not whole.
            entries = self.journal.entries(last=JOURNAL_ROWS)
        except UserError as exc:
            self.notify(printable(str(exc), 300), severity="error", markup=False)
            return
        fsid = self.frame.snapshot.cluster.fsid if self.frame and self.frame.snapshot.cluster \
            else None
        if len(self.tabs) > 1 and fsid:
            # With several clusters open, each tab's journal is its own cluster's.
            entries = [e for e in entries if e.cluster in (None, fsid)]
        for view in self.query_one(ContentSwitcher).children:
            if isinstance(view, View) and view.follows_journal:
                view.show_entries(entries, lambda ts: time.strftime("%m-%d %H:%M:%S",
                                                                    time.localtime(ts)))

