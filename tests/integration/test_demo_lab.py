"""`./dev demo` on a running lab, without a terminal: the status once, the console's
arguments with the lab's Prometheus, the man page and completions installed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import LabCluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_dev_demo_says_the_status_once_and_opens_the_console_with_prometheus(
        lab_cluster: LabCluster) -> None:
    man = ROOT / ".venv/share/man/man1/stormdeck.1"
    man.unlink(missing_ok=True)
    proc = subprocess.run([str(ROOT / "dev"), "demo", "--dir", str(lab_cluster.dir)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          stdin=subprocess.DEVNULL, env={**os.environ})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(f"lab {lab_cluster.dir}: running") == 1, proc.stdout
    console = f"--prometheus http://127.0.0.1:{lab_cluster.prometheus_port} " \
              "--prometheus-scrape-interval 5"
    assert f"stormdeck watch -c {lab_cluster.conf} {console}" in proc.stderr, proc.stderr
    assert man.is_file(), "the man page is installed as ./dev setup installs it"
