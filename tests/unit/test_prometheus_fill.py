"""Pools' fill in fleet mode, from the mgr module's `df` series on a captured Pacific page
(bench/data): the same Pool fields librados' `df` fills, so the fullness rule and views
read them alike."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from stormdeck.collectors.ceph.usage import parse_df
from stormdeck.collectors.prometheus.source import PrometheusSource
from tests.prometheus_wire import Answers

PAGE = Path(__file__).resolve().parents[2] / "bench" / "data" / "mgr-pacific-16.2.15.prom"
_LINE = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$")


def page_rows(*names: str) -> dict[str, list[dict[str, object]]]:
    """The page's samples of `names`, as Prometheus answers an instant query of them."""
    out: dict[str, list[dict[str, object]]] = {n: [] for n in names}
    for line in PAGE.read_text().splitlines():
        m = _LINE.match(line)
        if m and m.group(1) in out:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            out[m.group(1)].append({"metric": labels,
                                    "value": [time.time(), m.group(3)]})
    return out


def test_pools_fill_as_librados_df_fills_them() -> None:
    rows = page_rows("ceph_pool_metadata", "ceph_pool_stored", "ceph_pool_max_avail",
                     "ceph_pool_percent_used")
    assert all(rows.values()), "the captured page lost its pool series"
    with Answers() as prom:
        src = PrometheusSource(prom.url, timeout=5)
        try:
            prom.rows[src.queries["newest"]] = [{"metric": {}, "value": [0, str(time.time())]}]
            prom.rows[src.queries["pools"]] = rows["ceph_pool_metadata"]
            # What `max by (__name__, pool_id)` answers: each sample with its name.
            prom.rows[src.queries["pool_fill"]] = [
                {"metric": {"__name__": name, "pool_id": s["metric"]["pool_id"]},
                 "value": s["value"]}
                for name in ("ceph_pool_stored", "ceph_pool_max_avail",
                             "ceph_pool_percent_used") for s in rows[name]]
            part = src.poll()
        finally:
            src.close()
    assert part.cluster is not None
    pools = {p.name: p for p in part.cluster.pools}
    assert set(pools) == {"device_health_metrics", "bt"}
    bt = pools["bt"]
    assert (bt.stored_bytes, bt.max_avail_bytes) == (62914560, 2524935680)
    assert bt.used_ratio == pytest.approx(0.02431151457130909)
    # The same figures librados' `df` gives for the same pool (collectors/ceph/usage.py).
    df = parse_df({"pools": [{"name": "bt", "stats": {
        "stored": 62914560, "max_avail": 2524935680, "percent_used": 0.02431151457130909}}]})
    assert df["bt"] == (bt.stored_bytes, pytest.approx(bt.used_ratio), bt.max_avail_bytes)
    assert pools["device_health_metrics"].used_ratio == 0.0


def test_without_percent_used_the_ratio_is_stored_over_stored_and_avail() -> None:
    from stormdeck.collectors.prometheus.decode import _fill

    assert _fill({"stored": 25.0, "max_avail": 75.0}) == (25, 75, 0.25)
    assert _fill({"stored": 1.0, "max_avail": 0.0, "percent_used": 1.2}) == (1, 0, 1.0)
    assert _fill({}) == (None, None, None)
