"""The latency view: commit/apply or raft append/send per daemon, with history."""

from __future__ import annotations

from stormdeck.tui.feed import Frame
from stormdeck.tui.format import ms, spark, t
from stormdeck.tui.table import Column, VirtualTable
from stormdeck.tui.views.base import View


class LatencyTable(View, VirtualTable):
    view_id = "latency"
    COLUMNS = (Column("daemon", 14), Column("kind", 11, 4), Column("commit|append", 13),
               Column("apply|send", 11, 1), Column("p99", 9, 2), Column("op r/w", 17, 3),
               Column("history", 24, 5))

    def show(self, frame: Frame) -> None:
        rows = []
        for d in frame.snapshot.daemons.values():
            if d.kind == "osd":
                first, second, p99 = d.commit_latency, d.apply_latency, None
                attr = "commit_latency"
            else:
                first, second = d.raft_append_latency, d.raft_send_latency
                p99, attr = d.raft_append_latency_p99, "raft_append_latency"
            series = [getattr(x.daemons[d.id], attr) for x in frame.history
                      if d.id in x.daemons and getattr(x.daemons[d.id], attr) is not None]
            rows.append((d.id, (t(d.id), t(d.kind), t(ms(first)), t(ms(second)), t(ms(p99)),
                                t(f"{ms(d.op_read_latency)}/{ms(d.op_write_latency)}"),
                                t(spark(series, 24, self.ascii_only)))))
        self.sync(rows)
