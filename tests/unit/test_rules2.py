"""The slow-heartbeat and failing-disk rules on the lab capture edited into shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from stormdeck.advisors.findings import Severity
from stormdeck.advisors.rules import BY_ID
from stormdeck.collectors.model import HealthCheck, Snapshot
from tests.captured import firing, history, run, with_cluster, with_daemon

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


def test_slow_heartbeats_alone_are_left_to_the_health_floor() -> None:
    # Nothing ties them to a symptom: Ceph's own check says it (ceph.health.check).
    assert not firing(run(long(checks(SLOW_BACK))), "ceph.network.slow_heartbeats")
    # Flapping without slow heartbeats is the flapping rule's, not this one's.
    assert not firing(run(long(flapping("osd.1"))), "ceph.network.slow_heartbeats")


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


# The shared bad/healthy table (tests/unit/test_rules.py takes these in).
CASES: dict[str, tuple[Callable[[], History], Callable[[], History], Severity]] = {
    "ceph.network.slow_heartbeats": (lambda: long(both(checks(SLOW_BACK), slow_ops("osd.2"))),
                                     lambda: long(checks(SLOW_BACK)), Severity.WARNING),
    "ceph.osd.failing_disk": (lambda: long(checks(REPAIRS)),
                              lambda: long(checks(damaged(("2.5", "1,0,2")))),
                              Severity.WARNING),
}


def test_every_case_is_a_registered_rule() -> None:
    assert set(CASES) <= set(BY_ID)


# ---- PGs per OSD ----------------------------------------------------------------------

def few_pgs(mode: str, pgs: int = 12, objects: int = 50_000) -> Edit:
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        s = with_cluster(s, num_objects=objects, pools=tuple(
            replace(p, autoscale_mode=mode) for p in s.cluster.pools))
        for n in range(3):
            s = with_daemon(s, f"osd.{n}", pgs=pgs + n)
        return s
    return edit


def test_too_few_pgs_per_osd_informs_only_without_the_autoscaler_and_with_data() -> None:
    rule = "ceph.osd.pgs_too_few"
    (f,) = firing(run(long(few_pgs("warn"), n=40)), rule)
    assert f.severity == Severity.INFO and f.summary.startswith("13 PGs per OSD")
    assert "Ceph aims at 100" in f.summary
    assert not firing(run(long(few_pgs("on"), n=40)), rule)  # the autoscaler's business
    assert not firing(run(long(few_pgs("off", pgs=64), n=40)), rule)
    assert not firing(run(long(few_pgs("off", objects=7028), n=40)), rule)  # the lab's


CASES["ceph.osd.pgs_too_few"] = (lambda: long(few_pgs("off"), n=40),
                                 lambda: long(few_pgs("off", pgs=64), n=40), Severity.INFO)


def test_an_osd_named_earlier_in_the_window_still_ties() -> None:
    # osd.2 flapped and came back: its ping statistics start afresh and Ceph's list no
    # longer names it; it did a minute ago.
    later = HealthCheck(SLOW_BACK.code, SLOW_BACK.severity, SLOW_BACK.summary,
                        detail=SLOW_BACK.detail[:1])  # osd.1 -> osd.0 only

    def edit(s: Snapshot, i: int) -> Snapshot:
        s = checks(SLOW_BACK if i < 20 else later)(s, i)
        return with_daemon(s, "osd.2", up=i != 22)
    (f,) = firing(run(long(edit)), "ceph.network.slow_heartbeats")
    assert "osd.2 went down and up" in f.summary and f.severity == Severity.CRITICAL
