"""The daemons view: cores used against allowed, IOPS, latency, share, device."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType

from stormdeck.collectors.model import Daemon, Records, Snapshot, disk_key
from stormdeck.tui.feed import Frame
from stormdeck.tui.format import bar, cores_now, inert, ms, num, pct
from stormdeck.tui.keys import in_scope
from stormdeck.tui.stale import note, show_note, stale_parts, struck, wrapped
from stormdeck.tui.table import Column, VirtualTable
from stormdeck.tui.views.base import View


class DaemonTable(View, VirtualTable):
    view_id = "daemons"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(k.keys, k.action, k.description, show=False) for k in in_scope("daemons")]
    EMPTY = ("no daemons yet: they come with the first poll of Ceph (-c CONF) or Curve "
             "(--curve-mds); the header says whether each source answers")
    # At 80 columns the host stays (which host a slow or down OSD is on) and the
    # primaries, IOPS per core and device go first.
    COLUMNS = (Column("daemon", 14), Column("host", 12, 3), Column("cores used/allowed", 20),
               Column("IOPS", 7, 1, True), Column("IOPS/core", 9, 5, True),
               Column("latency", 15, 2), Column("prim|lead", 9, 4, True),
               Column("device", 10, 6), Column("util", 5, 2, True))

    # The records last built, and the daemons and disks mappings they were built from.
    _rows: dict[str, tuple] | None = None
    _rows_from: tuple[Any, Any] = (None, None)

    def show(self, frame: Frame) -> None:
        s = frame.snapshot
        rows = self.rows_of(s)
        marks = stale_parts(frame, ("osd", "chunkserver", "cores"))
        show_note(self, note(frame, marks))
        if not marks:
            # The same mapping while no record changed: the table has nothing to do.
            self.set_records(rows, lambda r: self.cells(r[0], s))
            return
        key = tuple(sorted((p, int(a)) for p, a in marks.items()))
        self.set_records(wrapped(rows, key),
                         lambda r: self.marked(self.cells(r[0][0], s), r[0][0], marks))

    def rows_of(self, s: Snapshot) -> dict[str, tuple]:
        """The records of `s`'s daemons: the same dict as last time while the merge's
        mappings are (a fleet source's scrape stands for 15 ticks), so the table,
        which compares by identity, has nothing to do for 10,000 rows."""
        # Each Snapshot wraps the merge's mapping anew (Records): compare what is inside.
        daemons, disks = inner(s.daemons), inner(s.disks)
        rows = self._rows
        if rows is None or self._rows_from[0] is not daemons or self._rows_from[1] is not disks:
            # Each snapshot may bring another disks mapping holding the same disks (or
            # none): equal, it changes no daemon's record.
            last = self._rows_from[1]
            same_disks = last is not None and (disks is last or disks == last)
            rows = self._rows = self._records_of(daemons, disks, rows or {}, same_disks)
            self._rows_from = (daemons, disks)
        return rows

    # Which cells come from the cluster's source (up, host, IOPS, latency, share, device)
    # and which from the host's (cores, utilisation); IOPS per core from both.
    FROM_CLUSTER = (0, 1, 3, 4, 5, 6, 7)
    FROM_HOST = (2, 4, 8)

    def marked(self, cells: tuple[Text, ...], d: Daemon,
               marks: Mapping[str, float]) -> tuple[Text, ...]:
        cols: set[int] = set()
        if d.kind in marks:
            cols.update(self.FROM_CLUSTER)
        if "cores" in marks:
            cols.update(self.FROM_HOST)
        return struck(cells, cols)

    @staticmethod
    def _records_of(daemons: Mapping[str, Daemon], disks: Mapping[str, Any],
                    last: dict[str, tuple], same_disks: bool) -> dict[str, tuple]:
        """A record per daemon: the Daemon and its disks. A daemon that is the same object
        (and whose disks are) keeps its record object, so the table compares by identity."""
        out = {}
        for d in daemons.values():
            old = last.get(d.id)
            if old is not None and old[0] is d and same_disks:
                out[d.id] = old
                continue
            rec = (d, tuple(disks.get(disk_key(d.host, x)) for x in d.devices or ()))
            out[d.id] = old if old is not None and old[0] is d and old[1] == rec[1] else rec
        return out

    def cells(self, d: Daemon, s: Snapshot) -> tuple[Text, ...]:
        iops = d.iops
        used = cores_now(d)
        per_core = iops / used if iops is not None and used else None
        if d.kind == "osd":
            lat = f"{ms(d.commit_latency)}/{ms(d.apply_latency)}"
            share = d.primary_pgs
        else:
            lat = f"{ms(d.raft_append_latency)}/{ms(d.raft_send_latency)}"
            share = d.leaders
        if d.down:
            # Its latency and IOPS are the last figures from before it died: never shown
            # as if current (issue 42).
            iops = per_core = None
            lat = "down" if d.kind == "osd" else "offline"
        devs = d.devices or ()
        disks = [s.disks.get(disk_key(d.host, x)) for x in devs]
        utils = [k.util for k in disks if k is not None and k.util is not None]
        busy = bool(used is not None and d.cores_allowed and used / d.cores_allowed > 0.85)
        cores = bar(used, d.cores_allowed, ascii_only=self.ascii_only) \
            if used is not None or not d.down else "down"
        return (inert(d.id, "bold red" if d.down else ""), inert(d.host or "-"),
                inert(cores, "yellow" if busy else "dim" if used is None else ""),
                inert(num(iops)), inert(num(per_core)), inert(lat), inert(num(share)),
                inert(",".join(devs) or "-"), inert(pct(max(utils)) if utils else "-"))

def inner(m: Mapping[str, Any]) -> Mapping[str, Any]:
    return m.inner if isinstance(m, Records) else m
