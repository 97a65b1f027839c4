"""Plans, the journal and the executors that need no Ceph: stand-in tools on PATH that record
their argv and answer like the real ones (hdparm, sdparm, nvme, tuned-adm, curve_ops_tool)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from stormdeck.advisors.actuators import base as actuator_base
from stormdeck.advisors.actuators.table import actuator
from stormdeck.advisors.actuators.table import change as make
from stormdeck.advisors.apply import Executor, ReadOnlyError
from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.plan import Plan
from stormdeck.base.errors import UserError
from tests.conftest import run_cli
from tests.curve_wire import POOL, CurveWire

HOST = socket.gethostname().split(".")[0]


def tool(bin_dir: Path, name: str, body: str) -> Path:
    """A stand-in: logs its argv to NAME.argv beside it, then runs `body` (sh)."""
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "$@" >> "{bin_dir}/{name}.argv"\n{body}\n')
    path.chmod(0o755)
    return path


def argv_log(bin_dir: Path, name: str) -> list[str]:
    f = bin_dir / f"{name}.argv"
    return f.read_text().splitlines() if f.exists() else []


HDPARM = '''state="$(dirname "$0")/wc.$(basename "$3$2")"
case "$#" in
  2) v=$(cat "$(dirname "$0")/wc.$(basename "$2")" 2>/dev/null || echo 1)
     echo; echo "$2:"
     if [ "$v" = 1 ]; then echo " write-caching =  1 (on)"
     else echo " write-caching =  0 (off)"; fi;;
  3) echo "$2" > "$(dirname "$0")/wc.$(basename "$3")"; echo; echo "$3:";
     echo " setting drive write-caching to $2";;
esac'''
SDPARM = '''dev=$(basename "$(eval echo \\${$#})")
f="$(dirname "$0")/wc.$dev"
case "$1" in
  --get) v=$(cat "$f" 2>/dev/null || echo 1); echo "    /dev/$dev: ATA  Micron"
         echo "WCE         $v  [cha: y, def:  1, sav:  $v]";;
  --clear) echo 0 > "$f";;
  --set) echo 1 > "$f";;
esac'''
NVME = '''dev=$(basename "$2"); f="$(dirname "$0")/wc.$dev"
case "$1" in
  get-feature) v=$(cat "$f" 2>/dev/null || echo 1)
    echo "get-feature:0x06 (Volatile Write Cache), Current value:0x0000000$v";;
  set-feature) echo "$6" > "$f"; echo "set-feature:0x06 (Volatile Write Cache), value:0x0000000$6";;
esac'''
TUNED = '''f="$(dirname "$0")/tuned.state"
case "$1" in
  active) echo "Current active profile: $(cat "$f" 2>/dev/null || echo balanced)";;
  profile) echo "$2" > "$f";;
esac'''
TUNED_MERGED = '''f="$(dirname "$0")/tuned.state"
case "$1" in
  active) echo "Current active profile: $(cat "$f")";;
  profile) shift
    for p in "$@"; do case "$p" in *" "*) echo "Requested profile '$p' doesn't exist." >&2
                                         exit 1;; esac; done
    echo "$*" > "$f";;
esac'''


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "hdparm", HDPARM)
    tool(bin_dir, "sdparm", SDPARM)
    tool(bin_dir, "nvme", NVME)
    tool(bin_dir, "tuned-adm", TUNED)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    # Never this machine's /etc/udev: the rules a cache change writes go here.
    monkeypatch.setattr(actuator_base, "UDEV_RULES", tmp_path / "udev")
    return bin_dir


def plan_of(*changes: Change, rule: str = "test.rule") -> Plan:
    return Plan(id="p1", created=1.0, rule=rule, target="t", summary="s", source="K0",
                fsid=None, changes=changes)


TRANSPORT_OF_TOOL = {"hdparm": "sata", "sdparm": "sas", "nvme": "nvme"}


def cache_change(name: str, command: str) -> Change:
    """The change the rule makes for the disk `command` is the tool's line for; the
    transport travels as the change's argument, and the command is its rendering."""
    c = make("device_cache", f"{HOST}:/dev/{name}", "volatile write cache", "on", "off",
             args={"transport": TRANSPORT_OF_TOOL[command.split()[0]]})
    assert c.command == command
    return c


@pytest.mark.parametrize(("name", "command", "tool_name", "expect"), [
    ("sdz", "hdparm -W 0 /dev/sdz", "hdparm", ["-W /dev/sdz", "-W 0 /dev/sdz", "-W /dev/sdz"]),
    ("sdy", "sdparm --clear WCE --save /dev/sdy", "sdparm",
     ["--get WCE /dev/sdy", "--clear WCE --save /dev/sdy", "--get WCE /dev/sdy"]),
    ("nvme7n1", "nvme set-feature /dev/nvme7 -f 6 -v 0 -s", "nvme",
     ["get-feature /dev/nvme7 -f 6", "set-feature /dev/nvme7 -f 6 -v 0 -s",
      "get-feature /dev/nvme7 -f 6"]),
])
def test_write_cache_off_and_back_through_the_transport_tool(
        tools: Path, tmp_path: Path, name: str, command: str, tool_name: str,
        expect: list[str]) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    ex = Executor(journal)
    (o,) = ex.apply(plan_of(cache_change(name, command)))
    assert o.outcome == "applied" and o.after == "off"
    # stale check read, before-value read, the change, the read-back
    assert argv_log(tools, tool_name) == [expect[0], expect[0], expect[1], expect[2]]
    (entry,) = journal.entries()
    assert entry.before == "on" and entry.status == "applied"
    # Kept across reboots: a udev rule for SATA/SAS, the saved feature (-s) for NVMe.
    rule = tmp_path / "udev" / f"99-stormdeck-write-cache-{name}.rules"
    if tool_name == "nvme":
        assert not rule.exists()
    else:
        text = rule.read_text()
        assert f'KERNEL=="{name}"' in text and 'SUBSYSTEM=="block"' in text
        assert f"{tools / tool_name} " in text and "/dev/%k" in text
        assert "(and removes" in ex.inverse(entry).command
    undo = ex.undo(entry)
    assert undo.outcome == "applied" and undo.after == "on"
    assert journal.entries()[0].undone_by == [undo.entry]
    assert not rule.exists(), "undo removes the rule"


def test_a_loop_device_is_never_a_cache_target(tools: Path, tmp_path: Path) -> None:
    ex = Executor(Journal(tmp_path / "j.jsonl"))
    with pytest.raises(UserError, match="virtual device"):
        ex.apply(plan_of(cache_change("loop0", "hdparm -W 0 /dev/loop0")))
    assert argv_log(tools, "hdparm") == []
    assert not (tmp_path / "j.jsonl").exists(), "nothing was even journaled"


def test_the_kernels_write_cache_view_is_never_written(tools: Path, tmp_path: Path) -> None:
    views = {p: p.read_text() for p in Path("/sys/block").glob("*/queue/write_cache")}
    ex = Executor(Journal(tmp_path / "j.jsonl"))
    ex.apply(plan_of(cache_change("sdz", "hdparm -W 0 /dev/sdz")))
    ex.undo(Journal(tmp_path / "j.jsonl").entries()[0])
    assert {p: p.read_text() for p in views} == views
    # And no code of ours opens that file for writing.
    root = Path(__file__).parents[2]
    for src in [*root.glob("advisors/**/*.py"), *root.glob("collectors/*.py")]:
        text = src.read_text()
        assert "write_cache\", \"w\"" not in text and "write_cache', 'w'" not in text


# A merged profile: tuned applies profiles given together, active_profile and `tuned-adm
# active` list all, and a single argument "a b" names no profile.
@pytest.mark.parametrize("before", ["balanced", "throughput-performance virtual-guest"])
def test_tuned_profile_set_read_back_and_restored(tools: Path, tmp_path: Path,
                                                  before: str) -> None:
    if " " in before:
        tool(tools, "tuned-adm", TUNED_MERGED)
        (tools / "tuned.state").write_text(before + "\n")
    change = Change(kind="tuned_profile", target=HOST, key="profile", current=before,
                    proposed="latency-performance", command="tuned-adm profile "
                    "latency-performance", runtime=True, reversible=True)
    journal = Journal(tmp_path / "j.jsonl")
    ex = Executor(journal)
    (o,) = ex.apply(plan_of(change))
    assert o.after == "latency-performance"
    assert "profile latency-performance" in argv_log(tools, "tuned-adm")
    assert journal.entries()[0].before == before  # whole, for undo to give back
    ex.undo(journal.entries()[0])
    assert (tools / "tuned.state").read_text().strip() == before


def test_a_tuned_change_for_another_host_is_refused_before_anything_runs(
        tools: Path, tmp_path: Path) -> None:
    # A fleet console sees every host's profile; tuned-adm would change this one's.
    change = Change(kind="tuned_profile", target=HOST + "-other", key="profile",
                    current="balanced", proposed="latency-performance",
                    command="tuned-adm profile latency-performance", runtime=True,
                    reversible=True)
    journal = Journal(tmp_path / "j.jsonl")
    with pytest.raises(UserError, match=f"run stormdeck on {HOST}-other"):
        Executor(journal).apply(plan_of(change))
    assert argv_log(tools, "tuned-adm") == []
    assert journal.entries() == []


def test_a_stale_plan_is_refused_and_says_what_moved(tools: Path, tmp_path: Path) -> None:
    (tools / "tuned.state").write_text("throughput-performance\n")
    change = Change(kind="tuned_profile", target=HOST, key="profile", current="balanced",
                    proposed="latency-performance", command="tuned-adm profile x")
    with pytest.raises(UserError, match="was balanced when planned and is "
                                        "throughput-performance now"):
        Executor(Journal(tmp_path / "j.jsonl")).apply(plan_of(change))
    assert "profile latency-performance" not in argv_log(tools, "tuned-adm")


KINDS = [
    make("ceph_config", "osd", "osd_scrub_sleep", "0", "0.1"),
    make("osd_flag", "cluster", "noscrub", "unset", "set"),
    make("pool_set", "rbd", "pg_num", "100", "128"),
    make("curve_leader_schedule", "pool1", "rapid-leader-schedule", "range 9", "range <= 5",
         args={"pool_id": "1"}),
    make("device_cache", f"{HOST}:/dev/sdz", "volatile write cache", "on", "off",
         args={"transport": "sata"}),
    make("tuned_profile", HOST, "profile", "balanced", "latency-performance"),
]
FSID = "8f4c1b9e-0000-4000-8000-000000000001"


@pytest.mark.parametrize("change", KINDS, ids=[c.kind for c in KINDS])
def test_read_only_refuses_every_kind_before_touching_anything(
        tools: Path, tmp_path: Path, change: Change) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    with pytest.raises(ReadOnlyError, match="read-only mode"):
        Executor(journal, read_only=True).apply(plan_of(change))
    assert not journal.path.exists()
    assert all(argv_log(tools, t) == [] for t in ("hdparm", "tuned-adm"))


def test_plan_files_round_trip_and_bad_ones_are_one_sentence(tmp_path: Path) -> None:
    plan = replace(plan_of(KINDS[1], replace(KINDS[1], key="nodeep-scrub",
                                             command="ceph osd set nodeep-scrub"),
                           rule="ceph.peering.storm"), fsid=FSID)
    plan.save(tmp_path / "p.json")
    assert Plan.load(tmp_path / "p.json") == plan
    raw = json.loads(plan.to_json())
    for bad, words in [
        ({**raw, "version": 9}, "not a version-1 stormdeck plan"),
        ({**raw, "changes": [{**raw["changes"][0], "target": "osd; rm -rf /"}]},
         "is not a plain value"),
        ({**raw, "changes": [{**raw["changes"][0], "kind": "shell"}]}, "unknown kind"),
        ({**raw, "changes": [{"kind": "ceph_config"}]}, "not a plan file"),
    ]:
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(UserError, match=words):
            Plan.load(tmp_path / "bad.json")
    (tmp_path / "torn.json").write_text(plan.to_json()[:50])
    with pytest.raises(UserError, match="is not a plan file"):
        Plan.load(tmp_path / "torn.json")


def test_confirmation_scales_with_the_computed_reach_not_the_stated_one() -> None:
    one = make("ceph_config", "osd.3", "osd_scrub_sleep", "0", "0.1")
    at_runtime, restart = (lambda c: True), (lambda c: False)
    assert not plan_of(one).needs_phrase(at_runtime)
    # What the cluster says decides; unknown counts as needing the phrase.
    assert plan_of(one).needs_phrase(restart) and plan_of(one).needs_phrase()
    assert plan_of(replace(one, runtime=True)).needs_phrase(restart)
    # The reach comes from the target, computed.
    wide = replace(one, target="osd")
    assert plan_of(wide).needs_phrase(at_runtime)
    assert "affects all OSDs" in plan_of(wide).phrase_reasons(at_runtime)[0]
    for target, width in [("osd/class:ssd", "device class"), ("mon", "all monitors"),
                          ("global", "cluster"), ("osd.12", "daemon")]:
        assert actuator("ceph_config").width(replace(one, target=target)) == width
    fast_ec = replace(make("fast_ec", "ecpool", "allow_ec_optimizations", "false", "true"),
                      reversible=True)
    assert plan_of(fast_ec).needs_phrase(at_runtime) and plan_of(fast_ec).phrase == "ecpool"
    assert "cannot be undone" in " ".join(plan_of(fast_ec).phrase_reasons(at_runtime))
    # A reversible pool change is confirmed by the generic phrase, whatever the file says.
    pg = replace(KINDS[2], reversible=False)
    assert plan_of(pg, rule="r").phrase == "apply r"


def test_journal_survives_a_torn_tail_and_shows_an_incomplete_entry(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    a = journal.intent(KINDS[0], "0.5", rule="r")
    journal.end(a, "applied", after="0.1")
    b = journal.intent(KINDS[1], "unset", rule="r")  # a crash before its end
    with open(journal.path, "a") as f:
        f.write('{"type":"end","id":"' + b[:4])  # and a write torn mid-line
    entries = journal.entries()
    assert [e.status for e in entries] == ["applied", "INCOMPLETE"]
    assert journal.find(None).id == b
    assert journal.find(a[:6]).id == a
    with pytest.raises(UserError, match="no journal entry"):
        journal.find("zzzz")
    lines = journal.path.read_text().splitlines()
    journal.path.write_text("\n".join([lines[0], "garbage", *lines[1:]]) + "\n")
    # A damaged line in the middle is named, not fatal: the records around it still count.
    assert [e.status for e in journal.entries()] == ["applied", "INCOMPLETE"]
    assert any("line 2" in d and "not a whole journal record" in d for d in journal.damaged)


def test_irreversible_and_failed_entries_cannot_be_undone(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    ex = Executor(journal)
    fast_ec = Change("pool_set", "ecpool", "allow_ec_optimizations", "false", "true",
                     "c", reversible=False, note="IRREVERSIBLE: fast EC cannot be turned off")
    e1 = journal.intent(fast_ec, "false")
    journal.end(e1, "applied", after="true")
    e2 = journal.intent(KINDS[2], "100")
    journal.end(e2, "failed", "refused")
    with pytest.raises(UserError, match="cannot be undone: IRREVERSIBLE"):
        ex.undo(journal.find(e1))
    with pytest.raises(UserError, match="failed and changed nothing"):
        ex.undo(journal.find(e2))


# ---- Curve: the leader schedule, followed over heartbeats ---------------------------------


def curve_plan(tmp_path: Path) -> Path:
    change = make("curve_leader_schedule", POOL, "rapid-leader-schedule", "range 12",
                  "range <= 5", args={"pool_id": "1"})
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({**asdict(plan_of(change, rule="curve.leaders.spread"))}))
    return path


@pytest.mark.parametrize("converges", [True, False])
def test_leader_schedule_runs_the_tool_and_follows_the_range(tmp_path: Path,
                                                             converges: bool) -> None:
    bin_dir = tmp_path / "bin"
    moved = tmp_path / "moved"
    # The real tool prints nothing on success (CURVE.md); it records its argv here, and
    # returns once the leaders have moved: what apply then follows does not hang on how
    # soon a thread of this test is scheduled on a busy host.
    tool(bin_dir, "curve_ops_tool",
         f'i=0; while [ ! -e "{moved}" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done')
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        def heartbeats() -> None:
            deadline = time.monotonic() + 60
            while not argv_log(bin_dir, "curve_ops_tool") and time.monotonic() < deadline:
                time.sleep(0.05)
            wire.set_leaders([17, 17, 17, 17, 16, 16] if converges else [22, 18, 16, 16, 15, 13])
            moved.touch()

        t = threading.Thread(target=heartbeats)
        t.start()
        res = run_cli("apply", str(curve_plan(tmp_path)), "--yes", "--heartbeat", "0.4",
                      "--curve-mds", ",".join(m.addr for m in wire.mds),
                      env=env)
        t.join()
    assert res.rc == 0, res.err
    assert argv_log(bin_dir, "curve_ops_tool") == [
        "rapid-leader-schedule -logical_pool_id=1 -scheduleAll=false"]
    if converges:
        assert "applied:" in res.out and "leadernum range 12 -> 1" in res.out
    else:
        assert "pending:" in res.out and "run the schedule again" in res.out
    (entry,) = Journal(tmp_path / "state" / "stormdeck" / "journal.jsonl").entries()
    assert entry.status == ("applied" if converges else "pending")


def test_a_leader_schedule_the_mds_refuses_is_journaled_refused(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    # What curve_ops_tool prints when the MDS refuses (tests/data/curve, its source).
    tool(bin_dir, "curve_ops_tool", 'echo "RapidLeaderSchedule pool 1 fail"; exit 255')
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        res = run_cli("apply", str(curve_plan(tmp_path)), "--yes",
                      "--curve-mds", ",".join(m.addr for m in wire.mds), env=env)
    assert res.rc == 3, (res.out, res.err)
    assert "RapidLeaderSchedule pool 1 fail" in res.err and "nothing was changed" in res.err
    (entry,) = Journal(tmp_path / "state" / "stormdeck" / "journal.jsonl").entries()
    assert entry.status == "refused", entry


def test_a_refusal_after_a_change_of_the_same_run_does_not_say_nothing_changed(
        tools: Path, tmp_path: Path) -> None:
    from stormdeck.advisors.apply import NothingChanged
    from stormdeck.cli_change import _began

    journal = Journal(tmp_path / "j.jsonl")
    ex = Executor(journal)
    (o,) = ex.apply(plan_of(KINDS[5]))
    assert ex.sent == [o.entry] == ex.began  # sent: a change made, or perhaps made
    refused = NothingChanged("osd.3 refused; nothing was changed (journal e2)")
    out = _began(ex, refused)
    assert out.exit_code == 1 and f"already changed journal {o.entry}" in str(out)
    assert _began(Executor(journal), refused) is refused
    # The next run of the same executor starts with nothing sent (a refused stale plan).
    with pytest.raises(NothingChanged):
        ex.apply(plan_of(KINDS[5]))
    assert ex.sent == []


def test_apply_asks_and_no_means_nothing_changes(tools: Path, tmp_path: Path) -> None:
    plan = tmp_path / "p.json"
    plan_of(KINDS[5], rule="host.tuned_profile").save(plan)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "STORMDECK_CONFIRM_STDIN": "1"}
    import subprocess
    import sys

    def apply(answer: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "stormdeck", "apply", str(plan)],
                              input=answer, capture_output=True, text=True, env=env,
                              cwd=Path(__file__).parents[2])

    # A host's profile reaches the whole host: the typed phrase, not y/N.
    for answer in ("\n", "n\n", "maybe\n", "y\n"):
        res = apply(answer)
        assert res.returncode == 3
        assert "cancelled" in res.stderr
        assert "affects host" in res.stdout
    # Without a terminal and without --yes, nothing is asked and nothing done.
    res = run_cli("apply", str(plan), env={**env, "STORMDECK_CONFIRM_STDIN": ""})
    assert res.rc == 3 and "use --yes" in res.err
    assert "profile latency-performance" not in argv_log(tools, "tuned-adm")
    assert apply("apply host.tuned_profile\n").returncode == 0
    assert (tools / "tuned.state").read_text().strip() == "latency-performance"


# ---- the actuator table ------------------------------------------------------------------


def test_every_kind_has_one_actuator_and_every_rule_proposes_a_known_kind() -> None:
    import inspect

    from stormdeck.advisors.actuators import ceph, curve, host
    from stormdeck.advisors.actuators.base import Actuator
    from stormdeck.advisors.actuators.table import ACTUATORS

    classes = {c for m in (ceph, curve, host) for _, c in inspect.getmembers(m, inspect.isclass)
               if issubclass(c, Actuator) and c is not Actuator}
    assert sorted(ACTUATORS) == sorted(c.kind for c in classes)
    for a in ACTUATORS.values():  # each says how to read, apply and invert itself
        for method in ("read", "apply", "inverse_command", "command", "width"):
            assert getattr(type(a), method) is not getattr(Actuator, method), (a.kind, method)
    rules_dir = Path(__file__).parents[2] / "advisors" / "rules"
    proposed = {m for f in rules_dir.glob("*.py")
                for m in __import__("re").findall(r'(?:kind="|change\(\s*"|Proposes\(")(\w+)"',
                                                  f.read_text())}
    assert proposed and proposed <= set(ACTUATORS)


def test_fast_ec_is_its_own_kind_typed_by_pool_name_and_has_no_way_back(tmp_path: Path) -> None:
    fast_ec = Change("fast_ec", "ecpool", "allow_ec_optimizations", "false", "true",
                     "ceph osd pool set ecpool allow_ec_optimizations true", reversible=False)
    plan = plan_of(fast_ec)
    assert plan.needs_phrase() and plan.phrase == "ecpool"
    journal = Journal(tmp_path / "j.jsonl")
    e = journal.intent(fast_ec, "false")
    journal.end(e, "applied", after="true")
    with pytest.raises(UserError, match="fast EC cannot be turned off again"):
        Executor(journal).inverse(journal.find(e))
    # Even an entry journaled as reversible (a hand-edited file) has no inverse.
    e2 = journal.intent(replace(fast_ec, reversible=True), "false")
    journal.end(e2, "applied", after="true")
    with pytest.raises(UserError, match="cannot be turned off"):
        Executor(journal).undo(journal.find(e2))


@pytest.mark.parametrize(("change", "before", "command"), [
    (KINDS[0], None, "ceph config rm osd osd_scrub_sleep"),
    (KINDS[0], "0.2", "ceph config set osd osd_scrub_sleep 0.2"),
    (KINDS[1], "unset", "ceph osd unset noscrub"),
    (KINDS[2], "100", "ceph osd pool set rbd pg_num 100"),
    (KINDS[4], "on", "hdparm -W 1 /dev/sdz (and removes "
                     "/etc/udev/rules.d/99-stormdeck-write-cache-sdz.rules)"),
    (KINDS[5], "balanced", "tuned-adm profile balanced"),
], ids=["config-rm", "config-set", "flag", "pg_num", "cache", "tuned"])
def test_the_inverse_is_the_exact_command_undo_runs(tmp_path: Path, change: Change,
                                                    before: str | None, command: str) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    e = journal.intent(change, before)
    journal.end(e, "applied", after=change.proposed)
    inverse = Executor(journal).inverse(journal.find(e))
    assert inverse.command == command
    assert (inverse.current, inverse.proposed) == (change.proposed, before or "unset")


def test_undo_on_the_command_line_shows_the_exact_inverse_before_it_runs(
        tools: Path, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "STORMDECK_CONFIRM_STDIN": "1"}
    change = Change(kind="tuned_profile", target=HOST, key="profile", current="balanced",
                    proposed="latency-performance",
                    command="tuned-adm profile latency-performance")
    journal = Journal(tmp_path / "state" / "stormdeck" / "journal.jsonl")
    e = journal.intent(change, "balanced")
    (tools / "tuned.state").write_text("latency-performance\n")  # as the change left it
    journal.end(e, "applied", after="latency-performance")
    # Answering no: the inverse was shown, and nothing ran.
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "stormdeck", "undo", e],
                          input="n\n", capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode != 0 and "cancelled" in proc.stderr
    assert "runs: tuned-adm profile balanced" in proc.stdout
    assert "profile balanced" not in argv_log(tools, "tuned-adm")
    res = run_cli("undo", e, "--yes", env=env)
    assert res.rc == 0, res.err
    assert "profile balanced" in argv_log(tools, "tuned-adm")


@pytest.mark.parametrize("flag", ["--y", "--ye", "--yes=1"])
def test_only_the_full_yes_skips_the_confirmation(tools: Path, tmp_path: Path,
                                                  flag: str) -> None:
    """argparse's abbreviations would take --y for --yes: they are off on every parser."""
    plan = tmp_path / "p.json"
    plan_of(KINDS[5], rule="host.tuned_profile").save(plan)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    journal = tmp_path / "state" / "stormdeck" / "journal.jsonl"
    res = run_cli("apply", str(plan), flag, env=env)
    assert res.rc == 3 and flag.split("=")[0] in res.err
    assert len(res.err.strip().splitlines()) == 1
    assert argv_log(tools, "tuned-adm") == [] and not journal.exists(), "nothing applied"
    res = run_cli("undo", flag, env=env)
    assert res.rc == 3 and len(res.err.strip().splitlines()) == 1
    assert run_cli("apply", str(plan), "--yes", env=env).rc == 0
    assert (tools / "tuned.state").read_text().strip() == "latency-performance"


def test_a_fleet_wide_read_back_asks_a_spread_sample_not_every_osd() -> None:
    from itertools import pairwise

    from stormdeck.advisors.actuators.ceph import READBACK_MAX, readback_sample

    few = [f"osd.{i}" for i in range(3)]
    assert readback_sample(few) == few
    many = [f"osd.{i}" for i in range(10_000)]
    sample = readback_sample(many)
    assert len(sample) == READBACK_MAX == len(set(sample))
    assert sample[0] == "osd.0" and sample[-1] == "osd.9999"
    ids = [int(d[4:]) for d in sample]
    assert ids == sorted(ids) and max(b - a for a, b in pairwise(ids)) <= 323
    assert len(readback_sample(many[:33])) == 32 and readback_sample(many[:32]) == many[:32]
