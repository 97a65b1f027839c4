"""The drill-down into one daemon: its figures with their history, disks and findings."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from stormdeck.advisors import blast
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.collectors.model import disk_key
from stormdeck.tui.feed import Frame
from stormdeck.tui.format import finding_line, inert, ms, num, pct, spark


def daemon_detail(frame: Frame, daemon_id: str, ascii_only: bool = False) -> Text:
    """One daemon: its figures with their history, its disks, its findings."""
    s = frame.snapshot
    d = s.daemons.get(daemon_id)
    if d is None:
        return inert(f"{daemon_id} is no longer reported")
    out = Text()
    out.append_text(inert(f"{d.id}  ({d.kind} on {d.host or 'unknown host'})", "bold"))
    out.append("\n")
    state = "up" if d.up else "DOWN" if d.up is False else "?"
    out.append_text(inert(f"  {state}, {'in' if d.in_ else 'out' if d.in_ is False else '?'}, "
                      f"{d.objectstore or ''} {d.device_class or ''}  pid {d.pid or '-'}  "
                      f"threads {num(d.threads)}  RSS {num((d.rss_bytes or 0) / 2**20)} MiB"))
    out.append("\n\n")

    def line(label: str, attr: str, fmt: Callable[[float | None], str]) -> None:
        series = [getattr(x.daemons[d.id], attr) for x in frame.history
                  if d.id in x.daemons and getattr(x.daemons[d.id], attr) is not None]
        out.append(f"  {label:<18} {fmt(getattr(d, attr)):>12}  ")
        out.append(spark(series, 40, ascii_only), style="cyan")
        out.append("\n")

    allowed = num(d.cores_allowed, "{:g}")
    line("cores used", "cores_used", lambda v: f"{num(v, '{:.2f}')}/{allowed}")
    line("write IOPS", "write_iops", num)
    line("read IOPS", "read_iops", num)
    if d.kind == "osd":
        line("commit latency", "commit_latency", ms)
        line("apply latency", "apply_latency", ms)
        line("primary PGs", "primary_pgs", num)
    else:
        line("raft append", "raft_append_latency", ms)
        line("raft send", "raft_send_latency", ms)
        line("leaders", "leaders", num)
        line("bthread usage", "bthread_usage", lambda v: num(v, "{:.1f}"))
    out.append("\n  disks\n", style="bold")
    for dev in d.devices or ():
        k = s.disks.get(disk_key(d.host, dev))
        if k is None:
            out.append_text(inert(f"    /dev/{dev}: not seen by a host source"))
        else:
            out.append_text(inert(f"    {k.key}: {pct(k.util)} busy, {num(k.write_iops)} w/s, "
                              f"await {ms(k.write_await)}, cache {k.write_cache or '-'}/"
                              f"{k.device_cache or '-'}, {k.transport or '-'}"
                              + "".join(f", on /dev/{b}" for b in k.backing)))
        out.append("\n")
    # A loop device's findings are the disk's under its file (the disk rules judge that).
    under = [b for x in d.devices or () for b in getattr(
        s.disks.get(disk_key(d.host, x)), "backing", ())]
    mine = {d.id, *(disk_key(d.host, x) for x in (*(d.devices or ()), *under))}
    related = [f for f in frame.findings if f.target in mine]
    out.append("\n  findings\n", style="bold")
    if not related:
        out.append("    none\n", style="green")
    for f in related:
        out.append_text(finding_line(f))
        out.append("\n")
    return out


class DaemonDetail(ModalScreen[None]):
    """Drill-down into one daemon; it follows the frames while open."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close"),
        Binding("o", "whatif_out", "What if it goes out (predicted; nothing changes)")]

    def __init__(self, daemon_id: str, frame: Frame, ascii_only: bool) -> None:
        super().__init__()
        self.daemon_id = daemon_id
        self.frame = frame
        self.ascii_only = ascii_only

    def compose(self) -> ComposeResult:
        yield VerticalScroll(Static(daemon_detail(self.frame, self.daemon_id, self.ascii_only),
                                    id="detail-body"), Static(id="detail-whatif"), id="help")

    def show(self, frame: Frame) -> None:
        self.frame = frame
        self.query_one("#detail-body", Static).update(
            daemon_detail(frame, self.daemon_id, self.ascii_only))

    def action_close(self) -> None:
        self.dismiss(None)

    def action_whatif_out(self) -> None:
        """o: what marking this OSD out would move (advisors/blast/), in a worker."""
        box = self.query_one("#detail-whatif", Static)
        if not re.fullmatch(r"osd\.\d+", self.daemon_id):
            box.update(Text("only an OSD can be marked out", style="bold"))
            return
        box.update(Text(f"predicting what {self.daemon_id} going out moves...", style="dim"))
        self.predict_out()

    @work(thread=True, exclusive=True)
    def predict_out(self) -> None:
        tab = getattr(self.app, "tab", None)
        factory = tab.executor_factory if tab is not None else None
        try:
            if factory is None:
                raise UserError("this session has no cluster connection to read the map from")
            with factory() as executor:
                ceph = executor.backends.ceph
                if ceph is None:
                    raise UserError("this session has no Ceph connection to read the map from")
                state = blast.state_of(ceph.connection)
                p = blast.predict_out(state, blast.find_tools(state.version, state.release),
                                      [int(self.daemon_id.removeprefix("osd."))])
            text = Text("\n".join(printable(line, 400) for line in p.lines()))
        except UserError as exc:
            text = Text(f"not predicted: {printable(str(exc), 400)}", style="bold")
        self.app.call_from_thread(self.query_one("#detail-whatif", Static).update, text)
