"""Every benchmark in bench/ runs in its smoke mode (small N, a few seconds), so none can
break unseen: the figures are the benchmarks' business, that they run is the tests'."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHES = sorted(p.name for p in (ROOT / "bench").glob("*_bench.py"))


def run(name: str, *extra: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([sys.executable, str(ROOT / "bench" / name), "--smoke", *extra],
                         capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, f"{name} --smoke failed:\n{res.stdout}\n{res.stderr}"
    return res


def test_every_bench_has_a_smoke_test() -> None:
    tested = {"snapshot_bench.py", "scale_bench.py", "console_bench.py", "record_bench.py",
              "curve_bench.py", "exporter_bench.py", "prometheus_bench.py", "fleet_bench.py",
              "blast_bench.py", "fleet_read_bench.py", "experiment_bench.py"}
    assert set(BENCHES) == tested, "a new bench needs its smoke run here"


@pytest.mark.parametrize("name", ["snapshot_bench.py", "record_bench.py", "curve_bench.py",
                                  "exporter_bench.py", "console_bench.py",
                                  "prometheus_bench.py", "fleet_read_bench.py",
                                  "experiment_bench.py"])
def test_bench_runs_in_smoke_mode(name: str) -> None:
    res = run(name)
    assert res.stdout.strip(), f"{name} printed no figure"
    if name in ("curve_bench.py", "prometheus_bench.py"):  # the pooling benches
        assert "connections" in res.stdout, res.stdout
    if name == "experiment_bench.py":  # the recorded counters read and judged
        assert "recorded counters, 4 OSDs" in res.stdout, res.stdout
    if name == "fleet_read_bench.py":  # both encodings read the whole planted fleet
        assert "median gzip" in res.stdout and "median identity" in res.stdout, res.stdout
        assert res.stdout.count(" 20 OSDs") == 2, res.stdout


def test_scale_bench_gives_every_figure_as_json() -> None:
    res = run("scale_bench.py", "--json")
    out = json.loads(res.stdout)
    console, record = out["console"], out["record"]
    for part in (console, record):
        assert part["ticks"] > 0 and part["missed"] == 0
        # CPU seconds come in clock ticks of 10 ms: three ticks of a 60-OSD loop may use
        # less than one, so the smoke run's CPU figure can be 0.0 (seen on a quiet machine).
        assert math.isfinite(part["cpu_pct"]) and part["cpu_pct"] >= 0
        assert part["peak_rss_mib"] > 0 and part["engine_ms"] > 0
    assert 0 < console["first_paint_s"] < 30 and console["bytes_per_s"] > 0
    assert out["seek"]["snapshots"] > 0 and out["seek"]["seek_back_s"] >= 0
    assert out["check"]["after_second_poll_s"] >= 0


@pytest.mark.skipif(shutil.which("osdmaptool") is None, reason="needs osdmaptool (ceph-base)")
def test_blast_bench_predicts_the_pgs_osdmaptool_moves() -> None:
    out = json.loads(run("blast_bench.py", "--json").stdout)
    assert out["verify"]["same"] and out["pgs_remapped"] > 0
    assert out["total_s"] > 0 and "crush_do_rule" in out["method"]


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="needs prometheus on PATH")
def test_fleet_bench_reads_the_planted_fleet_through_a_real_prometheus() -> None:
    out = json.loads(run("fleet_bench.py", "--json").stdout)
    polls, console = out["polls"], out["console"]
    assert polls["osds"] == 40 and polls["reading_polls"] >= 1
    assert polls["series_per_read"] > 40 and polls["mb_per_read"] > 0
    assert console["ticks"] > 0 and console["peak_rss_mib"] > 0
    assert math.isfinite(console["cpu_pct"]) and math.isfinite(out["prometheus_idle_pct"])
