"""The slow fleet figures (threads, RSS, write caches) are read once a minute, kept whole
in between, and read at once for a daemon that appears; PG counts and fill every scrape."""

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
    for name, query in (("up", "up"), ("iops", "read_iops"), ("pgs", "pgs"),
                        ("used", "utilization"), ("threads", "threads"), ("rss", "rss_bytes")):
        prom.rows[src.queries[query]] = [row(f[name], ceph_daemon=k) for k, f in osds.items()]


def osd(iops: float, pgs: int, used: float, threads: int, rss: int) -> dict:
    return dict(up=1, iops=iops, pgs=pgs, used=used, threads=threads, rss=rss)


def figures(d) -> tuple:
    return d.read_iops, d.pgs, d.utilization, d.threads, d.rss_bytes


def test_slow_figures_once_a_minute_and_at_once_for_a_new_daemon(clock: Clock) -> None:
    with Answers() as prom:
        src = PrometheusSource(prom.url, timeout=5)
        try:
            serve(prom, src, 1.0, {"osd.0": osd(3, 10, 50, 7, 700)})
            assert figures(src.poll().daemons["osd.0"]) == (3, 10, 0.5, 7, 700)
            # A new scrape 15 s on: rates, PG counts and fill are read; threads and RSS
            # are the last read's.
            serve(prom, src, 16.0, {"osd.0": osd(5, 20, 60, 9, 900)})
            clock.now += 15
            del prom.asked[:]
            assert figures(src.poll().daemons["osd.0"]) == (5, 20, 0.6, 7, 700)
            slow = {src.queries[n] for n in SLOW_QUERIES}
            assert not slow & set(prom.asked) and src.queries["pgs"] in prom.asked
            # A minute after they were read: read again.
            clock.now += SLOW_EVERY - 15
            serve(prom, src, 76.0, {"osd.0": osd(5, 20, 60, 9, 900)})
            assert figures(src.poll().daemons["osd.0"]) == (5, 20, 0.6, 9, 900)
            # osd.1 appears, named by no static series yet: its slow figures come with
            # the static re-read, not a minute later...
            serve(prom, src, 91.0, {"osd.0": osd(5, 20, 60, 9, 900),
                                    "osd.1": osd(1, 30, 25, 4, 400)})
            clock.now += 15
            assert figures(src.poll().daemons["osd.1"]) == (1, 30, 0.25, 4, 400)
            # ... and are kept whole until the next minute.
            serve(prom, src, 106.0, {"osd.0": osd(5, 21, 70, 10, 1000),
                                     "osd.1": osd(2, 31, 30, 5, 500)})
            clock.now += 15
            kept = src.poll().daemons
            assert figures(kept["osd.1"]) == (2, 31, 0.3, 4, 400)
            assert figures(kept["osd.0"]) == (5, 21, 0.7, 9, 900)
        finally:
            src.close()
