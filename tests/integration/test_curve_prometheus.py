"""Curve through a real Prometheus that scrapes Curve's endpoints (the fleet path) agrees
with reading the endpoints directly."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormdeck.collectors.curve.source import CurveSource
from stormdeck.collectors.prometheus.source import PrometheusSource
from tests.conftest import eventually, free_ports
from tests.curve_wire import POOL, CurveWire

pytestmark = pytest.mark.integration


@pytest.fixture
def scraped_wire(tmp_path: Path) -> Iterator[tuple[CurveWire, str]]:
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        targets = [m.addr for m in wire.mds] + list(wire.addrs())
        (tmp_path / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: curve\n"
            "    static_configs:\n      - targets: " + json.dumps(targets) + "\n")
        port = free_ports(1)[0]
        binary = shutil.which("prometheus")
        assert binary, "prometheus is installed by ./dev"
        proc = subprocess.Popen(
            [binary, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            def all_up() -> bool:
                try:
                    with urllib.request.urlopen(f"{url}/api/v1/query?query=sum(up)",
                                                timeout=2) as r:
                        result = json.load(r)["data"]["result"]
                except OSError:
                    return False
                return bool(result) and result[0]["value"][1] == str(len(targets))

            eventually(all_up, 60)
            yield wire, url
        finally:
            proc.terminate()
            proc.wait(10)


def test_curve_through_prometheus_agrees_with_the_endpoints(scraped_wire) -> None:
    wire, url = scraped_wire
    direct = CurveSource(mds=[m.addr for m in wire.mds], chunkservers=list(wire.addrs())).poll()
    fleet = PrometheusSource(url, ceph=False, curve=True).poll()
    assert not fleet.errors, fleet.errors
    assert fleet.cluster is None and fleet.curve is not None and direct.curve is not None
    assert fleet.curve.leader_mds == wire.mds[0].addr
    (pool,) = fleet.curve.pools
    assert pool.name == POOL and pool.leader_range == 12 == direct.curve.pools[0].leader_range
    assert set(fleet.daemons) == set(direct.daemons)
    for addr, d in direct.daemons.items():
        f = fleet.daemons[addr]
        assert f.kind == "chunkserver" and f.leaders == d.leaders
        for name in ("raft_append_latency", "raft_append_latency_p99", "raft_send_latency",
                     "write_latency", "write_latency_p99", "cores_used", "bthread_usage"):
            assert getattr(f, name) == pytest.approx(getattr(d, name)), name
        assert f.bthread_workers == d.bthread_workers and f.write_iops == d.write_iops
        assert f.config == d.config
