"""`ceph features` and `osd pool autoscale-status`: parsed from published and lab outputs,
asked once a minute, and carried into the Cluster and its pools."""

from __future__ import annotations

import json
from typing import Any

import pytest

from stormdeck.collectors.ceph.connection import CommandError
from stormdeck.collectors.ceph.parse import parse_autoscale_status, parse_features
from stormdeck.collectors.ceph.source import CephSource
from tests.capture_release import STATIC
from tests.captured import CannedCeph, lab_outputs
from tests.conftest import DATA

PUBLISHED = DATA / "published"


def test_features_of_published_clusters() -> None:
    # ceph.io's Luminous upgrade post: one client group, in the object form.
    assert parse_features((PUBLISHED / "features_ceph_io_2017.json").read_bytes()) == {
        "luminous": 1}
    # A 320-OSD cluster (digitalocean/ceph_exporter): three luminous groups, list form.
    assert parse_features((PUBLISHED / "features_ceph_exporter.json").read_bytes()) == {
        "luminous": 59}


def test_features_keep_every_repeated_group() -> None:
    raw = (PUBLISHED / "features_upgrade_blog_2020.json").read_bytes()
    # A plain JSON load keeps the last "group" only: 18 luminous clients, no jewel.
    assert json.loads(raw)["client"] == {"group": {
        "features": "0x3ffddff8eeacfffb", "release": "luminous", "num": 18}}
    assert parse_features(raw) == {"jewel": 422, "luminous": 113}


# What each release's mon called the lab's clients (the mgr, rados bench's, and the
# capture's own connection through this host's Pacific librados, features
# 0x3f01cfbdfffdffff): a mon names a feature set by the newest release it knows whose
# bits it holds, so the same Pacific client is "luminous" to Pacific and "reef" to Reef
# and Tentacle, and Tentacle's own clients are "squid" (no newer client bits).
CLIENTS = {"pacific": {"luminous": 3}, "reef": {"reef": 5},
           "tentacle": {"reef": 1, "squid": 5}}


@pytest.mark.parametrize("release", sorted(CLIENTS))
def test_features_and_autoscale_status_of_each_release_lab(release: str) -> None:
    data = DATA / release
    assert parse_features((data / STATIC["features"]).read_bytes()) == CLIENTS[release]
    targets = parse_autoscale_status(json.loads(
        (data / STATIC["osd pool autoscale-status"]).read_bytes()))
    # lab-bench was made with 32 PGs (the autoscaler's floor, autoscale off); the mgr's
    # own pool has 1 (pg_num_min 1): .mgr from Quincy on, device_health_metrics before.
    mgr_pool = "device_health_metrics" if release == "pacific" else ".mgr"
    assert targets == {mgr_pool: 1, "lab-bench": 32}, targets


def test_autoscale_status_of_a_published_cluster() -> None:
    rows = json.loads((PUBLISHED / "autoscale_status_neco.json").read_text())
    assert parse_autoscale_status(rows) == {"device_health_metrics": 1,
                                            "ceph-ssd-block-pool": 128}
    # A row without a target (a pool the module has not judged yet) is left out.
    rows[1].pop("pg_num_final")
    assert parse_autoscale_status(rows) == {"device_health_metrics": 1}


class Counting(CannedCeph):
    """The canned source on a clock of its own, counting what it was asked; a prefix in
    `refused` is refused as Ceph refuses a command."""

    def __init__(self, outputs: dict[str, bytes]) -> None:
        super().__init__(outputs)
        self.now = 0.0
        self.clock = lambda: self.now
        self.asked: list[str] = []
        self.refused: dict[str, str] = {}

    def _send(self, target: str, cmd: dict[str, Any], timeout: float) -> bytes:
        self.asked.append(cmd["prefix"])
        if cmd["prefix"] in self.refused:
            raise CommandError(f"{cmd['prefix']}: {self.refused[cmd['prefix']]}")
        return super()._send(target, cmd, timeout)


def test_the_poll_carries_clients_and_targets_and_asks_once_a_minute() -> None:
    outputs = lab_outputs()
    outputs["osd pool autoscale-status"] = json.dumps([
        {"pool_name": "lab-bench", "pg_num_final": 64, "pg_autoscale_mode": "warn"}]).encode()
    src = Counting(outputs)
    first = src.poll()
    assert first.errors == ()
    c = first.cluster
    assert c is not None and c.client_releases == {"luminous": 3}
    pools = {p.name: p for p in c.pools}
    assert pools["lab-bench"].autoscale_target == 64
    assert pools["device_health_metrics"].autoscale_target is None  # not in the answer
    src.now = CephSource.STATIC - 1
    again = src.poll().cluster
    assert src.asked.count("features") == src.asked.count("osd pool autoscale-status") == 1
    # Nothing changed: the same pools, not a copy per poll (History keeps one).
    assert again is not None and again.pools is c.pools
    src.now = CephSource.STATIC + 1
    src.poll()
    assert src.asked.count("features") == src.asked.count("osd pool autoscale-status") == 2


def test_a_refused_autoscale_status_keeps_the_last_targets_and_says_so() -> None:
    src = Counting(lab_outputs())
    assert src.poll().errors == ()
    src.refused["osd pool autoscale-status"] = "module 'pg_autoscaler' is not ready"
    src.now = CephSource.STATIC + 1
    p = src.poll()
    assert any("pg_autoscaler" in e for e in p.errors), p.errors
    assert p.cluster is not None
    assert {q.name: q.autoscale_target for q in p.cluster.pools}["lab-bench"] == 32
