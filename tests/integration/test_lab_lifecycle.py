"""`lab up`, `status` and `down` leave nothing behind, also after `up` itself crashed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_ports, lab_port_args, run_cli

pytestmark = pytest.mark.integration


def leftovers(directory: Path) -> list[str]:
    """Every trace a lab in `directory` could leave: processes, loop devices, mounts, files."""
    found = []
    marker = str(directory) + "/"
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            stat = (pid_dir / "stat").read_text()
            argv = (pid_dir / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if stat[stat.rindex(")") + 2] != "Z" and marker in argv:
            found.append(f"process {pid_dir.name}: {argv.replace(chr(0), ' ')}")
    loops = subprocess.run(["losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE"],
                           capture_output=True, text=True, check=True).stdout
    found += [f"loop device {line}" for line in loops.splitlines() if str(directory) in line]
    mounts = Path("/proc/mounts").read_text()
    found += [f"mount {line}" for line in mounts.splitlines() if str(directory) in line]
    if directory.exists():
        found.append(f"directory {directory}")
    return found


def test_up_status_down_leaves_nothing_behind(lab_dir: Path) -> None:
    directory = lab_dir
    up = run_cli("lab", "up", "--osds", "1", "--dir", str(directory), *lab_port_args(free_ports(5)))
    try:
        assert up.rc == 0, up.err
        status = run_cli("lab", "status", "--json", "--dir", str(directory))
        assert status.rc == 0
        state = json.loads(status.out)
        assert state["running"] and state["osds"] == {"up": 1, "total": 1}
        assert leftovers(directory), "the lab should be visible while it runs"
    finally:
        down = run_cli("lab", "down", "--dir", str(directory))
    assert down.rc == 0, down.err
    assert leftovers(directory) == []
    after = run_cli("lab", "status", "--dir", str(directory))
    assert after.rc == 1 and "no lab" in after.out


def test_down_cleans_up_after_up_was_killed_midway(lab_dir: Path) -> None:
    directory = lab_dir
    argv = [sys.executable, "-m", "stormdeck", "lab", "up", "--osds", "2",
            "--dir", str(directory), *lab_port_args(free_ports(5))]
    up = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          cwd=Path(__file__).parents[2])
    state_file = directory / "lab.json"
    try:
        # Kill `up` as a lost SSH session would, once an OSD is running.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                procs = json.loads(state_file.read_text())["procs"]
            except (OSError, ValueError):
                procs = {}
            if procs.get("osd.0", {}).get("pid"):
                break
            assert up.poll() is None, "lab up ended before it could be interrupted"
            time.sleep(0.1)
        else:
            pytest.fail("lab up never started osd.0")
        os.kill(up.pid, signal.SIGKILL)
        up.wait()
        assert leftovers(directory), "the killed up should have left a lab behind"
        again = run_cli("lab", "up", "--dir", str(directory))
        assert again.rc == 3 and ("already running" in again.err or "left in" in again.err)
    finally:
        down = run_cli("lab", "down", "--dir", str(directory))
    assert down.rc == 0, down.err
    assert leftovers(directory) == []
