"""The experiment's reads: OSD perf counters as Ceph prints them, each second's figures from
two reads, the cluster's harms from `status`, the load's mix, and the record of runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.experiment import stats
from stormdeck.advisors.experiment.counters import (
    Harms,
    OsdCounters,
    Sample,
    osds_to_read,
    parse_harms,
    parse_perf_dump,
)
from stormdeck.advisors.experiment.figures import BY_NAME, LOAD, MIX, seconds_of
from stormdeck.advisors.experiment.record import ExperimentLog
from stormdeck.advisors.experiment.runner import Settings, measurable
from stormdeck.advisors.plan import Plan
from stormdeck.base.errors import UserError

DATA = Path(__file__).parent.parent / "data"
CALM = Harms(slow_ops=0, up_osds=3, pgs_inactive=0, health="HEALTH_OK")


def test_a_published_filestore_dump_is_read_as_printed() -> None:
    """telegraf's test data (tests/data/published/README.md): a Hammer-era OSD, no avgtime."""
    c = parse_perf_dump((DATA / "published" / "perf_dump_osd_telegraf.json").read_bytes())
    assert (c.op_r, c.op_w, c.op_rw) == (23112, 549, 278)
    assert (c.w_sum, c.w_count) == (418.49461, 549)
    assert (c.r_sum, c.r_count) == (19.373526, 23112)
    assert c.in_bytes == 1245903961 and c.out_bytes == 29103083856


def test_the_labs_pacific_dump_under_load_is_read() -> None:
    """`ceph tell osd.0 perf dump osd` on a Pacific 16.2.15 lab under `lab load`."""
    c = parse_perf_dump((DATA / "pacific" / "perf_dump_osd_load.json").read_bytes())
    assert c.op_w > 1000 and c.w_count == c.op_w and c.w_sum > 0


@pytest.mark.parametrize("doc, said", [
    (b"not json", "not JSON"),
    ({"mon": {}}, 'no "osd" section'),
    ({"osd": {"op_r_latency": 3}}, "not a sum and a count"),
    ({"osd": {"op_r_latency": {"sum": "x", "avgcount": 1}}}, "not a number"),
])
def test_a_dump_of_another_shape_is_one_sentence(doc: object, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        parse_perf_dump(doc)


def counters(op_w: float, w_sum: float, in_bytes: float | None = None, op_r: float = 0
             ) -> OsdCounters:
    return OsdCounters(op_r, op_w, 0, in_bytes if in_bytes is not None else op_w * 4096, 0,
                       0, op_r, w_sum, op_w, 0, 0)


def test_a_seconds_latency_is_its_sums_difference_over_its_counts() -> None:
    # osd.0 did 100 writes of 2 ms and osd.1 300 of 6 ms in the second: the mean is 5 ms,
    # not the mean of the two OSDs' means (4 ms).
    a = Sample(0.0, {"osd.0": counters(1000, 1.0), "osd.1": counters(1000, 1.0)}, CALM)
    b = Sample(1.0, {"osd.0": counters(1100, 1.2), "osd.1": counters(1300, 2.8)}, CALM)
    secs = seconds_of([a, b], (BY_NAME["write latency"], BY_NAME["write IOPS"], LOAD))
    assert secs["write latency"] == [pytest.approx(0.005)]
    assert secs["write IOPS"] == [400.0] and secs["client ops"] == [400.0]
    # No read in the second: no read latency (not a latency of zero).
    assert seconds_of([a, b], (BY_NAME["read latency"],))["read latency"] == []


def test_cpu_per_op_is_the_osd_processes_cpu_over_their_ops() -> None:
    """2 OSDs spent 0.1 and 0.3 CPU seconds on 400 ops: 1 ms of CPU an op. With one OSD's
    CPU unknown (it runs on another host), or its process replaced, no second."""
    cpu = BY_NAME["CPU per op"]
    a = Sample(0.0, {"osd.0": counters(1000, 1.0), "osd.1": counters(1000, 1.0)}, CALM,
               cpu={"osd.0": 10.0, "osd.1": 20.0})
    b = Sample(1.0, {"osd.0": counters(1100, 1.2), "osd.1": counters(1300, 2.8)}, CALM,
               cpu={"osd.0": 10.1, "osd.1": 20.3})
    assert seconds_of([a, b], (cpu,))["CPU per op"] == [pytest.approx(0.001)]
    assert not cpu.higher_is_better
    half = Sample(1.0, b.osds, CALM, cpu={"osd.0": 10.1})
    assert seconds_of([a, half], (cpu,))["CPU per op"] == []
    replaced = Sample(1.0, b.osds, CALM, cpu={"osd.0": 0.5, "osd.1": 20.3})
    assert seconds_of([a, replaced], (cpu,))["CPU per op"] == []


def test_this_hosts_osd_processes_are_found_by_id_and_fsid() -> None:
    """Another cluster's osd.0 (a lab's, when one runs here) is not this cluster's: not
    claimed (a lab's own are, tests/integration/test_experiment_lab.py); this process's
    CPU is read, a process gone has none."""
    from stormdeck.advisors.experiment.counters import local_osd_pids, process_cpu

    assert local_osd_pids(["osd.0"], "00000000-0000-0000-0000-000000000000") == {}
    assert (process_cpu(os.getpid()) or 0) > 0
    assert process_cpu(2 ** 22 + 7) is None


def test_a_restarted_osd_or_one_read_at_one_end_only_gives_no_second() -> None:
    a = Sample(0.0, {"osd.0": counters(1000, 1.0)}, CALM)
    restarted = Sample(1.0, {"osd.0": counters(10, 0.1)}, CALM)
    assert seconds_of([a, restarted], (LOAD,))["client ops"] == []
    elsewhere = Sample(1.0, {"osd.1": counters(1000, 1.0)}, CALM)
    assert seconds_of([a, elsewhere], (LOAD,))["client ops"] == []


def test_the_harms_come_from_status() -> None:
    calm = parse_harms(json.loads((DATA / "pacific" / "status.json").read_text()))
    assert calm.slow_ops == 0 and calm.pgs_inactive == 0 and calm.up_osds == 3
    assert calm.worse_than(calm) is None
    down = Harms(0, 2, 0, "HEALTH_WARN")
    assert down.worse_than(calm) == "1 OSD(s) went down"
    assert Harms(4, 3, 0, "HEALTH_WARN").worse_than(calm) == \
        "4 slow ops (none before the experiment)"
    assert Harms(0, 3, 7, "HEALTH_WARN").worse_than(calm) == "7 PGs not active"


def test_the_osds_read_are_those_changed_else_spread_over_every_up_one() -> None:
    up = [f"osd.{i}" for i in range(100)]
    assert osds_to_read(up, ["osd.7"], 32) == ("osd.7",)
    spread = osds_to_read(up, ["osd"], 4)
    assert spread == ("osd.0", "osd.25", "osd.50", "osd.75")


def test_a_step_in_the_mix_is_seen_even_in_the_first_window() -> None:
    """rados bench's cleanup: deletes are writes of no bytes. The first window has no
    neighbour of its own arm, so only the mix across every window sees a step there."""
    bytes_per_op = [stats.Window(arm, (0.0, 0.0, 0.0) if k == 0 else (4096.0,) * 3)
                    for k, arm in enumerate(stats.schedule(4))]
    said = stats.mix_moved("bytes per op", bytes_per_op)
    assert said is not None and "window 1" in said and "not separable" in said
    steady = [stats.Window(arm, (4096.0, 4000.0, 4100.0)) for arm in stats.schedule(4)]
    assert stats.mix_moved("bytes per op", steady) is None
    assert {f.name for f in MIX} == {"bytes per op", "write share"}


@pytest.mark.parametrize("kw, said", [
    ({"window": 2.0}, "fewer than three reads"),
    ({"rounds": 3}, "even number"),
    ({"interval": 0.0}, "above zero"),
])
def test_settings_that_cannot_measure_are_refused(kw: dict, said: str) -> None:
    with pytest.raises(UserError, match=said):
        Settings(**kw).check()


def plan_of(*changes: object) -> Plan:
    return Plan(id="p", created=0.0, rule="r", target="osd", summary="", source="test",
                fsid=None, changes=tuple(changes))  # type: ignore[arg-type]


def test_only_changes_that_apply_and_undo_at_runtime_are_alternated() -> None:
    """The rest are measured once, before and after, and say why; one that cannot be
    undone, or changes nothing, is refused."""
    assert measurable(plan_of(change("ceph_config", "osd", "debug_osd", "1/5", "20/20")),
                      lambda c: True) is None
    assert measurable(plan_of(change("ceph_config", "osd", "osd_op_num_shards", "8", "4")),
                      lambda c: False) == \
        "osd_op_num_shards on osd takes effect only when the OSDs restart"
    assert measurable(plan_of(change("pool_set", "rbd", "pg_num", "32", "64")),
                      lambda c: None) == "pg_num on rbd moves data"
    # Both in one plan: the data's move is what the wait is for.
    assert measurable(plan_of(change("ceph_config", "osd", "osd_op_num_shards", "8", "4"),
                              change("pool_set", "rbd", "pg_num", "32", "64")),
                      lambda c: False) == "pg_num on rbd moves data"
    with pytest.raises(UserError, match="already"):
        measurable(plan_of(change("ceph_config", "osd", "debug_osd", "1/5", "1/5")),
                   lambda c: True)


def test_a_run_whose_process_died_reads_as_cut(tmp_path: Path) -> None:
    log = ExperimentLog(tmp_path / "experiments.jsonl")
    log.start("exp-done", "ceph config set osd debug_osd 20/20", {})
    log.end("exp-done", "done", result={"figures": []})
    # A start written by a process that is gone (kill -9 mid-run).
    subprocess.run([sys.executable, "-c", (
        "import sys; from pathlib import Path; "
        "from stormdeck.advisors.experiment.record import ExperimentLog; "
        f"ExperimentLog(Path({str(tmp_path / 'experiments.jsonl')!r})).start('exp-killed', "
        "'ceph osd set noscrub', {})")], check=True, env={**os.environ})
    log.start("exp-running", "ceph osd set nodeep-scrub", {})  # this process: alive
    with open(tmp_path / "experiments.jsonl", "ab") as f:
        f.write(b'{"type": "end", "id": "exp-running", "crc": "tampered"}\n')
    runs = {r["id"]: r for r in log.runs()}
    assert runs["exp-done"]["outcome"] == "done"
    assert runs["exp-killed"]["outcome"] == "cut"
    assert "see stormdeck journal" in runs["exp-killed"]["reason"]
    assert runs["exp-running"]["outcome"] == "running"  # the tampered end is not believed


def test_experiment_list_shows_each_run_as_it_ended(tmp_path: Path) -> None:
    """`stormdeck experiment --list`: the record of runs beside the journal, in words and
    as JSON; text from the record is data (a control character is shown, not sent)."""
    from tests.conftest import run_cli

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    r = run_cli("experiment", "--list", env=env)
    assert r.rc == 0 and "no experiment has run here" in r.out, r.err
    log = ExperimentLog(tmp_path / "stormdeck" / "experiments.jsonl")
    log.start("exp-done", "ceph config set osd debug_osd 20/20\x1b[2J", {})
    log.end("exp-done", "done", result={"figures": [
        {"figure": "write latency", "ratio": 1.58, "ci_low": 1.46, "ci_high": 1.71,
         "verdict": "worse"}], "load_moved": None})
    log.start("exp-cut", "ceph osd set noscrub", {"rounds": 6})
    log.end("exp-cut", "cut", reason="1 OSD(s) went down; the change was undone")
    r = run_cli("experiment", "--list", env=env)
    assert r.rc == 0, r.err
    assert "\x1b" not in r.out
    lines = r.out.splitlines()
    assert lines[0].startswith("exp-done ") and "done" in lines[0], r.out
    assert lines[1].strip() == "write latency +58% (95%: +46% to +71%) worse", r.out
    assert lines[2].startswith("exp-cut ") and "ceph osd set noscrub" in lines[2], r.out
    assert "1 OSD(s) went down" in lines[3], r.out
    r = run_cli("experiment", "--list", "-f", "json", env=env)
    runs = json.loads(r.out)
    assert [x["outcome"] for x in runs] == ["done", "cut"]
    r = run_cli("experiment", "--list", "set", "osd", "debug_osd", "1/5", env=env)
    assert r.rc != 0 and r.err.count("\n") == 1 and "takes no change" in r.err, r.err
    r = run_cli("experiment", env=env)
    assert r.rc != 0 and r.err.count("\n") == 1 and "set WHO OPTION VALUE" in r.err, r.err
