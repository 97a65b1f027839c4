"""The change path broken on purpose against the real lab: kill -9 at each step, a full disk,
a torn journal, the mon frozen mid-change, a value changed behind undo, two terminals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.journal import Journal
from stormdeck.lab import procs
from tests.conftest import LabCluster, eventually, run_cli
from tests.integration.test_changes_lab import lab_fsid, stored, write_plan

pytestmark = pytest.mark.integration

ROOT = Path(__file__).parents[2]
KEY = "osd_scrub_sleep"  # a runtime option nothing else in the suite keeps set


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}


def journal_of(env: dict[str, str]) -> Journal:
    return Journal(Path(env["XDG_STATE_HOME"]) / "stormdeck" / "journal.jsonl")


def stormdeck(lab: LabCluster, env: dict[str, str], *args: str, extra_env: dict | None = None,
              prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    argv = [*prefix, sys.executable, "-m", "stormdeck", *args, "-c", str(lab.conf)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**env, **(extra_env or {})})


def scrub_plan(lab: LabCluster, path: Path, value: str = "0.25") -> Path:
    """A plan of the change ceph.scrub.during_load proposes, as `stormdeck plan` writes it."""
    c = change("ceph_config", "osd", KEY, _effective(lab), value, runtime=True)
    return write_plan(path, c, rule="ceph.scrub.during_load", fsid=lab_fsid(lab))


def _effective(lab: LabCluster) -> str:
    return str(lab.command("config get", who="osd", key=KEY))


def mon_command(lab: LabCluster, prefix: str, **args: object) -> object:
    return lab.command(prefix, **args)


@pytest.fixture
def clean_key(lab_cluster: LabCluster) -> Iterator[None]:
    mon_command(lab_cluster, "config rm", who="osd", name=KEY)
    yield
    mon_command(lab_cluster, "config rm", who="osd", name=KEY)


STEPS = ("before-intent", "after-intent", "after-send", "after-verify", "after-end")


@pytest.mark.parametrize("step", STEPS)
def test_kill_9_at_each_step_of_apply_then_journal_tells_the_truth_and_undo_restores(
        lab_cluster: LabCluster, env, tmp_path: Path, clean_key, step: str) -> None:
    plan = scrub_plan(lab_cluster, tmp_path / "p.json")
    res = stormdeck(lab_cluster, env, "apply", str(plan), "--yes", "--verify-seconds", "5",
                    extra_env={"STORMDECK_FAILPOINT": step})
    assert res.returncode == -signal.SIGKILL, (res.returncode, res.stderr)
    entries = journal_of(env).entries()
    shown = run_cli("journal", env=env)
    assert shown.rc == 0, shown.err
    if step == "before-intent":
        assert entries == [] and stored(lab_cluster, "osd", KEY) is None
        return
    (e,) = entries
    if step == "after-end":
        assert e.status == "applied" and stored(lab_cluster, "osd", KEY) == "0.250000"
    else:
        # The intent is on disk whole: the entry is there, and says nobody knows yet.
        assert e.status == "INCOMPLETE" and "may or may not have been made" in shown.out
    undo = stormdeck(lab_cluster, env, "undo", "--yes", "--verify-seconds", "5")
    if step == "after-intent":  # never sent: read again, it was not made
        assert undo.returncode == 0 and "nothing to undo" in undo.stderr, undo.stderr
        assert journal_of(env).entries()[0].status == "not made"
    else:
        assert undo.returncode == 0, undo.stderr
        assert journal_of(env).entries()[0].undone_by
    assert stored(lab_cluster, "osd", KEY) is None
    # Nothing is left to offer: the same entry is never undone twice.
    again = stormdeck(lab_cluster, env, "undo", "--yes")
    assert again.returncode == 3


@pytest.mark.parametrize("step", STEPS[1:])
def test_kill_9_at_each_step_of_undo_then_undo_again_restores_once(
        lab_cluster: LabCluster, env, tmp_path: Path, clean_key, step: str) -> None:
    plan = scrub_plan(lab_cluster, tmp_path / "p.json")
    assert stormdeck(lab_cluster, env, "apply", str(plan), "--yes").returncode == 0
    (first,) = journal_of(env).entries()
    res = stormdeck(lab_cluster, env, "undo", first.id, "--yes", "--verify-seconds", "5",
                    extra_env={"STORMDECK_FAILPOINT": step})
    assert res.returncode == -signal.SIGKILL, res.stderr
    assert run_cli("journal", env=env).rc == 0
    again = stormdeck(lab_cluster, env, "undo", first.id, "--yes", "--verify-seconds", "5")
    if step == "after-end":
        assert again.returncode == 3 and "already undone" in again.stderr, again.stderr
    elif step == "after-intent":  # the undo was never sent: this one does it
        assert again.returncode == 0 and "applied" in again.stdout, again.stderr
    else:  # the undo reached the cluster: the value is the one before, nothing to do
        assert again.returncode == 0, again.stderr
    assert stored(lab_cluster, "osd", KEY) is None


def test_a_journal_that_cannot_grow_never_lets_a_change_through_unjournaled(
        lab_cluster: LabCluster, env, tmp_path: Path, clean_key) -> None:
    """RLIMIT_FSIZE at every size around the next records: each run is either refused with
    nothing sent, or sent with its intent whole on disk, so undo can put it back."""
    plan = scrub_plan(lab_cluster, tmp_path / "p.json")
    assert stormdeck(lab_cluster, env, "apply", str(plan), "--yes").returncode == 0
    j = journal_of(env)
    assert stormdeck(lab_cluster, env, "undo", "--yes").returncode == 0
    size = j.path.stat().st_size
    intent = len(j.path.read_bytes().splitlines()[0]) + 1
    outcomes = set()
    for extra in (0, intent - 1, intent, intent + 60, intent + 200):
        plan = scrub_plan(lab_cluster, tmp_path / f"p{extra}.json")
        before = j.path.read_bytes()
        limit = len(before) + extra
        res = stormdeck(lab_cluster, env, "apply", str(plan), "--yes", "--verify-seconds", "3",
                        prefix=("prlimit", f"--fsize={limit}", "--"))
        assert "Traceback" not in res.stderr
        if res.returncode == 3:  # refused: nothing sent, the journal as it was
            outcomes.add("refused")
            assert "nothing was sent" in res.stderr or "could not take" in res.stderr, res.stderr
            assert stored(lab_cluster, "osd", KEY) is None
            assert j.path.read_bytes() == before
            continue
        # Sent: its intent is whole; the end may not have fitted.
        outcomes.add("sent")
        assert res.returncode in (0, 1), res.stderr
        newest = j.entries(last=1)[0]
        assert newest.change.key == KEY, newest
        assert newest.status in ("applied", "pending restart", "INCOMPLETE"), (extra, newest)
        assert j.damaged == []
        undo = stormdeck(lab_cluster, env, "undo", newest.id, "--yes", "--verify-seconds", "3")
        assert undo.returncode == 0, undo.stderr
        assert stored(lab_cluster, "osd", KEY) is None
    assert outcomes == {"refused", "sent"}, outcomes
    assert size < j.path.stat().st_size


@contextlib.contextmanager
def tiny_fs(path: Path, size: str = "64k") -> Iterator[Path]:
    path.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                   check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Fill the filesystem of `directory` to the last byte."""
    filler = directory / "filler"
    with contextlib.suppress(OSError), open(filler, "wb", buffering=0) as f:
        while True:
            f.write(b"\0" * 4096)
    with contextlib.suppress(OSError), open(filler, "ab", buffering=0) as f:
        while True:
            f.write(b"\0")
    return filler


def test_a_full_disk_refuses_before_sending_and_a_disk_filled_mid_change_still_ends_it(
        lab_cluster: LabCluster, env, tmp_path: Path, clean_key) -> None:
    with tiny_fs(tmp_path / "fs") as fs:
        env = {**env, "XDG_STATE_HOME": str(fs)}
        filler = fill(fs)
        plan = scrub_plan(lab_cluster, tmp_path / "p.json")
        res = stormdeck(lab_cluster, env, "apply", str(plan), "--yes")
        assert res.returncode == 3 and "nothing was sent" in res.stderr, res.stderr
        assert stored(lab_cluster, "osd", KEY) is None
        filler.unlink()
        # Stopped after its intent, the disk filled by someone else, then continued: the
        # end still fits, in the room the journal kept for it.
        proc = subprocess.Popen(
            [sys.executable, "-m", "stormdeck", "apply", str(plan), "--yes",
             "--verify-seconds", "5", "-c", str(lab_cluster.conf)], cwd=ROOT,
            env={**env, "STORMDECK_FAILPOINT": "after-intent:stop"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            eventually(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED, 60,
                       interval=0.1)
            fill(fs)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        (e,) = journal_of(env).entries()
        assert e.status == "applied" and stored(lab_cluster, "osd", KEY) == "0.250000"
        (fs / "filler").unlink()
        assert stormdeck(lab_cluster, env, "undo", "--yes").returncode == 0
        assert stored(lab_cluster, "osd", KEY) is None


def test_a_torn_last_line_is_mended_or_quarantined_and_the_next_apply_goes_on(
        lab_cluster: LabCluster, env, tmp_path: Path, clean_key) -> None:
    j = journal_of(env)
    assert stormdeck(lab_cluster, env, "apply", str(scrub_plan(lab_cluster, tmp_path / "a")),
                     "--yes").returncode == 0
    # `head -c -1`: the last record lost only its newline; it is whole and stays.
    os.truncate(j.path, j.path.stat().st_size - 1)
    assert stormdeck(lab_cluster, env, "apply",
                     str(scrub_plan(lab_cluster, tmp_path / "b", "0.5")), "--yes"
                     ).returncode == 0
    assert [e.status for e in j.entries()] == ["applied", "applied"]
    # A crash mid-write: half a record, no newline.
    os.truncate(j.path, j.path.stat().st_size - 40)
    shown = run_cli("journal", env=env)
    assert shown.rc == 0 and "torn" in shown.err, shown.err
    res = stormdeck(lab_cluster, env, "apply", str(scrub_plan(lab_cluster, tmp_path / "c", "1")),
                    "--yes")
    assert res.returncode == 0 and "moved to" in res.stderr, res.stderr
    torn = j.path.with_name(j.path.name + ".torn")
    assert torn.exists() and oct(torn.stat().st_mode & 0o777) == "0o600"
    shown = run_cli("journal", env=env)
    assert shown.rc == 0 and shown.err == "", shown.err
    statuses = [e.status for e in j.entries()]
    # The end whose line was torn is gone; the entry says so, and the next one is whole.
    assert statuses == ["applied", "INCOMPLETE", "applied"], statuses
    for _ in range(3):
        assert stormdeck(lab_cluster, env, "undo", "--yes").returncode == 0
    assert stored(lab_cluster, "osd", KEY) is None


def mon_pid(lab: LabCluster) -> int:
    state = json.loads((lab.dir / "lab.json").read_text())
    (pid,) = [p["pid"] for name, p in state["procs"].items() if name.startswith("mon")]
    assert procs.is_ours(pid, str(lab.dir) + "/")
    return pid


@pytest.fixture
def pool(lab_cluster: LabCluster) -> Iterator[str]:
    name = "faults"
    mon_command(lab_cluster, "osd pool create", pool=name, pg_num=8, pgp_num=8)
    yield name
    # The lab's ceph.conf allows pool deletion (the config database is left alone: the
    # tamper test proves a plan cannot set mon_allow_pool_delete there).
    mon_command(lab_cluster, "osd pool rm", pool=name, pool2=name,
                yes_i_really_really_mean_it=True)


def pool_value(lab: LabCluster, pool: str, var: str) -> str:
    return str(mon_command(lab, "osd pool get", pool=pool, var=var)[var])


def test_the_mon_frozen_while_pg_num_converges_is_unknown_not_failed_and_undo_mends_it(
        lab_cluster: LabCluster, env, tmp_path: Path, pool: str) -> None:
    plan = write_plan(tmp_path / "p.json", change("pool_set", pool, "pg_num", "8", "16"),
                      rule="ceph.pool.pg_not_power_of_two", fsid=lab_fsid(lab_cluster))
    # Stopped right after sending, the mon frozen, then continued: the read-back meets
    # a mon that does not answer.
    proc = subprocess.Popen(
        [sys.executable, "-m", "stormdeck", "apply", str(plan), "--yes", "--timeout", "3",
         "-c", str(lab_cluster.conf)], cwd=ROOT,
        env={**env, "STORMDECK_FAILPOINT": "after-send:stop"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    mon = mon_pid(lab_cluster)
    try:
        eventually(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED, 60,
                   interval=0.1)
        os.kill(mon, signal.SIGSTOP)
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        os.kill(mon, signal.SIGCONT)
    assert proc.returncode == 1, err
    assert "outcome is unknown" in err or "could not be read back" in err, err
    (e,) = journal_of(env).entries()
    assert e.status == "unknown" and e.made is None
    eventually(lambda: pool_value(lab_cluster, pool, "pg_num") == "16", 120)
    # Read again: the journal learns the change was made.
    reread = stormdeck(lab_cluster, env, "journal", "--refresh")
    assert reread.returncode == 0 and "1 settled" in reread.stderr, reread.stderr
    assert journal_of(env).entries()[0].status == "applied"
    # The merge back takes a while: the undo is journaled pending, and counts as the undo.
    undo = stormdeck(lab_cluster, env, "undo", "--yes", "--converge-seconds", "5")
    assert undo.returncode == 0, undo.stderr
    assert "merging" in undo.stdout or "applied" in undo.stdout, undo.stdout
    entries = journal_of(env).entries()
    assert entries[0].status in ("applied", "pending"), entries[0]
    assert entries[0].undone_by == [entries[1].id]
    again = stormdeck(lab_cluster, env, "undo", "--yes")
    assert again.returncode == 3, again.stdout


def test_undo_does_not_overwrite_a_later_change_and_keeps_cephs_spelling(
        lab_cluster: LabCluster, env, tmp_path: Path, clean_key, pool: str) -> None:
    plan = scrub_plan(lab_cluster, tmp_path / "p.json")
    assert stormdeck(lab_cluster, env, "apply", str(plan), "--yes").returncode == 0
    mon_command(lab_cluster, "config set", who="osd", name=KEY, value="0.75")
    res = stormdeck(lab_cluster, env, "undo", "--yes")
    assert res.returncode == 3 and "someone changed it since" in res.stderr, res.stderr
    assert stored(lab_cluster, "osd", KEY) == "0.750000"
    # A boolean pool variable reads back as Ceph spells it, so an undo can send it.
    from stormdeck.advisors.ceph_admin import CephAdmin

    admin = CephAdmin(str(lab_cluster.conf))
    try:
        assert admin.pool_get(pool, "nodelete") == "false"
        admin.pool_set(pool, "nodelete", admin.pool_get(pool, "nodelete"))
    finally:
        admin.close()


def test_two_terminals_at_once_change_the_cluster_once(
        lab_cluster: LabCluster, env, tmp_path: Path, clean_key) -> None:
    plan = scrub_plan(lab_cluster, tmp_path / "p.json")

    def start(*args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "stormdeck", *args, "--yes",
                                 "-c", str(lab_cluster.conf)], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    runs = [start("apply", str(plan)) for _ in range(2)]
    results = [(p.wait(120), p.stderr.read()) for p in runs]
    assert sorted(rc for rc, _ in results) == [0, 3], results
    loser = next(err for rc, err in results if rc == 3)
    assert "another stormdeck" in loser or "moved since the plan" in loser, loser
    (e,) = journal_of(env).entries()
    runs = [start("undo", e.id) for _ in range(2)]
    results = [(p.wait(120), p.stderr.read()) for p in runs]
    assert sorted(rc for rc, _ in results) == [0, 3], results
    entries = journal_of(env).entries()
    assert len(entries) == 2 and entries[0].undone_by == [entries[1].id]
    assert stored(lab_cluster, "osd", KEY) is None
    # A holder that waits gets its turn; the lock names who holds it.
    held = subprocess.Popen(
        [sys.executable, "-m", "stormdeck", "apply", str(scrub_plan(lab_cluster, tmp_path / "q")),
         "--yes", "-c", str(lab_cluster.conf)], cwd=ROOT,
        env={**env, "STORMDECK_FAILPOINT": "after-intent:stop"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: psutil.Process(held.pid).status() == psutil.STATUS_STOPPED, 60,
                   interval=0.1)
        other = stormdeck(lab_cluster, env, "apply",
                          str(scrub_plan(lab_cluster, tmp_path / "r", "0.5")), "--yes")
        assert other.returncode == 3 and f"pid {held.pid}" in other.stderr, other.stderr
    finally:
        os.kill(held.pid, signal.SIGCONT)
    assert held.wait(120) == 0
    assert stormdeck(lab_cluster, env, "undo", "--yes", "--wait", "30").returncode == 0


def test_a_change_ceph_refuses_is_journaled_refused_and_exits_3_not_1(
        lab_cluster: LabCluster, tmp_path: Path, clean_key) -> None:
    """Ceph's "no" (here EINVAL; EACCES alike) before anything changed is not an outcome to
    look up in the journal: nothing changed, and undo has nothing to offer."""
    from stormdeck.advisors.apply import Executor, NothingChanged
    from stormdeck.advisors.ceph_admin import CephAdmin
    from stormdeck.advisors.plan import Plan

    bad = change("ceph_config", "osd", KEY, _effective(lab_cluster), "not-a-number")
    plan = Plan(id="refused1", created=time.time(), rule="ceph.scrub.during_load",
                target="osd", summary="s", source="K0", fsid=lab_fsid(lab_cluster),
                changes=(bad,))
    j = Journal(tmp_path / "state" / "journal.jsonl")
    with Executor(j, ceph=CephAdmin(str(lab_cluster.conf))) as ex, \
            pytest.raises(NothingChanged, match="nothing was changed") as caught:
        ex.apply(plan)
    assert caught.value.exit_code == 3
    (e,) = j.entries()
    assert e.status == "refused" and e.made is False
    assert stored(lab_cluster, "osd", KEY) is None
    with pytest.raises(Exception, match="changed nothing to undo"):
        Executor(j).inverse(e)
