"""The engine: warm-up, for-durations, hysteresis, vetted changes, mutes, settings files."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.advisors.engine import Engine, worst
from stormdeck.advisors.findings import Change, Check, RuleSettings, Severity
from stormdeck.advisors.mutes import MuteStore
from stormdeck.advisors.rules import Context, Rule
from stormdeck.advisors.rules.cpu import CoresStarved
from stormdeck.advisors.rules.peering import PeeringStorm
from stormdeck.advisors.settings import load_settings
from stormdeck.base.errors import UserError
from stormdeck.collectors.model import Snapshot
from tests.captured import history, lab_snapshot, with_cluster, with_daemon


def busy(level: float):
    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_daemon(s, "osd.0", cores_allowed=1.0, cores_used=level)
    return edit


def storm(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, num_pgs=65, pg_states={"unknown": 64, "active+clean": 1},
                        pg_flags={"unknown": 64, "active": 1, "clean": 1})


def states(engine: Engine, snaps: list[Snapshot], rule: str) -> list[str | None]:
    out: list[str | None] = []
    for i in range(1, len(snaps) + 1):
        found = [f for f in engine.evaluate(snaps[:i]) if f.rule == rule]
        out.append(found[0].state if found else None)
    return out


def test_warm_up_then_for_duration_then_firing() -> None:
    settings = load_settings()
    snaps = history(5, step=5.0, edit=storm)  # ceph.peering.storm: for 10 s
    assert states(Engine(settings, rules=[PeeringStorm]), snaps, "ceph.peering.storm") == \
        ["pending", "pending", "firing", "firing", "firing"]
    warm = {**settings, "ceph.peering.storm": replace(settings["ceph.peering.storm"],
                                                      warmup_samples=3)}
    assert states(Engine(warm, rules=[PeeringStorm]), snaps, "ceph.peering.storm") == \
        [None, None, "pending", "pending", "firing"]


def test_a_condition_that_ends_while_pending_never_fires() -> None:
    snaps = history(6, step=5.0, edit=lambda s, i: storm(s, i) if i != 1 else s)
    assert states(Engine(rules=[PeeringStorm]), snaps, "ceph.peering.storm") == \
        ["pending", None, "pending", "pending", "firing", "firing"]


def test_hysteresis_keeps_firing_between_the_thresholds() -> None:
    # cores_starved fires at 85% busy, clears under 75%; its window is 30 s.
    settings = load_settings()
    quick = {**settings, "ceph.osd.cores_starved": replace(
        settings["ceph.osd.cores_starved"], for_seconds=0, warmup_samples=1,
        params={**settings["ceph.osd.cores_starved"].params, "window_seconds": 1})}
    levels = [0.95, 0.80, 0.80, 0.70, 0.80]
    snaps = [busy(x)(s, i) for i, (x, s) in enumerate(zip(levels, history(5), strict=True))]
    engine = Engine(quick, rules=[CoresStarved])
    assert states(engine, snaps, "ceph.osd.cores_starved") == \
        ["firing", "firing", "firing", None, None]
    (resolved,) = engine.resolved
    assert resolved.rule == "ceph.osd.cores_starved" and resolved.target == "osd.0"


class Proposes(Rule):
    """A test rule that proposes whatever change it is given."""

    id = "test.proposes"
    title = "test"
    source = "K0"
    explanation = "test"
    change: Change
    severity = Severity.WARNING

    def check(self, ctx: Context) -> Iterable[Check]:
        yield Check(target="cluster", fire=True, clear=False, severity=self.severity,
                    summary="x", changes=(self.change,))


def proposing(rule_id: str, change: Change, severity: Severity = Severity.WARNING):
    return type(rule_id.replace(".", "_"), (Proposes,),
                {"id": rule_id, "change": change, "severity": severity})


def settings_for(*ids: str) -> dict[str, RuleSettings]:
    return {i: RuleSettings() for i in ids}


def config(key: str, current: str | None, proposed: str) -> Change:
    return Change(kind="ceph_config", target="osd", key=key, current=current,
                  proposed=proposed, command=f"ceph config set osd {key} {proposed}")


def test_changes_of_options_this_release_lacks_or_already_set_are_dropped() -> None:
    a = proposing("test.a", config("osd_peering_wq_threads", "2", "6"))  # gone in Pacific
    b = proposing("test.b", config("osd_scrub_sleep", "0.100000", "0.1"))
    c = proposing("test.c", config("osd_scrub_sleep", "0", "0.1"))
    engine = Engine(settings_for("test.a", "test.b", "test.c"), rules=[a, b, c])
    found = {f.rule: f for f in engine.evaluate([lab_snapshot()])}
    assert found["test.a"].changes == ()
    assert "does not exist in pacific" in found["test.a"].notes[0]
    assert found["test.b"].changes == () and "already 0.1" in found["test.b"].notes[0]
    assert len(found["test.c"].changes) == 1


def test_two_contradicting_changes_are_never_proposed_together() -> None:
    hi = proposing("test.hi", config("osd_scrub_sleep", "0", "0.1"), Severity.CRITICAL)
    lo = proposing("test.lo", config("osd_scrub_sleep", "0", "0.5"), Severity.INFO)
    found = {f.rule: f for f in Engine(settings_for("test.hi", "test.lo"),
                                       rules=[lo, hi]).evaluate([lab_snapshot()])}
    assert [c.proposed for c in found["test.hi"].changes] == ["0.1"]
    assert found["test.lo"].changes == ()
    assert "test.hi proposes 0.1" in found["test.lo"].notes[0]


def test_a_broken_rule_is_reported_and_the_others_still_judge() -> None:
    class Broken(Rule):
        id, title, source, explanation = "test.broken", "t", "K0", "t"

        def check(self, ctx: Context) -> Iterable[Check]:
            raise KeyError("boom")

    ok = proposing("test.ok", config("osd_scrub_sleep", "0", "0.1"))
    engine = Engine(settings_for("test.broken", "test.ok"), rules=[Broken, ok])
    assert [f.rule for f in engine.evaluate([lab_snapshot()])] == ["test.ok"]
    assert "KeyError" in engine.errors["test.broken"]


def test_mutes_need_a_ttl_stay_visible_persist_and_lift_when_worse(tmp_path: Path) -> None:
    path = tmp_path / "mutes.json"
    # The snapshots' time is the recorded lab's: "now" for the mutes file is the same.
    clock = lambda: lab_snapshot().time  # noqa: E731
    store = MuteStore(path, clock=clock)
    settings = load_settings()
    quick = {**settings, "ceph.osd.cores_starved": replace(
        settings["ceph.osd.cores_starved"], for_seconds=0, warmup_samples=1,
        params={**settings["ceph.osd.cores_starved"].params, "window_seconds": 1})}
    engine = Engine(quick, mutes=store, rules=[CoresStarved])
    (f,) = engine.evaluate([busy(0.90)(lab_snapshot(), 0)])
    with pytest.raises(UserError, match="time to live"):
        store.add(f, ttl=0)
    store.add(f, ttl=600, badness=engine.badness(f), now=f.last_seen)
    (muted,) = engine.evaluate([busy(0.92)(lab_snapshot(), 0)])
    assert muted.muted and muted.muted_until == pytest.approx(f.last_seen + 600)
    assert worst([muted]) == 0, "a muted finding does not set the exit code"
    # Another process, the same mutes.
    assert [m.target for m in MuteStore(path, clock=clock).list(now=f.last_seen)] == ["osd.0"]
    (worse,) = engine.evaluate([busy(1.20)(lab_snapshot(), 0)])
    assert not worse.muted and "unmuted: it grew worse" in worse.notes[-1]
    assert MuteStore(path, clock=clock).list(now=f.last_seen) == []


def test_expired_mutes_do_not_hold(tmp_path: Path) -> None:
    store = MuteStore(tmp_path / "mutes.json", clock=lambda: lab_snapshot().time)
    engine = Engine(mutes=store, rules=[PeeringStorm])
    snap = storm(lab_snapshot(), 0)
    (f,) = [x for x in engine.evaluate([snap]) if x.rule == "ceph.peering.storm"]
    store.add(f, ttl=5, badness=engine.badness(f), now=snap.time - 10)
    (g,) = [x for x in engine.evaluate([snap]) if x.rule == "ceph.peering.storm"]
    assert not g.muted


def test_a_corrupt_mutes_file_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "mutes.json").write_text("{torn")
    with pytest.raises(UserError, match="not a mutes file"):
        MuteStore(tmp_path / "mutes.json")


def test_user_thresholds_override_the_defaults(tmp_path: Path) -> None:
    f = tmp_path / "rules.toml"
    f.write_text('["curve.leaders.spread"]\nmax_range = 8\n\n'
                 '["host.tuned_profile"]\nenabled = false\n')
    s = load_settings(f)
    assert s["curve.leaders.spread"].params["max_range"] == 8
    assert s["curve.leaders.spread"].for_seconds == 20, "the rest stays default"
    assert not s["host.tuned_profile"].enabled
    assert "host.tuned_profile" not in {r.id for r in Engine(s).rules}


@pytest.mark.parametrize(("text", "words"), [
    ('["no.such.rule"]\nx = 1\n', "there is no rule 'no.such.rule'"),
    ('["curve.leaders.spread"]\nmax_rnage = 8\n', "has no setting 'max_rnage'"),
    ('["curve.leaders.spread"]\nmax_range = "five"\n', "must be a number of zero or more"),
    ('["curve.leaders.spread"]\nmax_range = -1\n', "must be a number of zero or more"),
    ('["host.tuned_profile"]\nenabled = "no"\n', "must be true or false"),
    ("this is = not toml [", "is not valid TOML"),
    ('"curve.leaders.spread" = 3\n', "must be a table"),
])
def test_bad_rules_files_are_one_sentence(tmp_path: Path, text: str, words: str) -> None:
    f = tmp_path / "rules.toml"
    f.write_text(text)
    with pytest.raises(UserError, match=words.replace("(", r"\(")):
        load_settings(f)


def test_exit_code_of_the_worst_firing_finding() -> None:
    (f,) = [x for x in Engine(rules=[PeeringStorm]).evaluate([storm(lab_snapshot(), 0)])]
    assert f.state == "pending" and worst([f]) == 0
    assert worst([replace(f, state="firing")]) == 2
    assert worst([replace(f, state="firing", severity=Severity.WARNING)]) == 1
    assert worst([replace(f, state="firing", severity=Severity.INFO)]) == 0
