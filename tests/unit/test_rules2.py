"""The network, failing-disk and mClock-capacity rules on the lab capture edited into shape."""

from __future__ import annotations

import time
from collections import namedtuple
from collections.abc import Callable
from dataclasses import replace

from stormdeck.advisors.model import Severity
from stormdeck.advisors.rules import BY_ID
from stormdeck.collectors.host.network import nic_rates
from stormdeck.collectors.model import ConfigOption, HealthCheck, Nic, Snapshot
from tests.captured import firing, history, run, with_cluster, with_config, with_daemon

History = list[Snapshot]
Edit = Callable[[Snapshot, int], Snapshot]

# What the monitors wrote on a lab whose cluster network was slowed (format of
# src/mon/PGMap.cc; health detail shows at most 10 lines).
SLOW_BACK = HealthCheck(
    code="OSD_SLOW_PING_TIME_BACK", severity="HEALTH_WARN",
    summary="Slow OSD heartbeats on back (longest 1468.955ms)",
    detail=("Slow OSD heartbeats on back from osd.1 [] to osd.0 [] 1468.955 msec",
            "Slow OSD heartbeats on back from osd.1 [] to osd.2 [] 1468.391 msec "
            "possibly improving",
            "Slow OSD heartbeats on back from osd.2 [vm] (down) to osd.1 [vm] 1201.100 msec"))


def long(edit: Edit | None = None, n: int = 31) -> History:
    return history(n, step=10.0, edit=edit)


def both(*edits: Edit) -> Edit:
    def edit(s: Snapshot, i: int) -> Snapshot:
        for e in edits:
            s = e(s, i)
        return s
    return edit


def checks(*hs: HealthCheck) -> Edit:
    return lambda s, i: with_cluster(s, health="HEALTH_WARN", checks=hs)


def flapping(osd: str) -> Edit:
    return lambda s, i: with_daemon(s, osd, up=(i % 4) != 1)


def slow_ops(osd: str) -> Edit:
    return lambda s, i: with_cluster(s, slow_ops=3, slow_ops_daemons=(osd,))


def nics(drops: float, errors: float = 0.0, packets: float = 1000.0) -> Edit:
    def edit(s: Snapshot, i: int) -> Snapshot:
        h = s.hosts["vm"]
        nic = Nic(name="eth0", packets=packets, drops=drops, errors=errors)
        return replace(s, hosts={**s.hosts, "vm": replace(h, nics=(nic,))})
    return edit


# ---- slow heartbeats ------------------------------------------------------------------

def test_slow_heartbeats_beside_flapping_are_critical_and_name_the_shared_osd() -> None:
    (f,) = firing(run(long(both(checks(SLOW_BACK), flapping("osd.1")))),
                  "ceph.network.slow_heartbeats")
    assert f.severity == Severity.CRITICAL
    assert "osd.1->osd.0 back 1469 ms" in f.summary
    assert "osd.1 is in 3 of them" in f.summary and "osd.1 went down and up" in f.summary
    assert any("dump_osd_network" in p and "osd.1" in p for p in f.procedure)


def test_slow_heartbeats_beside_slow_ops_warn() -> None:
    (f,) = firing(run(long(both(checks(SLOW_BACK), slow_ops("osd.2")))),
                  "ceph.network.slow_heartbeats")
    assert f.severity == Severity.WARNING and "osd.2 have slow ops" in f.summary


def test_slow_heartbeats_beside_nic_drops_name_the_nic() -> None:
    (f,) = firing(run(long(both(checks(SLOW_BACK), nics(drops=30.0)))),
                  "ceph.network.slow_heartbeats")
    assert any(p.startswith("vm eth0: 30.0 drops/s") for p in f.procedure), f.procedure


def test_slow_heartbeats_alone_are_left_to_the_health_floor() -> None:
    # Nothing ties them to a symptom: Ceph's own check says it (ceph.health.check).
    assert not firing(run(long(checks(SLOW_BACK))), "ceph.network.slow_heartbeats")
    # Flapping without slow heartbeats is the flapping rule's, not this one's.
    assert not firing(run(long(flapping("osd.1"))), "ceph.network.slow_heartbeats")


# ---- NICs ---------------------------------------------------------------------------

def test_nic_errors_follow_ceph_mixins_bounds() -> None:
    rule = "host.nic.errors"
    # 0.01% of the packets, or 10 per second (CephNodeNetworkPacketDrops/Errors).
    assert firing(run(long(nics(drops=0.2, packets=1000.0))), rule)  # 0.02%
    assert firing(run(long(nics(drops=12.0, packets=10 ** 7))), rule)  # 12/s
    (f,) = firing(run(long(nics(drops=0.0, errors=0.5))), rule)
    assert f.target == "vm:eth0" and "errors/s" in f.summary
    assert not firing(run(long(nics(drops=0.05, packets=1000.0))), rule)  # 0.005%, 0.05/s


def test_nic_rates_from_two_polls_skip_resets_and_new_interfaces() -> None:
    C = namedtuple("C", "packets_recv packets_sent dropin dropout errin errout")
    a = {"eth0": C(100, 100, 0, 0, 0, 0), "eth1": C(50, 0, 9, 0, 0, 0)}
    b = {"eth0": C(1100, 1100, 4, 2, 1, 0), "eth1": C(10, 0, 0, 0, 0, 0),
         "eth2": C(5, 5, 0, 0, 0, 0)}
    assert nic_rates(None, 10.0, b) == ()
    (eth0,) = nic_rates((0.0, a), 2.0, b)
    assert eth0 == Nic("eth0", packets=1000.0, drops=3.0, errors=0.5)


def test_the_host_source_reads_this_hosts_nics() -> None:
    from stormdeck.collectors.host.source import HostSource
    src = HostSource(watch=False)
    try:
        assert not src.poll().hosts[src.hostname].nics  # the first poll has no rates yet
        time.sleep(0.2)
        got = src.poll().hosts[src.hostname].nics
    finally:
        src.close()
    assert got and all(n.name != "lo" and n.packets >= 0 and n.drops >= 0 for n in got)


# ---- failing disk ---------------------------------------------------------------------

REPAIRS = HealthCheck("OSD_TOO_MANY_REPAIRS", "HEALTH_WARN",
                      "Too many repaired reads on 1 OSDs", 1,
                      ("osd.1 had 13 reads repaired",))
SPURIOUS = HealthCheck("BLUESTORE_SPURIOUS_READ_ERRORS", "HEALTH_WARN",
                       "1 OSD(s) have spurious read errors", 1,
                       ("osd.1  reads with retries: 2",))


def damaged(*pgs: tuple[str, str]) -> HealthCheck:
    return HealthCheck("PG_DAMAGED", "HEALTH_ERR",
                       f"Possible data damage: {len(pgs)} pgs inconsistent", len(pgs),
                       tuple(f"pg {pg} is active+clean+inconsistent, acting [{acting}]"
                             for pg, acting in pgs))


def test_failing_disk_names_the_osd_and_its_disk() -> None:
    (f,) = firing(run(long(checks(REPAIRS))), "ceph.osd.failing_disk")
    assert f.target == "osd.1" and f.severity == Severity.WARNING
    assert f.summary.startswith("osd.1 on vm:/dev/loop1") and "13 reads repaired" in f.summary
    assert any("smartctl -a` on /dev/loop1" in p for p in f.procedure)


def test_two_signs_of_one_osd_are_one_critical_finding() -> None:
    found = firing(run(long(checks(REPAIRS, SPURIOUS, damaged(("2.5", "1,0,2"))))),
                   "ceph.osd.failing_disk")
    assert [f.target for f in found] == ["osd.1"]
    assert found[0].severity == Severity.CRITICAL
    assert "spurious" in found[0].summary.lower() or "retry" in found[0].summary


def test_damaged_pgs_alone_blame_only_the_osd_all_of_them_share() -> None:
    one = firing(run(long(checks(damaged(("2.5", "1,0,2"))))), "ceph.osd.failing_disk")
    assert not one  # one PG's acting set names three OSDs: no culprit
    found = firing(run(long(checks(damaged(("2.5", "1,0,2"), ("3.1", "2,1,0"),
                                           ("3.7", "1,2"))))), "ceph.osd.failing_disk")
    assert sorted(f.target for f in found) == ["osd.1", "osd.2"]


def test_a_recent_crash_counts_only_beside_flapping() -> None:
    crash = HealthCheck("RECENT_CRASH", "HEALTH_WARN", "1 daemons have recently crashed", 1,
                        ("osd.2 crashed on host vm at 2026-11-25T06:00:00.000000Z",))
    assert not firing(run(long(checks(crash))), "ceph.osd.failing_disk")
    (f,) = firing(run(long(both(checks(crash), flapping("osd.2")))), "ceph.osd.failing_disk")
    assert f.target == "osd.2" and "crashed and went down and up" in f.summary


# ---- mClock capacity -----------------------------------------------------------------

def mclock(values: dict[str, str], kind: str = "hdd", exists: bool = True) -> Edit:
    name = f"osd_mclock_max_capacity_iops_{kind}"
    opt = ConfigOption(name, exists=exists, runtime=True,
                       default="315.000000" if kind == "hdd" else "21500.000000",
                       type="float", values=values)

    def edit(s: Snapshot, i: int) -> Snapshot:
        s = with_config(s, "osd_op_queue", "osd", "mclock_scheduler")
        assert s.cluster is not None
        return with_cluster(s, config={**s.cluster.config, name: opt})
    return edit


def test_mclock_capacity_outlier_warns_and_fallback_informs() -> None:
    rule = "ceph.mclock.capacity"
    found = {f.target: f for f in firing(run(long(mclock(
        {"osd.0": "310.5", "osd.1": "290.1", "osd.2": "1.2"}))), rule)}
    assert set(found) == {"osd.2"} and found["osd.2"].severity == Severity.WARNING
    assert "the median 290.1 of 3 hdd OSDs" in found["osd.2"].summary
    found = {f.target: f for f in firing(run(long(mclock({"osd.0": "310.5"}))), rule)}
    assert set(found) == {"osd.1", "osd.2"}
    assert all(f.severity == Severity.INFO and "fallback" in f.summary
               for f in found.values())


def test_mclock_capacity_is_silent_under_wpq_and_where_measured_alike() -> None:
    rule = "ceph.mclock.capacity"
    assert not firing(run(long(mclock({"osd.0": "300", "osd.1": "310", "osd.2": "280"}))),
                      rule)
    # The lab's Pacific runs wpq: the capacity means nothing there.
    wpq = lambda s, i: with_config(mclock({})(s, i), "osd_op_queue", "osd", "wpq")  # noqa: E731
    assert not firing(run(long(wpq)), rule)
    assert not firing(run(long(mclock({}, exists=False))), rule)


# The shared bad/healthy table (tests/unit/test_rules.py takes these in).
CASES: dict[str, tuple[Callable[[], History], Callable[[], History], Severity]] = {
    "ceph.network.slow_heartbeats": (lambda: long(both(checks(SLOW_BACK), slow_ops("osd.2"))),
                                     lambda: long(checks(SLOW_BACK)), Severity.WARNING),
    "host.nic.errors": (lambda: long(nics(drops=30.0)), lambda: long(nics(drops=0.0)),
                        Severity.WARNING),
    "ceph.osd.failing_disk": (lambda: long(checks(REPAIRS)),
                              lambda: long(checks(damaged(("2.5", "1,0,2")))),
                              Severity.WARNING),
    "ceph.mclock.capacity": (lambda: long(mclock({"osd.0": "300", "osd.1": "310",
                                                  "osd.2": "3000"})),
                             lambda: long(mclock({"osd.0": "300", "osd.1": "310",
                                                  "osd.2": "280"})), Severity.WARNING),
}


def test_every_case_is_a_registered_rule() -> None:
    assert set(CASES) <= set(BY_ID)
