"""The pooling benchmarks (bench/curve_bench.py, bench/prometheus_bench.py) run: their --smoke."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("bench", ["curve_bench.py", "prometheus_bench.py"])
def test_bench_smoke(bench: str) -> None:
    res = subprocess.run([sys.executable, str(ROOT / "bench" / bench), "--smoke"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert "connections" in res.stdout, res.stdout
