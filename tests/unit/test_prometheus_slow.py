"""The slow fleet figures (PGs, fill, threads, RSS, write caches) are read once a minute,
kept whole in between, and read at once for a daemon that appears."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from stormdeck.collectors.prometheus import source as source_mod
from stormdeck.collectors.prometheus.queries import SLOW_EVERY, SLOW_QUERIES
from stormdeck.collectors.prometheus.source import PrometheusSource
from tests.prometheus_wire import Answers, row


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(source_mod, "time", SimpleNamespace(monotonic=c, time=time.time))
    return c


def serve(prom: Answers, src: PrometheusSource, newest: float, osds: dict[str, dict]) -> None:
    """Each OSD's figures as Prometheus answers them; `newest` the mgr's scrape."""
    prom.rows[src.queries["newest"]] = [row(newest)]
    prom.rows[src.queries["metadata"]] = [row(1, ceph_daemon="osd.0", hostname="stor1")]
    prom.rows[src.queries["osd_bytes"]] = [row(100, ceph_daemon=k) for k in osds]
    for name, query in (("up", "up"), ("read_iops", "read_iops"), ("pgs", "pgs"),
                        ("used", "utilization"), ("threads", "threads")):
        prom.rows[src.queries[query]] = [row(f[name], ceph_daemon=k) for k, f in osds.items()]


def test_slow_figures_once_a_minute_and_at_once_for_a_new_daemon(clock: Clock) -> None:
    with Answers() as prom:
        src = PrometheusSource(prom.url, timeout=5)
        try:
            serve(prom, src, 1.0, {"osd.0": dict(up=1, read_iops=3, pgs=10, used=50,
                                                 threads=7)})
            first = src.poll().daemons["osd.0"]
            assert (first.read_iops, first.pgs, first.utilization, first.threads) == \
                (3, 10, 0.5, 7)
            # A new scrape 15 s on: the rates are read, the slow figures are the last.
            serve(prom, src, 16.0, {"osd.0": dict(up=1, read_iops=5, pgs=20, used=60,
                                                  threads=9)})
            clock.now += 15
            del prom.asked[:]
            second = src.poll().daemons["osd.0"]
            assert (second.read_iops, second.pgs, second.utilization, second.threads) == \
                (5, 10, 0.5, 7)
            slow = {src.queries[n] for n in SLOW_QUERIES}
            assert not slow & set(prom.asked) and src.queries["read_iops"] in prom.asked
            # A minute after they were read: read again, and the fill divided as before.
            serve(prom, src, 76.0, {"osd.0": dict(up=1, read_iops=5, pgs=20, used=60,
                                                  threads=9)})
            clock.now += SLOW_EVERY - 15
            third = src.poll().daemons["osd.0"]
            assert (third.pgs, third.utilization, third.threads) == (20, 0.6, 9)
            # osd.1 appears, named by no static series yet: its slow figures come with
            # the static re-read, not a minute later.
            serve(prom, src, 91.0, {
                "osd.0": dict(up=1, read_iops=5, pgs=20, used=60, threads=9),
                "osd.1": dict(up=1, read_iops=1, pgs=30, used=25, threads=4)})
            clock.now += 15
            new = src.poll().daemons["osd.1"]
            assert (new.pgs, new.utilization, new.threads) == (30, 0.25, 4)
            # ... and those are kept whole until the next minute.
            serve(prom, src, 106.0, {
                "osd.0": dict(up=1, read_iops=5, pgs=21, used=70, threads=9),
                "osd.1": dict(up=1, read_iops=2, pgs=31, used=30, threads=4)})
            clock.now += 15
            kept = src.poll().daemons
            assert kept["osd.1"].read_iops == 2
            assert (kept["osd.1"].pgs, kept["osd.1"].utilization) == (30, 0.25)
            assert (kept["osd.0"].pgs, kept["osd.0"].utilization) == (20, 0.6)
        finally:
            src.close()
