"""The disks view shows what udev knows of the selected disk, as inert text, and says so when
no udev runs; recordings keep those fields and old recordings read as before."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import Static

from stormdeck.collectors.model import Disk, DiskEvent, Host, Snapshot
from stormdeck.collectors.recording import Recorder, Recording
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import StaticFeed
from stormdeck.tui.views import DisksView, DiskTable, disk_detail
from stormdeck.tui.views.detail import daemon_detail
from tests.unit.test_tui import EVIL, frames

ROOT = Path(__file__).parent.parent.parent


def named(s: Snapshot, i: int, udev: bool | None) -> Snapshot:
    """The lab capture's loop0 as udev would name a SATA disk, with a model that tries to be
    markup, on a host with or without udev."""
    disks = dict(s.disks)
    key = "vm:/dev/loop0"
    disks[key] = replace(disks[key], model=EVIL, serial="WD-WX62D81PKZTZ",
                         wwn="0x50014ee269fc2b36", bus="ata", rpm=5400,
                         links=("/dev/disk/by-id/wwn-0x50014ee269fc2b36",
                                "/dev/disk/by-path/pci-0000:00:17.0-ata-1"))
    return replace(s, disks=disks, hosts={"vm": Host("vm", udev=udev)})


@pytest.mark.asyncio
@pytest.mark.parametrize("udev", [True, False])
async def test_the_disk_detail_follows_the_cursor_and_the_note_tells_of_no_udev(
        udev: bool) -> None:
    app = StormdeckApp(StaticFeed(frames(lambda s, i: named(s, i, udev))))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("5")
        table = app.query_one(DiskTable)
        table.move_cursor(table.keys.index("vm:/dev/loop0"))
        await pilot.pause()
        view = app.query_one(DisksView)
        note = view.query_one("#disks-note", Static)
        assert note.display is (not udev)
        if not udev:
            assert "udev not running here: disk names from sysfs, no model/serial" in \
                str(note.render())
        body = disk_detail(app.frame, "vm:/dev/loop0").plain
        # Cluster text shown as its characters: the markup is not applied, the escape
        # sequence is shown escaped.
        assert "[bold red]x[/]" in body and "\x1b" not in body
        for part in ("WD-WX62D81PKZTZ", "0x50014ee269fc2b36", "bus ata", "5400 rpm",
                     "/dev/disk/by-path/pci-0000:00:17.0-ata-1"):
            assert part in body
        shown = str(view.query_one("#disk-detail", Static).render())
        assert "WD-WX62D81PKZTZ" in shown


def test_udev_fields_and_disk_news_go_on_tape(tmp_path: Path) -> None:
    s = Snapshot(time=1_763_900_000.0, cluster=None, daemons={}, sources={},
                 disks={"h:/dev/sdc": Disk(host="h", name="sdc", model="WDC WD50NMZW-11BGRS1",
                                           serial="WD-WX62D81PKZTZ", wwn="0x50014ee269fc2b36",
                                           bus="ata", rpm=5400,
                                           links=("/dev/disk/by-id/wwn-0x50014ee269fc2b36",)),
                        "h:/dev/loop3": Disk(host="h", name="loop3", virtual=True,
                                             daemons=("osd.3",), backing=("sdc",))},
                 hosts={"h": Host("h", udev=True, disk_events=(
                     DiskEvent(1_763_899_999.512, "sdc", True, "4.5e+03 GiB"),
                     DiskEvent(1_763_899_999.75, "sdd", False)))})
    rec = Recorder(tmp_path / "r")
    rec.add_snapshot(s)
    rec.close()
    [back] = Recording(tmp_path / "r").snapshots()
    assert back == s


def test_a_recording_made_before_udev_fields_reads_with_them_unknown() -> None:
    """assets/demo.sdrec was recorded before the disks carried udev's names."""
    rec = Recording(ROOT / "assets" / "demo.sdrec")
    first = next(iter(rec.snapshots()))
    assert first.disks
    for d in first.disks.values():
        assert d.serial is None and d.wwn is None and d.links == () and d.backing == ()
    for h in first.hosts.values():
        assert h.udev is None and h.disk_events == ()


def test_a_loops_detail_names_the_disk_its_io_lands_on() -> None:
    """The loop stays as `ceph osd metadata` names it; its detail says which disk is under
    it, and the disk under it lists the daemons of the loops above."""
    def on_vda(s: Snapshot, i: int) -> Snapshot:
        disks = {k: replace(d, backing=("vda",)) if d.name.startswith("loop") else d
                 for k, d in s.disks.items()}
        vda = replace(disks["vm:/dev/vda"], daemons=("osd.0", "osd.1", "osd.2"))
        return replace(s, disks={**disks, vda.key: vda})

    (frame, *_) = frames(on_vda)
    loop = disk_detail(frame, "vm:/dev/loop0").plain
    assert "I/O lands on /dev/vda, the disk under its backing file" in loop
    assert "daemons osd.0" in loop
    vda = disk_detail(frame, "vm:/dev/vda").plain
    assert "daemons osd.0, osd.1, osd.2" in vda and "lands on" not in vda
    assert DiskTable.cells(frame.snapshot.disks["vm:/dev/vda"])[-1].plain == \
        "osd.0,osd.1,osd.2"
    # osd.0's detail: its loop, the disk under it, and that disk's finding.
    last = frames(on_vda)[-1]
    assert any(f.rule == "disk.write_cache_on" and f.target == "vm:/dev/vda"
               for f in last.findings)
    osd = daemon_detail(last, "osd.0").plain
    assert "vm:/dev/loop0:" in osd and ", on /dev/vda" in osd
    assert "INFO     vm:/dev/vda: vm:/dev/vda (virtio" in osd.split("findings", 1)[1]
