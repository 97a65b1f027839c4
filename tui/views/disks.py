"""The disks view: utilisation, IO, await, queue, cache state and the daemons on each."""

from __future__ import annotations

from rich.text import Text
from stormdeck.collectors.model import Disk
from stormdeck.tui.feed import Frame
from stormdeck.tui.format import ms, num, pct, t
from stormdeck.tui.table import Column, VirtualTable
from stormdeck.tui.views.base import View


class DiskTable(View, VirtualTable):
    view_id = "disks"
    COLUMNS = (Column("disk", 22), Column("util", 5, 0, True), Column("r/s", 7, 2, True),
               Column("w/s", 7, 1, True), Column("r_await", 8, 4, True),
               Column("w_await", 8, 3, True), Column("queue", 6, 5, True),
               Column("cache kernel/device", 26, 1), Column("transport", 15, 6),
               Column("daemons", 14, 3))

    def show(self, frame: Frame) -> None:
        self.set_records(((k.key, k) for k in frame.snapshot.disks.values()), self.cells)

    @staticmethod
    def cells(k: Disk) -> tuple[Text, ...]:
        cache = f"{k.write_cache or '-'}/{k.device_cache or '-'}"
        risky = bool(k.daemons) and not k.virtual and (k.write_cache or "").startswith("write back")
        return (t(k.key), t(pct(k.util), "yellow" if (k.util or 0) > 0.9 else ""),
                t(num(k.read_iops)), t(num(k.write_iops)), t(ms(k.read_await)),
                t(ms(k.write_await)), t(num(k.queue_depth, "{:.1f}")),
                t(cache, "yellow" if risky else ""),
                t((k.transport or "-") + (" (virtual)" if k.virtual else "")),
                t(",".join(k.daemons) or "-"))
