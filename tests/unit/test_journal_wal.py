"""The journal as a write-ahead log: whole records or none, torn tails, checksums, reading
from the end, and the states undo relies on. (Against the lab: test_change_faults.py.)"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Journal, JournalError, decode, encode

CHANGE = Change("ceph_config", "osd", "osd_scrub_sleep", "0", "0.1",
                "ceph config set osd osd_scrub_sleep 0.1", runtime=True)


def test_a_record_is_whole_and_unaltered_or_it_is_not_a_record() -> None:
    line = encode({"type": "end", "id": "abc", "time": 1.0, "outcome": "applied"})
    assert decode(line) is not None
    assert decode(line.replace(b"applied", b"APPLIED")) is None  # altered, JSON still valid
    assert decode(line[:-10]) is None
    assert decode(b'{"type":"end","id":"abc","time":1e999}') is None
    assert decode(b'["not", "a", "record"]') is None
    assert decode(b'{"type":"intent","id":5,"time":1}') is None
    # A version-1 line (no checksum) from before the write-ahead journal still reads.
    assert decode(b'{"type":"end","id":"abc","time":1.5,"outcome":"applied"}') is not None


def test_records_that_are_json_but_not_records_are_named_not_fatal(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl")
    a = j.intent(CHANGE, "0")
    j.end(a, "applied", after="0.1")
    with open(j.path, "ab") as f:
        f.write(b'{"type":"intent","id":"x","time":1,"change":{"kind":7}}\n')
        f.write(b'{"hello": "world"}\n')
    b = j.intent(CHANGE, "0.1")
    assert [e.id for e in j.entries()] == [a, b]
    assert len(j.damaged) == 2
    res = subprocess.run([sys.executable, "-m", "stormdeck", "journal"], capture_output=True,
                         text=True, env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "s")})
    assert res.returncode == 0  # an empty journal elsewhere is fine


def test_a_short_write_leaves_no_torn_record_and_sends_nothing(tmp_path: Path) -> None:
    """RLIMIT_FSIZE cuts the intent mid-line: the journal is cut back to where it was and
    the caller is told, so nothing is sent."""
    path = tmp_path / "j.jsonl"
    j = Journal(path)
    a = j.intent(CHANGE, "0")
    j.end(a, "applied")
    size = path.stat().st_size
    code = f"""
import resource, sys
from pathlib import Path
from stormdeck.advisors.journal import Journal, JournalError
from stormdeck.advisors.findings import Change
resource.setrlimit(resource.RLIMIT_FSIZE, ({size + 100}, {size + 100}))
c = Change("ceph_config", "osd", "osd_scrub_sleep", "0", "0.1", "x")
try:
    Journal(Path({str(path)!r})).intent(c, "0")
except JournalError as exc:
    print(exc)
    sys.exit(3)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 3 and "could not take the record" in res.stdout, res
    assert path.stat().st_size == size
    assert [e.status for e in j.entries()] == ["applied"] and j.damaged == []
    assert resource.getrlimit(resource.RLIMIT_FSIZE)  # this process was never limited


def test_a_torn_tail_is_moved_aside_and_a_whole_one_only_gets_its_newline(
        tmp_path: Path) -> None:
    warnings: list[str] = []
    j = Journal(tmp_path / "j.jsonl", warn=warnings.append)
    a = j.intent(CHANGE, "0")
    os.truncate(j.path, j.path.stat().st_size - 1)  # whole, but its newline lost
    j.end(a, "applied")
    assert [e.status for e in j.entries()] == ["applied"] and not warnings
    with open(j.path, "ab") as f:
        f.write(b'{"type":"intent","id":"torn')
    assert [e.status for e in j.entries()] == ["applied"]
    assert j.damaged and "torn" in j.damaged[0]
    b = j.intent(CHANGE, "0.1")
    assert warnings and "moved to" in warnings[0]
    assert b'"id":"torn' in j.torn_path.read_bytes()
    assert [e.id for e in j.entries()] == [a, b] and j.damaged == []


op = st.one_of(st.tuples(st.just("apply"), st.sampled_from(
    ["applied", "pending", "unknown", "refused", None])),
    st.tuples(st.just("undo"), st.sampled_from(["applied", "pending", "unknown", None])),
    st.tuples(st.just("end"), st.sampled_from(["applied", "not made"])))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, max_size=25), last=st.integers(1, 30))
def test_reading_from_the_end_tells_what_reading_it_all_tells(
        tmp_path_factory: pytest.TempPathFactory, ops: list, last: int) -> None:
    j = Journal(tmp_path_factory.mktemp("j") / "j.jsonl")
    ids: list[str] = []
    for kind, outcome in ops:
        if kind == "apply" or not ids:
            e = j.intent(CHANGE, "0")
        elif kind == "undo":
            e = j.intent(CHANGE, "0.1", undoes=ids[len(ids) // 2])
        else:
            j.end(ids[-1], outcome)
            continue
        ids.append(e)
        if outcome:
            j.end(e, outcome)
    everything = j.entries()
    assert j.entries(last=last) == everything[-last:]
    # Reading from the end stops early, and still sees every later undo of what it returns.
    live = [e for e in everything if e.undoes is None and not e.undone_by
            and e.made is not False]
    if live:
        assert j.find(None) == live[-1]
    for e in everything:
        assert j.find(e.id) == e


def test_a_long_journal_is_read_from_its_end(tmp_path: Path) -> None:
    """150,000 changes (69 MB, issue 27's figure): the newest entries and undo's lookup read
    a few chunks, not the whole file (measured in docs/measured.md)."""
    path = tmp_path / "j.jsonl"
    body = []
    change = {"kind": "ceph_config", "target": "osd", "key": "osd_scrub_sleep",
              "current": "0", "proposed": "0.1", "command": "c"}
    for i in range(20_000):
        body.append(encode({"type": "intent", "id": f"{i:010x}", "time": 1.0 + i,
                            "rule": "r", "change": change, "before": "0"}))
        body.append(encode({"type": "end", "id": f"{i:010x}", "time": 2.0 + i,
                            "outcome": "applied"}))
    path.write_bytes(b"".join(body))
    j = Journal(path)
    reads: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        reads.append(n)
        return real(fd, n, offset)

    os.pread = counting  # type: ignore[assignment]
    try:
        newest = j.find(None)
        found = j.find(f"{100:010x}")
    finally:
        os.pread = real  # type: ignore[assignment]
    assert newest.id == f"{19_999:010x}" and found.status == "applied"
    assert j.entries(last=5)[-1].id == newest.id
    # The newest entry came from the last chunk alone, not the whole file.
    assert 0 < reads[0] < path.stat().st_size / 10


def test_no_room_for_the_reserve_refuses_the_intent(tmp_path: Path) -> None:
    j = Journal(tmp_path / "j.jsonl")
    j.reserve_path.mkdir()  # cannot be made: as good as no room
    with pytest.raises(JournalError, match="nothing was sent"):
        j.intent(CHANGE, "0")
    assert not j.path.exists() or j.path.stat().st_size == 0


def test_an_undo_of_a_split_says_merge_and_asks_for_undo() -> None:
    from stormdeck.advisors.actuators.table import actuator, change
    from stormdeck.advisors.plan import Plan

    split = change("pool_set", "rbd", "pg_num", "100", "128")
    back = actuator("pool_set").inverse(split, "100")
    assert "merge back to 100" in back.note and "split" not in back.note
    assert back.command == "ceph osd pool set rbd pg_num 100"
    plan = Plan(id="undo-0123456789", created=0.0, rule="ceph.pool.pg_not_power_of_two",
                target="rbd", summary="undo", source="journal", fsid=None, changes=(back,))
    assert plan.phrase == "undo 0123456789"


def test_the_journal_command_names_a_damaged_middle_line_and_exits_3(tmp_path: Path) -> None:
    """A line in the middle edited by hand: every whole record is still listed, the damaged
    line is named by its number on stderr, and the exit is 3 (the journal cannot be
    trusted whole); a torn last line alone is a crash's trace, not damage (exit 0)."""
    state = tmp_path / "state"
    j = Journal(state / "stormdeck" / "journal.jsonl")
    a = j.intent(CHANGE, "0")
    j.end(a, "applied", after="0.1")
    b = j.intent(CHANGE, "0.1")
    j.end(b, "applied", after="0.2")
    lines = j.path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 4
    lines[1] = lines[1].replace(b'"applied"', b'"apPlied"')  # the checksum no longer holds
    j.path.write_bytes(b"".join(lines))
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    res = subprocess.run([sys.executable, "-m", "stormdeck", "journal"], capture_output=True,
                         text=True, env=env)
    assert res.returncode == 3, (res.stdout, res.stderr)
    assert a in res.stdout and b in res.stdout, res.stdout
    assert f"line 2 of {j.path} is not a whole journal record" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    # Mended, with a torn last line instead (a crash mid-write): said, not exit 3.
    lines[1] = lines[1].replace(b'"apPlied"', b'"applied"')
    j.path.write_bytes(b"".join(lines) + lines[3][:20])
    res = subprocess.run([sys.executable, "-m", "stormdeck", "journal"], capture_output=True,
                         text=True, env=env)
    assert res.returncode == 0 and "last line is torn" in res.stderr, (res.stdout, res.stderr)
