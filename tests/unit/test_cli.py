"""The command line: help, one-sentence errors and exit codes, without a cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli


def assert_one_sentence(err: str) -> None:
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_help_lists_every_command() -> None:
    res = run_cli("--help")
    assert res.rc == 0 and "lab" in res.out and "watch" in res.out


def test_every_lab_action_has_help() -> None:
    for action in ("up", "down", "status", "load", "storm"):
        res = run_cli("lab", action, "--help")
        assert res.rc == 0 and "--dir" in res.out, action


def test_bad_arguments_are_one_line() -> None:
    res = run_cli("lab")
    assert res.rc == 3
    assert_one_sentence(res.err)
    res = run_cli("lab", "up", "--osds", "many")
    assert res.rc == 3
    assert_one_sentence(res.err)


def test_osd_count_out_of_range(tmp_path: Path) -> None:
    res = run_cli("lab", "up", "--osds", "0", "--dir", str(tmp_path / "lab"))
    assert res.rc == 3 and "1 to 16 OSDs" in res.err
    assert_one_sentence(res.err)


def test_bad_osd_size(tmp_path: Path) -> None:
    res = run_cli("lab", "up", "--osd-size", "100M", "--dir", str(tmp_path / "lab"))
    assert res.rc == 3 and "at least 1G" in res.err
    assert_one_sentence(res.err)


def test_down_with_nothing_up_says_so(tmp_path: Path) -> None:
    res = run_cli("lab", "down", "--dir", str(tmp_path / "nothing"))
    assert res.rc == 0 and "nothing to stop" in res.out


def test_down_refuses_a_directory_that_is_not_a_lab(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("keep me")
    res = run_cli("lab", "down", "--dir", str(precious))
    assert res.rc == 3 and "not touching it" in res.err
    assert_one_sentence(res.err)
    assert (precious / "data.txt").read_text() == "keep me"


def test_up_refuses_a_directory_that_is_not_a_lab(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    res = run_cli("lab", "up", "--memstore", "--dir", str(tmp_path))
    assert res.rc == 3
    assert_one_sentence(res.err)
    assert (tmp_path / "file").exists()


def test_status_without_a_lab(tmp_path: Path) -> None:
    res = run_cli("lab", "status", "--dir", str(tmp_path / "none"))
    assert res.rc == 1 and "no lab" in res.out
    res = run_cli("lab", "status", "--json", "--dir", str(tmp_path / "none"))
    assert res.rc == 1 and json.loads(res.out)["running"] is False


def test_load_and_storm_without_a_lab(tmp_path: Path) -> None:
    for args in (["load"], ["storm"], ["storm", "--restart-osd", "0"]):
        res = run_cli("lab", *args, "--dir", str(tmp_path / "none"))
        assert res.rc == 3 and "no lab" in res.err, args
        assert_one_sentence(res.err)


def test_corrupt_state_file_is_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "lab.json").write_text("not json")
    for args in (["status"], ["down"], ["up", "--memstore"]):
        res = run_cli("lab", *args, "--dir", str(tmp_path))
        assert res.rc == 3, args
        assert "not a lab state file" in res.err
        assert_one_sentence(res.err)


def test_up_with_ceph_missing(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path / "empty-bin")}
    res = run_cli("lab", "up", "--memstore", "--dir", str(tmp_path / "lab"), env=env)
    assert res.rc == 3
    assert "Ceph is not installed" in res.err and "ceph-mon" in res.err
    assert_one_sentence(res.err)
    assert not (tmp_path / "lab").exists()


def test_up_as_non_root(tmp_path: Path) -> None:
    # As root, become an unprivileged user; otherwise we already are one.
    user = "nobody" if os.geteuid() == 0 else None
    target = Path("/tmp") / f"stormdeck-nonroot-{os.getpid()}"
    res = run_cli("lab", "up", "--dir", str(target), user=user)
    assert res.rc == 3
    assert "needs root" in res.err
    assert_one_sentence(res.err)
    assert not target.exists()


def test_port_in_use_is_named(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = run_cli("lab", "up", "--memstore", "--mon-port", str(port),
                      "--dir", str(tmp_path / "lab"))
    if res.rc == 3 and "Ceph is not installed" in res.err:
        return  # checked before ports on a machine without Ceph
    assert res.rc == 3 and f"mon {port}" in res.err
    assert_one_sentence(res.err)


def test_cli_does_not_import_textual() -> None:
    code = ("import sys; from stormdeck.cli import build_parser; build_parser(); "
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).parents[2]).stdout
    assert out.strip() == "False"
