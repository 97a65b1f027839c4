"""The disks view: utilisation, IO, await, queue, cache state and the daemons on each,
above the selected disk's detail (what udev knows of it: model, serial, WWN, links)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from stormdeck.collectors.model import Disk
from stormdeck.tui.feed import Frame
from stormdeck.tui.format import inert, ms, num, pct, spark
from stormdeck.tui.stale import note as stale_note
from stormdeck.tui.stale import stale_parts, struck
from stormdeck.tui.table import Column, VirtualTable
from stormdeck.tui.views.base import View

NO_UDEV = "udev not running here: disk names from sysfs, no model/serial"


class DiskTable(VirtualTable):
    EMPTY = ("no disks seen: this host's come from /proc/diskstats, other hosts' from "
             "`stormdeck exporter` through Prometheus (--prometheus URL)")
    # Dropped when narrow from the highest priority: at 80 columns the disk, its
    # utilisation, writes, cache and the daemons on it stay (which OSD a busy disk hurts).
    COLUMNS = (Column("disk", 22), Column("util", 5, 0, True), Column("r/s", 7, 3, True),
               Column("w/s", 7, 1, True), Column("r_await", 8, 4, True),
               Column("w_await", 8, 3, True), Column("queue", 6, 5, True),
               Column("cache kernel/device", 20, 2), Column("transport", 15, 6),
               Column("daemons", 14, 1))

    def show(self, frame: Frame) -> None:
        # Disks come from the host source: a late one's rows are struck whole.
        late = "disks" in stale_parts(frame, ("disks",))
        self.set_records(((k.key, (k, late)) for k in frame.snapshot.disks.values()),
                         lambda r: struck(self.cells(r[0]), range(10)) if r[1]
                         else self.cells(r[0]))

    @staticmethod
    def cells(k: Disk) -> tuple[Text, ...]:
        cache = f"{k.write_cache or '-'}/{k.device_cache or '-'}"
        risky = bool(k.daemons) and not k.virtual and (k.write_cache or "").startswith("write back")
        return (inert(k.key), inert(pct(k.util), "yellow" if (k.util or 0) > 0.9 else ""),
                inert(num(k.read_iops)), inert(num(k.write_iops)), inert(ms(k.read_await)),
                inert(ms(k.write_await)), inert(num(k.queue_depth, "{:.1f}")),
                inert(cache, "yellow" if risky else ""),
                inert((k.transport or "-") + (" (virtual)" if k.virtual else "")),
                inert(",".join(k.daemons) or "-"))


def udev_note(frame: Frame) -> Text:
    """One line where a host source found no udev: names only, nothing udev would add."""
    if any(h.udev is False for h in frame.snapshot.hosts.values()):
        return Text(NO_UDEV, style="yellow")
    return Text()


def disk_detail(frame: Frame, key: str | None, ascii_only: bool = False) -> Text:
    """One disk: what it is (udev's names where known), its cache, links and daemons."""
    k = frame.snapshot.disks.get(key) if key else None
    if k is None:
        return Text("no disk selected" if key is None else "")
    out = inert(k.key, "bold")
    kind = ("rotational" if k.rotational else "solid state" if k.rotational is False else "")
    if k.rpm:
        kind = f"{k.rpm} rpm"
    what = ", ".join(x for x in (k.model, k.bus and f"bus {k.bus}", k.transport, kind) if x)
    out.append_text(inert(f"  {what}" if what else ""))
    out.append("\n")
    out.append_text(inert(f"  serial {k.serial or '-'}   WWN {k.wwn or '-'}   cache kernel "
                      f"{k.write_cache or '-'}, device {k.device_cache or '-'}   daemons "
                      f"{', '.join(k.daemons) or '-'}"))
    out.append("\n")
    if k.backing:
        # The loop is what `ceph osd metadata` names; the disk under its file is what the
        # disk rules judge for it.
        out.append_text(inert(f"  I/O lands on {', '.join('/dev/' + b for b in k.backing)}, "
                          "the disk under its backing file"))
        out.append("\n")
    for link in k.links:
        out.append_text(inert(f"  {link}", "dim"))
        out.append("\n")
    series = [u for x in frame.history if k.key in x.disks
              and (u := x.disks[k.key].util) is not None]
    out.append(f"  util {pct(k.util):>5}  ")
    out.append(spark(series, 40, ascii_only), style="cyan")
    return out


class DisksView(View, Vertical):
    """The disks table above the selected disk's detail, which follows the cursor."""

    view_id = "disks"
    DEFAULT_CSS = """
    DisksView #disks-note { height: auto; }
    DisksView #disk-detail { height: auto; max-height: 50%; border-top: solid $primary; }
    """
    frame: Frame | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="disks-note")
        yield DiskTable(id="disk-table")
        yield Static(id="disk-detail")

    def show(self, frame: Frame) -> None:
        self.frame = frame
        note = udev_note(frame)
        late = stale_note(frame, ("disks",))
        if late:
            note = Text(late, style="bold reverse") + (Text("\n") + note if note.plain else Text())
        box = self.query_one("#disks-note", Static)
        box.display = bool(note.plain)
        box.update(note)
        self.query_one(DiskTable).show(frame)
        self.show_detail()

    def show_detail(self) -> None:
        if self.frame is not None:
            self.query_one("#disk-detail", Static).update(disk_detail(
                self.frame, self.query_one(DiskTable).selected_key, self.ascii_only))

    @on(VirtualTable.RowHighlighted, "#disk-table")
    def disk_moved(self) -> None:
        self.show_detail()
