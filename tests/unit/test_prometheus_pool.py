"""The Prometheus source's queries run concurrently over one pooled session, credentials kept,
behind a proxy that adds a round trip (tests/prometheus_wire.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from stormdeck.collectors.prometheus.queries import (
    ALL_QUERIES,
    RECORDED_PROBE,
    SLOW_QUERIES,
    STATIC_QUERIES,
)
from stormdeck.collectors.prometheus.source import PrometheusSource
from tests.prometheus_wire import DelayProxy, StandIn

DELAY = 0.05


@pytest.fixture
def proxy() -> Iterator[DelayProxy]:
    with StandIn() as upstream, DelayProxy(upstream.url, DELAY) as p:
        yield p


@pytest.mark.parametrize(("ceph", "curve"), [(True, False), (False, True), (True, True)])
def test_a_poll_sends_each_query_once(proxy: DelayProxy, ceph: bool, curve: bool) -> None:
    src = PrometheusSource(proxy.url, timeout=5, ceph=ceph, curve=curve)
    try:
        part = src.poll()
    finally:
        src.close()
    assert not part.errors
    names = src.query_names()
    assert len(names) == len(set(names)) and set(names) <= set(ALL_QUERIES)
    # With Ceph's, one more: which recording rules' series exist (none here).
    probe = [RECORDED_PROBE] if ceph else []
    assert sorted(proxy.queries) == sorted([*(src.queries[n] for n in names), *probe])
    assert src.mode == "raw queries"


def test_queries_are_in_flight_together_over_kept_connections(proxy: DelayProxy,
                                                              tmp_path: Path) -> None:
    (tmp_path / "token").write_text("s3cret\n")
    src = PrometheusSource(proxy.url, timeout=5, curve=True, concurrency=6,
                           token_file=str(tmp_path / "token"))
    n = len(src.query_names())
    try:
        src.poll()
        src.poll()
    finally:
        src.close()
    # The second poll leaves out what changes only when daemons do (STATIC_QUERIES) and
    # what is read once a minute (SLOW_QUERIES); the
    # first asks which recording rules' series exist.
    assert proxy.requests == 2 * n - len(STATIC_QUERIES) - len(SLOW_QUERIES) + 1
    # One after another, the poll would hold at most one query at the proxy at a time;
    # at most `concurrency` at once, never more. Counted at the proxy, not timed: how long
    # the poll takes says more about the host than about the pool.
    assert 2 <= proxy.max_in_flight <= 6, proxy.max_in_flight
    # One pool for every query of both polls: no connection opened per query or per poll.
    assert proxy.connections <= 6, proxy.connections
    # Every concurrent request carried the bearer token, and nothing else.
    assert proxy.authorizations == {"Bearer s3cret"}


def test_basic_auth_on_every_concurrent_request(proxy: DelayProxy, tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("hunter2\n")
    src = PrometheusSource(proxy.url, timeout=5, user="stormdeck",
                           password_file=str(tmp_path / "pw"))
    try:
        src.poll()
    finally:
        src.close()
    assert proxy.authorizations == {"Basic c3Rvcm1kZWNrOmh1bnRlcjI="}  # stormdeck:hunter2
    assert proxy.max_in_flight >= 2


def test_the_label_matcher_narrows_every_concurrent_query(proxy: DelayProxy) -> None:
    src = PrometheusSource(proxy.url, timeout=5, match='cluster="prod"', curve=True)
    try:
        src.poll()
    finally:
        src.close()
    assert len(proxy.queries) == len(src.query_names()) + 1  # the recording rules probe too
    assert all('cluster="prod"' in q for q in proxy.queries), proxy.queries


def test_the_tenant_goes_with_every_query(proxy: DelayProxy) -> None:
    src = PrometheusSource(proxy.url, timeout=5, org_id="team-a")
    try:
        src.poll()
    finally:
        src.close()
    assert proxy.tenants == {"team-a"}
    with pytest.raises(ValueError, match="one line"):
        PrometheusSource(proxy.url, org_id="a\r\nX-Evil: 1")
