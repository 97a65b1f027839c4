"""The fleet through a real Prometheus scraping the bench's targets (real mgr, node_exporter
and stormdeck-exporter pages, figures at planted rates): read once per scrape, right under a
duplicated scrape job, with the summary line and the health checks."""

from __future__ import annotations

import importlib
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stormdeck.collectors.prometheus.source import PrometheusSource

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
fleet_bench = importlib.import_module("fleet_bench")

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("prometheus") is None,
                                 reason="needs prometheus on PATH")]
OSDS = 40
INTERVAL = 2.0  # seconds between scrapes: room for a poll or two in between
# The rules' rate window on the duplicated fleet, and the raw queries' beside them: a
# target writes its counters when asked, up to ~0.1 s off the scrape's stamp, and the
# rules are evaluated between scrapes, so over 8 s (4 scrapes) the two paths read up
# to 1.5% apart (measured); over 16 s, 0.04-0.10%.
WINDOW = 16.0


@pytest.fixture(scope="module")
def fleets() -> Iterator[tuple[str, str, Any]]:
    """Two Prometheus servers over the same planted fleet, the second scraping the mgr and
    exporter targets twice (two jobs): what Thanos without dedup, or two clusters' jobs
    without --prometheus-match, hold."""
    once = fleet_bench.Fleet(OSDS, INTERVAL, duplicate=False)
    # It also evaluates stormdeck's recording rules (assets/), their series scraped twice.
    twice = fleet_bench.Fleet(OSDS, INTERVAL, duplicate=True, rules=True,
                              window=f"{WINDOW:g}s")
    try:
        deadline = time.monotonic() + 60
        while min(once.scrapes(), twice.scrapes()) < 6:  # rate windows full (4 + 2)
            assert time.monotonic() < deadline, "Prometheus never scraped the targets"
            time.sleep(0.5)
        yield once.url, twice.url, twice
    finally:
        once.close()
        twice.close()


def figures(part: object) -> dict[str, object]:
    c = part.cluster  # type: ignore[attr-defined]
    out: dict[str, object] = {
        "summary": (c.num_osds, c.num_up_osds, c.num_in_osds, c.version, c.release,
                    c.num_pgs, c.health),
        "checks": [(h.code, h.severity) for h in c.checks],
        "pools": [(p.id, p.name, p.size, p.pg_num) for p in c.pools],
    }
    for key, d in part.daemons.items():  # type: ignore[attr-defined]
        out[key] = (d.up, d.in_, d.pgs, d.host, d.devices, d.cores_allowed,
                    round(d.cores_used or -1, 2), round(d.read_iops or -1),
                    round(d.write_iops or -1))
    for key, disk in part.disks.items():  # type: ignore[attr-defined]
        out[key] = (round(disk.read_iops or -1), disk.rotational, disk.daemons)
    return out


def test_the_fleet_is_read_once_a_scrape_and_a_duplicated_job_changes_no_figure(
        fleets: tuple[str, str]) -> None:
    once_url, twice_url, _ = fleets
    once = PrometheusSource(once_url, scrape_interval=INTERVAL)
    twice = PrometheusSource(twice_url, scrape_interval=INTERVAL, recording_rules=False)
    try:
        a = once.poll()
        assert not a.errors, a.errors
        # The summary line and the checks, as the mgr's series give them.
        c = a.cluster
        assert c is not None
        down = sum(1 for i in range(OSDS) if not fleet_bench.is_up(i))
        assert (c.num_osds, c.num_up_osds, c.num_in_osds) == (OSDS, OSDS - down, OSDS)
        assert (c.version, c.release) == ("16.2.15", "pacific")
        assert [(h.code, h.severity) for h in c.checks] == [("OSD_DOWN", "HEALTH_WARN")]
        truth = sum(fleet_bench.planted(i)["read_iops"] for i in range(OSDS)
                    if fleet_bench.is_up(i))
        # The targets write a counter when asked, Prometheus stamps it when it asked: on
        # a busy machine they differ by up to ~0.1 s, 5% of a 2 s interval (the bench's
        # 15 s scrapes keep within 2%). A doubled figure is 100% off.
        assert c.client_read_iops == pytest.approx(truth, rel=0.1)
        cores = {k: d.cores_used for k, d in a.daemons.items()}
        assert cores["osd.3"] == pytest.approx(fleet_bench.planted(3)["cores"], rel=0.1)

        # Until the mgr's next scrape lands, a poll is one tiny query and hands back
        # the same mappings: nothing is built, the History holds one copy.
        b = once.poll()
        if b.daemons is not a.daemons:  # a scrape landed in between: one more try
            a, b = b, once.poll()
        assert b.daemons is a.daemons and b.disks is a.disks and b.cluster is a.cluster
        # The next scrape is read once it lands (the hub asks every second).
        deadline = time.monotonic() + INTERVAL + 2
        while (c2 := once.poll()).daemons is a.daemons:
            assert time.monotonic() < deadline, "no new scrape was read"
            time.sleep(0.2)
        # What did not change is the same object: hosts, pools, each disk's static part.
        assert c2.hosts is a.hosts
        assert c2.cluster is not None and c2.cluster.pools[0] is c.pools[0]

        # A duplicated scrape job: the same figures, and a warning naming a daemon.
        d = twice.poll()
        assert any("copies of ceph_osd_up for osd." in e for e in d.errors), d.errors
        fa, fd = figures(once.poll()), figures(d)
        assert fa.keys() == fd.keys()
        diff = {k: (fa[k], fd[k]) for k in fa if fa[k] != fd[k]
                and not k.startswith(("osd.", "stor"))}
        assert not diff, diff
        for k in fa:  # rates are read apart: equal within the jitter above, not 2x
            if k.startswith("osd."):
                x, y = fa[k], fd[k]
                assert x[:6] == y[:6], (k, x, y)  # type: ignore[index]
                assert y[6] == pytest.approx(x[6], rel=0.1), (k, x, y)  # type: ignore[index]
    finally:
        once.close()
        twice.close()


def test_recording_rules_give_the_raw_queries_figures_within_2pct(
        fleets: tuple[str, str, Any]) -> None:
    """On the fleet whose Prometheus evaluates the rules, every series twice: the source
    reading the recorded series and one reading the raw queries agree within 2% on every
    recorded figure, and the header says which each used. Pools' fill as well."""
    _, url, fleet = fleets
    deadline = time.monotonic() + 90
    while fleet.scrapes() < WINDOW / INTERVAL + 2:  # the rate windows full
        assert time.monotonic() < deadline, "Prometheus never filled the rules' window"
        time.sleep(0.5)
    rules = PrometheusSource(url, scrape_interval=WINDOW / 4)
    raw = PrometheusSource(url, scrape_interval=WINDOW / 4, recording_rules=False)
    try:
        a = rules.poll()
        b = raw.poll()
        if rules._read_newest != raw._read_newest:
            a = rules.poll()  # a scrape landed between the two: read both at the same one
        assert rules.mode == "recording rules" and raw.mode == "raw queries"
        assert sorted(a.daemons) == sorted(b.daemons) and len(a.daemons) == OSDS
        assert sorted(a.disks) == sorted(b.disks) and a.disks
        compared, worst = 0, 0.0
        for key, x in a.daemons.items():
            y = b.daemons[key]
            for f in ("read_iops", "write_iops", "read_bps", "write_bps", "op_read_latency",
                      "op_write_latency", "cores_used"):
                u, v = getattr(x, f), getattr(y, f)
                assert (u is None) == (v is None), (key, f, u, v)
                if v:
                    assert u == pytest.approx(v, rel=0.02), (key, f, u, v)
                    compared += 1
                    worst = max(worst, abs(u / v - 1))
        for key, x in a.disks.items():
            y = b.disks[key]
            for f in ("util", "read_iops", "write_iops", "read_bps", "write_bps",
                      "read_await", "write_await", "queue_depth"):
                u, v = getattr(x, f), getattr(y, f)
                assert (u is None) == (v is None), (key, f, u, v)
                if v:
                    assert u == pytest.approx(v, rel=0.02), (key, f, u, v)
                    compared += 1
                    worst = max(worst, abs(u / v - 1))
        assert compared > OSDS * 5, compared
        assert worst < 0.02, worst
        # Under the duplicated jobs neither path doubles: the planted cores, once.
        assert a.daemons["osd.3"].cores_used == pytest.approx(
            fleet_bench.planted(3)["cores"], rel=0.05)
        # Pools' fill, from the mgr's df series.
        assert a.cluster is not None and a.cluster.pools
        assert all(p.used_ratio is not None and p.max_avail_bytes for p in a.cluster.pools)
    finally:
        rules.close()
        raw.close()
