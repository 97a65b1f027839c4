"""The incident-cause rules on the real lab: slow heartbeats beside an OSD down, a read repaired."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Severity
from stormdeck.advisors.rules.heartbeats import slow_pairs
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.hub import History, Hub, merge
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
        # Alone, the check is Ceph's to say (the health floor): no symptom beside it. A
        # loaded machine can give an OSD slow ops of its own meanwhile (seen once in CI);
        # then the rule is right to fire, and must say which OSD has them.
        fired = mine()
        named = {o for p in found for o in (p.source, p.to)}
        slow = sorted({d for snap in history if snap.cluster
                       for d in snap.cluster.slow_ops_daemons} & named)
        flaps = sorted(k for k in named if len({s.daemons[k].up for s in history
                                                 if k in s.daemons}) > 1)
        if slow or flaps:
            assert fired and all(o in fired[0].summary for o in slow + flaps), (fired, slow)
        else:
            assert not fired, fired
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


def test_a_read_repaired_from_a_replica_names_the_osd_and_its_disk(
        lab_cluster: LabCluster) -> None:
    # BlueStore's debug injection makes the primary's copy of one object fail to read;
    # the read is then served and repaired from a replica, and the OSD counts it. With
    # mon_osd_warn_num_repaired at 0, Ceph raises OSD_TOO_MANY_REPAIRS for that OSD.
    cluster = lab_cluster.rados()
    pool, obj = "rules2-repair", "victim"
    rule = "ceph.osd.failing_disk"
    engine = Engine(load_settings(), mutes=None)
    source = CephSource(conffile=str(lab_cluster.conf))
    primary = None
    try:
        ceph_json(cluster, "osd pool create", pool=pool, pg_num=1, pgp_num=1)
        # The lab's pools have one copy by default: a repair needs a second.
        ceph_json(cluster, "osd pool set", pool=pool, var="size", val="2",
                  yes_i_really_mean_it=True)
        ioctx = cluster.open_ioctx(pool)
        ioctx.write_full(obj, b"x" * 4096)
        eventually(lambda: len(ceph_json(cluster, "osd map", pool=pool, object=obj)
                               ["acting"]) == 2, 30)
        where = ceph_json(cluster, "osd map", pool=pool, object=obj)
        primary = int(where["acting_primary"])
        ceph_json(cluster, "config set", who=f"osd.{primary}",
                  name="bluestore_debug_inject_read_err", value="true")
        ret, _out, err = cluster.osd_command(primary, json.dumps(
            {"prefix": "injectdataerr", "pool": pool, "objname": obj}), b"", timeout=30)
        assert ret == 0, err
        assert ioctx.read(obj, 4096) == b"x" * 4096  # served from a replica, repaired
        ioctx.close()
        ceph_json(cluster, "config set", who="global", name="mon_osd_warn_num_repaired",
                  value="0")
        history: list = []

        def named() -> list:
            history.append(merge([source.poll()], now=time.time()))
            return [f for f in engine.evaluate(history)
                    if f.rule == rule and f.state == "firing"]

        (f,) = eventually(named, 60, interval=1.0)
        assert f.target == f"osd.{primary}" and f.severity == Severity.WARNING, f
        assert "reads repaired" in f.summary and "/dev/" in f.summary, f.summary
    finally:
        ceph_json(cluster, "config rm", who="global", name="mon_osd_warn_num_repaired")
        if primary is not None:
            ceph_json(cluster, "config rm", who=f"osd.{primary}",
                      name="bluestore_debug_inject_read_err")
            cluster.osd_command(primary, json.dumps({"prefix": "clear_shards_repaired"}), b"",
                                timeout=30)
        ceph_json(cluster, "osd pool rm", pool=pool, pool2=pool,
                  yes_i_really_really_mean_it=True)
        cluster.shutdown()
        source.close()
