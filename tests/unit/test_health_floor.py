"""Ceph's own health as the floor of `check`: captured `health detail` outputs, judged."""

from __future__ import annotations

import json
from dataclasses import replace

from stormdeck.advisors.engine import Engine, worst
from stormdeck.advisors.findings import Severity
from stormdeck.advisors.rules import health
from stormdeck.advisors.settings import load_settings
from stormdeck.cli_check import render
from stormdeck.collectors.ceph.parse import parse_health
from stormdeck.collectors.model import Snapshot
from tests.captured import PAC, firing, history, run, with_cluster

# What Ceph said on the issue's Tentacle lab: osd.2 stopped and marked down under client
# load (`ceph health detail -f json`, the shape of tests/data/pacific/health_detail_storm.json).
ISSUE_HEALTH = {
    "status": "HEALTH_WARN",
    "checks": {
        "OSD_DOWN": {"severity": "HEALTH_WARN",
                     "summary": {"message": "1 osds down", "count": 1},
                     "detail": [{"message": "osd.2 (root=default,host=vm) is down"}],
                     "muted": False},
        "PG_DEGRADED": {"severity": "HEALTH_WARN",
                        "summary": {"message": "Degraded data redundancy: 310/930 objects "
                                               "degraded (33.333%), 14 pgs degraded",
                                    "count": 14},
                        "detail": [{"message": "pg 2.1 is active+undersized+degraded, acting "
                                               "[0,1]"},
                                   {"message": "pg 2.4 is stale+active+clean, acting [2]"}],
                        "muted": False},
    },
    "mutes": [],
}
# `ceph pg stat` at the same moment: 9 stale, 16 undersized.
ISSUE_PGS = {"active+clean": 40, "stale+active+clean": 9, "active+undersized+degraded": 16}


def checks_of(doc: dict) -> tuple:
    return parse_health(doc)[0]


def the_issue(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, health="HEALTH_WARN", checks=checks_of(ISSUE_HEALTH),
                        num_pgs=65, pg_states=ISSUE_PGS)


def judged(edit, n: int = 5, step: float = 9.0) -> list:
    # `check --for 45`: five polls, nine seconds apart.
    return run(history(n, step=step, edit=edit))


def test_check_never_exits_below_ceph_health_in_the_issues_case() -> None:
    findings = judged(the_issue)
    floor = {f.target: f for f in firing(findings, "ceph.health.check")}
    assert set(floor) >= {"OSD_DOWN", "PG_DEGRADED"}
    assert floor["OSD_DOWN"].severity == Severity.WARNING
    assert floor["OSD_DOWN"].detail == ("osd.2 (root=default,host=vm) is down",)
    assert "1 osds down" in floor["OSD_DOWN"].summary
    (inactive,) = firing(findings, "ceph.pgs.inactive")
    assert inactive.severity == Severity.CRITICAL and "9 of 65 PGs not active" in \
        inactive.summary and "stale+active+clean 9" in inactive.summary
    assert worst(findings) == 2, "stale PGs: critical as soon as the PG map shows them"
    # The plain output carries Ceph's own lines.
    text = render(findings, {}, history(1, edit=the_issue)[0])
    assert "| osd.2 (root=default,host=vm) is down" in text


def test_a_warning_alone_sets_exit_1_from_the_first_poll() -> None:
    warn = lambda s, i: with_cluster(s, health="HEALTH_WARN",  # noqa: E731
                                     checks=checks_of({"checks": {"OSD_DOWN":
                                                                  ISSUE_HEALTH["checks"][
                                                                      "OSD_DOWN"]}}))
    findings = run(history(1, edit=warn))
    assert worst(findings) == 1
    assert [f.target for f in firing(findings, "ceph.health.check")] == ["OSD_DOWN"]


def test_health_err_is_critical_and_unknown_severities_are_not_fine() -> None:
    doc = {"checks": {"OSD_FULL": {"severity": "HEALTH_ERR",
                                   "summary": {"message": "1 full osd(s)", "count": 1},
                                   "detail": [{"message": "osd.0 is full"}]},
                      "NEW_THING": {"severity": "HEALTH_SOMETHING",
                                    "summary": {"message": "new"}}}}
    edit = lambda s, i: with_cluster(s, health="HEALTH_ERR", checks=checks_of(doc))  # noqa: E731
    found = {f.target: f for f in firing(run(history(2, edit=edit)), "ceph.health.check")}
    assert found["OSD_FULL"].severity == Severity.CRITICAL
    assert found["NEW_THING"].severity == Severity.WARNING
    assert health.severity_of("HEALTH_ERR") == Severity.CRITICAL


def test_cephs_mutes_are_honoured_and_shown() -> None:
    doc = json.loads(json.dumps(ISSUE_HEALTH))
    doc["checks"]["OSD_DOWN"]["muted"] = True
    doc["checks"].pop("PG_DEGRADED")
    # Ceph leaves muted checks out of its status: HEALTH_OK.
    edit = lambda s, i: with_cluster(s, health="HEALTH_OK", checks=checks_of(doc))  # noqa: E731
    findings = run(history(3, edit=edit))
    (f,) = [f for f in findings if f.rule == "ceph.health.check"]
    assert f.muted and f.state == "firing" and health.CEPH_MUTED in f.notes
    assert worst(findings) == 0
    assert "muted" in render(findings, {}, history(1, edit=edit)[0])


def test_a_check_ceph_drops_clears_at_once() -> None:
    engine = Engine(settings=load_settings())
    snaps = history(4, edit=lambda s, i: the_issue(s, i) if i < 3 else s)
    out = []
    for i in range(1, 5):
        out = engine.evaluate(snaps[:i])
    assert not [f for f in out if f.rule == "ceph.health.check"], out
    assert worst(out) == 0


def test_status_warn_without_readable_checks_still_sets_the_floor() -> None:
    edit = lambda s, i: with_cluster(s, health="HEALTH_ERR", checks=())  # noqa: E731
    (f,) = firing(run(history(1, edit=edit)), "ceph.health.check")
    assert f.target == "cluster" and f.severity == Severity.CRITICAL


def test_a_check_a_rule_covers_folds_into_its_finding() -> None:
    doc = {"checks": {"PG_AVAILABILITY": {
        "severity": "HEALTH_WARN",
        "summary": {"message": "Reduced data availability: 3 pgs incomplete", "count": 3},
        "detail": [{"message": "pg 2.3 is incomplete, acting [1,0]"}]}}}
    states = {"active+clean": 62, "incomplete": 3}

    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(s, health="HEALTH_WARN", checks=checks_of(doc), num_pgs=65,
                            pg_states=states)
    findings = run(history(3, edit=edit))
    assert not [f for f in findings if f.rule == "ceph.health.check"], "one finding, not two"
    (f,) = firing(findings, "ceph.pgs.inactive")
    assert f.detail == ("pg 2.3 is incomplete, acting [1,0]",)
    assert any("PG_AVAILABILITY" in n for n in f.notes)
    assert any("never `ceph osd lost`" in step for step in f.procedure)
    # Three incomplete PGs are below peering.storm's 10 PGs: this is what catches them.
    assert not firing(findings, "ceph.peering.storm")


def test_pgs_inactive_for_five_minutes_are_stuck() -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(s, num_pgs=65, pg_states={"active+clean": 64, "peering": 1})
    (early,) = firing(run(history(3, step=60.0, edit=edit)), "ceph.pgs.inactive")
    assert "stuck" not in early.summary and "for 120 s" in early.summary
    (late,) = firing(run(history(7, step=60.0, edit=edit)), "ceph.pgs.inactive")
    assert "stuck (CephPGsInactive" in late.summary and late.severity == Severity.CRITICAL


def test_every_pg_unknown_is_the_mgr_rule_not_this_one() -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(s, num_pgs=65, pg_states={"unknown": 65})
    findings = run(history(3, edit=edit))
    assert not firing(findings, "ceph.pgs.inactive")


def test_unfound_objects_get_a_procedure_never_mark_unfound_lost() -> None:
    doc = {"checks": {"OBJECT_UNFOUND": {
        "severity": "HEALTH_WARN", "summary": {"message": "1/310 objects unfound (0.323%)",
                                               "count": 1},
        "detail": [{"message": "pg 2.5 has 1 unfound objects"}]}}}

    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(s, health="HEALTH_WARN", checks=checks_of(doc), num_pgs=65,
                            pg_states={"active+clean": 64,
                                       "active+recovery_unfound+degraded": 1})
    findings = run(history(2, edit=edit))
    (f,) = firing(findings, "ceph.pgs.unfound")
    assert f.severity == Severity.CRITICAL and f.changes == ()
    assert f.detail == ("pg 2.5 has 1 unfound objects",)
    assert any(s.startswith("Do not run `ceph pg PGID mark_unfound_lost") for s in f.procedure)
    assert not [x for x in findings if x.rule == "ceph.health.check"]


def test_the_captured_storm_health_is_a_warning() -> None:
    checks = checks_of(json.loads((PAC / "health_detail_storm.json").read_text()))
    edit = lambda s, i: with_cluster(s, health="HEALTH_WARN", checks=checks)  # noqa: E731
    findings = run(history(1, edit=edit))
    assert worst(findings) == 1
    snap = replace(history(1, edit=edit)[0])
    assert snap.cluster is not None and snap.cluster.checks[0].code == "OSD_DOWN"


def test_network_and_disk_checks_carry_their_first_steps() -> None:
    doc = {"checks": {
        "OSD_SLOW_PING_TIME_BACK": {
            "severity": "HEALTH_WARN",
            "summary": {"message": "Slow OSD heartbeats on back (longest 1203.4ms)"},
            "detail": [{"message": "Slow OSD heartbeats on back from osd.1 [host-b] to osd.0 "
                                   "[host-a] 1203.4 msec"}]},
        "OSD_SCRUB_ERRORS": {"severity": "HEALTH_ERR",
                             "summary": {"message": "2 scrub errors", "count": 2}}}}
    edit = lambda s, i: with_cluster(s, health="HEALTH_ERR", checks=checks_of(doc))  # noqa: E731
    found = {f.target: f for f in firing(run(history(2, edit=edit)), "ceph.health.check")}
    ping = found["OSD_SLOW_PING_TIME_BACK"]
    assert any("dump_osd_network" in step for step in ping.procedure)
    assert any("MTU" in step for step in ping.procedure)
    scrub = found["OSD_SCRUB_ERRORS"]
    assert scrub.severity == Severity.CRITICAL
    assert any("list-inconsistent-obj" in step for step in scrub.procedure)
    assert any("smartctl" in step for step in scrub.procedure)


def test_a_recent_crash_beside_a_flapping_osd_says_why_it_flaps() -> None:
    from tests.captured import with_daemon

    doc = {"checks": {"RECENT_CRASH": {
        "severity": "HEALTH_WARN", "summary": {"message": "1 daemons have recently crashed"},
        "detail": [{"message": "osd.1 crashed on host vm at 2027-01-15T08:00:00.000000Z"}]}}}

    def edit(s: Snapshot, i: int) -> Snapshot:
        s = with_cluster(s, health="HEALTH_WARN", checks=checks_of(doc))
        return with_daemon(s, "osd.1", up=i != 2)
    (f,) = firing(run(history(5, step=5.0, edit=edit)), "ceph.health.check")
    assert any(step.startswith("osd.1 crashed and went down or up") for step in f.procedure)
    quiet = lambda s, i: with_cluster(s, health="HEALTH_WARN", checks=checks_of(doc))  # noqa: E731
    (g,) = firing(run(history(5, step=5.0, edit=quiet)), "ceph.health.check")
    assert not any("crashed and went down" in step for step in g.procedure)


def test_inactive_pgs_in_a_storm_are_one_finding_with_cephs_words() -> None:
    doc = {"checks": {"PG_AVAILABILITY": {
        "severity": "HEALTH_WARN",
        "summary": {"message": "Reduced data availability: 40 pgs peering", "count": 40},
        "detail": [{"message": "pg 3.1 is peering, acting [0,1]"}]}}}

    def edit(s: Snapshot, i: int) -> Snapshot:
        states = {"active+clean": 25, "peering": 40}
        return with_cluster(s, health="HEALTH_WARN", checks=checks_of(doc), num_pgs=65,
                            pg_states=states, pg_flags={"active": 25, "clean": 25,
                                                        "peering": 40})
    findings = run(history(5, step=5.0, edit=edit))
    assert {f.rule for f in findings if f.state == "firing"} >= {"ceph.peering.storm"}
    assert not [f for f in findings if f.rule in ("ceph.health.check", "ceph.pgs.inactive")]
    (storm,) = firing(findings, "ceph.peering.storm")
    assert storm.severity == Severity.CRITICAL
    assert storm.detail == ("pg 3.1 is peering, acting [0,1]",)
    assert any(n.startswith("ceph.pgs.inactive: 40 of 65 PGs not active") for n in storm.notes)
    assert any("dump_stuck inactive" in step for step in storm.procedure)
