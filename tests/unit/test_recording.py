"""Recordings: lossless round trips, torn and corrupt files, versions, size bounds, the CLI."""

from __future__ import annotations

import json
import struct
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.session import Session, recorded_changes, recorded_findings, replay
from stormdeck.base.errors import UserError
from stormdeck.collectors.model import Snapshot
from stormdeck.collectors.recording import MAGIC, Recorder, Recording, decode, diff, encode, patch
from tests.captured import history, with_cluster, with_daemon
from tests.conftest import run_cli


def busy(s: Snapshot, i: int) -> Snapshot:
    """Values that move every poll, as under load; osd.1 down for a while."""
    s = with_daemon(s, "osd.0", cores_used=0.5 + (i % 7) / 10, rss_bytes=10**9 + i * 4096)
    s = with_daemon(s, "osd.1", up=not 20 <= i < 25, write_iops=100.0 + i)
    return with_cluster(s, client_write_iops=1000.0 + i * 3.3, osdmap_epoch=50 + i // 10)


def record(path: Path, snaps: list[Snapshot], **kw) -> Recorder:
    rec = Recorder(path, **kw)
    for s in snaps:
        rec.add_snapshot(s)
    rec.close()
    return rec


def test_snapshots_come_back_as_they_were_encoded(tmp_path: Path) -> None:
    snaps = history(130, step=1.0, edit=busy)
    record(tmp_path / "r", snaps, keyframe_every=60)
    rec = Recording(tmp_path / "r")
    assert rec.torn is None and len(rec) == 130
    assert [f.kind for f in rec.frames].count(b"K") == 3
    expect = [decode(Snapshot, encode(s)) for s in snaps]
    assert list(rec.snapshots()) == expect
    # From the middle of a deflate stream, as a seek does.
    assert list(rec.snapshots(75)) == expect[75:]
    assert rec.snapshot_at(snaps[90].time + 0.5) == 90
    # Nothing is lost but float digits: what the rules read stays.
    back = expect[22]
    assert back.daemons["osd.1"].up is False and back.cluster.osdmap_epoch == 52
    assert back.daemons["osd.0"].rss_bytes == 10**9 + 22 * 4096


def test_a_torn_tail_replays_up_to_the_tear(tmp_path: Path) -> None:
    snaps = history(30, step=1.0, edit=busy)
    record(tmp_path / "r", snaps)
    whole = (tmp_path / "r").read_bytes()
    last = Recording(tmp_path / "r").frames[-1]
    start = last.offset - 17  # the last frame's header
    for cut in sorted({start + 1, start + 10, start + 17, last.offset + last.length // 2,
                       len(whole) - 1}):
        (tmp_path / "t").write_bytes(whole[:cut])
        rec = Recording(tmp_path / "t")
        assert len(rec) == 29, cut
        assert rec.torn and "torn" in rec.torn
        assert len(list(rec.snapshots())) == 29


def test_a_corrupt_frame_ends_the_replay_there(tmp_path: Path) -> None:
    record(tmp_path / "r", history(30, step=1.0, edit=busy))
    data = bytearray((tmp_path / "r").read_bytes())
    tenth = Recording(tmp_path / "r").frames[10]
    data[tenth.offset + 3] ^= 0xFF
    (tmp_path / "c").write_bytes(bytes(data))
    rec = Recording(tmp_path / "c")
    assert len(rec) == 10 and "corrupt" in (rec.torn or "")


def test_newer_formats_and_strangers_get_one_sentence(tmp_path: Path) -> None:
    record(tmp_path / "r", history(3))
    data = (tmp_path / "r").read_bytes()
    head_end = data.index(b"\n", len(MAGIC)) + 1
    header = json.loads(data[len(MAGIC):head_end])
    newer = MAGIC + json.dumps({**header, "format": 2}).encode() + b"\n" + data[head_end:]
    (tmp_path / "n").write_bytes(newer)
    with pytest.raises(UserError, match="format 2; this stormdeck reads format 1"):
        Recording(tmp_path / "n")
    (tmp_path / "x").write_text("hello\n")
    with pytest.raises(UserError, match="not a stormdeck recording"):
        Recording(tmp_path / "x")
    (tmp_path / "e").write_bytes(data[:head_end])
    with pytest.raises(UserError, match="holds no snapshot"):
        Recording(tmp_path / "e")
    with pytest.raises(UserError, match="already exists"):
        Recorder(tmp_path / "r")


def test_past_its_size_a_recording_starts_afresh_keeping_one_older_part(tmp_path: Path) -> None:
    rec = record(tmp_path / "r", history(400, step=1.0, edit=busy), max_bytes=8192)
    assert rec.rotations >= 2
    for name in ("r", "r.1"):
        part = Recording(tmp_path / name)
        # The current part holds what came after the last rotation: how many depends on
        # where 400 snapshots fall against the size (a snapshot's fields grow with time).
        assert part.torn is None and len(part) > (10 if name == "r.1" else 0)
        # Each part stands alone: it opens on a keyframe.
        assert part.frames[0].kind == b"K"
    assert (tmp_path / "r").stat().st_size < 8192 + 4096
    assert not (tmp_path / "r.2").exists()


def test_findings_and_changes_go_on_tape_and_replay_judges_the_same(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal.jsonl")
    tape = Recorder(tmp_path / "r")
    live = Session(Engine(), recorder=tape, journal=journal)
    snaps = history(40, step=1.0, edit=busy)
    seen = []
    for i, s in enumerate(snaps):
        if i == 30:
            ch = Change(kind="osd_flag", target="cluster", key="noout", current="unset",
                        proposed="set", command="ceph osd set noout")
            journal.end(journal.intent(ch, "unset", rule="test"), "applied", after="set")
        step = live.step(s, snaps[:i + 1])
        seen.append({(f.rule, f.target, f.state) for f in step.findings})
    live.close()
    rec = Recording(tmp_path / "r")
    again = [{(f.rule, f.target, f.state) for f in step.findings}
             for _, step, _ in replay(rec, Engine())]
    assert again == seen
    taped = recorded_findings(rec)
    assert taped and {(f.rule, f.target, f.state) for f in taped[-1][1]} == seen[-1]
    (change,) = recorded_changes(rec)
    assert change.change.command == "ceph osd set noout" and change.outcome == "applied"


def test_the_cli_reports_a_recording_and_refuses_bad_ones(tmp_path: Path) -> None:
    record(tmp_path / "r", history(60, step=1.0, edit=busy))
    md = run_cli("report", str(tmp_path / "r"))
    assert md.rc == 0, md.err
    assert "osd.1 down" in md.out and "osd.1 up" in md.out and "## PG states" in md.out
    js = run_cli("report", str(tmp_path / "r"), "--json", "--from", "+10", "--to", "-10")
    assert js.rc == 0, js.err
    doc = json.loads(js.out)
    assert doc["format"] == 1 and doc["snapshots"] == 40  # 10 s in, 10 s before the end
    whole = (tmp_path / "r").read_bytes()
    (tmp_path / "t").write_bytes(whole[:-5])
    torn = run_cli("report", str(tmp_path / "t"), "--json")
    assert torn.rc == 0 and "torn frame" in torn.err and json.loads(torn.out)["snapshots"] == 59
    for args, words in ((("report", str(tmp_path / "nope")), "cannot open"),
                        (("replay", str(tmp_path / "journal")), "cannot open"),
                        (("report", str(tmp_path / "r"), "--from", "25:00"), "not a time"),
                        (("record", str(tmp_path / "r"), "--no-host"), "already exists")):
        res = run_cli(*args)
        assert res.rc != 0 and words in res.err, (args, res.err)
        assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5)
    | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=4),
    max_leaves=20)
json_dicts = st.dictionaries(st.text(max_size=4), json_values, max_size=6)


@settings(max_examples=300, deadline=None)
@given(json_dicts, json_dicts)
def test_a_delta_turns_one_state_into_the_other(a: dict, b: dict) -> None:
    assert patch(a, diff(a, b)) == b
    # What goes through JSON comes back the same: the deltas are JSON too.
    assert patch(a, json.loads(json.dumps(diff(a, b)))) == b


def test_the_frame_header_is_as_documented() -> None:
    assert struct.calcsize(">cdII") == 17
    doc = (Path(__file__).parent.parent.parent / "docs" / "recording.md").read_text()
    assert "format 1" in doc.lower() and "17 bytes" in doc


def test_encoding_keeps_what_matters() -> None:
    s = history(1)[0]
    s = with_daemon(s, "osd.0", cores_used=float("inf"), commit_latency=0.000123456)
    back = decode(Snapshot, encode(s))
    assert back.daemons["osd.0"].cores_used == float("inf")
    assert back.daemons["osd.0"].commit_latency == pytest.approx(0.000123456, rel=1e-3)
    assert back.time == s.time and back.cluster is not None
    assert replace(back, time=0) != back


def test_the_encoder_reusing_unchanged_objects_writes_what_encode_writes() -> None:
    from stormdeck.collectors.recording import Encoder, encode

    snaps = history(12, step=1.0, edit=busy)
    # Shared objects, as the hub's merge leaves them: the same daemons mapping twice.
    snaps[5] = replace(snaps[5], daemons=snaps[4].daemons)
    enc = Encoder()
    for s in snaps:
        assert enc.snapshot(s) == encode(s)
