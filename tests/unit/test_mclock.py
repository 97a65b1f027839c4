"""The scheduler and release table (advisors/overrides.py) and the rules that read it, on the
outputs captured from each release's lab (tests/data/<release>/): Pacific runs wpq, Reef and
Tentacle mclock_scheduler."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.advisors import overrides
from stormdeck.advisors.findings import Change, Check, Severity
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.rules import Context, Rule
from stormdeck.collectors.model import Snapshot
from tests.captured import (
    firing,
    history,
    lab_snapshot,
    run,
    with_cluster,
    with_config,
    with_daemon,
)
from tests.conftest import DATA

RELEASES = ("pacific", "reef", "tentacle")
SCHEDULER = {"pacific": "wpq", "reef": "mclock_scheduler", "tentacle": "mclock_scheduler"}


def long(release: str, edit=None) -> list[Snapshot]:
    return history(41, step=10.0, edit=edit, base=lab_snapshot(release=release))


# ---- the table --------------------------------------------------------------------------


@pytest.mark.parametrize("release", RELEASES)
def test_the_scheduler_is_read_from_the_releases_own_config_help(release: str) -> None:
    c = lab_snapshot(release=release).cluster
    assert overrides.scheduler(c) == SCHEDULER[release]
    # Without the option's config help (an old recording), the release's default.
    bare = replace(c, config={k: v for k, v in c.config.items() if k != "osd_op_queue"})
    assert overrides.scheduler(bare) == SCHEDULER[release]


def test_every_option_in_the_table_is_one_the_release_knows() -> None:
    # The names come from OSD.cc and osd.yaml.in; Tentacle's config help knows each one
    # the collector watches (a misspelt name would never match a proposal).
    helps = json.loads((DATA / "tentacle" / "config_help_watched.json").read_text())
    watched = [name for name in overrides.TABLE if name in helps]
    assert len(watched) >= 17 and all(helps[name] for name in watched)
    assert helps["osd_op_queue"]["default"] == "mclock_scheduler"
    # Each entry is about one scheduler (debug_random picks one per OSD: maybe mClock).
    table = overrides.TABLE
    assert overrides.runs(table["osd_scrub_sleep"], "debug_random")
    assert not overrides.runs(table["osd_scrub_sleep"], "wpq")
    assert overrides.runs(table["osd_mclock_profile"], "wpq")
    assert not overrides.runs(table["osd_mclock_profile"], "mclock_scheduler")
    assert helps["osd_mclock_override_recovery_settings"]["default"] is False


@pytest.mark.parametrize("release", RELEASES)
def test_vet_drops_what_mclock_overrides_and_keeps_the_rest(release: str) -> None:
    c = lab_snapshot(release=release).cluster
    mclock = SCHEDULER[release] == "mclock_scheduler"
    for option in ("osd_scrub_sleep", "osd_recovery_sleep_hdd", "osd_snap_trim_sleep",
                   "osd_delete_sleep_ssd", "osd_max_backfills", "osd_recovery_max_active_hdd"):
        why = overrides.vet(c, option, "osd")
        if mclock:
            assert why and why.startswith(f"{option} is overridden by mclock_scheduler")
            assert "OSD.cc" in why and "osd_mclock_profile" in why
        else:
            assert why is None, why
    profile = overrides.vet(c, "osd_mclock_profile", "osd")
    assert profile is None if mclock else profile.startswith("osd_mclock_profile does nothing")
    assert "does not exist in" in overrides.vet(c, "osd_map_max_advance", "osd")


def test_the_recovery_override_option_lifts_the_recovery_limits_only() -> None:
    snap = with_config(lab_snapshot(release="tentacle"),
                       "osd_mclock_override_recovery_settings", "osd", "true")
    assert overrides.vet(snap.cluster, "osd_max_backfills", "osd.1") is None
    assert overrides.vet(snap.cluster, "osd_recovery_max_active_ssd", "osd") is None
    assert overrides.vet(snap.cluster, "osd_scrub_sleep", "osd") is not None


def test_a_cluster_moved_to_wpq_or_a_class_mask_is_judged_by_its_own_section() -> None:
    wpq = with_config(lab_snapshot(release="tentacle"), "osd_op_queue", "osd", "wpq")
    assert overrides.scheduler(wpq.cluster) == "wpq"
    assert overrides.vet(wpq.cluster, "osd_scrub_sleep", "osd") is None
    pac = with_config(lab_snapshot(), "osd_op_queue", "global", "mclock_scheduler")
    assert overrides.vet(pac.cluster, "osd_recovery_sleep_hdd", "osd/class:hdd") is not None


class _Proposes(Rule):
    """A rule that proposes what the old ceph.scrub.during_load did, to test the engine."""

    id = "ceph.scrub.during_load"  # borrows real settings
    title = "test"
    source = "K3.6"
    explanation = "test"

    def check(self, ctx: Context):
        yield Check(target="osd", fire=True, clear=False, severity=Severity.INFO,
                    summary="s", changes=(
                        Change("ceph_config", "osd", "osd_scrub_sleep", "0", "0.1",
                               "ceph config set osd osd_scrub_sleep 0.1", runtime=True),
                        Change("ceph_config", "osd", "osd_mclock_profile", "balanced",
                               "high_client_ops", "ceph config set osd osd_mclock_profile "
                               "high_client_ops", runtime=True)))


@pytest.mark.parametrize("release", RELEASES)
def test_the_engine_never_proposes_an_overridden_option(release: str) -> None:
    (f,) = run(long(release), rules=(_Proposes,))
    keys = [c.key for c in f.changes]
    if SCHEDULER[release] == "wpq":
        assert keys == ["osd_scrub_sleep"]
        assert any(n.startswith("osd_mclock_profile does nothing under wpq") for n in f.notes)
    else:
        assert keys == ["osd_mclock_profile"]
        assert any(n.startswith("osd_scrub_sleep is overridden by mclock_scheduler")
                   for n in f.notes), f.notes


# ---- ceph.scrub.during_load ---------------------------------------------------------------


def scrubbing(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, pg_states={"active+clean": 30, "active+clean+scrubbing+deep": 3})


def scrub_hurts(latency: float, start: int = 20):
    """From sample `start`, 3 PGs scrub and every OSD commits in `latency` seconds."""
    def edit(s: Snapshot, i: int) -> Snapshot:
        if i < start:
            return s
        s = scrubbing(s, i)
        for osd in ("osd.0", "osd.1", "osd.2"):
            s = with_daemon(s, osd, commit_latency=latency)
        return s
    return edit


def test_scrub_under_wpq_proposes_the_sleep_and_never_the_load_threshold() -> None:
    assert not firing(run(long("pacific")), "ceph.scrub.during_load"), "no scrub runs"
    (f,) = firing(run(long("pacific", scrubbing)), "ceph.scrub.during_load")
    assert [(c.key, c.current, c.proposed) for c in f.changes] == \
        [("osd_scrub_sleep", "0", "0.1")]
    assert "under wpq" in f.summary

    def many_core(s: Snapshot, i: int) -> Snapshot:
        return replace(s, hosts={"vm": replace(s.hosts["vm"], cpus=32)})

    (f,) = firing(run(long("pacific", lambda s, i: many_core(scrubbing(s, i), i))),
                  "ceph.scrub.during_load")
    assert "osd_scrub_load_threshold" not in {c.key for c in f.changes}


@pytest.mark.parametrize("release", ["reef", "tentacle"])
def test_scrub_under_mclock_points_to_the_profile_and_the_hours(release: str) -> None:
    assert not firing(run(long(release)), "ceph.scrub.during_load"), "no scrub, no finding"
    # A scrub under load with clients as fast as without it: no evidence it hurts them.
    assert not firing(run(long(release, scrubbing)), "ceph.scrub.during_load")
    (f,) = firing(run(long(release, scrub_hurts(0.025))), "ceph.scrub.during_load")
    assert [(c.key, c.current, c.proposed) for c in f.changes] == \
        [("osd_mclock_profile", "balanced", "high_client_ops")]
    assert "set balanced back" in f.changes[0].note
    assert any("osd_scrub_begin_hour" in p for p in f.procedure)
    assert any("forced to 0" in p for p in f.procedure)
    assert "3 PGs scrubbing" in f.summary and "mclock_scheduler" in f.summary

    def client_ops(s: Snapshot, i: int) -> Snapshot:
        return with_config(scrub_hurts(0.025)(s, i), "osd_mclock_profile", "osd",
                           "high_client_ops")

    assert not firing(run(long(release, client_ops)), "ceph.scrub.during_load")


# ---- ceph.mclock.background_vs_clients --------------------------------------------------


def recovery_hurts(latency: float, start: int = 20):
    """From sample `start`, 10 PGs recover and every OSD commits in `latency` seconds."""
    def edit(s: Snapshot, i: int) -> Snapshot:
        if i < start:
            return s
        s = with_cluster(s, pg_states={"active+clean": 23, "active+recovering": 10},
                         recovering_bps=40e6)
        for osd in ("osd.0", "osd.1", "osd.2"):
            s = with_daemon(s, osd, commit_latency=latency)
        return s
    return edit


def test_mclock_rule_proposes_high_client_ops_with_its_evidence() -> None:
    (f,) = firing(run(long("tentacle", recovery_hurts(0.025))),
                  "ceph.mclock.background_vs_clients")
    assert f.severity == Severity.WARNING
    (ch,) = f.changes
    assert (ch.kind, ch.key, ch.current, ch.proposed) == \
        ("ceph_config", "osd_mclock_profile", "balanced", "high_client_ops")
    assert ch.command == "ceph config set osd osd_mclock_profile high_client_ops"
    assert ch.runtime is True  # Tentacle's config help: a runtime option
    assert "25.0 ms" in f.summary and "2.0 ms without" in f.summary
    metrics = {e.metric: e for e in f.evidence}
    assert metrics["commit_latency with background work"].avg == pytest.approx(0.025)
    assert metrics["PGs recovering, backfilling or scrubbing"].now == 10
    assert "mclock-forces-sleeps-zero" in f.source


@pytest.mark.parametrize(("release", "edit"), [
    ("tentacle", recovery_hurts(0.0025)),  # recovery, clients barely slower
    ("tentacle", None),  # no background work
    ("pacific", recovery_hurts(0.025)),  # wpq: the sleeps and limits still work there
    ("reef", lambda s, i: with_config(recovery_hurts(0.025)(s, i), "osd_mclock_profile",
                                      "osd", "high_client_ops")),
])
def test_mclock_rule_is_silent_where_it_has_nothing_to_say(release: str, edit) -> None:
    assert not [f for f in run(long(release, edit))
                if f.rule == "ceph.mclock.background_vs_clients"]


@pytest.mark.parametrize("release", ["reef", "tentacle"])
def test_no_finding_proposes_an_option_mclock_overrides(release: str) -> None:
    # The captured lab under load, with scrubs and with a recovery hurting clients:
    # whatever fires, nothing in the table is proposed.
    mclock_overrides = {k for k, o in overrides.TABLE.items() if o.scheduler == overrides.MCLOCK}
    proposed = set()
    for edit in (None, scrubbing, recovery_hurts(0.025)):
        for f in run(long(release, edit)):
            proposed |= {c.key for c in f.changes}
    assert proposed and not proposed & mclock_overrides, proposed


# ---- the journal -----------------------------------------------------------------------


def test_an_overridden_entry_and_its_undo(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.jsonl")
    ch = Change("ceph_config", "osd", "osd_scrub_sleep", "0", "0.1",
                "ceph config set osd osd_scrub_sleep 0.1", runtime=True)
    first = j.intent(ch, None, rule="ceph.scrub.during_load")
    j.end(first, overrides.outcome("mclock_scheduler"), "osd.0 runs 0", "0")
    back = replace(ch, current="0.1", proposed="unset",
                   command="ceph config rm osd osd_scrub_sleep")
    undo = j.intent(back, "0.1", undoes=first)
    j.end(undo, overrides.outcome("mclock_scheduler"), "", "0")
    entries = j.entries()
    assert entries[0].status == "overridden by mclock_scheduler"
    assert entries[0].undone_by == [undo]
    assert overrides.is_overridden(entries[1].outcome)


# ---- validate's settings step ------------------------------------------------------------


@pytest.mark.parametrize("release", RELEASES)
def test_validate_judges_scrubs_by_scheduler_and_passes_the_defaults(release: str) -> None:
    from types import SimpleNamespace

    from stormdeck.advisors.validate import checks, judge

    def verdicts(snap: Snapshot) -> dict[str, str]:
        return {v.check: v.verdict for v in checks.cluster_settings(SimpleNamespace(snapshot=snap))
                if "scrub" in v.check or "mclock" in v.check or "overridden" in v.check}

    snap = lab_snapshot(release=release)
    found = verdicts(snap)
    assert set(found.values()) == {judge.PASS}, found
    assert ("osd_scrub_sleep" in found) == (release == "pacific")
    assert ("osd_mclock_profile" in found) == (release != "pacific")
    stored = verdicts(with_config(snap, "osd_scrub_sleep", "osd", "0.100000"))
    if release == "pacific":
        assert stored["osd_scrub_sleep"] == judge.PASS
    else:
        assert stored["osd_scrub_sleep set but overridden"] == judge.WARN
