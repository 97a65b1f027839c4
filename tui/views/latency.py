"""The latency view: commit/apply or raft append/send per daemon, with history."""

from __future__ import annotations

from collections.abc import Sequence

from stormdeck.collectors.model import Daemon, Snapshot
from stormdeck.tui.feed import Frame
from stormdeck.tui.format import inert, ms, spark
from stormdeck.tui.format import newest as last_values
from stormdeck.tui.stale import note, show_note, stale_parts, struck
from stormdeck.tui.table import Cells, Column, VirtualTable
from stormdeck.tui.views.base import View

SPARK = 24  # the history column's width: the newest values it shows


class LatencyTable(View, VirtualTable):
    view_id = "latency"
    EMPTY = ("no daemons yet: they come with the first poll of Ceph or Curve; p99 and op "
             "r/w come from Prometheus (watch --prometheus URL)")
    COLUMNS = (Column("daemon", 14), Column("kind", 11, 4), Column("commit|append", 13),
               Column("apply|send", 11, 1), Column("p99", 9, 2), Column("op r/w", 17, 3),
               Column("history", 24, 5))

    def show(self, frame: Frame) -> None:
        # A row is its Daemon and the frame's time: only rows on screen are formatted
        # (reading the history for their sparklines), not every daemon every frame.
        when, history = frame.snapshot.time, frame.history
        marks = stale_parts(frame, ("osd", "chunkserver"))
        show_note(self, note(frame, marks))
        # Latencies come from the cluster's sources: a late one's rows are struck whole
        # (the record carries the marking, so the row is drawn again when it changes).
        self.set_records(((d.id, (d, when, d.kind in marks))
                          for d in frame.snapshot.daemons.values()),
                         lambda r: struck(self.cells(r[0], history), range(7)) if r[2]
                         else self.cells(r[0], history))

    def cells(self, d: Daemon, history: Sequence[Snapshot]) -> Cells:
        if d.kind == "osd":
            first, second, p99 = d.commit_latency, d.apply_latency, None
            attr = "commit_latency"
        else:
            first, second = d.raft_append_latency, d.raft_send_latency
            p99, attr = d.raft_append_latency_p99, "raft_append_latency"
        ops = f"{ms(d.op_read_latency)}/{ms(d.op_write_latency)}"
        if d.down:
            # The last figures the cluster had from it, from before it went down: its
            # history stays in the sparkline, no figure is shown as current (issue 42).
            first = second = p99 = None
            ops = "down" if d.kind == "osd" else "offline"
        return (inert(d.id, "bold red" if d.down else ""), inert(d.kind), inert(ms(first)),
                inert(ms(second)), inert(ms(p99)), inert(ops),
                inert(spark(newest(history, d.id, attr, SPARK), SPARK, self.ascii_only)))


def newest(history: Sequence[Snapshot], daemon_id: str, attr: str, n: int) -> list[float]:
    """The daemon's last `n` known values of `attr` in `history`, oldest first."""
    return last_values(history, lambda x: getattr(x.daemons.get(daemon_id), attr, None), n)
