"""Changes against the real lab: plan, apply, read back, journal, undo, and every refusal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path

import pytest

from stormdeck.advisors.actuators.table import change as make
from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.plan import Plan
from tests.conftest import LabCluster, Result, ceph_json, eventually, not_required, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}


def journal(env: dict[str, str]) -> Journal:
    return Journal(Path(env["XDG_STATE_HOME"]) / "stormdeck" / "journal.jsonl")


def cli(lab: LabCluster, env: dict[str, str], *args: str):
    return run_cli(*args, "-c", str(lab.conf), env=env)


def stored(lab: LabCluster, who: str, key: str) -> str | None:
    section, _, mask = who.partition("/")
    cluster = lab.rados()
    try:
        rows = ceph_json(cluster, "config dump")
    finally:
        cluster.shutdown()
    for r in rows:
        if r["section"] == section and r["name"] == key and (r.get("mask") or "") == mask:
            return r["value"]
    return None


def get(lab: LabCluster, who: str, key: str) -> str:
    cluster = lab.rados()
    try:
        ret, out, err = cluster.mon_command(json.dumps(
            {"prefix": "config get", "who": who, "key": key, "format": "json"}), b"", timeout=30)
    finally:
        cluster.shutdown()
    assert ret == 0, err
    # The value comes bare whatever the format: a number parses as JSON, a string not.
    try:
        return str(json.loads(out))
    except ValueError:
        return out.decode().strip()


def flags(lab: LabCluster) -> str:
    cluster = lab.rados()
    try:
        return ceph_json(cluster, "osd dump")["flags"]
    finally:
        cluster.shutdown()


@contextmanager
def scrubbing(lab: LabCluster) -> Iterator[None]:
    """Scrubs running under the load, for the scrub rule to see (it speaks only while one
    runs, issue 31). The lab's PGs hold a few objects and scrub in milliseconds, so osd.0
    alone scrubs an object per chunk with a second between chunks; its own section, so
    the `osd` section's osd_scrub_sleep stays 0, as the rule judges it."""
    cluster = lab.rados()
    slow = {"osd_scrub_sleep": "1", "osd_scrub_chunk_min": "1", "osd_scrub_chunk_max": "1"}
    try:
        for key, value in slow.items():
            ceph_json(cluster, "config set", who="osd.0", name=key, value=value)
        # A mgr command; through the mon with `who` a string it never answers.
        ceph_json(cluster, "osd pool deep-scrub", target="mgr", who=["lab-bench"])

        def seen() -> bool:
            stat = ceph_json(cluster, "pg stat", target="mgr")
            states = stat.get("pg_summary", {}).get("num_pg_by_state", [])
            return any("scrubbing" in s.get("name", "") for s in states)
        eventually(seen, 60, interval=0.5)
        yield
    finally:
        for key in slow:
            ceph_json(cluster, "config rm", who="osd.0", name=key)
        cluster.shutdown()


def test_plan_apply_and_undo_a_scrub_change_through_the_cli(release_cluster: LabCluster, env,
                                                            tmp_path: Path) -> None:
    lab_cluster = release_cluster
    plan = tmp_path / "plan.json"
    if lab_cluster.release == "pacific":
        assert lab_cluster.cli("lab", "load", "--threads", "8").rc == 0
        try:
            time.sleep(6)  # the mgr's client IO rates need a few seconds of load
            # The rule speaks only while a scrub runs (issue 31): start some.
            with scrubbing(lab_cluster):
                res = cli(lab_cluster, env, "plan", "ceph.scrub.during_load", "--for", "5",
                          "-o", str(plan))
            assert res.rc == 0, res.err
            assert "ceph config set osd osd_scrub_sleep 0.1" in res.out
        finally:
            lab_cluster.cli("lab", "load", "--stop")
    else:
        # From Quincy the mClock scheduler holds osd_scrub_sleep at 0, so no rule proposes
        # it any more (test_mclock_lab); an operator's plan of it is applied as one.
        write_plan(plan, make("ceph_config", "osd", "osd_scrub_sleep",
                              get(lab_cluster, "osd", "osd_scrub_sleep"), "0.1", runtime=True),
                   rule="ceph.scrub.during_load", fsid=lab_fsid(lab_cluster))
    started = time.monotonic()
    res = cli(lab_cluster, env, "apply", str(plan), "--yes")
    assert res.rc == 0, res.err
    (entry,) = journal(env).entries()
    if lab_cluster.release == "pacific":
        assert "applied:" in res.out
        assert float(get(lab_cluster, "osd.1", "osd_scrub_sleep")) == pytest.approx(0.1)
        assert entry.status == "applied"
    else:
        # Stored, read back from the OSDs, and named for what it is: no restart fixes it,
        # so apply does not wait for one either.
        assert "overridden by mclock_scheduler: ceph config set osd osd_scrub_sleep 0.1" \
            in res.out, res.out
        assert time.monotonic() - started < 15  # verify_seconds: it did not wait them out
        assert float(stored(lab_cluster, "osd", "osd_scrub_sleep") or 0) == pytest.approx(0.1)
        assert entry.status == "overridden by mclock_scheduler"
        assert "maybe_override_sleep_options_for_qos" in entry.detail
        assert "osd.0, osd.1, osd.2 run 0" in entry.detail and float(entry.after) == 0
    assert entry.before is None  # unset before
    assert "config log version" in entry.detail
    res = cli(lab_cluster, env, "undo", "--yes")
    assert res.rc == 0, res.err
    assert "runs: ceph config rm osd osd_scrub_sleep" in res.out  # shown before it runs
    assert stored(lab_cluster, "osd", "osd_scrub_sleep") is None
    assert float(get(lab_cluster, "osd.1", "osd_scrub_sleep")) == 0
    assert journal(env).entries()[0].undone_by


def test_a_recovery_limit_mclock_removes_is_reported_and_undone(release_cluster: LabCluster,
                                                                env, tmp_path: Path) -> None:
    lab_cluster = release_cluster
    if lab_cluster.release == "pacific":
        not_required("wpq takes osd_max_backfills: test_osd_specific_class_wide_and_flag_changes")
    plan = write_plan(tmp_path / "p.json", make(
        "ceph_config", "osd", "osd_max_backfills", get(lab_cluster, "osd", "osd_max_backfills"),
        "3", runtime=True))
    res = run_plan(lab_cluster, env, plan)
    assert res.rc == 0, res.err
    assert "overridden by mclock_scheduler: ceph config set osd osd_max_backfills 3" in res.out
    (entry,) = journal(env).entries()
    # maybe_override_options_for_qos took it out of the config database again.
    assert "removed osd_max_backfills 3 from the config database" in entry.detail
    assert stored(lab_cluster, "osd", "osd_max_backfills") is None
    assert get(lab_cluster, "osd.0", "osd_max_backfills") == "1"
    res = cli(lab_cluster, env, "undo", "--yes")
    assert res.rc == 0, res.err
    assert "applied: ceph config rm osd osd_max_backfills" in res.out, res.out
    # Undo's read-back waited for every OSD, not only the first to revert.
    assert {get(lab_cluster, f"osd.{i}", "osd_max_backfills") for i in range(3)} == {"1"}
    assert journal(env).entries()[0].undone_by


def test_an_option_the_scheduler_ignores_is_not_called_applied(release_cluster: LabCluster,
                                                               env, tmp_path: Path) -> None:
    """The OSDs run the value, and their scheduler does not look at it: the read-back
    names the scheduler rather than promise an effect (advisors/overrides.py)."""
    lab_cluster = release_cluster
    # Pacific's default profile is high_client_ops: a change must change something.
    key, value, scheduler = (("osd_mclock_profile", "balanced", "wpq")
                             if lab_cluster.release == "pacific" else
                             ("osd_scrub_extended_sleep", "2", "mclock_scheduler"))
    plan = write_plan(tmp_path / "p.json", make(
        "ceph_config", "osd", key, get(lab_cluster, "osd", key), value, runtime=True))
    res = run_plan(lab_cluster, env, plan)
    assert res.rc == 0, res.err
    assert f"overridden by {scheduler}: ceph config set osd {key} {value}" in res.out, res.out
    (entry,) = journal(env).entries()
    assert entry.status == f"overridden by {scheduler}"
    assert "ignores it" in entry.detail, entry.detail
    # Stored and running all the same: only the scheduler leaves it unused.
    assert "osd.0, osd.1, osd.2 run " in entry.detail, entry.detail
    for text in (stored(lab_cluster, "osd", key), *(get(lab_cluster, f"osd.{i}", key)
                                                     for i in range(3))):
        assert text == value or (key.endswith("sleep") and float(text) == 2), text
    res = cli(lab_cluster, env, "undo", "--yes")
    assert res.rc == 0, res.err
    assert f"applied: ceph config rm osd {key}" in res.out, res.out
    assert stored(lab_cluster, "osd", key) is None
    assert journal(env).entries()[0].undone_by


def test_the_mclock_profile_the_advice_proposes_is_applied_and_undone(
        release_cluster: LabCluster, env, tmp_path: Path) -> None:
    """A string option, as ceph.mclock.background_vs_clients proposes it, through `stormdeck
    apply` as an operator applies that plan: `config get` answers it bare, which the
    staleness check and the read-back must read as such."""
    lab_cluster = release_cluster
    if lab_cluster.release == "pacific":
        not_required("wpq ignores the profile: test_an_option_the_scheduler_ignores_...")
    before = get(lab_cluster, "osd", "osd_mclock_profile")
    assert before == "balanced"  # the default since Quincy 17.2.6 (osd.yaml.in)
    plan = write_plan(tmp_path / "p.json", make(
        "ceph_config", "osd", "osd_mclock_profile", before, "high_client_ops", runtime=True),
        rule="ceph.mclock.background_vs_clients", fsid=lab_fsid(lab_cluster))
    res = cli(lab_cluster, env, "apply", str(plan), "--yes")
    assert res.rc == 0, res.err
    assert "applied: ceph config set osd osd_mclock_profile high_client_ops" in res.out, res.out
    assert {get(lab_cluster, f"osd.{i}", "osd_mclock_profile") for i in range(3)} == \
        {"high_client_ops"}
    res = cli(lab_cluster, env, "undo", "--yes")
    assert res.rc == 0, res.err
    assert "applied: ceph config rm osd osd_mclock_profile" in res.out, res.out
    assert get(lab_cluster, "osd.0", "osd_mclock_profile") == "balanced"


def test_an_osd_with_its_own_value_is_not_waited_for(release_cluster: LabCluster, env,
                                                     tmp_path: Path) -> None:
    """A change to the `osd` section does not reach an OSD with its own osd.N value: the
    read-back says so, rather than wait it out and call the change "pending restart"."""
    lab_cluster = release_cluster
    key = "osd_max_scrubs"  # runtime, and no scheduler overrides it
    cluster = lab_cluster.rados()
    try:
        ceph_json(cluster, "config set", who="osd.1", name=key, value="5")
    finally:
        cluster.shutdown()
    try:
        plan = write_plan(tmp_path / "p.json", make(
            "ceph_config", "osd", key, get(lab_cluster, "osd", key), "4", runtime=True))
        started = time.monotonic()
        res = run_plan(lab_cluster, env, plan)
        assert res.rc == 0, res.err
        assert f"applied: ceph config set osd {key} 4" in res.out, res.out
        assert time.monotonic() - started < 15  # it did not wait out verify_seconds
        (entry,) = journal(env).entries()
        assert "osd.1 keeps 5 (its own setting)" in entry.detail, entry.detail
        assert [get(lab_cluster, f"osd.{i}", key) for i in range(3)] == ["4", "5", "4"]
        res = cli(lab_cluster, env, "undo", "--yes")
        assert res.rc == 0, res.err
        assert f"applied: ceph config rm osd {key}" in res.out, res.out
    finally:
        cluster = lab_cluster.rados()
        try:
            ceph_json(cluster, "config rm", who="osd.1", name=key)
        finally:
            cluster.shutdown()


def write_plan(path: Path, *changes: Change, fsid: str | None = None,
               rule: str = "test.lab") -> Path:
    plan = Plan(id="lab1", created=time.time(), rule=rule, target="lab",
                summary="test", source="K0", fsid=fsid, changes=changes)
    path.write_text(json.dumps(asdict(plan)))
    return path


def lab_fsid(lab: LabCluster) -> str:
    cluster = lab.rados()
    try:
        return str(ceph_json(cluster, "status")["fsid"])
    finally:
        cluster.shutdown()


# `stormdeck apply` takes only what a rule proposes (advisors/plan.check_plan); the executor
# itself applies any change. These tests drive it with changes no rule proposes (an OSD's
# own, a device class's) in a process of its own, printing what `apply` prints.
RUN_PLAN = """
import json, sys
from stormdeck.advisors.apply import Executor, journal_path
from stormdeck.advisors.ceph_admin import CephAdmin
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.findings import Change
from stormdeck.advisors.plan import Plan
raw = json.load(open(sys.argv[1]))
plan = Plan(**{**raw, "changes": tuple(Change(**c) for c in raw["changes"])})
with Executor(Journal(journal_path()), ceph=CephAdmin(sys.argv[2]),
              verify_seconds=float(sys.argv[3])) as ex:
    for o in ex.apply(plan):
        print(f"{o.outcome}: {o.change.command} -> {o.after}")
"""


def run_plan(lab: LabCluster, env: dict[str, str], plan: Path,
             verify_seconds: float = 15.0) -> Result:
    proc = subprocess.run([sys.executable, "-c", RUN_PLAN, str(plan), str(lab.conf),
                           str(verify_seconds)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).parents[2])
    return Result(proc.returncode, proc.stdout, proc.stderr)


def test_osd_specific_class_wide_and_flag_changes_and_their_undo(lab_cluster: LabCluster, env,
                                                                 tmp_path: Path) -> None:
    changes = (
        Change("ceph_config", "osd.1", "osd_max_backfills",
               get(lab_cluster, "osd.1", "osd_max_backfills"), "3",
               "ceph config set osd.1 osd_max_backfills 3", runtime=True),
        Change("ceph_config", "osd/class:hdd", "osd_recovery_sleep_hdd",
               get(lab_cluster, "osd", "osd_recovery_sleep_hdd"), "0.2",
               "ceph config set osd/class:hdd osd_recovery_sleep_hdd 0.2", runtime=True),
    )
    res = run_plan(lab_cluster, env, write_plan(tmp_path / "p.json", *changes))
    assert res.rc == 0, res.err
    assert res.out.count("applied:") == 2, res.out
    # A rule proposes the flag (ceph.peering.storm), so it goes as an operator's plan of it
    # goes, through `stormdeck apply`: the executor alone is for what no rule proposes.
    flag = write_plan(tmp_path / "flag.json", make("osd_flag", "cluster", "noscrub", "unset",
                                                   "set"),
                      rule="ceph.peering.storm", fsid=lab_fsid(lab_cluster))
    res = cli(lab_cluster, env, "apply", str(flag), "--yes")
    assert res.rc == 0, res.err
    assert "applied: ceph osd set noscrub" in res.out, res.out
    assert get(lab_cluster, "osd.1", "osd_max_backfills") == "3"
    assert get(lab_cluster, "osd.2", "osd_max_backfills") != "3", "only osd.1"
    assert stored(lab_cluster, "osd/class:hdd", "osd_recovery_sleep_hdd") == "0.200000"
    assert "noscrub" in flags(lab_cluster)
    entries = journal(env).entries()
    assert [e.status for e in entries] == ["applied"] * 3
    for e in reversed(entries):
        res = cli(lab_cluster, env, "undo", e.id, "--yes")
        assert res.rc == 0, res.err
    assert stored(lab_cluster, "osd.1", "osd_max_backfills") is None
    assert stored(lab_cluster, "osd/class:hdd", "osd_recovery_sleep_hdd") is None
    assert "noscrub" not in flags(lab_cluster)


def test_a_plan_is_refused_when_someone_else_changed_the_value(release_cluster: LabCluster, env,
                                                               tmp_path: Path) -> None:
    lab_cluster = release_cluster
    change = make("ceph_config", "osd", "osd_scrub_sleep",
                  get(lab_cluster, "osd", "osd_scrub_sleep"), "0.1", runtime=True)
    plan = write_plan(tmp_path / "p.json", change, rule="ceph.scrub.during_load",
                      fsid=lab_fsid(lab_cluster))
    subprocess.run(["ceph", "-c", str(lab_cluster.conf), "config", "set", "osd",
                    "osd_scrub_sleep", "0.3"], check=True, capture_output=True)
    try:
        res = cli(lab_cluster, env, "apply", str(plan), "--yes")
        assert res.rc == 3
        assert "moved since the plan" in res.err and "is 0.3 now" in res.err
        assert len(res.err.strip().splitlines()) == 1
        assert journal(env).entries() == [], "nothing was attempted"
        assert stored(lab_cluster, "osd", "osd_scrub_sleep") == "0.300000"
    finally:
        subprocess.run(["ceph", "-c", str(lab_cluster.conf), "config", "rm", "osd",
                        "osd_scrub_sleep"], check=True, capture_output=True)


def test_a_plan_for_another_cluster_is_refused(lab_cluster: LabCluster, env,
                                               tmp_path: Path) -> None:
    change = make("osd_flag", "cluster", "noscrub", "unset", "set")
    plan = write_plan(tmp_path / "p.json", change, fsid="00000000-0000-0000-0000-000000000000",
                      rule="ceph.peering.storm")
    res = cli(lab_cluster, env, "apply", str(plan), "--yes")
    assert res.rc == 3 and "made for cluster 00000000" in res.err
    assert "noscrub" not in flags(lab_cluster)


def test_read_only_refuses_apply_and_undo(lab_cluster: LabCluster, env,
                                          tmp_path: Path) -> None:
    change = make("osd_flag", "cluster", "noscrub", "unset", "set")
    plan = write_plan(tmp_path / "p.json", change, rule="ceph.peering.storm",
                      fsid=lab_fsid(lab_cluster))
    for extra, ro_env in ((["--read-only"], env), ([], {**env, "STORMDECK_READ_ONLY": "1"})):
        res = run_cli("apply", str(plan), "--yes", *extra, "-c", str(lab_cluster.conf),
                      env=ro_env)
        assert res.rc == 3 and "read-only mode" in res.err
    assert "noscrub" not in flags(lab_cluster)
    assert cli(lab_cluster, env, "apply", str(plan), "--yes").rc == 0
    try:
        res = run_cli("undo", "--yes", "--read-only", "-c", str(lab_cluster.conf), env=env)
        assert res.rc == 3 and "read-only mode" in res.err
        assert "noscrub" in flags(lab_cluster)
    finally:
        assert cli(lab_cluster, env, "undo", "--yes").rc == 0
    assert "noscrub" not in flags(lab_cluster)


def test_a_crash_between_intent_and_end_leaves_an_incomplete_entry_undo_can_mend(
        lab_cluster: LabCluster, env, tmp_path: Path) -> None:
    # With osd.2 stopped, the read-back waits for it to run the new value: kill
    # stormdeck while it waits, after the change was made and before its end.
    assert lab_cluster.cli("lab", "stop", "osd.2").rc == 0
    try:
        change = Change("ceph_config", "osd.2", "osd_max_backfills",
                        get(lab_cluster, "osd.2", "osd_max_backfills"), "4",
                        "ceph config set osd.2 osd_max_backfills 4", runtime=True)
        plan = write_plan(tmp_path / "p.json", change)
        proc = subprocess.Popen(
            [sys.executable, "-c", RUN_PLAN, str(plan), str(lab_cluster.conf), "120"], env=env,
            cwd=Path(__file__).parents[2], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            eventually(lambda: stored(lab_cluster, "osd.2", "osd_max_backfills") == "4", 60)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(10)
        res = run_cli("journal", env=env)
        assert "INCOMPLETE" in res.out and "may or may not have been made" in res.out
        res = cli(lab_cluster, env, "undo", "--yes", "--verify-seconds", "1")
        assert res.rc == 0, res.err
        assert stored(lab_cluster, "osd.2", "osd_max_backfills") is None
    finally:
        assert lab_cluster.cli("lab", "start", "osd.2").rc == 0

    def osd2_up() -> bool:
        cluster = lab_cluster.rados()
        try:
            return any(o["osd"] == 2 and o["up"] for o in ceph_json(cluster, "osd dump")["osds"])
        finally:
            cluster.shutdown()

    eventually(osd2_up, 60)


def test_a_pool_wide_change_needs_the_typed_phrase(lab_cluster: LabCluster, env,
                                                   tmp_path: Path) -> None:
    cluster = lab_cluster.rados()
    try:
        ceph_json(cluster, "osd pool create", pool="pg100", pg_num=100, pgp_num=100)
        plan = tmp_path / "p.json"
        res = cli(lab_cluster, env, "plan", "ceph.pool.pg_not_power_of_two",
                  "--target", "pool pg100", "-o", str(plan))
        assert res.rc == 0, res.err
        phrase = "apply ceph.pool.pg_not_power_of_two"

        def apply(answer: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "stormdeck", "apply", str(plan), "-c",
                 str(lab_cluster.conf), "--verify-seconds", "30"], input=answer,
                capture_output=True, text=True, cwd=Path(__file__).parents[2],
                env={**env, "STORMDECK_CONFIRM_STDIN": "1"})

        for wrong in ("y\n", "yes\n", "apply\n"):
            res = apply(wrong)
            assert res.returncode == 3 and "phrase did not match" in res.stderr
        assert ceph_json(cluster, "osd pool get", pool="pg100", var="pg_num")["pg_num"] == 100
        res = apply(phrase + "\n")
        assert res.returncode == 0, res.stderr
        assert f"Type {phrase!r}" in res.stdout
        assert ("applied:" in res.stdout) or ("on its way to 128" in res.stdout)
        target = ceph_json(cluster, "osd pool ls", detail="detail")
        (pool,) = [p for p in target if p["pool_name"] == "pg100"]
        assert pool["pg_num_target"] == 128
    finally:
        ceph_json(cluster, "osd pool rm", pool="pg100", pool2="pg100",
                  yes_i_really_really_mean_it=True)
        cluster.shutdown()
