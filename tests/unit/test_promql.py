"""The label matcher: checked as Prometheus would, and put into every vector selector.

Checked on stormdeck's own queries (collectors/prometheus/queries.py) and on ceph-mixin's alert
expressions, and every rewritten expression is parsed by Prometheus' own promtool.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from stormdeck.collectors.prometheus.promql import MatcherError, inject, parse_matchers
from stormdeck.collectors.prometheus.queries import ALL_QUERIES, RATE, rate_window
from stormdeck.collectors.prometheus.source import PrometheusSource

M = 'cluster="prod"'

# From ceph/ceph monitoring/ceph-mixin/prometheus_alerts.yml (commit 7c1cf228):
# CephMonDownQuorumAtRisk, CephMonDown, CephOSDDownHigh, CephOSDFlapping.
MIXIN = {
    """(
  (ceph_health_detail{name="MON_DOWN"} == 1) * on() (
    count(ceph_mon_quorum_status == 1) == bool (floor(count(ceph_mon_metadata) / 2) + 1)
  )
) == 1""": """(
  (ceph_health_detail{cluster="prod", name="MON_DOWN"} == 1) * on() (
    count(ceph_mon_quorum_status{cluster="prod"} == 1) == bool \
(floor(count(ceph_mon_metadata{cluster="prod"}) / 2) + 1)
  )
) == 1""",
    "count(ceph_mon_quorum_status == 0) <= (count(ceph_mon_metadata) - "
    "floor(count(ceph_mon_metadata) / 2) + 1)":
    'count(ceph_mon_quorum_status{cluster="prod"} == 0) <= (count(ceph_mon_metadata'
    '{cluster="prod"}) - floor(count(ceph_mon_metadata{cluster="prod"}) / 2) + 1)',
    "count(ceph_osd_up == 0) / count(ceph_osd_up) * 100 >= 10":
    'count(ceph_osd_up{cluster="prod"} == 0) / count(ceph_osd_up{cluster="prod"}) * 100 >= 10',
    "(rate(ceph_osd_up[5m]) * on(ceph_daemon) group_left(hostname) ceph_osd_metadata) "
    "* 60 > 1":
    '(rate(ceph_osd_up{cluster="prod"}[5m]) * on(ceph_daemon) group_left(hostname) '
    'ceph_osd_metadata{cluster="prod"}) * 60 > 1',
}

OURS = {
    "cores_used": 'max by (ceph_daemon) (rate(stormdeck_daemon_cpu_seconds_total'
                  '{cluster="prod"}[2m])) or sum by (ceph_daemon) (max by (ceph_daemon, mode) '
                  '(rate(ceph_exporter_cpu_total{cluster="prod", mode=~"user|kernel|system"}'
                  '[2m])))',
    "disk_read_await": 'max by (instance, device) (rate(node_disk_read_time_seconds_total'
                       '{cluster="prod"}[2m]))',
    "nodes": 'max by (instance, nodename) (node_uname_info{cluster="prod"})',
    "pg_flags": 'sum by (__name__) (max by (__name__, pool_id) ({cluster="prod", '
                '__name__=~"ceph_pg_[a-z_]+", __name__!="ceph_pg_total"}))',
    "flags": 'max by (__name__) ({cluster="prod", __name__=~"ceph_osd_flag_.+"}) == 1',
    "curve_write_latency": '{cluster="prod", __name__=~"chunkserver_[0-9_]+_write_lat_latency"}'
                           ' / 1e6',
    "commit_latency": 'max by (ceph_daemon) (ceph_osd_commit_latency_ms{cluster="prod"}) / 1000',
    "newest": 'max(timestamp(ceph_health_status{cluster="prod"}))',
}


@pytest.mark.parametrize("name", sorted(OURS))
def test_our_queries_get_the_matcher_in_every_selector(name: str) -> None:
    assert inject(ALL_QUERIES[name], M) == OURS[name]


@pytest.mark.parametrize("expr", sorted(MIXIN))
def test_ceph_mixins_expressions_get_it_too(expr: str) -> None:
    assert inject(expr, M) == MIXIN[expr]


@pytest.mark.parametrize("interval, window", [(30.0, "120s"), (5.0, "20s"), (15, "60s"),
                                              (60.0, "240s"), (0.1, "1s")])
def test_every_rate_spans_four_scrapes(interval: float, window: str) -> None:
    assert rate_window(interval) == window
    src = PrometheusSource("http://127.0.0.1:9", curve=True, scrape_interval=interval)
    src.close()
    rated = [q for q in src.queries.values() if "rate(" in q]
    assert len(rated) >= 15
    assert all(f"[{window}]" in q and f"[{RATE}]" not in q for q in rated), rated


def test_what_is_not_a_selector_is_left_alone() -> None:
    assert inject('label_replace(up, "a", "$1", "job", "(.*)")', M) == \
        'label_replace(up{cluster="prod"}, "a", "$1", "job", "(.*)")'
    assert inject("max_over_time(up[5m:30s] offset 1h)", M) == \
        'max_over_time(up{cluster="prod"}[5m:30s] offset 1h)'
    assert inject("sum without (instance) (up) and ignoring (job) vector(1)", M) == \
        'sum without (instance) (up{cluster="prod"}) and ignoring (job) vector(1)'
    assert inject('up{job="a}b"} # a comment with up in it', M) == \
        'up{cluster="prod", job="a}b"} # a comment with up in it'
    assert inject("up", "") == "up"


@pytest.mark.parametrize("text, normal", [
    ('cluster="prod"', 'cluster="prod"'),
    ('{cluster="prod", dc=~"eu.*"}', 'cluster="prod",dc=~"eu.*"'),
    ("cluster != 'x'", "cluster!='x'"),
])
def test_matchers_are_read_as_prometheus_writes_them(text: str, normal: str) -> None:
    assert parse_matchers(text) == normal


@pytest.mark.parametrize("text", ["cluster=prod", "cluster", '"prod"', 'cluster="prod" dc="a"',
                                  'cluster="prod",', "", '1a="x"', 'a=="x"'])
def test_a_bad_matcher_says_so(text: str) -> None:
    with pytest.raises(MatcherError, match="label matchers like"):
        parse_matchers(text)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian: prometheus)")
def test_prometheus_parses_every_rewritten_expression(tmp_path: Path) -> None:
    """promtool parses a rule file with Prometheus' own PromQL parser.

    Our queries as the source sends them: with the matcher and a rate window of its own.
    """
    m = 'cluster="prod",dc=~"eu.*"'
    src = PrometheusSource("http://127.0.0.1:9", match=m, curve=True, scrape_interval=7.5)
    src.close()
    exprs = [*src.queries.values(), *(inject(e, m) for e in MIXIN)]
    rules = ["groups:", "  - name: injected", "    rules:"]
    for i, e in enumerate(exprs):
        body = "\n".join("          " + line for line in e.splitlines())
        rules += [f"      - record: stormdeck:test_{i}", "        expr: |", body]
    path = tmp_path / "rules.yml"
    path.write_text("\n".join(rules) + "\n")
    res = subprocess.run(["promtool", "check", "rules", str(path)], capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in res.stdout
