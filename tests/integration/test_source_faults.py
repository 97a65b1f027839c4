"""Sources under real faults: the monitor stopped, Prometheus stopped; errors shown, values kept."""

from __future__ import annotations

import time

import pytest

from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.host.source import HostSource
from stormdeck.collectors.hub import Hub
from stormdeck.collectors.prometheus.source import PrometheusSource
from tests.conftest import LabCluster, eventually

pytestmark = pytest.mark.integration


def test_mon_stopped_then_back(lab_cluster: LabCluster) -> None:
    hub = Hub([CephSource(conffile=str(lab_cluster.conf), timeout=3),
               HostSource(ceph_conf=str(lab_cluster.conf))], interval=0.5, timeout=6)
    hub.start()
    try:
        assert hub.wait_polls(1, timeout=30)
        good = hub.snapshot()
        assert good.sources["ceph"].ok and good.cluster and good.cluster.num_pgs
        assert lab_cluster.cli("lab", "stop", "mon.a").rc == 0
        try:
            def ceph_failing() -> bool:
                s = hub.snapshot().sources["ceph"]
                return not s.ok and s.stale

            eventually(ceph_failing, 30)
            bad = hub.snapshot()
            assert bad.sources["ceph"].error
            # The last good values stay on screen, marked stale; the host goes on.
            assert bad.cluster is not None and bad.cluster.num_pgs == good.cluster.num_pgs
            assert set(bad.daemons) == set(good.daemons)
            assert bad.sources["host"].ok
        finally:
            assert lab_cluster.cli("lab", "start", "mon.a").rc == 0
        eventually(lambda: hub.snapshot().sources["ceph"].ok, 90)
        recovered = hub.snapshot()
        assert not recovered.sources["ceph"].stale
        assert recovered.sources["ceph"].last_success > bad.sources["ceph"].last_success
    finally:
        hub.stop()
    # Leave the cluster as we found it for the tests after this one.
    src = CephSource(conffile=str(lab_cluster.conf))
    seen: list[str] = []
    try:
        def healthy() -> bool:
            c = src.poll().cluster
            if c is None:
                seen.append("no cluster read")
                return False
            seen.append(f"{c.num_up_osds} OSDs up, PG states {dict(c.pg_states or {})}, "
                        f"slow ops on {list(c.slow_ops_daemons)}")
            # What a mon restart can disturb: OSDs up, every PG active (none stale,
            # peering or unknown). Not a backfill the mgr's balancer began meanwhile: a
            # fresh-clone run waited 120 s on one ("active+remapped+backfilling": 1,
            # "backfill_wait": 1, every OSD up), which the loop-device OSDs finish at their
            # own pace and the tests after this one do not need finished.
            return c.num_up_osds == 3 and c.pgs_inactive == 0
        # A CI run once timed out here with no word of why: the last state read says it.
        assert wait_for(healthy, 120), seen[-1:]
    finally:
        src.close()


def wait_for(check, timeout: float) -> bool:
    """`eventually` that returns False instead of failing, so the caller's message shows."""
    try:
        eventually(check, timeout)
    except AssertionError:
        return False
    return True


def test_prometheus_stopped_then_back(lab_cluster: LabCluster) -> None:
    url = f"http://127.0.0.1:{lab_cluster.prometheus_port}"
    hub = Hub([PrometheusSource(url, timeout=2)], interval=0.5, timeout=5)
    hub.start()
    try:
        assert hub.wait_polls(1, timeout=30)
        assert hub.snapshot().sources["prometheus"].ok
        # Good values to keep first: a lab just started has not been scraped yet.
        eventually(lambda: hub.snapshot().daemons, 60)
        assert lab_cluster.cli("lab", "stop", "prometheus").rc == 0
        try:
            # While it shuts down Prometheus may still answer, 503 Service Unavailable
            # (a fresh clone's run caught that): the source says it refused, which is
            # true. Stopped, it does not answer at all.
            # A poll that Prometheus stopped in the middle of answered in part: it is
            # current, with errors; the next one, which nothing answers, is stale.
            s = eventually(lambda: (lambda h: h if h.stale and "did not answer" in (
                h.error or "") else None)(hub.snapshot().sources["prometheus"]), 20)
            assert s.stale and not s.ok
            assert hub.snapshot().daemons, "last good values kept"
        finally:
            assert lab_cluster.cli("lab", "start", "prometheus").rc == 0
        started = time.monotonic()
        eventually(lambda: hub.snapshot().sources["prometheus"].ok, 60)
        assert time.monotonic() - started < 60
    finally:
        hub.stop()
