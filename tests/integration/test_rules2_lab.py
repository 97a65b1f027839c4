"""Slow heartbeats on the real lab: Ceph's own check, quiet alone, critical beside an OSD down."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.model import Severity
from stormdeck.advisors.rules.heartbeats import slow_pairs
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.hub import History, Hub
from tests.conftest import LabCluster, ceph_json, eventually

pytestmark = pytest.mark.integration

RULE = "ceph.network.slow_heartbeats"
OPTION = "mon_warn_on_slow_ping_time"  # ms; 0 (default) = 5% of osd_heartbeat_grace


def test_slow_heartbeats_are_tied_to_an_osd_that_went_down(lab_cluster: LabCluster) -> None:
    cluster = lab_cluster.rados()
    settings = load_settings()
    s = settings[RULE]
    engine = Engine({**settings, RULE: replace(s, warmup_samples=1)}, mutes=None)
    hub = Hub([CephSource(conffile=str(lab_cluster.conf))], interval=0.25)
    history = History()
    hub.start()

    def mine() -> list:
        snap = hub.snapshot()
        if snap is not history.latest:
            history.append(snap)
        return [f for f in engine.evaluate(history) if f.rule == RULE and f.state == "firing"]

    def pairs() -> list:
        snap = hub.snapshot()
        return slow_pairs(snap.cluster.checks) if snap.cluster else []

    try:
        assert hub.wait_polls(1, timeout=30)
        # Every ping on this host takes longer than 1 us: Ceph raises its check with the
        # OSD pairs, as it would for a slow network at its 1 s default.
        ceph_json(cluster, "config set", who="global", name=OPTION, value="0.001")
        found = eventually(pairs, 90, interval=1.0)
        assert {p.source for p in found} <= {"osd.0", "osd.1", "osd.2"}
        # Alone, the check is Ceph's to say (the health floor): no symptom beside it.
        assert not mine()
        ceph_json(cluster, "osd down", ids=["2"])  # osd.2 is alive: it comes back up
        (f,) = eventually(mine, 60, interval=0.25)
        ups = [s.daemons["osd.2"].up for s in history if "osd.2" in s.daemons]
        assert False in ups, "the hub never saw osd.2 down"
        assert f.severity == Severity.CRITICAL, f
        assert "osd.2 went down and up" in f.summary and "slow heartbeat pairs" in f.summary
        assert any("dump_osd_network" in p for p in f.procedure)
    finally:
        ceph_json(cluster, "config rm", who="global", name=OPTION)
        try:
            eventually(lambda: not pairs() and all(
                d.up for d in hub.snapshot().daemons.values() if d.kind == "osd"), 90)
        finally:
            hub.stop()
            cluster.shutdown()
