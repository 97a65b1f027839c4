"""A kind's knowledge lives in its actuator: the engine, the CLI and the rules ask the table."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

from stormdeck.advisors import blast
from stormdeck.advisors.actuators.base import Backends, DataMovement
from stormdeck.advisors.actuators.curve import CurveLeaderSchedule
from stormdeck.advisors.actuators.table import ACTUATORS, actuator, change, moves_leaders
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.rules.mclock import MclockBackgroundVsClients
from tests.captured import history, with_cluster

ROOT = Path(__file__).resolve().parents[2]
# Where a change's kind was once tested by name: now each asks the actuator table.
ASKERS = ("advisors/engine.py", "advisors/rules/leaders.py", "stormdeck/cli_change.py",
          "stormdeck/assembly.py", "advisors/apply.py", "advisors/plan.py",
          "advisors/journal.py",
          *sorted(str(f.relative_to(ROOT)) for f in (ROOT / "advisors/blast").glob("*.py")))


def kind_literals(path: Path) -> list[str]:
    """Every comparison of something's `.kind` with a change kind's name."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and \
                node.left.attr == "kind":
            for c in node.comparators:
                for lit in ast.walk(c):
                    if isinstance(lit, ast.Constant) and lit.value in ACTUATORS:
                        out.append(f"{path.name}:{node.lineno} {lit.value}")
    return out


def test_no_kind_is_tested_by_name_outside_the_actuators() -> None:
    assert [hit for p in ASKERS for hit in kind_literals(ROOT / p)] == []


def test_the_leader_schedule_is_followed_from_the_range_its_change_saw() -> None:
    c = change("curve_leader_schedule", "pool1", "rapid-leader-schedule", "range 9",
               "range <= 5", args={"pool_id": "1"})
    seen = []

    def follow(pool: str, planned: str | None) -> tuple[bool, str]:
        seen.append((pool, planned))
        return True, "converged"

    v = CurveLeaderSchedule().verify(Backends(curve_follow=follow), c, None)
    assert (v.outcome, seen) == ("applied", [("pool1", "9")])


def test_which_kinds_move_leaders_is_the_actuators_word() -> None:
    assert [k for k in ACTUATORS if moves_leaders(k)] == ["curve_leader_schedule"]
    assert moves_leaders("a kind of a later version") is False


def test_what_moves_data_is_the_actuators_word() -> None:
    """The blast radius and the journal ask the actuator whether a change moves data, what
    it does to placement and whether apply follows it to active+clean."""
    noup = change("osd_flag", "osd.3", "noup", "unset", "set")
    split = change("pool_set", "rbd", "pgp_num", "32", "64")
    others = [change("osd_flag", "cluster", "noup", "unset", "set"),
              change("osd_flag", "osd.3", "noup", "set", "unset"),
              change("pool_set", "rbd", "size", "2", "3"),
              change("fast_ec", "ecpool", "allow_ec_optimizations", "false", "true"),
              change("ceph_config", "osd", "osd_max_backfills", "1", "2"),
              replace(split, kind="a kind of a later version")]
    assert [blast.moves_data(c) for c in (noup, split)] == [True, True]
    assert [blast.moves_data(c) for c in others] == [False] * len(others)
    assert actuator("osd_flag").data_movement(noup) == DataMovement(held_down=(3,))
    assert actuator("pool_set").data_movement(split) == \
        DataMovement(pool="rbd", key="pgp_num", count="64")
    assert blast.splits_pool(split) and not blast.splits_pool(noup)
    # noup moves nothing until that OSD next goes down: nothing of its own to follow.
    assert actuator("pool_set").follows_to_clean(split)
    assert not actuator("osd_flag").follows_to_clean(noup)
    assert [k for k, a in ACTUATORS.items() if a.unset_removes] == ["ceph_config"]


def test_the_engine_drops_what_the_actuator_vets() -> None:
    # An option this release does not have (its config help said ENOENT): the Ceph
    # config actuator says so, the engine drops the change and keeps the note.
    snaps = history(3)
    cluster = snaps[-1].cluster
    missing = {k: v for k, v in cluster.config.items() if k != "osd_mclock_profile"}
    snaps = [with_cluster(s, config=missing) for s in snaps]
    ch = change("ceph_config", "osd", "osd_mclock_profile", "balanced", "high_client_ops")
    why = actuator("ceph_config").vet(snaps[-1].cluster, ch)
    assert why is not None and "does not exist" in why
    for kind in ACTUATORS:
        if kind != "ceph_config":
            assert ACTUATORS[kind].vet(snaps[-1].cluster, ch) is None
    engine = Engine(rules=[MclockBackgroundVsClients])
    for f in engine.evaluate(snaps):
        assert all(c.key != "osd_mclock_profile" for c in f.changes)


def test_one_model_and_one_evidence() -> None:
    # Two model.py and three things called "evidence" before: the advisors' one is named
    # for what it holds (findings), and what validate measured is "validated".
    assert not (ROOT / "advisors" / "model.py").exists()
    assert not (ROOT / "advisors" / "evidence.py").exists()
    from stormdeck.advisors.findings import Evidence, Finding
    from stormdeck.advisors.validated import ValidatedStore

    assert "evidence" in Finding.__dataclass_fields__ and Evidence and ValidatedStore
    assert "validated" in Engine.__init__.__code__.co_varnames
