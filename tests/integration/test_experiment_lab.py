"""`stormdeck experiment` on real labs under `lab load` (issue 44): a change that hurts is
found worse and undone, one that nothing reads is "no effect" with the least it could have
seen, and a load changed halfway is "not separable". Every apply and undo is journaled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LabCluster, Result, lab_home, run_cli, started_lab

pytestmark = pytest.mark.integration

# Short windows: 8 of 3 s, 1 s to settle after each change. The lab's load is steady
# enough for these (4 pairs: the interval takes Student's t for 3 degrees of freedom).
SHORT = ("--for", "3", "--settle", "1", "--rounds", "4")
# The verdict that must come out "worse": six pairs, as the default. With four, the pairs
# of Tentacle's lab (OSDs held to 1.5 cores) differed so much that a doubled write latency
# had an interval from -8% to +280% (fresh clone run 9): four degrees of freedom, not two.
SIX = ("--for", "3", "--settle", "1", "--rounds", "6")
# One rados bench round for the whole run: a round's end deletes what it wrote, a load
# of another kind in the middle of the run (which the run would rightly call so). A new
# object per write, as rados bench does by default: filling bigger objects with 4 KiB
# writes, or writing 64 KiB ones, goes through BlueStore's deferred writes, and RocksDB
# grew past a 2 GiB loop OSD in a minute (fresh clone run 7: an OSD aborted in BlueFS).
LOAD = ("lab", "load", "--threads", "16", "--round", "150")


@pytest.fixture(scope="module")
def own_lab() -> Iterator[LabCluster]:
    """A Pacific lab of these tests' own. Their minutes of 4 KiB writes grow the OSDs'
    RocksDB through BlueStore's deferred writes, and on the shared lab, after every
    earlier test's load, that left osd.0 nearfull (fresh clone run 8): measured on a
    fresh lab, the 2 GiB loop OSDs hold all of them."""
    with lab_home() as home:
        yield from started_lab(home / "cluster")


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}


def writing(lab: LabCluster, timeout: float = 120) -> None:
    """Until rados bench writes, as the OSDs' own counters say: a load's start first
    deletes what a stopped round left, and deletes are writes of no bytes (a mix the
    experiment rightly refuses). `status`'s rates are no help here: they are averaged
    over seconds and still show the last test's load."""
    from stormdeck.advisors.experiment.counters import parse_perf_dump

    cluster = lab.rados()
    try:
        def written() -> tuple[float, float]:
            ops = size = 0.0
            for osd in range(3):
                _, out, _ = cluster.osd_command(osd, json.dumps(
                    {"prefix": "perf dump", "logger": "osd", "format": "json"}), b"")
                c = parse_perf_dump(out)
                ops, size = ops + c.op_w, size + c.in_bytes
            return ops, size

        end = time.monotonic() + timeout
        before = written()
        while time.monotonic() < end:
            time.sleep(1)
            now = written()
            ops, size = now[0] - before[0], now[1] - before[1]
            if ops > 100 and size / ops > 2048:
                return
            before = now
    finally:
        cluster.shutdown()
    raise AssertionError(f"lab load wrote no 4 KiB writes for {timeout:g} s")


def experiment(lab: LabCluster, tmp_path: Path, *change: str,
               windows: tuple[str, ...] = SHORT) -> Result:
    return run_cli("experiment", *change, *windows, "--yes", "-f", "json", "-c", str(lab.conf),
                   env=env(tmp_path), timeout=300)


def under_load(lab: LabCluster, tmp_path: Path, *change: str,
               windows: tuple[str, ...] = SHORT) -> Result:
    """`stormdeck experiment CHANGE` with the lab's load on for its whole run."""
    assert lab.cli(*LOAD).rc == 0
    try:
        writing(lab)
        return experiment(lab, tmp_path, *change, windows=windows)
    finally:
        lab.cli("lab", "load", "--stop")


def figures(out: str) -> dict[str, dict]:
    return {f["figure"]: f for f in json.loads(out)["figures"]}


def journal(lab: LabCluster, tmp_path: Path) -> list[dict]:
    r = run_cli("journal", "-f", "json", "-c", str(lab.conf), env=env(tmp_path))
    assert r.rc == 0, r.err
    return json.loads(r.out)


@pytest.mark.releases("reef", "tentacle")
def test_debug_logging_is_found_worse_and_undone(release_cluster: LabCluster,
                                                 tmp_path: Path) -> None:
    """On Reef and Tentacle (mClock schedules the ops): see debug_logging_is_worse. With
    windows of 5 s: beside the Pacific lane on CI's two cores, Tentacle's OSDs (held to
    1.5 cores) logging every op moved the load by more than 35% between two 3-s windows of
    one arm (fresh clone run 11), and this lane has the minutes to spare."""
    debug_logging_is_worse(release_cluster, tmp_path,
                           ("--for", "5", "--settle", "1", "--rounds", "6"))


def test_debug_logging_is_found_worse_and_undone_on_pacific(own_lab: LabCluster,
                                                            tmp_path: Path) -> None:
    """On Pacific, on these tests' own lab (the shared one grows nearfull under it)."""
    debug_logging_is_worse(own_lab, tmp_path)


def debug_logging_is_worse(lab: LabCluster, tmp_path: Path,
                           windows: tuple[str, ...] = SIX) -> None:
    """debug_osd 20/20 logs every op: on the lab it cost 30-58% of write latency
    (issue 44's runs, 12 s each, with a drift of 29% between two of the same setting)."""
    seen = []
    for attempt in range(2):
        r = under_load(lab, tmp_path / str(attempt), "set", "osd", "debug_osd", "20/20",
                       windows=windows)
        assert r.rc == 0, r.err
        result = json.loads(r.out)
        lat = figures(r.out)["write latency"]
        seen.append((lat, result["load_moved"]))
        # A run that could not tell (an interval that reaches 1, or a load that moved
        # within an arm) is not a wrong answer: on CI's busy machine one Tentacle run said
        # 1.73x (0.955 to 2.82), another "not separable". A second run is taken then;
        # "better", or two runs that could not tell, fail.
        if lat["verdict"] not in ("no effect", "not separable"):
            break
    assert lat["verdict"] == "worse", seen
    assert lat["ci_low"] > 1.0 and lat["after"] > lat["before"]
    assert result["load_moved"] is None and not result["kept"]
    # The lab's OSDs run here: the CPU they spend per op is measured too, and logging
    # every op costs CPU.
    cpu = figures(r.out)["CPU per op"]
    assert cpu["after"] > cpu["before"] and cpu["ratio"] > 1.0, cpu
    # ABBA three times: applied and undone thrice, each through the journal, in order; the
    # database holds no debug_osd of the run's afterwards.
    entries = journal(lab, tmp_path / str(attempt))
    assert [e["id"] for e in entries] == result["journal"]
    assert [e["undoes"] is not None for e in entries] == [False, True] * 3
    assert all(e["status"] == "applied" and e["plan"] in (result["id"], None)
               for e in entries)
    dump = lab.command("config dump")
    assert not [row for row in dump if row["name"] == "debug_osd"]  # type: ignore[union-attr]


def test_an_option_nothing_reads_now_has_no_effect(own_lab: LabCluster,
                                                   tmp_path: Path) -> None:
    """osd_scrub_sleep is read only while a PG scrubs: with scrubs held off, nothing reads
    it, and the run says so with the least change it could have seen.

    At 95% a change with no effect is called one in about 1 run of 20 by design (2-4% of
    synthetic runs with these 3-second windows, tests/unit/test_experiment_stats.py): a
    second run is taken when the first says so, and two in a row (1 in 400) fail."""
    lab = own_lab
    seen = []
    for _ in range(2):
        lab.command("osd set", key="noscrub")
        lab.command("osd set", key="nodeep-scrub")
        try:
            # Six pairs: four 3-second pairs resolved no less than 139% on the lab.
            r = under_load(lab, tmp_path, "set", "osd", "osd_scrub_sleep", "0.2",
                           windows=SIX)
        finally:
            lab.command("osd unset", key="noscrub")
            lab.command("osd unset", key="nodeep-scrub")
        assert r.rc == 0, r.err
        lat = figures(r.out)["write latency"]
        seen.append((lat, json.loads(r.out)["load_moved"]))
        if lat["verdict"] == "no effect":
            break
    assert lat["verdict"] == "no effect", seen
    assert lat["ci_low"] < 1.0 < lat["ci_high"]
    assert 0 < lat["smallest_effect"] < 1.0


def test_a_load_changed_halfway_is_not_separable(own_lab: LabCluster,
                                                 tmp_path: Path) -> None:
    """The client's writes go from 4 KiB to 8 KiB in the middle of the run: no verdict
    is a number, and the result says how the load moved."""
    lab = own_lab
    assert lab.cli(*LOAD).rc == 0
    try:
        writing(lab)
        run = subprocess.Popen(
            [sys.executable, "-m", "stormdeck", "experiment", "set", "osd", "debug_osd", "5/5",
             *SHORT, "--yes", "-f", "json", "-c", str(lab.conf)], env=env(tmp_path),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        assert run.stderr is not None
        for line in run.stderr:
            if "window 4 of 8" in line:
                break
        lab.cli("lab", "load", "--stop")
        assert lab.cli("lab", "load", "--threads", "8", "--round", "150", "--size", "8K").rc == 0
        out, err = run.communicate(timeout=240)
    finally:
        lab.cli("lab", "load", "--stop")
    assert run.returncode == 0, err
    result = json.loads(out)
    assert result["load_moved"] and "not separable" in result["load_moved"], result
    # No figure judged gets a number for a verdict (a window the stop and start left
    # empty leaves that figure unjudged, which is said as such).
    assert all(f["verdict"] == "not separable" for f in result["figures"]), result


def test_apply_measure_leaves_the_change_made_with_its_measure_journaled(
        own_lab: LabCluster, tmp_path: Path) -> None:
    """`apply --measure`: the plan applied as the first window, BAAB, so it ends made,
    and the journal keeps the measure beside the change. The plan is the scrub rule's
    change (a plan names the rule that proposes it); with no scrub running it does
    nothing measurable, and the report says so."""
    from stormdeck.advisors.actuators.table import change
    from stormdeck.advisors.plan import Plan

    lab = own_lab
    fsid = lab.command("status")["fsid"]  # type: ignore[index]
    plan = Plan(id="p-measure", created=time.time(), rule="ceph.scrub.during_load",
                target="osd", summary="scrub sleep", source="test", fsid=str(fsid),
                changes=(change("ceph_config", "osd", "osd_scrub_sleep", "0.000000", "0.1"),))
    plan.save(tmp_path / "plan.json")
    assert lab.cli(*LOAD).rc == 0
    try:
        writing(lab)
        # Two pairs: this test is of the path (made, measured, journaled), not of a
        # verdict's power (the default six took 101 s of the suite's critical path).
        r = run_cli("apply", str(tmp_path / "plan.json"), "--measure", "3", "--rounds", "2",
                    "--yes", "-c", str(lab.conf), env=env(tmp_path), timeout=300)
    finally:
        lab.cli("lab", "load", "--stop")
    try:
        assert r.rc == 0, r.err
        assert "made: the change stays" in r.out
        entries = journal(lab, tmp_path)
        last = entries[-1]
        assert last["undoes"] is None and last["status"] == "applied"
        measured = {f["figure"]: f for f in last["measured"]["figures"]}
        assert measured["write latency"]["verdict"] in ("no effect", "not separable"), r.out
        assert last["measured"]["experiment"].startswith("exp-")
        assert last["plan"] == last["measured"]["experiment"]
        shown = run_cli("journal", "-c", str(lab.conf), env=env(tmp_path))
        assert "measured by exp-" in shown.out and "write latency " in shown.out
    finally:
        lab.command("config rm", who="osd", name="osd_scrub_sleep")


def test_a_run_killed_mid_way_is_read_as_cut_and_its_change_undone_by_hand(
        own_lab: LabCluster, tmp_path: Path) -> None:
    """kill -9 while the change is on: the journal holds it applied, the record of runs
    reads the run as cut, and `stormdeck undo` puts the value back."""
    lab = own_lab
    assert lab.cli(*LOAD).rc == 0
    try:
        writing(lab)
        run = subprocess.Popen(
            [sys.executable, "-m", "stormdeck", "experiment", "flag", "noscrub", *SHORT,
             "--yes", "-c", str(lab.conf)], env=env(tmp_path), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, bufsize=1)
        assert run.stderr is not None
        for line in run.stderr:
            if "window 2 of 8" in line:  # B: the flag is set
                break
        run.kill()
        run.wait(timeout=30)
    finally:
        lab.cli("lab", "load", "--stop")
    assert "noscrub" in lab.command("osd dump")["flags"]  # type: ignore[index]
    from stormdeck.advisors.experiment.record import ExperimentLog

    runs = ExperimentLog(tmp_path / "state" / "stormdeck" / "experiments.jsonl").runs()
    assert [r["outcome"] for r in runs] == ["cut"]
    entries = journal(lab, tmp_path)
    assert [e["status"] for e in entries] == ["applied"]
    undo = run_cli("undo", entries[0]["id"], "--yes", "-c", str(lab.conf), env=env(tmp_path))
    assert undo.rc == 0, undo.err
    assert "noscrub" not in lab.command("osd dump")["flags"]  # type: ignore[index]




# On Reef: the release lane has minutes to spare beside Pacific's, which is the suite's
# critical path. The engine is the same on every release.
BEFORE_AFTER = ("--for", "3", "--settle", "1", "--rounds", "2", "--settled-within", "300")


@pytest.mark.releases("reef")
def test_a_split_is_measured_before_and_after_and_merged_back(release_cluster: LabCluster,
                                                              tmp_path: Path) -> None:
    """pg_num 32 -> 64 moves data, so it is not alternated: two windows without, the
    split (its prediction journaled), a wait until every PG is active+clean again, two
    windows with, then the undo (the merge back), each journaled. The result says it was
    before and after, and how long the data took to move."""
    from stormdeck.advisors.actuators.table import change
    from stormdeck.advisors.plan import Plan

    lab = release_cluster
    cluster = lab.rados()
    pool = "expsplit"
    try:
        lab.command("osd pool create", pool=pool, pg_num=32, pgp_num=32)
        lab.command("osd pool set", pool=pool, var="size", val="2")
        lab.command("osd pool application enable", pool=pool, app="rbd")
        io = cluster.open_ioctx(pool)
        blob = os.urandom(1 << 20)
        for i in range(16):
            io.write_full(f"obj{i}", blob)
        io.close()
        # The mgr then takes pgp_num to 64 at once rather than 5% of the objects at a time.
        lab.command("config set", who="mgr", name="target_max_misplaced_ratio", value="1")
        fsid = str(lab.command("status")["fsid"])  # type: ignore[index]
        Plan(id="p-split", created=time.time(), rule="ceph.pool.pg_not_power_of_two",
             target=pool, summary="split", source="test", fsid=fsid,
             changes=(change("pool_set", pool, "pg_num", "32", "64"),)
             ).save(tmp_path / "plan.json")
        # The undo's merge is followed 5 s, not 120, before it is journaled "pending":
        # the merge itself is Ceph's (tests/integration/test_blast_lab.py follows one).
        r = under_load(lab, tmp_path, str(tmp_path / "plan.json"),
                       windows=(*BEFORE_AFTER, "--converge-seconds", "5"))
        assert r.rc == 0, r.err
        result = json.loads(r.out)
        assert result["method"] == "before/after", result
        assert result["before_after"] == f"pg_num on {pool} moves data"
        assert "a wait (at most 300 s) until its data has moved," in r.err, r.err
        assert [w["arm"] for w in result["windows"]] == ["A", "A", "B", "B"]
        assert 0 < result["settled_seconds"] < 300
        assert {f["verdict"] for f in result["figures"]} <= \
            {"better", "worse", "no effect", "not separable"}
        assert "write latency" in {f["figure"] for f in result["figures"]}, result
        assert not result["kept"]
        entries = journal(lab, tmp_path)
        assert [e["id"] for e in entries] == result["journal"]
        assert [e["undoes"] is not None for e in entries] == [False, True]
        # The merge back steps pg_num down under the mgr: "pending" until it is there.
        assert entries[0]["status"] == "applied", entries
        assert entries[1]["status"] in ("applied", "pending"), entries
        assert entries[0]["prediction"]["copies_to_create"] > 0, entries[0]
        (row,) = [p for p in lab.command("osd dump")["pools"]  # type: ignore[index]
                  if p["pool_name"] == pool]
        assert row["pg_num_target"] == 32, row  # merging back
    finally:
        cluster.shutdown()
        lab.command("config rm", who="mgr", name="target_max_misplaced_ratio")
        lab.command("osd pool rm", pool=pool, pool2=pool, yes_i_really_really_mean_it=True)


@pytest.mark.releases("reef")
def test_an_option_on_only_at_a_restart_is_measured_once_the_osd_restarted(
        release_cluster: LabCluster, tmp_path: Path) -> None:
    """osd_op_num_shards_hdd on osd.1 is on only once osd.1 restarts (Ceph's `config
    help`): two windows without, the change ("pending restart" in the journal), a wait
    the run says is for osd.1's restart (the test restarts it then), two windows with,
    the option taken back out of the database. stormdeck restarts nothing itself."""
    lab = release_cluster
    try:
        assert lab.cli(*LOAD).rc == 0
        try:
            writing(lab)
            run = subprocess.Popen(
                [sys.executable, "-m", "stormdeck", "experiment", "set", "osd.1",
                 "osd_op_num_shards_hdd", "2", *BEFORE_AFTER, "--yes", "-f", "json",
                 "-c", str(lab.conf)], env=env(tmp_path),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
            assert run.stderr is not None
            said = []
            for line in run.stderr:
                said.append(line)
                if "waiting for osd.1 to restart" in line:
                    break
            assert lab.cli("lab", "storm", "--restart-osd", "1").rc == 0, said
            out, err = run.communicate(timeout=400)
        finally:
            lab.cli("lab", "load", "--stop")
        err = "".join(said) + err
        assert run.returncode == 0, err
        assert "until osd.1 restarted (restart them once it is made)" in err, err
        result = json.loads(out)
        assert result["before_after"] == \
            "osd_op_num_shards_hdd on osd.1 takes effect only when the OSDs restart", result
        assert result["osds"] == ["osd.1"]
        assert [w["arm"] for w in result["windows"]] == ["A", "A", "B", "B"]
        assert 0 < result["settled_seconds"] < 300
        assert "write latency" in {f["figure"] for f in result["figures"]}, result
        entries = journal(lab, tmp_path)
        assert [e["undoes"] is not None for e in entries] == [False, True]
        # Made in the database, on in osd.1 only after its restart; taken out again at
        # the end, where the restarted osd.1 runs 2 until it restarts once more.
        assert entries[0]["status"] == "pending restart", entries
        dump = lab.command("config dump")
        assert not [row for row in dump if row["name"] == "osd_op_num_shards_hdd"]  # type: ignore[union-attr]
    finally:
        # osd.1 runs the run's shards until it restarts: as it was before the test.
        lab.cli("lab", "storm", "--restart-osd", "1")
