"""Apply latency on an all-BlueStore fleet is the commit latency column, not asked again;
any other store among the OSDs and it is asked as before."""

from __future__ import annotations

import pytest

from stormdeck.collectors.prometheus.source import PrometheusSource
from tests.prometheus_wire import Answers, row


def serve(prom: Answers, src: PrometheusSource, newest: float,
          stores: dict[str, str]) -> None:
    """OSDs on the given object stores; commit latency 2 ms, apply 3 ms (as a FileStore
    OSD's differ: its journal's latency and its apply's, src/os/filestore)."""
    prom.rows[src.queries["newest"]] = [row(newest)]
    prom.rows[src.queries["metadata"]] = [
        row(1, ceph_daemon=k, hostname="stor1", objectstore=store)
        for k, store in stores.items()]
    prom.rows[src.queries["up"]] = [row(1, ceph_daemon=k) for k in stores]
    prom.rows[src.queries["commit_latency"]] = [row(0.002, ceph_daemon=k) for k in stores]
    prom.rows[src.queries["apply_latency"]] = [row(0.003, ceph_daemon=k) for k in stores]


@pytest.mark.parametrize(("stores", "apply_asked", "apply"), [
    ({"osd.0": "bluestore", "osd.1": "bluestore"}, False, 0.002),
    ({"osd.0": "bluestore", "osd.1": "filestore"}, True, 0.003),
])
def test_apply_latency_asked_unless_every_osd_is_bluestore(
        stores: dict[str, str], apply_asked: bool, apply: float) -> None:
    with Answers() as prom:
        src = PrometheusSource(prom.url, timeout=5)
        try:
            serve(prom, src, 1.0, stores)
            first = src.poll().daemons
            # The first read knows no store yet: it asks, and reads what Prometheus has.
            assert src.queries["apply_latency"] in prom.asked
            assert first["osd.0"].apply_latency == 0.003
            del prom.asked[:]
            serve(prom, src, 16.0, stores)
            daemons = src.poll().daemons
            assert (src.queries["apply_latency"] in prom.asked) is apply_asked
            assert src.queries["commit_latency"] in prom.asked
            assert [d.apply_latency for d in daemons.values()] == [apply] * len(stores)
            assert [d.commit_latency for d in daemons.values()] == [0.002] * len(stores)
        finally:
            src.close()


def test_a_filestore_osd_that_appears_is_asked_for_in_the_same_read() -> None:
    with Answers() as prom:
        src = PrometheusSource(prom.url, timeout=5)
        try:
            serve(prom, src, 1.0, {"osd.0": "bluestore"})
            src.poll()
            # osd.1 comes up on FileStore: the read skips apply latency (all it knew was
            # BlueStore), sees a daemon its metadata lacks, re-reads the metadata, and
            # then asks for apply latency after all.
            serve(prom, src, 16.0, {"osd.0": "bluestore", "osd.1": "filestore"})
            daemons = src.poll().daemons
            assert daemons["osd.1"].apply_latency == 0.003
            assert daemons["osd.0"].apply_latency == 0.003
        finally:
            src.close()
