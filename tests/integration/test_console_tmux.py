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


class Tmux:
    """The real console in a tmux pane of a given size, read off the screen."""

    def __init__(self, args: list[str], size: tuple[int, int], state: Path) -> None:
        self.cmd = ["tmux", "-L", f"stormdeck-test-{os.getpid()}-{size[0]}"]
        line = " ".join(shlex.quote(x) for x in [
            "env", f"XDG_STATE_HOME={state}", "TERM=xterm-256color", sys.executable, "-m",
            "stormdeck", *args])
        subprocess.run([*self.cmd, "new-session", "-d", "-s", "sd", "-x", str(size[0]),
                        "-y", str(size[1]), "-c", str(Path(__file__).parents[2]), line],
                       check=True)

    def header(self) -> str:
        """The docked header: its first line, and its second when it wraps."""
        return " ".join(self.screen()[:2])

    def screen(self) -> list[str]:
        out = subprocess.run([*self.cmd, "capture-pane", "-t", "sd", "-p"],
                             capture_output=True, text=True).stdout
        return out.splitlines()

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.cmd, "send-keys", "-t", "sd", *keys], check=True)

    def close(self) -> None:
        subprocess.run([*self.cmd, "kill-server"], capture_output=True)


def lab_console_args(lab_cluster: LabCluster) -> list[str]:
    """What `lab status --json` says opens the console on the lab (as ./dev demo does)."""
    import json

    res = lab_cluster.cli("lab", "status", "--json")
    assert res.rc == 0, res.err
    return json.loads(res.out)["console"]


def test_at_80x24_help_and_quit_stay_on_screen_and_the_header_stays_put(
        lab_cluster: LabCluster, tmp_path: Path) -> None:
    import time

    args = lab_console_args(lab_cluster)
    assert "--prometheus" in args
    began = time.monotonic()
    tmux = Tmux(args, (80, 24), tmp_path)
    try:
        eventually(lambda: "ceph ok" in tmux.header(), 60)
        for key in "12345678":
            tmux.keys(key)

            def bar_and_header() -> bool:
                lines = tmux.screen()
                return len(lines) >= 23 and "?Help" in lines[-1] and "qQuit" in lines[-1] \
                    and lines[0].lstrip().startswith("stormdeck")

            eventually(bar_and_header, 15)
        tmux.keys("2", "/", "o", "s", "d", "Enter")
        eventually(lambda: "filter 'osd'" in tmux.header(), 15)
        # Enough frames behind to go 12 s back (the time it takes, not the length, is
        # what the suite pays: 30 s back cost 20 s more and proved nothing more).
        time.sleep(max(0.0, 18 - (time.monotonic() - began)))
        tmux.keys("g", "-", "1", "2", "Enter")

        def back() -> re.Match | None:
            return re.search(r"\d\d:\d\d:\d\d, (\d+) s back", tmux.header())

        m = eventually(back, 15)
        assert 10 <= int(m.group(1)) <= 14, m.group(0)
        header = tmux.header()
        assert "filter 'osd'" in header and "?Help" in tmux.screen()[-1], header
    finally:
        tmux.close()


def test_the_lab_console_fills_op_latency_from_prometheus(lab_cluster: LabCluster,
                                                          tmp_path: Path) -> None:
    """The demo's console reads the lab's Prometheus: the op r/w column is not `-/-`."""
    assert lab_cluster.cli("lab", "load", "--threads", "8").rc == 0
    tmux = Tmux(lab_console_args(lab_cluster), (80, 24), tmp_path)
    try:
        eventually(lambda: "ceph ok" in tmux.header(), 60)
        tmux.keys("4")

        def op_latency() -> list[str]:
            rows = [line.split() for line in tmux.screen() if re.match(r"\s*osd\.\d+\s", line)]
            filled = [r[-1] for r in rows if "/" in r[-1] and r[-1] != "-/-"]
            return filled if len(rows) == 3 and len(filled) == 3 else []

        assert eventually(op_latency, 120)
    finally:
        tmux.close()
        lab_cluster.cli("lab", "load", "--stop")
