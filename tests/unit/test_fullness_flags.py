"""Fullness against the monitors' ratios, the pools' growth forecast, and flags left set."""

from __future__ import annotations

from dataclasses import replace

from stormdeck.advisors.engine import worst
from stormdeck.advisors.findings import Severity
from stormdeck.advisors.rules import fullness
from stormdeck.collectors.ceph.parse import parse_health, parse_log_last
from stormdeck.collectors.model import Snapshot
from tests.captured import firing, history, run, with_cluster, with_daemon

RATIOS = {"nearfull_ratio": 0.85, "backfillfull_ratio": 0.90, "full_ratio": 0.95}


def used(u: float, **ratios: float):
    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_daemon(with_cluster(s, **{**RATIOS, **ratios}), "osd.1", utilization=u)
    return edit


def test_each_ratio_says_what_it_stops() -> None:
    (near,) = firing(run(history(2, edit=used(0.86))), "ceph.osd.fullness")
    assert near.target == "osd.1" and near.severity == Severity.WARNING
    assert "past the nearfull ratio 85%" in near.summary and "next: backfillfull" in near.summary
    (back,) = firing(run(history(2, edit=used(0.91))), "ceph.osd.fullness")
    assert "recovery stalls" in back.summary
    (full,) = firing(run(history(2, edit=used(0.96))), "ceph.osd.fullness")
    assert full.severity == Severity.CRITICAL and "writes stop" in full.summary
    assert not full.changes, "raising the ratio is a procedure step, never a change"
    assert any("set-full-ratio 0.97" in step for step in full.procedure)


def test_the_monitors_ratios_not_the_defaults() -> None:
    # A lowered nearfull ratio (as the lab test makes it): 30% used is past it.
    (f,) = firing(run(history(2, edit=used(0.30, nearfull_ratio=0.25))), "ceph.osd.fullness")
    assert "nearfull ratio 25%" in f.summary
    assert not firing(run(history(2, edit=used(0.30))), "ceph.osd.fullness")


def test_a_nearfull_check_folds_into_the_osd_finding() -> None:
    checks = parse_health({"checks": {"OSD_NEARFULL": {
        "severity": "HEALTH_WARN", "summary": {"message": "1 nearfull osd(s)", "count": 1},
        "detail": [{"message": "osd.1 is near full"}, {"message": "osd.11 is near full"}]}}})[0]

    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(used(0.86)(s, i), health="HEALTH_WARN", checks=checks)
    findings = run(history(2, edit=edit))
    assert not [f for f in findings if f.rule == "ceph.health.check"]
    (f,) = firing(findings, "ceph.osd.fullness")
    assert f.detail == ("osd.1 is near full",) and worst(findings) == 1


def growing(rate_per_s: float, start: float = 0.40):
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        pools = tuple(replace(p, used_ratio=start + rate_per_s * 10 * i)
                      if p.name == "lab-bench" else p for p in s.cluster.pools)
        return with_cluster(s, pools=pools)
    return edit


def test_growth_forecast_is_predict_linear_over_the_history() -> None:
    pts = [(0.0, 0.5), (100.0, 0.51), (200.0, 0.52)]
    assert abs(fullness.slope(pts) - 0.0001) < 1e-12
    days = fullness.days_to_full(pts, min_span=100)
    assert days is not None and abs(days - 0.48 / 0.0001 / 86400) < 1e-9
    assert fullness.days_to_full(pts, min_span=300) is None, "too short a span"
    assert fullness.days_to_full([(0, 0.5), (400, 0.4)], 100) is None, "shrinking"
    # 41 samples, 10 s apart: 400 s of points.
    (f,) = firing(run(history(41, edit=growing(2e-5))), "ceph.pool.fullness")
    assert f.target == "pool lab-bench" and "full in" in f.summary
    # A pool that grows 1e-8 a second reaches 95% in years: quiet.
    assert not firing(run(history(41, edit=growing(1e-8))), "ceph.pool.fullness")


def test_forecast_waits_for_five_minutes_of_points() -> None:
    assert not firing(run(history(20, edit=growing(2e-5))), "ceph.pool.fullness")


def test_a_full_pool_warns_without_a_forecast() -> None:
    (f,) = firing(run(history(8, edit=growing(0.0, start=0.96))), "ceph.pool.fullness")
    assert "96.0% used" in f.summary and "days" not in f.summary


AUDIT = [{"name": "mon.a", "rank": "mon.0", "addrs": {}, "stamp": "2027-01-15T08:00:00.000000+0000",
          "seq": 101, "channel": "audit", "priority": "[INF]",
          "message": "from='client.? 10.0.0.7:0/1234' entity='client.admin' "
                     "cmd='[{\"prefix\": \"osd set\", \"key\": \"noout\"}]': finished"},
         {"name": "mon.a", "rank": "mon.0", "addrs": {}, "stamp": "2027-01-15T08:10:00.000000+0000",
          "seq": 102, "channel": "audit", "priority": "[INF]",
          "message": "from='client.? 10.0.0.8:0/99' entity='client.bob' "
                     "cmd='[{\"prefix\": \"osd set-group\", \"flags\": \"noup\", "
                     "\"who\": [\"osd.2\"]}]': finished"}]


def test_flags_say_what_they_stop_who_set_them_and_since_when() -> None:
    audit = parse_log_last(AUDIT)
    # An hour after noout was set (the lines as Pacific's audit log has them).
    t0 = audit[0].stamp + 3600

    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(s, osd_flags=("noout",), osd_state_flags={"osd.2": ("noup",)},
                            audit=audit)
    findings = run(history(2, edit=edit, base=replace(history(1)[0], time=t0)))
    found = {f.target: f for f in firing(findings, "ceph.flags.left_set")}
    assert set(found) == {"cluster:noout", "osd.2:noup"}
    noout = found["cluster:noout"]
    assert "never marked out" in noout.summary and "client.admin" in noout.summary
    assert "60 min ago" in noout.summary and "`ceph osd unset noout`" in noout.procedure[0]
    assert "client.bob" in found["osd.2:noup"].summary
    assert "`ceph osd rm-noup osd.2`" in found["osd.2:noup"].procedure[0]


def test_pause_is_critical_and_fresh_scrub_flags_are_quiet() -> None:
    edit = lambda s, i: with_cluster(s, osd_flags=("pauserd", "pausewr", "noscrub"))  # noqa: E731
    found = {f.target: f for f in firing(run(history(3, edit=edit)), "ceph.flags.left_set")}
    assert found["cluster:pauserd"].severity == Severity.CRITICAL
    assert "cluster:noscrub" not in found, "noscrub is judged once left for a day"


def test_an_unset_flag_clears_at_once() -> None:
    edit = lambda s, i: with_cluster(s, osd_flags=("noout",) if i < 2 else ())  # noqa: E731
    assert not firing(run(history(3, edit=edit)), "ceph.flags.left_set")
