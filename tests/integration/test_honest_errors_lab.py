"""On the real lab: each way of not reaching Ceph is its own sentence, and a report marks
a frozen monitor as a gap of the length it had."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from stormdeck.advisors.ceph_admin import CephAdmin
from stormdeck.base.errors import UserError
from stormdeck.lab import procs
from tests.conftest import LabCluster, eventually, run_cli

pytestmark = pytest.mark.integration
FREEZE = 12.0  # seconds the mon is stopped, as in the issue
REPO_ROOT = Path(__file__).resolve().parents[2]


def conf_copy(lab: LabCluster, where: Path, **client: str) -> Path:
    """The lab's ceph.conf with the client's auth settings (and others) replaced."""
    text = lab.conf.read_text()
    for key, value in client.items():
        name = key.replace("_", " ")
        lines = [ln for ln in text.splitlines() if not ln.strip().startswith(name + " =")]
        at = lines.index("[global]") + 1
        lines.insert(at, f"{name} = {value}")
        text = "\n".join(lines) + "\n"
    path = where / "ceph.conf"
    path.write_text(text)
    return path


def admin_error(conf: Path, timeout: float = 5.0) -> str:
    admin = CephAdmin(str(conf), timeout=timeout)
    try:
        with pytest.raises(UserError) as caught:
            admin.fsid()
    finally:
        admin.close()
    return str(caught.value)


def test_keyring_missing_access_denied_and_no_mon_are_three_sentences(
        lab_cluster: LabCluster, tmp_path: Path) -> None:
    # The lab runs with auth none; a client that requires cephx needs a keyring.
    (tmp_path / "nokey").mkdir()
    nokey = conf_copy(lab_cluster, tmp_path / "nokey", auth_client_required="cephx",
                      keyring="/nonexistent")
    res = run_cli("check", "-c", str(nokey), "--no-host", "--for", "1", "--timeout", "5")
    assert res.rc == 3, res.err
    assert "no keyring at /nonexistent, and client.admin must authenticate with cephx" \
        in res.err and "object not found" not in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1, res.err
    missing = admin_error(nokey)
    assert "no keyring at /nonexistent" in missing

    # A key the monitors do not accept: Ceph says EACCES.
    (tmp_path / "badkey").mkdir()
    keyring = tmp_path / "badkey" / "keyring"
    keyring.write_text("[client.admin]\n\tkey = AQBxq1xlAAAAABAAV1DzO7nI0yYvM8i1zBLgKA==\n")
    badkey = conf_copy(lab_cluster, tmp_path / "badkey", auth_client_required="cephx",
                       keyring=str(keyring))
    denied = admin_error(badkey)
    assert "access denied: the monitors at" in denied and str(keyring) in denied, denied

    # Nobody at the monitor's address: a timeout.
    (tmp_path / "nomon").mkdir()
    nomon = conf_copy(lab_cluster, tmp_path / "nomon", mon_host="127.0.0.1:9")
    unreachable = admin_error(nomon, timeout=3)
    assert "no monitor answered at 127.0.0.1:9 within 3 s" in unreachable, unreachable

    sentences = {missing, denied, unreachable}
    assert len(sentences) == 3 and not any("object not found" in s for s in sentences)


def mon_pid(lab: LabCluster) -> int:
    state = json.loads((lab.dir / "lab.json").read_text())
    return int(state["procs"]["mon.a"]["pid"])


@contextmanager
def frozen(lab: LabCluster) -> Iterator[float]:
    """The lab's mon stopped (SIGSTOP) and always continued on the way out; yields the
    wall time it stopped at."""
    pid = mon_pid(lab)
    marker = str(lab.dir) + "/"
    assert procs.is_ours(pid, marker), pid
    os.kill(pid, signal.SIGSTOP)
    try:
        eventually(lambda: psutil.Process(pid).status() == psutil.STATUS_STOPPED, 10,
                   interval=0.1)
        yield time.time()
    finally:
        if procs.is_ours(pid, marker):
            os.kill(pid, signal.SIGCONT)


def test_a_report_shows_a_frozen_mon_as_a_gap_of_its_length(
        lab_cluster: LabCluster, tmp_path: Path) -> None:
    path = tmp_path / "freeze.rec"
    recorder = subprocess.Popen(
        [sys.executable, "-m", "stormdeck", "record", str(path), "--for", "34", "-c",
         str(lab_cluster.conf), "--timeout", "3", "--no-host"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(8)  # answers first, so the gap has a start
        with frozen(lab_cluster) as stopped:
            time.sleep(FREEZE)
        thawed = time.time()
        _, err = recorder.communicate(timeout=90)
    finally:
        if recorder.poll() is None:
            recorder.kill()
    assert recorder.returncode == 0, err
    js = run_cli("report", str(path), "--json")
    assert js.rc == 0, js.err
    gaps = [o for o in json.loads(js.out)["outages"] if o["source"] == "ceph"]
    assert len(gaps) == 1, gaps
    gap = gaps[0]
    # From its last answer (at most a poll before the freeze) to the first answer after
    # it (the mon's catching up and a reconnect): the freeze, give or take a few seconds.
    assert stopped - 2 <= gap["start"] <= stopped + 0.5, (gap, stopped)
    assert thawed - 0.5 <= gap["end"] <= thawed + 6, (gap, thawed)
    assert FREEZE - 1 <= gap["seconds"] <= FREEZE + 7, gap
    md = run_cli("report", str(path))
    assert md.rc == 0, md.err
    assert "**Data gap**: ceph did not answer from" in md.out
    assert f"({gap['seconds']:.0f} s)" in md.out
    assert "ceph stopped answering" in md.out and "ceph answering again" in md.out
