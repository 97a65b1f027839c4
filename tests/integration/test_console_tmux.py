"""The real console in a real terminal (tmux) against the lab under load, read off the screen."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import LabCluster, eventually

pytestmark = pytest.mark.integration


def test_every_osd_row_shows_cores_under_load(lab_cluster: LabCluster, tmp_path: Path) -> None:
    sock = f"stormdeck-test-{os.getpid()}"
    tmux = ["tmux", "-L", sock]
    cmd = " ".join(shlex.quote(x) for x in [
        "env", f"XDG_STATE_HOME={tmp_path}", "TERM=xterm-256color", sys.executable, "-m",
        "stormdeck", "watch", "-c", str(lab_cluster.conf)])
    assert lab_cluster.cli("lab", "load", "--threads", "16").rc == 0
    subprocess.run([*tmux, "new-session", "-d", "-s", "sd", "-x", "160", "-y", "48",
                    "-c", str(Path(__file__).parents[2]), cmd], check=True)
    try:
        def screen() -> str:
            return subprocess.run([*tmux, "capture-pane", "-t", "sd", "-p"],
                                  capture_output=True, text=True).stdout

        eventually(lambda: "ceph ok" in screen(), 60)
        subprocess.run([*tmux, "send-keys", "-t", "sd", "2"], check=True)

        def busy_rows() -> dict[str, float]:
            rows = {}
            for line in screen().splitlines():
                m = re.match(r"\s*(osd\.\d+)\s.*?(\d+\.\d+)/(\d+)", line)
                if m:
                    rows[m.group(1)] = float(m.group(2))
            return rows if len(rows) == 3 and all(v > 0 for v in rows.values()) else {}

        rows = eventually(busy_rows, 60)
        assert set(rows) == {"osd.0", "osd.1", "osd.2"}
    finally:
        subprocess.run([*tmux, "kill-server"], capture_output=True)
        lab_cluster.cli("lab", "load", "--stop")
