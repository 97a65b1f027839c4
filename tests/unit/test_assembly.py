"""One builder: every command and each console tab gets its pieces from stormdeck/assembly.py."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from stormdeck import assembly, cli, cli_change, cli_check, cli_record, cli_snapshot, cli_watch
from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.plan import Plan
from stormdeck.cli import build_parser

TOOL = "curve_ops_tool -confPath=/etc/curve/tools.conf"
# A Curve-only cluster: nothing is asked of a network until a poll, and no Ceph is named.
SOURCES = ["--curve-mds", "127.0.0.1:9", "--curve-ops-tool", TOOL, "--no-host"]
CHANGING = ["--verify-seconds", "7", "--converge-seconds", "30", "--heartbeat", "2"]


class Stop(BaseException):
    """Raised by the spy once the pieces are made: nothing is read from a cluster."""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("CEPH_CONF", "CEPH_ARGS", "STORMDECK_READ_ONLY", "STORMDECK_CONFIG",
                 "STORMDECK_RULES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no ./ceph.conf found by librados' search
    return tmp_path


def pieces(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> list[assembly.Assembly]:
    """The assemblies `stormdeck ARGV` makes, stopped as soon as the first is made."""
    made: list[assembly.Assembly] = []

    def spy(*args: Any, **kwargs: Any) -> assembly.Assembly:
        made.append(assembly.assemble(*args, **kwargs))
        raise Stop

    for module in (cli_check, cli_watch, cli_record, cli_change, cli_snapshot):
        monkeypatch.setattr(module, "assemble", spy)
    with pytest.raises(Stop):
        cli.main(argv)
    return made


def kinds(a: assembly.Assembly) -> list[str]:
    return [type(s).__name__ for s in a.sources]


def test_every_entry_point_gets_the_same_pieces(home: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    plan = home / "plan.json"
    Plan(id="p1", created=time.time(), rule="curve.leaders.spread", target="pool1",
         summary="spread", source="curve", fsid=None,
         changes=(change("curve_leader_schedule", "pool1", "rapid-leader-schedule", "range 9",
                         "range <= 5", args={"pool_id": "1"}),)).save(plan)
    judging = {
        "check": pieces(monkeypatch, ["check", "--for", "0", *SOURCES])[0],
        "watch": pieces(monkeypatch, ["watch", *SOURCES, *CHANGING])[0],
        "record": pieces(monkeypatch, ["record", str(home / "rec"), *SOURCES])[0],
        # The rule that acts on validate's evidence: plan must see that evidence too.
        "plan": pieces(monkeypatch, ["plan", "disk.write_cache_on", *SOURCES])[0],
    }
    changing = {
        "watch": judging["watch"],
        "apply": pieces(monkeypatch, ["apply", str(plan), "--yes", *SOURCES, *CHANGING])[0],
    }
    snapshot = pieces(monkeypatch, ["snapshot", *SOURCES])[0]
    state = home / "state" / "stormdeck"
    for name, a in judging.items():
        assert kinds(a) == ["CurveSource"], name
        assert a.mutes.path == state / "mutes.json", name
        assert a.engine.mutes is a.mutes, name
        assert a.engine.validated is not None, name
        assert a.engine.validated.path == state / "validate" / "evidence.json", name
    assert [r.id for r in judging["plan"].engine.rules] == ["disk.write_cache_on"]
    assert kinds(snapshot) == ["CurveSource"]
    want = assembly.ExecutorOptions(curve_tool=("curve_ops_tool",
                                                "-confPath=/etc/curve/tools.conf"),
                                    heartbeat=2.0, verify_seconds=7.0, converge_seconds=30.0)
    for name, a in changing.items():
        assert a.options == want, name


def test_the_consoles_executor_has_the_clis_options(home: Path) -> None:
    args = build_parser().parse_args(["watch", *SOURCES, *CHANGING])
    app = cli_watch.build_app(args)
    try:
        (tab,) = app.tabs
        with tab.executor_factory() as console:
            pass
        apply_args = build_parser().parse_args(["apply", "x", *SOURCES, *CHANGING])
        with cli_change.executor(apply_args, needs_ceph=False) as cli_ex:
            pass
        for ex in (console, cli_ex):
            b = ex.backends
            assert b.curve_tool == ("curve_ops_tool", "-confPath=/etc/curve/tools.conf")
            assert (b.verify_seconds, b.converge_seconds) == (7.0, 30.0)
            # A leader schedule applied from either is followed over heartbeats.
            assert b.curve_follow is not None
    finally:
        tab.feed.hub.stop(wait=0)


def test_named_tabs_and_the_cli_share_one_mutes_file(home: Path) -> None:
    (home / "lab.conf").write_text("[global]\n")
    config = home / "config.toml"
    config.write_text(f'[clusters.prod]\nconf = "{home}/lab.conf"\nhost = false\n')
    old = home / "state" / "stormdeck"
    old.mkdir(parents=True)
    # A console tab's mute of before, in its own file: folded into the one file.
    mute = {"rule": "r", "target": "osd.1", "until": time.time() + 600,
            "created": time.time(), "severity": 2, "badness": 1.0, "reason": "", "fsid": None}
    (old / "mutes-prod.json").write_text(json.dumps({"version": 1, "mutes": [mute]}))
    app = cli_watch.build_app(build_parser().parse_args(["watch", "--config", str(config)]))
    try:
        (tab,) = app.tabs
        assert tab.name == "prod"
        assert tab.mutes.path == old / "mutes.json"
        assert tab.feed.engine.mutes is tab.mutes
        assert [m.target for m in assembly.mutes_store().list()] == ["osd.1"]
        assert not (old / "mutes-prod.json").exists()
    finally:
        tab.feed.hub.stop(wait=0)


def test_a_state_dir_that_cannot_be_written_still_reads_an_old_tab_mutes(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An operator's state dir stormdeck may read but not write (a read-only mount, another
    # user's): a console tab's mutes of before still hold, and the command still runs.
    state = home / "state" / "stormdeck"
    state.mkdir(parents=True)
    mute = {"rule": "r", "target": "osd.1", "until": time.time() + 600,
            "created": time.time(), "severity": 2, "badness": 1.0, "reason": "", "fsid": None}
    (state / "mutes-prod.json").write_text(json.dumps({"version": 1, "mutes": [mute]}))
    # Root writes through a mode, so the writer's lock is made unopenable instead.
    (state / "writer.lock").mkdir()
    store = assembly.mutes_store(wait=0)
    assert [m.target for m in store.list()] == ["osd.1"]
    assert (state / "mutes-prod.json").exists()  # not folded: tried again next time
    assert "mutes-prod.json" in capsys.readouterr().err
    assert cli.main(["mute", "--list"]) == 0
    assert "osd.1" in capsys.readouterr().out
