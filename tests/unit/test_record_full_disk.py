"""A recording on a disk that fills: what was recorded before stays readable, and is said.

A real tmpfs of 64 KiB (root only), not an imitation of ENOSPC: the kernel decides
where the write stops, short or refused.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.base.errors import UserError
from stormdeck.collectors.recording import Recorder, Recording
from tests.captured import history
from tests.conftest import run_cli


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB filesystem with about `room` bytes left (set by the test through fill())."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    where = tmp_path / "tiny"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path, room: int) -> None:
    st = os.statvfs(where)
    free = st.f_bavail * st.f_frsize
    (where / "filler").write_bytes(b"\0" * max(0, free - room))


def test_the_snapshots_before_a_full_disk_stay_readable(tiny: Path) -> None:
    fill(tiny, 24 << 10)
    path = tiny / "rec"
    rec = Recorder(path, keyframe_every=5)
    snaps = history(400, step=1.0)
    with pytest.raises(UserError) as caught:
        for i, s in enumerate(snaps):
            # Values that move each poll, so that every frame costs space.
            cluster = replace(s.cluster, client_write_iops=1000.0 + i * 7.3,
                              osdmap_epoch=i)
            rec.add_snapshot(replace(s, cluster=cluster))
    kept = rec.snapshots
    assert 0 < kept < len(snaps)
    said = str(caught.value)
    assert f"the {kept} snapshot(s) recorded before it are kept and readable" in said
    assert "No space left on device" in said and str(path) in said
    rec.close()  # the recorder closed itself; closing again is harmless
    back = Recording(path)
    assert back.torn is None  # the torn frame was cut: the file ends on a whole frame
    assert len(back) == kept == len(list(back.snapshots()))
    assert back.torn is None


def test_record_on_a_full_disk_exits_3_and_says_what_is_kept(tiny: Path) -> None:
    fill(tiny, 6 << 10)
    path = tiny / "rec"
    res = run_cli("record", str(path), "--for", "40", "--interval", "0.1",
                  "--prometheus", "http://127.0.0.1:1", timeout=60)
    assert res.rc == 3, res.err
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.err, res.err
    assert "kept and readable" in lines[0] and f"stormdeck replay {path}" in lines[0]
    kept = int(lines[0].split("the ")[1].split(" snapshot")[0])
    assert kept > 0
    rep = run_cli("report", str(path), "--json")
    assert rep.rc == 0 and "torn" not in rep.err, rep.err
    assert f'"snapshots": {kept}' in rep.out


def test_a_full_disk_before_the_first_snapshot_leaves_no_empty_file(tiny: Path) -> None:
    fill(tiny, 0)
    with pytest.raises(UserError) as caught:
        rec = Recorder(tiny / "rec")
        rec.add_snapshot(history(1)[0])
    assert "No space left on device" in str(caught.value)
    assert not (tiny / "rec").exists()
