"""A loop device's I/O lands on the disk under its backing file: found on real loop devices
(a file on this host's own disk, a deleted file, a file on tmpfs, a loop inside a loop's
filesystem), and that disk carrying the daemons that hold the loop open."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormdeck.collectors.host.disks import backing_disks, loop_backing_dev, whole_disk
from stormdeck.collectors.host.source import HostSource
from tests.conftest import eventually
from tests.unit.test_host_udev import attach, detach, needs_loop

pytestmark = needs_loop


def disks_under(path: Path) -> list[str]:
    """The whole disks under the filesystem holding `path`, found apart from the code under
    test: its st_dev through /sys/dev/block, then partitions and dm slaves."""
    st = os.stat(path)
    link = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if not link.exists():
        pytest.skip(f"{path} is on no block device here")
    return whole_disk(Path(os.path.realpath(link)).name)


def sparse(path: Path, mib: int = 64) -> Path:
    with open(path, "wb") as f:
        f.truncate(mib << 20)
    return path


@pytest.fixture
def attached() -> Iterator[list[str]]:
    """Loop devices a test attaches, detached afterwards whatever happened."""
    names: list[str] = []
    try:
        yield names
    finally:
        for name in reversed(names):
            detach(name)


def test_a_loop_devices_io_lands_on_the_disk_under_its_backing_file(
        tmp_path: Path, attached: list[str]) -> None:
    expected = disks_under(tmp_path)
    name = attach(sparse(tmp_path / "osd.img"))
    attached.append(name)
    assert backing_disks(name) == tuple(expected)
    assert not any(d.startswith("loop") for d in expected)
    # What `losetup -a` prints as [MAJMIN] is the same device number.
    st = os.stat(tmp_path)
    assert loop_backing_dev(name) == st.st_dev
    # A disk is no loop: nothing under it in this sense.
    assert backing_disks(expected[0]) == ()


def test_a_deleted_backing_file_is_still_found_through_the_loop_driver(
        tmp_path: Path, attached: list[str]) -> None:
    """The sysfs path then reads "... (deleted)" and stats nothing: LOOP_GET_STATUS64 still
    names the filesystem the file was on."""
    expected = disks_under(tmp_path)
    image = sparse(tmp_path / "gone.img")
    name = attach(image)
    attached.append(name)
    image.unlink()
    shown = Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
    assert shown.endswith("(deleted)") and not Path(shown).exists()
    assert backing_disks(name) == tuple(expected)


def test_a_loop_on_tmpfs_has_no_disk_under_it(attached: list[str]) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir():
        pytest.skip("no /dev/shm here")
    image = sparse(shm / f"stormdeck-test-{os.getpid()}.img", 16)
    try:
        name = attach(image)
        attached.append(name)
        dev = loop_backing_dev(name)
        assert dev is not None and os.major(dev) == 0  # tmpfs: an anonymous device number
        assert backing_disks(name) == ()
    finally:
        image.unlink()


@pytest.mark.skipif(shutil.which("mkfs.ext4") is None, reason="needs mkfs.ext4")
def test_a_loop_inside_a_loops_filesystem_lands_on_the_disk_under_both(
        tmp_path: Path, attached: list[str]) -> None:
    expected = disks_under(tmp_path)
    outer = attach(sparse(tmp_path / "outer.img", 64))
    attached.append(outer)
    subprocess.run(["mkfs.ext4", "-q", "-F", f"/dev/{outer}"], check=True, timeout=60,
                   capture_output=True)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(["mount", f"/dev/{outer}", str(mnt)], check=True, timeout=30)
    try:
        inner = attach(sparse(mnt / "inner.img", 8))
        try:
            assert loop_backing_dev(inner) == os.stat(f"/dev/{outer}").st_rdev
            assert backing_disks(inner) == tuple(expected)
        finally:
            detach(inner)
    finally:
        subprocess.run(["umount", str(mnt)], check=True, timeout=30)


def test_the_disk_under_a_loop_carries_the_daemon_that_holds_the_loop(
        tmp_path: Path, attached: list[str]) -> None:
    """A process the kernel calls ceph-osd holding /dev/loopN open (as BlueStore holds its
    block device): the loop carries it, as `ceph osd metadata` names it, and so does the
    disk under the loop's file; the daemon itself holds only the loop."""
    expected = disks_under(tmp_path)
    name = attach(sparse(tmp_path / "osd.img"))
    attached.append(name)
    shell = tmp_path / "ceph-osd"
    shell.symlink_to(shutil.which("sh") or "/bin/sh")
    proc = subprocess.Popen([str(shell), "-c", f"exec 3</dev/{name}; while sleep 1; do :; done",
                             "-i", "78"])
    src = HostSource(hostname="h1", watch=False)
    try:
        def held():
            d = src.poll().daemons.get("osd.78")
            return d if d is not None and d.devices else None
        daemon = eventually(held, 10, interval=0.2)
        assert daemon.devices == (name,)
        time.sleep(0.2)
        disks = src.poll().disks
    finally:
        proc.kill()
        proc.wait()
        src.close()
    loop = disks[f"h1:/dev/{name}"]
    assert loop.daemons == ("osd.78",) and loop.virtual and loop.backing == tuple(expected)
    for disk in expected:
        assert "osd.78" in disks[f"h1:/dev/{disk}"].daemons
        assert disks[f"h1:/dev/{disk}"].backing == ()
