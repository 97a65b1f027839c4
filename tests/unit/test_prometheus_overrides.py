"""The Prometheus source's query overrides and tenant, from the command line and the config
file: reaching the source, and a bad one refused in one sentence with exit 3."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stormdeck.base.errors import UserError
from stormdeck.cli import build_parser
from stormdeck.collectors.prometheus.promql import MatcherError, check_query
from stormdeck.collectors.prometheus.source import PrometheusSource
from stormdeck.config import choose_cluster, load_clusters
from stormdeck.sources import prometheus_source
from tests.prometheus_wire import Answers

MINE = "max by (ceph_daemon) (site:ceph_osd_op_r:rate5m)"
CONFIG = f"""
[clusters.prod]
prometheus = "http://127.0.0.1:9"
prometheus_org_id = "tenant-1"

[clusters.prod.prometheus_query]
read_iops = '{MINE}'
disk_util = 'max by (nodename, device) (site:disk_util)'
"""


def test_overrides_and_the_tenant_reach_the_source_from_the_config(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(CONFIG)
    (prod,) = load_clusters(path)
    assert prod.sources.prometheus_query == [
        ("read_iops", MINE), ("disk_util", "max by (nodename, device) (site:disk_util)")]
    assert prod.sources.prometheus_org_id == "tenant-1"
    # As `stormdeck snapshot --config FILE` takes the cluster: the file's keys, then the source.
    args = build_parser().parse_args(["snapshot", "--config", str(path)])
    choose_cluster(args)
    src = prometheus_source(args)
    try:
        assert src.queries["read_iops"] == MINE
        assert src.client._headers["X-Scope-OrgID"] == "tenant-1"
        assert "read_iops" not in src._recorded_queries  # a recorded series never replaces it
        assert "write_iops" in src._recorded_queries
    finally:
        src.close()
    # The command line's overrides win over the file's, as any option does.
    args = build_parser().parse_args(["snapshot", "--config", str(path),
                                      "--prometheus-query", "read_iops=my:reads"])
    choose_cluster(args)
    assert args.prometheus_query == [("read_iops", "my:reads")]


def test_the_command_line_takes_repeated_overrides() -> None:
    args = build_parser().parse_args([
        "snapshot", "--prometheus", "http://127.0.0.1:9",
        "--prometheus-query", f"read_iops={MINE}",
        "--prometheus-query", "up = max by (ceph_daemon) (ceph_osd_up{job='ceph'})"])
    src = prometheus_source(args)
    try:
        assert src.queries["read_iops"] == MINE
        assert src.queries["up"] == "max by (ceph_daemon) (ceph_osd_up{job='ceph'})"
    finally:
        src.close()


@pytest.mark.parametrize("table, words", [
    ("read_iop = 'x'", r"prometheus_query.read_iop is not allowed: it names no Prometheus "
                       r"query 'read_iop' \(did you mean read_iops"),
    ("read_iops = 'sum(rate(x[1m])'", r"read_iops is not allowed: it has PromQL for "
                                      r"read_iops that Prometheus would refuse \(unbalanced"),
    ("read_iops = ''", "it is empty"),
    ("read_iops = 3", "takes PromQL text for read_iops"),
])
def test_a_bad_override_in_the_config_is_one_sentence(tmp_path: Path, table: str,
                                                      words: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f"[clusters.a]\nprometheus = 'http://p:9090'\n"
                    f"[clusters.a.prometheus_query]\n{table}\n")
    with pytest.raises(UserError, match=words):
        load_clusters(path)
    path.write_text("[clusters.a]\nprometheus_query = 3\n")
    with pytest.raises(UserError, match="it takes a table of query names and PromQL"):
        load_clusters(path)


@pytest.mark.parametrize("value, words", [
    ("read_iop=x", "names no Prometheus query 'read_iop'"),
    ("read_iops", "takes NAME=PROMQL"),
    ('read_iops=rate(x{a="b}[1m])', "would refuse (unterminated string"),
    ("read_iops=max(x", "would refuse (unbalanced ()"),
])
def test_a_bad_override_on_the_command_line_exits_3_in_one_sentence(value: str,
                                                                    words: str) -> None:
    res = subprocess.run([sys.executable, "-m", "stormdeck", "snapshot", "--prometheus",
                          "http://127.0.0.1:9", "--prometheus-query", value],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 3, res.stderr
    assert words in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_check_query_passes_what_the_lexer_passes() -> None:
    for good in ('max by (ceph_daemon) (rate(x{a=")("}[2m]))', "up # a comment (",
                 "sum(x) / sum(y)"):
        assert check_query(good) == good
    for bad in ("", "  ", "max(x))", "(x", 'x{a="b"', "x[2m"):
        with pytest.raises(MatcherError):
            check_query(bad)


def test_an_override_prometheus_refuses_is_named_as_one() -> None:
    with Answers() as prom:
        src = PrometheusSource(prom.url, timeout=5, queries={"read_iops": "my:reads"})
        try:
            prom.refused = {"my:reads", src.queries["write_iops"]}
            errors = src.poll().errors
        finally:
            src.close()
    mine = [e for e in errors if "read_iops" in e]
    theirs = [e for e in errors if "write_iops" in e]
    assert len(mine) == 1 and "the query is overridden: --prometheus-query" in mine[0], errors
    assert len(theirs) == 1 and "overridden" not in theirs[0], errors
