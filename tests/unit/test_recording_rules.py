"""stormdeck's recording rules (assets/stormdeck-recording.yml): written from the queries,
passed by promtool, and giving on Prometheus' own engine (promtool test rules) the figures
the raw queries give, duplicated scrape jobs counted once; the source's choice of them."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stormdeck.collectors.prometheus.queries import (
    ALL_QUERIES,
    DIVIDED_BY,
    RECORDED,
    RECORDED_PROBE,
    RECORDED_QUERIES,
    RECORDING_RULES,
    WHOLE_QUERIES,
    recording_rules_yaml,
)
from stormdeck.collectors.prometheus.source import PrometheusSource
from tests.prometheus_wire import Answers, row

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED = ROOT / "assets" / "stormdeck-recording.yml"
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool is not installed (./dev setup: prometheus)")


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def test_the_shipped_file_is_the_one_the_queries_write() -> None:
    # Edit queries.py, then: python -c 'from stormdeck.collectors.prometheus.queries
    # import recording_rules_yaml as r; print(r(), end="")' > assets/stormdeck-recording.yml
    assert SHIPPED.read_text() == recording_rules_yaml()
    rules = yaml.safe_load(SHIPPED.read_text())["groups"][0]["rules"]
    assert [r["record"] for r in rules] == [RECORDED + n for n in RECORDING_RULES]
    assert set(RECORDED_QUERIES) <= set(ALL_QUERIES)
    # What the issue names: IOPS, cores used, disk util and await joined to their host.
    assert {"read_iops", "write_iops", "cores_used", "disk_util", "disk_read_await",
            "disk_write_await"} <= set(RECORDED_QUERIES)
    assert all("nodename" in r["expr"] for r in rules if r["record"].startswith(
        RECORDED + "disk_"))


@needs_promtool
def test_the_shipped_rules_pass_promtool_check() -> None:
    res = promtool("check", "rules", str(SHIPPED))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(RECORDING_RULES)} rules found" in res.stdout


# Input series at 1 min steps, each counter's rate at 10 min (over [2m], three samples
# exactly two minutes apart: no extrapolation) chosen to be exact in binary floats. The
# mgr's and the exporters' series are scraped twice, under two jobs (Thanos without
# dedup): neither path may count them twice.
OSD0 = 'ceph_daemon="osd.0", instance="mgr"'
OSD1 = 'ceph_daemon="osd.1", instance="mgr"'
H1 = 'instance="h1:9100"'
SERIES: list[tuple[str, str]] = []
for job in ("ceph", "ceph-again"):
    SERIES += [
        (f'ceph_osd_op_r{{{OSD0}, job="{job}"}}', "0+600x12"),   # 10/s
        (f'ceph_osd_op_r{{{OSD1}, job="{job}"}}', "0+1200x12"),  # 20/s
        (f'ceph_osd_op_w{{{OSD0}, job="{job}"}}', "0+300x12"),   # 5/s
        (f'ceph_osd_op_r_out_bytes{{{OSD0}, job="{job}"}}', "0+6000x12"),
        (f'ceph_osd_op_w_in_bytes{{{OSD0}, job="{job}"}}', "0+12000x12"),
        (f'ceph_osd_op_r_latency_sum{{{OSD0}, job="{job}"}}', "0+15x12"),   # 0.025 s
        (f'ceph_osd_op_r_latency_count{{{OSD0}, job="{job}"}}', "0+600x12"),
        (f'ceph_osd_op_w_latency_sum{{{OSD0}, job="{job}"}}', "0+30x12"),   # 0.1 s
        (f'ceph_osd_op_w_latency_count{{{OSD0}, job="{job}"}}', "0+300x12"),
    ]
for job in ("stormdeck", "stormdeck-again"):
    # osd.0's CPU from stormdeck's exporter, which wins over ceph-exporter's below.
    SERIES.append((f'stormdeck_daemon_cpu_seconds_total{{ceph_daemon="osd.0", '
                   f'instance="h1:9567", job="{job}"}}', "0+30x12"))  # 0.5 core
for job in ("ceph-exporter", "ceph-exporter-again"):
    for daemon, mode, per_min in (("osd.0", "user", 120), ("osd.1", "user", 12),
                                  ("osd.1", "kernel", 12), ("osd.1", "idle", 600)):
        SERIES.append((f'ceph_exporter_cpu_total{{ceph_daemon="{daemon}", mode="{mode}", '
                       f'instance="h1:9926", job="{job}"}}', f"0+{per_min}x12"))
for job in ("node", "node-again"):
    SERIES += [
        (f'node_uname_info{{{H1}, nodename="h1.example", job="{job}"}}', "1x12"),
        (f'node_disk_io_time_seconds_total{{{H1}, device="sda", job="{job}"}}', "0+30x12"),
        (f'node_disk_reads_completed_total{{{H1}, device="sda", job="{job}"}}', "0+600x12"),
        (f'node_disk_writes_completed_total{{{H1}, device="sda", job="{job}"}}',
         "0+1200x12"),
        (f'node_disk_read_bytes_total{{{H1}, device="sda", job="{job}"}}', "0+60000x12"),
        (f'node_disk_written_bytes_total{{{H1}, device="sda", job="{job}"}}', "0+120000x12"),
        (f'node_disk_read_time_seconds_total{{{H1}, device="sda", job="{job}"}}', "0+15x12"),
        (f'node_disk_write_time_seconds_total{{{H1}, device="sda", job="{job}"}}', "0+60x12"),
        (f'node_disk_io_time_weighted_seconds_total{{{H1}, device="sda", job="{job}"}}',
         "0+90x12"),
    ]
EXPECTED: dict[str, list[tuple[str, float]]] = {
    "read_iops": [('{ceph_daemon="osd.0"}', 10), ('{ceph_daemon="osd.1"}', 20)],
    "write_iops": [('{ceph_daemon="osd.0"}', 5)],
    "read_bps": [('{ceph_daemon="osd.0"}', 100)],
    "write_bps": [('{ceph_daemon="osd.0"}', 200)],
    "op_read_latency": [('{ceph_daemon="osd.0"}', 0.025)],
    "op_write_latency": [('{ceph_daemon="osd.0"}', 0.1)],
    # osd.0: stormdeck's exporter (0.5), not ceph-exporter's 2.0; osd.1: user + kernel.
    "cores_used": [('{ceph_daemon="osd.0"}', 0.5), ('{ceph_daemon="osd.1"}', 0.4)],
    "disk_util": [(0.5, )],  # type: ignore[list-item]
    "disk_read_iops": [(10, )],  # type: ignore[list-item]
    "disk_write_iops": [(20, )],  # type: ignore[list-item]
    "disk_read_bps": [(1000, )],  # type: ignore[list-item]
    "disk_write_bps": [(2000, )],  # type: ignore[list-item]
    "disk_read_await": [(0.025, )],  # type: ignore[list-item]
    "disk_write_await": [(0.05, )],  # type: ignore[list-item]
    "disk_queue_depth": [(1.5, )],  # type: ignore[list-item]
}


def samples(name: str, raw: bool = False, times: float = 1.0) -> list[dict[str, Any]]:
    """The expected answer: recorded disk series name their host, the raw disk queries
    their scrape target (the source maps it to the host); `times` for a numerator."""
    disk = '{device="sda", instance="h1:9100"}' if raw else \
        '{device="sda", nodename="h1.example"}'
    out = []
    for want in EXPECTED[name]:
        labels, value = want if len(want) == 2 else (disk, want[0])
        out.append({"labels": labels, "value": value * times})
    return out


@needs_promtool
def test_recorded_and_raw_give_the_same_figures_on_prometheus_engine(tmp_path: Path) -> None:
    assert set(EXPECTED) == set(RECORDING_RULES)
    (tmp_path / "rules.yml").write_text(SHIPPED.read_text())
    cases = []
    for name in RECORDING_RULES:
        cases.append({"expr": RECORDED_QUERIES[name], "eval_time": "10m",
                      "exp_samples": samples(name)})
        if name in DIVIDED_BY:
            # The raw query is the numerator, which the source divides by its divisor's
            # figure; the whole figure is sent where the divisor is recorded.
            divisor = EXPECTED[DIVIDED_BY[name]][0][-1]
            cases.append({"expr": ALL_QUERIES[name], "eval_time": "10m",
                          "exp_samples": samples(name, raw=True, times=divisor)})
            cases.append({"expr": WHOLE_QUERIES[name], "eval_time": "10m",
                          "exp_samples": samples(name, raw=True)})
        else:
            cases.append({"expr": ALL_QUERIES[name], "eval_time": "10m",
                          "exp_samples": samples(name, raw=True)})
    doc = {"rule_files": ["rules.yml"], "evaluation_interval": "1m",
           "tests": [{"interval": "1m",
                      "input_series": [{"series": s, "values": v} for s, v in SERIES],
                      "promql_expr_test": cases}]}
    (tmp_path / "cases.yml").write_text(json.dumps(doc))
    res = promtool("test", "rules", "cases.yml", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    # The same cases fail where a figure is wrong: the test can fail.
    doc["tests"][0]["promql_expr_test"][0]["exp_samples"][0]["value"] = 11
    (tmp_path / "cases.yml").write_text(json.dumps(doc))
    assert promtool("test", "rules", "cases.yml", cwd=tmp_path).returncode != 0


@pytest.fixture
def answers() -> Iterator[Answers]:
    a = Answers()
    yield a
    a.close()


def test_the_source_reads_recorded_series_where_they_exist_and_raw_at_once_when_gone(
        answers: Answers) -> None:
    src = PrometheusSource(answers.url, timeout=5, scrape_interval=30)
    now = time.time()  # the mgr's newest scrape, as the answers give it
    try:
        answers.rows[src.queries["newest"]] = [row(now)]
        answers.rows[src.queries["up"]] = [row(1, ceph_daemon="osd.0")]
        answers.rows[RECORDED_PROBE] = [row(1, __name__="stormdeck:read_iops")]
        answers.rows[RECORDED_QUERIES["read_iops"]] = [row(42, ceph_daemon="osd.0")]
        answers.rows[src.queries["read_iops"]] = [row(41, ceph_daemon="osd.0")]
        part = src.poll()
        assert part.daemons["osd.0"].read_iops == 42
        assert src.mode == f"recording rules for 1 of {len(RECORDED_QUERIES)} queries"
        assert src.queries["read_iops"] not in answers.asked  # not asked twice
        # Every recorded series there: the header says so plainly.
        answers.rows[RECORDED_PROBE] = [row(1, __name__=RECORDED + n)
                                        for n in RECORDED_QUERIES]
        for expr in RECORDED_QUERIES.values():
            answers.rows.setdefault(expr, [row(1, ceph_daemon="osd.0", nodename="h1",
                                               device="sda")])
        src.forget_newest()
        src._probe_mono = None
        src.poll()
        assert src.mode == "recording rules"
        # The rules unloaded: the recorded series go empty, the same read takes the raw
        # query, and the next probe finds none.
        answers.rows[RECORDED_PROBE] = []
        for expr in RECORDED_QUERIES.values():
            del answers.rows[expr]
        answers.rows[src.queries["newest"]] = [row(now + 15)]
        part = src.poll()
        assert part.daemons["osd.0"].read_iops == 41 and not part.errors
        answers.rows[src.queries["newest"]] = [row(now + 30)]
        src.poll()
        assert src.mode == "raw queries"
    finally:
        src.close()


def test_an_override_wins_over_a_recorded_series_and_rules_can_be_refused(
        answers: Answers) -> None:
    mine = "max by (ceph_daemon) (site:osd_reads:rate5m)"
    src = PrometheusSource(answers.url, timeout=5, queries={"read_iops": mine})
    raw = PrometheusSource(answers.url, timeout=5, recording_rules=False)
    now = time.time()
    try:
        answers.rows[src.queries["newest"]] = [row(now)]
        answers.rows[src.queries["up"]] = [row(1, ceph_daemon="osd.0")]
        answers.rows[RECORDED_PROBE] = [row(1, __name__=RECORDED + n)
                                        for n in RECORDED_QUERIES]
        answers.rows[mine] = [row(7, ceph_daemon="osd.0")]
        assert src.poll().daemons["osd.0"].read_iops == 7
        assert "read_iops" not in src._recorded
        assert RECORDED_QUERIES["read_iops"] not in answers.asked
        n = len(answers.asked)
        raw.poll()
        assert RECORDED_PROBE not in answers.asked[n:] and raw.mode == "raw queries"
    finally:
        src.close()
        raw.close()
