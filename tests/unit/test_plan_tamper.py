"""Plans that cannot lie: every way a plan file was found to lie (issue 27, item 3) refused.

Each case edits a plan stormdeck made itself (the rules' own changes, rendered by their
actuators) the way the fault campaign did, and loads it as `stormdeck apply` does.
"""

from __future__ import annotations

import json
import os
import stat
import time
import tracemalloc
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from stormdeck.advisors.actuators.table import ACTUATORS
from stormdeck.advisors.actuators.table import change as make
from stormdeck.advisors.findings import Change
from stormdeck.advisors.plan import MAX_BYTES, Plan, check_plan, plan_from_finding, review
from stormdeck.advisors.rules import BY_ID
from stormdeck.base.errors import UserError
from tests.captured import firing, run
from tests.unit.test_curve_rules import TWO_POOLS, judge, snap
from tests.unit.test_rules import CASES, EVIDENCE

FSID = "8f4c1b9e-5d0a-4c7e-9b1f-2a3c4d5e6f70"


def scrub_plan(**plan: Any) -> dict[str, Any]:
    """What `stormdeck plan ceph.scrub.during_load` writes, as JSON."""
    c = make("ceph_config", "osd", "osd_scrub_sleep", "0", "0.1", runtime=True)
    made = Plan(id="a1b2c3d4e5f6", created=1.0, rule="ceph.scrub.during_load", target="osd",
                summary="osd_scrub_sleep is 0 under wpq", source="K3.7", fsid=FSID,
                changes=(c,))
    return {**json.loads(made.to_json()), **plan}


def load(tmp_path: Path, raw: Any) -> Plan:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(raw))
    return Plan.load(path)


def refused(tmp_path: Path, raw: Any, words: str) -> str:
    with pytest.raises(UserError, match=words) as exc:
        load(tmp_path, raw)
    message = str(exc.value)
    assert "\n" not in message and "\x1b" not in message, "one sentence, escaped"
    return message


def with_change(raw: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {**raw, "changes": [{**raw["changes"][0], **fields}]}


def test_an_untampered_plan_loads_and_shows_its_rendered_command(tmp_path: Path) -> None:
    plan = load(tmp_path, scrub_plan())
    assert plan.changes[0].command == "ceph config set osd osd_scrub_sleep 0.1"
    assert "  ceph config set osd osd_scrub_sleep 0.1" in review(plan).splitlines()


def test_forged_command_text_is_refused(tmp_path: Path) -> None:
    raw = scrub_plan()
    # The command says scrub sleep; the change sets mon_allow_pool_delete.
    refused(tmp_path, with_change(raw, target="mon", key="mon_allow_pool_delete",
                                  proposed="true"), "never proposes")
    # The change is the rule's own; only the text differs: shown text != what runs.
    msg = refused(tmp_path, with_change(raw, command="ceph config set osd osd_scrub_sleep 0.5"),
                  "is not what the change runs")
    assert "edited or made by another version" in msg


def test_an_option_the_rule_cannot_propose_is_refused(tmp_path: Path) -> None:
    raw = with_change(scrub_plan(), key="osd_max_backfills", proposed="64",
                      command="ceph config set osd osd_max_backfills 64")
    refused(tmp_path, raw, "rule ceph.scrub.during_load never proposes ceph_config "
                           "'osd_max_backfills'")
    # Its own option on another section, or a value of another shape, neither.
    refused(tmp_path, with_change(scrub_plan(), target="global",
                                  command="ceph config set global osd_scrub_sleep 0.1"),
            "never proposes")
    refused(tmp_path, with_change(scrub_plan(), proposed="0.1,osd_max_backfills=9",
                                  command="ceph config set osd osd_scrub_sleep "
                                          "0.1,osd_max_backfills=9"), "never proposes")


@pytest.mark.parametrize("rule", ["ceph.peering.storm", "ceph.osd.flapping",
                                  "ceph.scrub.during_load"])
def test_the_pause_flag_through_a_rule_that_cannot_set_it_is_refused(
        tmp_path: Path, rule: str) -> None:
    pause = make("osd_flag", "cluster", "pause", "unset", "set")
    raw = scrub_plan(rule=rule, changes=[asdict(pause)])
    refused(tmp_path, raw, f"rule {rule} never proposes osd_flag 'pause'")
    # Added beside a change the rule does propose: the whole plan goes.
    storm = make("osd_flag", "cluster", "noscrub", "unset", "set")
    assert load(tmp_path, scrub_plan(rule="ceph.peering.storm", changes=[asdict(storm)]))
    refused(tmp_path, scrub_plan(rule="ceph.peering.storm",
                                 changes=[asdict(storm), asdict(pause)]), "never proposes")


def test_an_unknown_rule_is_refused(tmp_path: Path) -> None:
    refused(tmp_path, scrub_plan(rule="my.own.rule"), "names no rule of this stormdeck")


def test_a_ceph_plan_without_an_fsid_is_refused(tmp_path: Path) -> None:
    refused(tmp_path, scrub_plan(fsid=None), r"names no cluster \(fsid\)")
    raw = scrub_plan()
    del raw["fsid"]
    refused(tmp_path, raw, "names no cluster")
    refused(tmp_path, scrub_plan(fsid="x; rm -rf /"), "is not a cluster's fsid")
    # A host's tuned profile is no Ceph change: no cluster to name.
    tuned = make("tuned_profile", "vm", "profile", "balanced", "latency-performance")
    assert load(tmp_path, scrub_plan(rule="host.tuned_profile", fsid=None,
                                     changes=[asdict(tuned)]))


def test_duplicates_and_too_many_changes_are_refused(tmp_path: Path) -> None:
    raw = scrub_plan()
    refused(tmp_path, {**raw, "changes": raw["changes"] * 2}, "twice")
    refused(tmp_path, {**raw, "changes": raw["changes"] * 100}, "100 changes, more than the 32")
    # The campaign's 2,000: over the size limit as a file, over the count as data.
    refused(tmp_path, {**raw, "changes": raw["changes"] * 2000}, "larger than 256 KiB")
    with pytest.raises(UserError, match="2000 changes"):
        Plan.from_dict({**raw, "changes": raw["changes"] * 2000})


def test_an_oversized_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    raw = scrub_plan()
    raw["summary"] = "x" * (MAX_BYTES + 10)
    path.write_text(json.dumps(raw))
    with pytest.raises(UserError, match="larger than 256 KiB"):
        Plan.load(path)
    # Under the file limit, a field over its own limit is refused too.
    refused(tmp_path, {**raw, "summary": "x" * 5000}, "summary is longer than")


def test_dev_zero_is_refused_at_once_with_flat_memory() -> None:
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(UserError, match="not a regular file"):
            Plan.load(Path("/dev/zero"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 2
    assert peak < 4 * MAX_BYTES


def test_deep_nesting_and_wrong_types_are_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000)
    with pytest.raises(UserError, match="not a plan file"):
        Plan.load(path)
    for bad in (with_change(scrub_plan(), proposed=["0.1"]),
                with_change(scrub_plan(), runtime="yes"),
                with_change(scrub_plan(), args="transport"),
                scrub_plan(id=7), scrub_plan(created="now"), scrub_plan(changes={})):
        refused(tmp_path, bad, "not a plan file")


@pytest.mark.parametrize("field", ["id", "rule", "source", "summary", "target"])
def test_control_characters_never_reach_the_terminal(tmp_path: Path, field: str) -> None:
    evil = "x\x1b[8m\x1b]0;owned\x07\n  ceph config set osd osd_scrub_sleep 0.1\r"
    raw = scrub_plan(**{field: evil})
    if field in ("id", "rule"):
        # An id is a plain token; a rule must exist: refused, and the message escaped.
        msg = refused(tmp_path, raw, "is not a plain token" if field == "id" else "names no rule")
        assert "\\x1b" in msg
        return
    plan = load(tmp_path, raw)
    text = review(plan)
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    # The newline does not make a fake line: the command appears once, as the real one.
    lines = text.splitlines()
    assert len(lines) == len(review(load(tmp_path, scrub_plan())).splitlines())
    assert [line for line in lines if line.strip().startswith("ceph config")] == \
        ["  ceph config set osd osd_scrub_sleep 0.1"]


def test_a_note_with_control_characters_is_escaped(tmp_path: Path) -> None:
    plan = load(tmp_path, with_change(scrub_plan(), note="fine\n  ceph osd set pause\x1b[2J"))
    text = review(plan)
    assert "\x1b" not in text and "\n  ceph osd set pause" not in text


def test_an_understated_reversibility_is_refused_and_a_stated_reach_ignored(
        tmp_path: Path) -> None:
    # Plan files from before issue 30 carry a hand-written "blast_radius": they load, and
    # the label is dropped; the reach shown and confirmed is computed.
    old = load(tmp_path, with_change(scrub_plan(), blast_radius="daemon"))
    assert old.phrase_reasons(lambda c: True) == ["osd_scrub_sleep on osd affects all OSDs"]
    assert "moves no data, affects all OSDs" in review(old)
    assert not hasattr(old.changes[0], "blast_radius")
    sched = asdict(make("curve_leader_schedule", "pool_a", "rapid-leader-schedule",
                        "range 12", "range <= 5", args={"pool_id": "1"}))
    ok = scrub_plan(rule="curve.leaders.spread", fsid=None, changes=[sched])
    assert load(tmp_path, ok).needs_phrase(lambda c: True)
    refused(tmp_path, with_change(ok, reversible=True), "cannot be undone: refused")
    assert load(tmp_path, with_change(ok, blast_radius="daemon")).phrase_reasons(
        lambda c: True)[0].endswith("affects pool")
    # Fast EC on an existing pool is the operator's step (issue 31): no rule proposes it.
    fast_ec = asdict(make("fast_ec", "ecpool", "allow_ec_optimizations", "false", "true"))
    refused(tmp_path, scrub_plan(rule="ceph.ec.fast_ec_off", changes=[fast_ec]), "propose")
    wider = load(tmp_path, with_change(scrub_plan(), blast_radius="cluster"))
    assert wider.phrase_reasons(lambda c: True) == ["osd_scrub_sleep on osd affects all OSDs"]


def test_the_confirmation_is_computed_not_read_from_the_file(tmp_path: Path) -> None:
    c = make("ceph_config", "osd.3", "osd_max_backfills", "1", "3", runtime=True)
    plan = Plan(id="p", created=1.0, rule="r", target="osd.3", summary="", source="",
                fsid=FSID, changes=(c,))
    assert not plan.needs_phrase(lambda c: True)
    # The file says runtime: what the cluster's config help says at apply time decides.
    assert plan.phrase_reasons(lambda c: False) == ["osd_max_backfills on osd.3 needs a restart"]
    assert "is unknown" in plan.phrase_reasons(lambda c: None)[0]
    assert plan.needs_phrase()  # no cluster to ask: as if it needed a restart


def test_device_cache_and_leader_schedule_take_their_parameters_from_args(
        tmp_path: Path) -> None:
    cache = make("device_cache", "vm:/dev/sdb", "volatile write cache", "on", "off",
                 args={"transport": "sas"})
    assert cache.command == "sdparm --clear WCE --save /dev/sdb"
    raw = scrub_plan(rule="disk.write_cache_on", fsid=None, changes=[asdict(cache)])
    assert load(tmp_path, raw).changes[0].arg("transport") == "sas"
    # The command text claims another tool: refused, not parsed.
    refused(tmp_path, with_change(raw, command="hdparm -W 0 /dev/sdb"),
            "is not what the change runs")
    for bad in ([["transport", "sata; reboot"]], [["transport", "ide"]],
                [["transport", "sas"], ["transport", "sata"]], [["tool", "dd"]]):
        refused(tmp_path, with_change(raw, args=bad), "not one it takes")
    sched = make("curve_leader_schedule", "pool_a", "rapid-leader-schedule", "range 12",
                 "range <= 5", args={"pool_id": "1"})
    raw = scrub_plan(rule="curve.leaders.spread", fsid=None, changes=[asdict(sched)])
    assert load(tmp_path, raw).changes[0].command.endswith("-logical_pool_id=1 "
                                                           "-scheduleAll=false")
    refused(tmp_path, with_change(raw, args=[["pool_id", "2"]]), "is not what the change runs")
    refused(tmp_path, with_change(raw, args=[["pool_id", "1 -scheduleAll=true"]]),
            "not one it takes")


def test_plan_files_are_written_0600(tmp_path: Path) -> None:
    plan = load(tmp_path, scrub_plan())
    out = tmp_path / "saved.json"
    out.write_text("")
    out.chmod(0o644)  # an older file in its place keeps no wider mode
    old = os.umask(0)
    try:
        plan.save(out)
        plan.save(tmp_path / "new.json")
    finally:
        os.umask(old)
    for path in (out, tmp_path / "new.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert Plan.load(out) == plan
    with pytest.raises(UserError, match="cannot write the plan"):
        plan.save(tmp_path / "missing" / "p.json")


# ---- the rule registry against the rules' own code ----------------------------------------


def proposals(tmp_path: Path) -> list[tuple[str, Any]]:
    """Every finding with changes the rules' captured cases raise (tests/unit/test_rules.py,
    with the evidence some of them act on)."""
    out = []
    for rule_id, (bad, _, _) in sorted(CASES.items()):
        store = EVIDENCE[rule_id](tmp_path) if rule_id in EVIDENCE else None
        for f in firing(run(bad(), validated=store), rule_id):
            if f.changes:
                out.append((rule_id, f))
    return out


def test_every_rules_proposals_pass_the_plan_check(tmp_path: Path) -> None:
    seen: set[str] = set()
    for rule_id, finding in proposals(tmp_path):
        plan = plan_from_finding(finding, FSID)
        check_plan(plan)
        for c in plan.changes:
            assert c.command == ACTUATORS[c.kind].command(c), (rule_id, c)
        # And through a file, as `stormdeck apply` reads it.
        path = tmp_path / f"{rule_id}.json"
        plan.save(path)
        assert Plan.load(path) == plan
        seen.add(rule_id)
    # Every declaration is proved by a case, and every rule that proposes declares it.
    declared = {r for r, cls in BY_ID.items() if cls.proposes}
    assert seen == declared, (declared - seen, seen - declared)


def test_the_all_pools_leader_schedule_passes_the_plan_check() -> None:
    from stormdeck.advisors.rules.leaders import CurveLeaderSpread
    from stormdeck.collectors.curve.source import CurveSource
    from tests.curve_wire import CurveWire

    with CurveWire(pools=TWO_POOLS) as wire:
        (check,) = judge(CurveLeaderSpread, [snap(CurveSource(mds=[m.addr for m in wire.mds]))])
    (c,) = check.changes
    plan = Plan(id="p", created=1.0, rule="curve.leaders.spread", target=c.target, summary="",
                source="", fsid=None, changes=(c,))
    check_plan(plan)
    assert ACTUATORS[c.kind].width(c) == "cluster" and plan.needs_phrase(lambda c: True)


def test_a_change_off_its_declaration_is_refused_by_the_registry() -> None:
    """The check itself can fail: a rule's change with its key or target moved."""
    storm = BY_ID["ceph.peering.storm"]
    flag = make("osd_flag", "cluster", "noscrub", "unset", "set")
    assert storm.may_propose(flag)
    assert not storm.may_propose(replace(flag, key="pause"))
    assert not storm.may_propose(replace(flag, proposed="unset"))
    assert not BY_ID["ceph.osd.flapping"].may_propose(replace(flag, key="noup"))
    assert BY_ID["ceph.osd.flapping"].may_propose(
        make("osd_flag", "osd.7", "noup", "unset", "set"))
    assert not BY_ID["ceph.slow_ops"].may_propose(flag), "an advice-only rule proposes nothing"
    assert isinstance(flag, Change)


class _Checked:
    """An executor's checks that pass, for the review's own: what is left to judge is the
    plan against what the cluster says of applying at runtime."""

    def refuse_if_read_only(self, what: str) -> None:
        pass

    def check_stale(self, plan: Plan) -> None:
        pass

    def prediction(self, plan: Plan) -> None:
        return None

    def guard(self, plan: Plan, prediction: object) -> None:
        pass


def test_apply_refuses_a_plan_that_says_runtime_where_the_cluster_says_restart() -> None:
    from stormdeck.advisors.review import review_plan

    c = make("ceph_config", "osd.3", "osd_max_backfills", "1", "3", runtime=True)
    plan = Plan(id="p", created=1.0, rule="r", target="osd.3", summary="", source="",
                fsid=FSID, changes=(c,))
    with pytest.raises(UserError, match="the cluster says it needs a restart: refused"):
        review_plan(_Checked(), plan, lambda c: False)
    # The cluster agrees: reviewed, and a one-OSD change that applies live needs no phrase.
    assert review_plan(_Checked(), plan, lambda c: True).reasons == ()
    told = review_plan(_Checked(), replace(plan, changes=(replace(c, runtime=False),)),
                       lambda c: False)
    assert told.reasons == ("osd_max_backfills on osd.3 needs a restart",)
