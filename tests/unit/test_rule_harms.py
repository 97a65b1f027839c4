"""Advice that does no harm (issue 31): each rule's harm, on the captured lab snapshots
edited into the moment it fires. Each test fails on the rule as it was before."""

from __future__ import annotations

import pytest
from stormdeck.advisors.rules import BY_ID
from stormdeck.advisors.validate import judge
from stormdeck.collectors.model import Snapshot

from tests.captured import firing, history, lab_snapshot, run, with_cluster, with_config
from tests.unit.test_mclock import recovery_hurts, scrub_hurts

MCLOCK = "ceph.mclock.background_vs_clients"
SCRUB = "ceph.scrub.during_load"


def long(release: str = "pacific", edit=None) -> list[Snapshot]:
    return history(41, step=10.0, edit=edit, base=lab_snapshot(release=release))


def rule(rule_id: str) -> tuple:
    return (BY_ID[rule_id],)


# ---- 2. mClock: never high_client_ops over degraded PGs or the operator's choice -------


def degraded(edit):  # -> edit
    """The same moment, with 10 PGs degraded and undersized (an OSD down, copies missing)."""
    def out(s: Snapshot, i: int) -> Snapshot:
        s = edit(s, i)
        assert s.cluster is not None
        states = dict(s.cluster.pg_states)
        states["active+undersized+degraded"] = 10
        return with_cluster(s, pg_states=states)
    return out


@pytest.mark.parametrize(("rule_id", "hurts"), [(MCLOCK, recovery_hurts(0.025)),
                                                (SCRUB, scrub_hurts(0.025))])
def test_high_client_ops_is_never_proposed_while_pgs_are_degraded(rule_id: str, hurts) -> None:
    (f,) = firing(run(long("tentacle", hurts), rule(rule_id)), rule_id)
    assert [c.proposed for c in f.changes] == ["high_client_ops"]
    for f in run(long("tentacle", degraded(hurts)), rule(rule_id)):
        assert f.changes == (), f.changes
        assert any("degraded or undersized" in p for p in f.procedure)


@pytest.mark.parametrize(("rule_id", "hurts"), [(MCLOCK, recovery_hurts(0.025)),
                                                (SCRUB, scrub_hurts(0.025))])
def test_high_recovery_ops_the_operator_chose_is_not_overturned(rule_id: str, hurts) -> None:
    def chosen(s: Snapshot, i: int) -> Snapshot:
        return with_config(hurts(s, i), "osd_mclock_profile", "osd", "high_recovery_ops")

    found = run(long("tentacle", chosen), rule(rule_id))
    assert all(f.changes == () for f in found)
    assert any("high_recovery_ops" in p for f in found for p in f.procedure)


# ---- 9. validate: a stored recovery limit is not "nothing" ---------------------------------


def test_a_stored_osd_max_backfills_is_said_to_be_kept_at_boot() -> None:
    snap = with_config(lab_snapshot(release="tentacle"), "osd_max_backfills", "osd", "4")
    from types import SimpleNamespace

    from stormdeck.advisors.validate import steps
    found = {v.check: v for v in steps.cluster_settings(SimpleNamespace(snapshot=snap))}
    v = found["osd_max_backfills set but overridden"]
    assert "does nothing" not in v.summary and "remove it" not in v.summary.split(":")[0]
    assert "set_val_default" in v.summary and "osd_mclock_override_recovery_settings" in v.summary
    # A sleep is forced to 0 whatever is stored: that one does nothing.
    (sleep,) = judge.overridden_settings({"osd_scrub_sleep": ("0.1", "the OSD forces it")})
    assert "does nothing" in sleep.summary



# ---- 4. fast EC: information and a procedure; validate quiet where it cannot apply -------


def settings(snap: Snapshot) -> dict[str, judge.Verdict]:
    from types import SimpleNamespace

    from stormdeck.advisors.validate import steps
    return {v.check: v for v in steps.cluster_settings(SimpleNamespace(snapshot=snap))}


@pytest.mark.parametrize(("version", "pool", "verdict"), [
    ("20.2.1", {}, judge.WARN),
    ("20.2.0", {}, judge.PASS),  # crashes OSDs with the flag (tracker 74813)
    ("20.2.4", {"ec_technique": "cauchy_good"}, judge.PASS),  # the mon refuses it
    ("20.2.4", {"ec_plugin": "clay", "ec_technique": None}, judge.PASS),
    ("20.2.4", {"name": "default.rgw.buckets.data", "applications": ("rgw",)}, judge.PASS),
])
def test_validate_warns_of_fast_ec_only_where_it_could_be_turned_on(
        version: str, pool: dict, verdict: str) -> None:
    from tests.unit.test_rules import tentacle_ec
    snap = tentacle_ec(version, (), **pool)(lab_snapshot(release="tentacle"), 0)
    name = pool.get("name", "ecpool")
    v = settings(snap)[f"EC pool {name}"]
    assert v.verdict == verdict, v.summary
    if verdict == judge.WARN:
        assert "test pool" in v.summary
