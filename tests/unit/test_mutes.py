"""The mutes file: only what stormdeck would write is obeyed, writers never lose each other's
mutes, and a full disk leaves the old file as it was."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stormdeck.advisors.findings import Finding, Severity
from stormdeck.advisors.lock import writer
from stormdeck.advisors.mutes import MuteStore
from stormdeck.base.errors import UserError
from tests.conftest import run_cli

ROOT = Path(__file__).parents[2]


def finding(rule: str = "ceph.osd.cores_starved", target: str = "osd.0") -> Finding:
    now = time.time()
    return Finding(rule, "t", Severity.WARNING, target, "s", "e", "K1", "firing", now, now)


def good(**over: object) -> dict[str, object]:
    now = time.time()
    return {"rule": "ceph.osd.cores_starved", "target": "osd.0", "until": now + 3600,
            "created": now, "severity": 2, "badness": 0.5, "reason": "known", **over}


def write(path: Path, *mutes: object, raw: str | None = None) -> None:
    path.write_text(raw if raw is not None else json.dumps({"version": 1, "mutes": list(mutes)}))


@pytest.mark.parametrize(("entry", "why"), [
    (good(until=1e300), r"until 1e\+300 is not within 30 days"),
    (good(until="tomorrow"), r"until 'tomorrow' is not a finite number"),
    (good(until=-5), r"until -5 is not within 30 days"),
    (good(until=True), r"until True is not a finite number"),
    (good(created=time.time() + 86400), r"created at .* in the future"),
    (good(created=-1.0), r"created at -1, at or before 1970"),
    (good(severity=9), r"severity 9 is not 1, 2 or 3"),
    (good(badness=-1), r"badness -1 is below 0"),
    (good(rule=""), r"its rule is not a name"),
    (good(target=["osd.0"]), r"its target is not a name"),
    (good(muted_forever=True), r"unknown field 'muted_forever'"),
    ("osd.0", r"it is not an object"),
])
def test_a_hand_edited_mute_stormdeck_would_never_write_is_refused(
        tmp_path: Path, entry: object, why: str) -> None:
    path = tmp_path / "mutes.json"
    write(path, good(target="osd.1"), entry)
    with pytest.raises(UserError, match=rf"mutes.json: mute 2 is refused: [^;]*{why}[^;]*; "
                                        "fix or delete that entry"):
        MuteStore(path)


@pytest.mark.parametrize("raw", [
    '{"version": 1, "mutes": [{"rule": "r", "target": "t", "until": NaN, "created": 1, '
    '"severity": 2, "badness": 0}]}',
    '{"version": 1, "mutes": [{"rule": "r", "target": "t", "until": Infinity, "created": 1, '
    '"severity": 2, "badness": 0}]}',
    '{"version": 1, "mutes": [{"rule": "r", "target": "t", "until": 1e999, "created": 1, '
    '"severity": 2, "badness": 0}]}',
    '{"version": 2, "mutes": []}', '[]', '{"version": 1, "mutes": {}}', '\xff\xfe',
])
def test_not_a_mutes_file_is_one_sentence(tmp_path: Path, raw: str) -> None:
    path = tmp_path / "mutes.json"
    path.write_bytes(raw.encode("latin-1"))
    with pytest.raises(UserError, match=r"mutes.json"):
        MuteStore(path)


def test_the_cli_refuses_a_forged_mute_with_exit_3_in_one_sentence(tmp_path: Path) -> None:
    state = tmp_path / "state" / "stormdeck"
    state.mkdir(parents=True)
    write(state / "mutes.json", good(until=1e300))
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    res = run_cli("mute", "--list", env=env)
    assert res.rc == 3, res.out
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
    assert "mute 1 is refused: its until 1e+300" in res.err
    write(state / "mutes.json", good(until="tomorrow"))
    res = run_cli("unmute", "ceph.osd.cores_starved", "osd.0", env=env)
    assert res.rc == 3 and "is not a finite number" in res.err


def test_a_good_file_round_trips_and_is_0600(tmp_path: Path) -> None:
    path = tmp_path / "state" / "mutes.json"
    store = MuteStore(path)
    store.add(finding(), ttl=600, badness=0.4, reason="known")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    (m,) = MuteStore(path).list()
    assert (m.rule, m.target, m.badness, m.reason) == ("ceph.osd.cores_starved", "osd.0", 0.4,
                                                       "known")
    assert MuteStore(path).remove("ceph.osd.cores_starved", "osd.0")
    assert MuteStore(path).list() == []
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_a_store_opened_earlier_does_not_drop_a_mute_added_since(tmp_path: Path) -> None:
    """The console holds a store for hours: its next mute must not erase the CLI's."""
    path = tmp_path / "mutes.json"
    console = MuteStore(path)
    MuteStore(path).add(finding(target="osd.1"), ttl=600)
    console.add(finding(target="osd.2"), ttl=600)
    assert sorted(m.target for m in MuteStore(path).list()) == ["osd.1", "osd.2"]


ADD = """
import sys, time
from pathlib import Path
from stormdeck.advisors.findings import Finding, Severity
from stormdeck.advisors.mutes import MuteStore
go = Path(sys.argv[2])
Path(sys.argv[4]).touch()
while not go.exists():
    time.sleep(0.001)
now = time.time()
f = Finding(sys.argv[3], "t", Severity.WARNING, "osd.0", "s", "e", "K1", "firing", now, now)
MuteStore(Path(sys.argv[1]), wait=60).add(f, ttl=600)
"""


def test_twenty_mutes_at_once_are_all_kept(tmp_path: Path) -> None:
    path = tmp_path / "state" / "mutes.json"
    go = tmp_path / "go"
    rules = [f"test.rule{i}" for i in range(20)]
    ready = [tmp_path / f"ready{i}" for i in range(len(rules))]
    procs = [subprocess.Popen([sys.executable, "-c", ADD, str(path), str(go), r, str(mark)],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
             for r, mark in zip(rules, ready, strict=True)]
    # Every one imported and waiting, however long a busy host takes: they start together.
    deadline = time.monotonic() + 120
    while not all(m.exists() for m in ready) and time.monotonic() < deadline:
        time.sleep(0.02)
    go.touch()
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert sorted(m.rule for m in MuteStore(path).list()) == sorted(rules)


def test_a_mute_waits_for_the_writer_lock_and_says_who_holds_it(tmp_path: Path) -> None:
    path = tmp_path / "mutes.json"
    store = MuteStore(path, wait=0.3)
    with writer(tmp_path, "applying ceph.scrub.during_load"), \
            pytest.raises(UserError, match=r"another stormdeck \(pid \d+: applying "
                                           r"ceph.scrub.during_load\) is changing"):
        store.add(finding(), ttl=600)
    assert not path.exists()


@pytest.fixture
def tiny_fs(tmp_path: Path):
    """A 16 KiB tmpfs: a full disk for real, not an imitation of one."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k,mode=0700", "tmpfs", str(mnt)],
                   check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def fill(directory: Path) -> None:
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"x" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)


def test_a_full_disk_while_muting_changes_nothing(tiny_fs: Path) -> None:
    path = tiny_fs / "mutes.json"
    MuteStore(path).add(finding(target="osd.1"), ttl=600, reason="before")
    before = path.read_bytes()
    fill(tiny_fs)
    store = MuteStore(path)
    with pytest.raises(UserError, match=r"cannot save the mutes in .*mutes.json \(No space "
                                        r"left on device\); nothing was changed"):
        store.add(finding(target="osd.2", rule="x.y"), ttl=600, reason="x" * 20000)
    assert path.read_bytes() == before
    assert [m.target for m in MuteStore(path).list()] == ["osd.1"]
    assert sorted(p.name for p in tiny_fs.iterdir()) == ["filler", "mutes.json",
                                                         "writer.lock"]


def test_the_cli_on_a_full_disk_is_one_sentence_and_exit_3(tiny_fs: Path) -> None:
    from tests.curve_wire import CurveWire

    state = tiny_fs / "stormdeck"
    MuteStore(state / "mutes.json").add(finding(target="osd.1"), ttl=600)
    before = (state / "mutes.json").read_bytes()
    fill(tiny_fs)
    rules = tiny_fs.parent / "rules.toml"
    rules.write_text('["curve.leaders.spread"]\nfor_seconds = 0\n')
    env = {**os.environ, "XDG_STATE_HOME": str(tiny_fs), "STORMDECK_RULES": str(rules)}
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        res = run_cli("mute", "curve.leaders.spread", "--for", "2h", "--reason", "y" * 9000,
                      "--curve-mds", ",".join(m.addr for m in wire.mds), "--no-host",
                      env=env, timeout=120)
    assert res.rc == 3, (res.out, res.err)
    assert len(res.err.strip().splitlines()) == 1 and "No space left" in res.err
    assert (state / "mutes.json").read_bytes() == before


@pytest.mark.asyncio
async def test_the_console_says_when_a_mute_could_not_be_saved(tmp_path: Path) -> None:
    from stormdeck.tui.app import StormdeckApp
    from stormdeck.tui.feed import StaticFeed
    from stormdeck.tui.views import FindingTable
    from tests.unit.test_tui import frames

    store = MuteStore(tmp_path / "mutes.json", wait=0.2)
    app = StormdeckApp(StaticFeed(frames()), mutes=store)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("6")
        table = app.query_one(FindingTable)
        table.move_cursor(row=table.keys.index("ceph.scrub.during_load|osd"))
        with writer(tmp_path, "applying a plan"):
            await pilot.press("m")
            await pilot.pause()
        assert any("another stormdeck" in n.message and n.title == "not muted"
                   for n in app._notifications)
        assert MuteStore(tmp_path / "mutes.json").list() == []
        await pilot.press("m")  # the lock is free again
        await pilot.pause()
    assert [m.target for m in MuteStore(tmp_path / "mutes.json").list()] == ["osd"]


A_FSID = "1b2c3d4e-0000-4000-8000-00000000000a"
B_FSID = "1b2c3d4e-0000-4000-8000-00000000000b"


# The lab capture's snapshots are dated ahead of the wall clock: mutes are judged at their time.
LAB_NOW = 1800000000.0


def at_lab(path: Path) -> MuteStore:
    return MuteStore(path, clock=lambda: LAB_NOW + 10)


def scrub_engine(store: MuteStore):
    from dataclasses import replace

    from stormdeck.advisors.engine import Engine
    from stormdeck.advisors.settings import load_settings

    settings = load_settings()
    settings["ceph.scrub.during_load"] = replace(settings["ceph.scrub.during_load"],
                                                 for_seconds=0, warmup_samples=1)
    return Engine(settings, mutes=store)


def scrub_findings(store: MuteStore, fsid: str | None) -> list[Finding]:
    from tests.captured import history, with_cluster

    # Three PGs scrub: the rule speaks only while a scrub runs (issue 31).
    snaps = history(5, step=1.0, edit=lambda s, i: with_cluster(
        s, fsid=fsid, pg_states={"active+clean": 30, "active+clean+scrubbing": 3}))
    engine = scrub_engine(store)
    out: list[Finding] = []
    for i in range(1, len(snaps) + 1):
        out = engine.evaluate(snaps[:i])
    return [f for f in out if f.rule == "ceph.scrub.during_load"]


def test_a_mute_set_on_one_cluster_does_not_silence_the_same_finding_on_another(
        tmp_path: Path) -> None:
    path = tmp_path / "mutes.json"
    (on_a,) = scrub_findings(at_lab(path), A_FSID)
    assert not on_a.muted
    at_lab(path).add(on_a, ttl=600, badness=10.0, fsid=A_FSID, now=LAB_NOW)
    (a_again,) = scrub_findings(at_lab(path), A_FSID)
    (on_b,) = scrub_findings(at_lab(path), B_FSID)
    assert a_again.muted and not on_b.muted
    # A cluster the engine cannot name (no Ceph identity) is not cluster A either.
    assert not scrub_findings(at_lab(path), None)[0].muted
    # B muted too: two mutes of the same rule and target, each its cluster's.
    at_lab(path).add(on_b, ttl=600, badness=10.0, fsid=B_FSID, now=LAB_NOW)
    assert sorted(at_lab(path).holders(on_a.rule, on_a.target)) == [A_FSID, B_FSID]
    assert at_lab(path).remove(on_a.rule, on_a.target, A_FSID)
    assert not scrub_findings(at_lab(path), A_FSID)[0].muted
    assert scrub_findings(at_lab(path), B_FSID)[0].muted
    assert [m.fsid for m in at_lab(path).for_cluster(B_FSID)] == [B_FSID]
    assert at_lab(path).for_cluster(A_FSID) == []


def test_an_old_file_without_fsids_loads_and_its_mutes_hold_everywhere(tmp_path: Path) -> None:
    path = tmp_path / "mutes.json"
    (f,) = scrub_findings(at_lab(path), A_FSID)
    write(path, good(rule=f.rule, target=f.target, badness=10.0, created=LAB_NOW,
                     until=LAB_NOW + 600))  # no "fsid" at all
    (m,) = at_lab(path).list()
    assert m.fsid is None
    assert scrub_findings(at_lab(path), A_FSID)[0].muted
    assert scrub_findings(at_lab(path), B_FSID)[0].muted
    write(path, good(fsid=None), good(target="osd.1", fsid=A_FSID))
    assert [m.fsid for m in MuteStore(path).list()] == [None, A_FSID]


@pytest.mark.parametrize("fsid", ["not-a-uuid", A_FSID.upper(), "{" + A_FSID + "}",
                                  A_FSID.replace("-", ""), 12, ["x"], True, ""])
def test_a_bad_fsid_in_the_file_is_refused(tmp_path: Path, fsid: object) -> None:
    path = tmp_path / "mutes.json"
    write(path, good(fsid=fsid))
    with pytest.raises(UserError, match=r"mute 1 is refused: its fsid .* is not a cluster's "
                                        r"fsid \(a lower-case UUID\) or null"):
        MuteStore(path)


def test_unmute_names_the_clusters_when_several_hold_a_mute(tmp_path: Path) -> None:
    state = tmp_path / "state" / "stormdeck"
    state.mkdir(parents=True)
    write(state / "mutes.json", good(fsid=A_FSID), good(fsid=B_FSID))
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    res = run_cli("mute", "--list", env=env)
    assert res.rc == 0 and A_FSID in res.out and B_FSID in res.out
    res = run_cli("unmute", "ceph.osd.cores_starved", "osd.0", env=env)
    assert res.rc == 3 and "2 clusters hold a mute" in res.err and A_FSID in res.err
    conf = tmp_path / "b.conf"
    conf.write_text(f"[global]\n\tfsid = {B_FSID}\n\tmon_host = 127.0.0.1\n")
    res = run_cli("unmute", "ceph.osd.cores_starved", "osd.0", "-c", str(conf), env=env)
    assert res.rc == 0 and f"on cluster {B_FSID}" in res.out, res.err
    assert [m.fsid for m in MuteStore(state / "mutes.json").list()] == [A_FSID]
    res = run_cli("unmute", "ceph.osd.cores_starved", "osd.0", "-c", str(conf), env=env)
    assert res.rc == 3 and f"held on cluster {A_FSID}" in res.err
    # One cluster holds it: no need to name it.
    res = run_cli("unmute", "ceph.osd.cores_starved", "osd.0", env=env)
    assert res.rc == 0 and A_FSID in res.out
    assert MuteStore(state / "mutes.json").list() == []


@pytest.mark.asyncio
async def test_the_console_mutes_on_its_tabs_cluster_only(tmp_path: Path) -> None:
    from stormdeck.tui.app import StormdeckApp
    from stormdeck.tui.feed import StaticFeed
    from stormdeck.tui.views import FindingTable
    from tests.unit.test_tui import frames

    store = MuteStore(tmp_path / "mutes.json")
    shown = frames()
    app = StormdeckApp(StaticFeed(shown), mutes=store)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("6")
        table = app.query_one(FindingTable)
        table.move_cursor(row=table.keys.index("ceph.scrub.during_load|osd"))
        await pilot.press("m")
        await pilot.pause()
    (m,) = MuteStore(tmp_path / "mutes.json").list()
    assert m.fsid == shown[-1].snapshot.cluster.fsid and m.fsid
