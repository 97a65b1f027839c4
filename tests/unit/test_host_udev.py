"""Disk discovery through pyudev on real block devices: what udev knows where it runs, sysfs
where it does not, and disks that come and go (a loop device attached and detached)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormdeck.advisors.timeline import ERR, WARN, Timeline
from stormdeck.collectors.host.disks import Disks, _unhex, _wwn, udev_running
from stormdeck.collectors.host.source import HostSource
from stormdeck.collectors.hub import merge
from stormdeck.collectors.model import Daemon, Disk, DiskEvent, Host, Snapshot

RECORD = Path(__file__).parent.parent / "data" / "udev" / "wd50nmzw.db"
CAN_LOOP = os.geteuid() == 0 and shutil.which("losetup") is not None

needs_loop = pytest.mark.skipif(not CAN_LOOP, reason="attaching a loop device needs root and "
                                "losetup")


def attach(image: Path) -> str:
    out = subprocess.run(["losetup", "-f", "--show", str(image)], capture_output=True,
                         text=True, check=True, timeout=30)
    return Path(out.stdout.strip()).name


def detach(name: str) -> None:
    subprocess.run(["losetup", "-d", f"/dev/{name}"], check=True, timeout=30)


@pytest.fixture
def image(tmp_path: Path) -> Path:
    img = tmp_path / "disk.img"
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    return img


@pytest.fixture
def loop(image: Path) -> Iterator[str]:
    name = attach(image)
    try:
        yield name
    finally:
        detach(name)


# ---- what udev knows ---------------------------------------------------------------

IN_NAMESPACE = """
import dataclasses, json, sys
from stormdeck.collectors.host.disks import Disks
from stormdeck.collectors.host.source import HostSource
name = sys.argv[1]
src = HostSource(hostname="h1", watch=False)
part = src.poll()
print(json.dumps({"running": Disks().udev,
                  "info": dataclasses.asdict(Disks().info(name)),
                  "forced_off": dataclasses.asdict(Disks(udev=False).info(name)),
                  "disk": dataclasses.asdict(part.disks["h1:/dev/" + name]),
                  "host_udev": part.hosts["h1"].udev}))
"""


def with_udev_database(name: str) -> dict:
    """Our code, run where a udev database holds a real disk's record for `name`: in a
    private mount namespace with a fresh /run (the host's own is untouched)."""
    majmin = Path(f"/sys/block/{name}/dev").read_text().strip()
    script = ('mount -t tmpfs tmpfs /run && mkdir -p /run/udev/data && '
              'cp "$1" "/run/udev/data/b$2" && exec "$3" -c "$4" "$5"')
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script,
                          "sh", str(RECORD), majmin, sys.executable, IN_NAMESPACE, name],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.fail(f"in the namespace: {out.stderr.strip()}")
    return json.loads(out.stdout)


@needs_loop
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_where_udev_runs_its_names_reach_the_disk_record(loop: str) -> None:
    seen = with_udev_database(loop)
    assert seen["running"] is True and seen["host_udev"] is True
    info, disk = seen["info"], seen["disk"]
    # ID_MODEL_ENC decoded (the drive's own spaces), not ID_MODEL's underscores.
    assert info["model"] == disk["model"] == "WDC WD50NMZW-11BGRS1"
    assert disk["serial"] == "WD-WX62D81PKZTZ"  # ID_SERIAL_SHORT: what the label says
    assert disk["wwn"] == "0x50014ee269fc2b36"
    assert disk["bus"] == "ata" and disk["rpm"] == 5400
    assert disk["links"] == ["/dev/disk/by-id/ata-WDC_WD50NMZW-11BGRS1_WD-WX62D81PKZTZ",
                             "/dev/disk/by-id/wwn-0x50014ee269fc2b36",
                             "/dev/disk/by-path/pci-0000:00:17.0-ata-1"]
    # The kernel's own attributes still come from the kernel: a loop device.
    assert disk["transport"] == "loop" and disk["virtual"] is True
    assert info["size_bytes"] == 64 << 20
    # Told that no udev runs, the same disk is read from sysfs alone.
    off = seen["forced_off"]
    assert off["model"] is None and off["serial"] is None and off["wwn"] is None
    assert off["links"] == [] and off["size_bytes"] == 64 << 20


@needs_loop
def test_where_no_udev_runs_the_disk_is_named_by_sysfs_and_says_so(loop: str,
                                                                   tmp_path: Path) -> None:
    empty = tmp_path / "udev-data"
    empty.mkdir()
    assert udev_running(empty) is False and udev_running(tmp_path / "absent") is False
    disks = Disks(udev_data=empty)
    assert disks.udev is False
    assert loop in disks.names()
    info = disks.info(loop)
    assert info.serial is None and info.links == () and info.size_bytes == 64 << 20
    # This machine, as it is: the source reports what it found.
    part = HostSource(hostname="h1", watch=False).poll()
    assert part.hosts["h1"].udev is udev_running()


def test_udev_encodings_and_absent_wwns() -> None:
    # ID_MODEL_ENC as systemd/systemd#24921 and xcat2/xcat-core#1058 show it.
    assert _unhex(r"ST1000NX0313\x20\x20\x20\x20\x20\x20\x20\x20\x20tbd\x20\x20\x20\x20"
                  r"\x20tbd\x20\x20\x20\x20IBM\x20") == "ST1000NX0313 tbd tbd IBM"
    # harvester/harvester#6604: a drive without one reports sixteen zeros.
    assert _wwn({"ID_WWN_WITH_EXTENSION": "0x0000000000000000",
                 "ID_WWN": "0x0000000000000000"}) is None
    assert _wwn({"ID_WWN": "0x500253855031cfa5"}) == "0x500253855031cfa5"


# ---- disks that come and go -----------------------------------------------------------


def announced(src: HostSource, name: str, present: bool, timeout: float = 60.0) -> None:
    """Wait until the watch's thread has queued an event of `name` (with a size, or gone),
    however long a busy host takes to run it; the next poll drains it. The asserts after
    say what is missing if it never comes."""
    assert src.watch is not None
    deadline = time.monotonic() + timeout
    while not any(n == name and p is present for _, n, p in list(src.watch._queue)):
        if time.monotonic() > deadline:
            return
        time.sleep(0.02)


def _ours(part, name: str) -> list[DiskEvent]:
    return [e for e in part.hosts["h1"].disk_events if e.name == name]


@needs_loop
def test_a_disk_attached_and_detached_between_two_polls_is_seen_by_the_monitor(
        image: Path) -> None:
    src = HostSource(hostname="h1")
    blind = HostSource(hostname="h1", watch=False)
    try:
        assert src.watch is not None and src.watch.error is None, src.watch and src.watch.error
        first = src.poll()
        blind.poll()
        began = time.time()
        name = attach(image)
        try:
            announced(src, name, True)  # the watch reads the size at the event: let it
        finally:
            detach(name)
        announced(src, name, False)
        ended = time.time()
        second = src.poll()
        # Other people's labs share the machine: one may have taken the freed number since.
        reused = Path(f"/sys/block/{name}/size").read_text().strip() != "0"
        if not reused:  # the listing alone, polled before and after, never saw it
            assert _ours(blind.poll(), name) == []
        events = _ours(second, name)[:2]
        assert [e.appeared for e in events] == [True, False], events
        assert began <= events[0].time < events[1].time <= ended
        assert events[0].detail == ""  # gone by the poll: nothing left to describe

        # Into the timeline, each at its own time.
        tl = Timeline()
        tl.add(merge([first], now=began))
        new = [e for e in tl.add(merge([second], now=ended)) if e.kind == "disk"
               and e.target == f"h1:/dev/{name}"]
        assert [e.text for e in new] == [f"disk h1:/dev/{name} appeared",
                                         f"disk h1:/dev/{name} vanished"]
        assert new[1].level == WARN and new[0].time == events[0].time
    finally:
        src.close()
        blind.close()


@needs_loop
def test_a_disk_that_stays_is_news_once_with_what_it_is(image: Path) -> None:
    src = HostSource(hostname="h1")
    try:
        src.poll()
        name = attach(image)
        try:
            announced(src, name, True)
            events = _ours(src.poll(), name)
            assert [e.appeared for e in events] == [True]
            assert events[0].detail.startswith("0.0625 GiB")
            assert _ours(src.poll(), name) == []  # told once
        finally:
            detach(name)
        announced(src, name, False)
        assert [e.appeared for e in _ours(src.poll(), name)][:1] == [False]
    finally:
        src.close()


def test_a_stale_host_does_not_tell_its_news_twice_and_a_held_disk_vanishing_is_an_error(
        ) -> None:
    gone = DiskEvent(100.5, "sdc", False)
    held = Disk(host="h1", name="sdc", daemons=("osd.3",))
    before = Snapshot(time=100.0, cluster=None, sources={}, disks={held.key: held},
                      daemons={"osd.3": Daemon(id="osd.3", kind="osd", host="h1")},
                      hosts={"h1": Host("h1")})
    news = Snapshot(time=101.0, cluster=None, sources={}, disks={}, daemons=before.daemons,
                    hosts={"h1": Host("h1", disk_events=(gone,))})
    again = Snapshot(time=102.0, cluster=None, sources={}, disks={}, daemons=before.daemons,
                     hosts={"h1": Host("h1", disk_events=(gone,))})
    tl = Timeline()
    tl.add(before)
    [e] = tl.add(news)
    assert (e.kind, e.target, e.level, e.time) == ("disk", "h1:/dev/sdc", ERR, 100.5)
    assert e.text == "disk h1:/dev/sdc vanished under osd.3"
    assert tl.add(again) == []
