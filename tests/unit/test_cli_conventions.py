"""The ceph CLI's conventions and stormdeck's safety rules, through the real command line:
no abbreviations, one exit-code table, the client options and CEPH_ARGS, the config file
checked as the command line is, and `stormdeck` alone opening the console."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from stormdeck.cli import build_parser
from stormdeck.parsing import EXIT_CODES
from tests.conftest import run_cli
from tests.terminal import on_pty, plain

ROOT = Path(__file__).parents[2]


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No cluster anywhere: no CEPH_CONF, no CEPH_ARGS, no config file, a fresh state dir."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CEPH_CONF", "CEPH_ARGS", "STORMDECK_CONFIG")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_STATE_HOME=str(tmp_path / "state"),
               HOME=str(tmp_path / "home"))
    env.update(extra)
    return env


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def every_parser() -> list[argparse.ArgumentParser]:
    out, todo = [], [build_parser()]
    while todo:
        p = todo.pop()
        out.append(p)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += list(action.choices.values())
    return out


# ---- no abbreviations -----------------------------------------------------------------


def test_no_parser_takes_abbreviations() -> None:
    parsers = every_parser()
    assert len(parsers) > 20  # every command and every lab action
    assert all(p.allow_abbrev is False for p in parsers), \
        [p.prog for p in parsers if p.allow_abbrev]


def test_a_prefix_of_an_option_is_refused(tmp_path: Path) -> None:
    conf = tmp_path / "ceph.conf"
    conf.write_text("[global]\n")
    res = run_cli("snapshot", "--con", str(conf), env=clean_env(tmp_path))
    assert res.rc == 3 and "unrecognized arguments: --con" in one_line(res.err)
    res = run_cli("lab", "status", "--js", env=clean_env(tmp_path))
    assert res.rc == 3 and "--js" in one_line(res.err)


# ---- one exit-code table ----------------------------------------------------------------


def test_every_help_ends_with_the_exit_code_table() -> None:
    for argv in (["--help"], ["check", "--help"], ["apply", "--help"], ["lab", "up", "--help"],
                 ["validate", "--help"], ["exporter", "--help"]):
        res = run_cli(*argv)
        assert res.rc == 0 and EXIT_CODES in res.out, argv


def test_the_guide_has_the_same_table() -> None:
    page = (ROOT / "docs" / "command-line.md").read_text()
    rows = re.findall(r"^\| (\d+) +\|", page, re.M)
    table = re.findall(r"^  (\d+) ", EXIT_CODES, re.M)
    assert rows == table == ["0", "1", "2", "3", "70", "130"]


def test_usage_errors_never_share_a_code_with_a_finding(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    for argv in (["check", "--bogus"], ["check", "--for", "soon"],
                 ["check", "-c", "/nonexistent.conf"], ["check"],
                 ["check", "--timeout", "0", "-c", "/etc/hostname"],
                 ["check", "--prometheus", "prom:9090"],
                 ["check", "--prometheus-for", "cuvre", "--prometheus", "http://127.0.0.1:9"],
                 ["check", "--rules", str(tmp_path / "none.toml"), "-c", "/etc/hostname"],
                 ["validate", "--headless"], ["snapshot", "--format", "yaml"],
                 ["journal", "-f", "xml"], ["bogus-command"]):
        res = run_cli(*argv, env=env)
        assert res.rc == 3, (argv, res)
        one_line(res.err)


# ---- the ceph CLI's client options ------------------------------------------------------


def test_the_client_options_are_the_ceph_clis() -> None:
    parser = build_parser()
    for command in ("watch", "snapshot", "check", "plan", "apply", "undo", "mute", "record",
                    "validate"):
        extra = ["x"] if command in ("plan", "apply", "record") else []
        args = parser.parse_args([command, *extra,
                                  "-c", "a.conf", "--user", "ops", "-n", "client.ops",
                                  "-k", "k.ring", "--cluster", "prod"])
        assert (args.conf, args.client_id, args.client_name, args.keyring, args.cluster) == \
            ("a.conf", "ops", "client.ops", "k.ring", "prod"), command
    for command in ("snapshot", "check", "journal", "report", "validate"):
        extra = ["f"] if command == "report" else []
        assert parser.parse_args([command, *extra, "-f", "json"]).format == "json"
        assert parser.parse_args([command, *extra, "--json"]).format == "json-pretty"
        assert parser.parse_args([command, *extra]).format == "plain"


def test_journal_formats(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    compact = run_cli("journal", "-f", "json", env=env)
    pretty = run_cli("journal", "--format", "json-pretty", env=env)
    assert compact.rc == pretty.rc == 0
    assert compact.out == "[]\n" and json.loads(pretty.out) == []
    assert "no changes journaled" in run_cli("journal", "-f", "plain", env=env).out


def test_ceph_args_is_read_as_the_ceph_cli_reads_it(tmp_path: Path) -> None:
    """`ceph` appends CEPH_ARGS to its arguments: -c there names the cluster."""
    env = clean_env(tmp_path, CEPH_ARGS=f"-c {tmp_path}/missing.conf --id ops")
    res = run_cli("snapshot", env=env)
    assert res.rc == 3 and f"no such ceph.conf: {tmp_path}/missing.conf" in one_line(res.err)
    res = run_cli("validate", "--headless", env=env)
    assert res.rc == 3 and "no such ceph.conf" in one_line(res.err)
    res = run_cli("snapshot", env=clean_env(tmp_path, CEPH_ARGS="--keyring"))
    assert res.rc == 3 and one_line(res.err).startswith("stormdeck: CEPH_ARGS: ")


def test_a_bad_client_name_is_refused_as_ceph_would() -> None:
    res = run_cli("snapshot", "-n", "admin")
    assert res.rc == 3 and "TYPE.ID" in one_line(res.err)


# ---- the config file: the command line's choices and ranges ---------------------------


@pytest.mark.parametrize("key, value, option, words", [
    ("prometheus_for", '"cuvre"', ["--prometheus-for", "cuvre"], "both"),
    ("timeout", "0", ["--timeout", "0"], "a number of seconds above 0"),
    ("timeout", '"soon"', ["--timeout", "soon"], "a number of seconds"),
    ("prometheus", '"prom:9090"', ["--prometheus", "prom:9090"], "a URL like"),
    ("prometheus_match", "'cluster=prod'", ["--prometheus-match", "cluster=prod"],
     "label matchers like"),
    ("curve_mds", '["mds1"]', ["--curve-mds", "mds1"], "host:port addresses"),
    ("name", '"admin"', ["--name", "admin"], "TYPE.ID"),
    ("prometheus_ca", '"/nonexistent.pem"', ["--prometheus-ca", "/nonexistent.pem"],
     "a readable file, and /nonexistent.pem is not"),
])
def test_the_config_file_is_checked_as_the_command_line(tmp_path: Path, key: str, value: str,
                                                         option: list[str], words: str) -> None:
    path = tmp_path / "config.toml"
    base = "" if key == "prometheus" else 'prometheus = "http://127.0.0.1:9"\n'
    path.write_text(f'[clusters.prod]\n{base}{key} = {value}\n')
    env = clean_env(tmp_path)
    res = run_cli("watch", "--config", str(path), env=env)
    line = one_line(res.err)
    assert res.rc == 3 and f"[clusters.prod] {key} = " in line and words in line, line
    assert "is not allowed: it takes" in line
    res = run_cli("snapshot", "--prometheus", "http://127.0.0.1:9", *option, env=env)
    assert res.rc == 3 and words in one_line(res.err)
    # The same file serves every command of one cluster: snapshot reads it too.
    res = run_cli("snapshot", "--config", str(path), env=env)
    assert res.rc == 3 and f"[clusters.prod] {key} = " in one_line(res.err)


def test_secrets_are_file_only(tmp_path: Path) -> None:
    for option in ("--prometheus-token-file", "--prometheus-user", "--prometheus-password-file"):
        res = run_cli("snapshot", option, "x", env=clean_env(tmp_path))
        assert res.rc == 3 and "unrecognized arguments" in res.err, option
    path = tmp_path / "config.toml"
    path.write_text('[clusters.p]\nprometheus = "http://127.0.0.1:9"\n'
                    f'prometheus_token_file = "{tmp_path}/none"\n')
    res = run_cli("snapshot", "--config", str(path), env=clean_env(tmp_path))
    assert res.rc == 3 and "prometheus_token_file" in one_line(res.err)


def test_one_command_takes_one_cluster_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[clusters.a]\nprometheus = "http://127.0.0.1:9"\n'
                    '[clusters.b]\nprometheus = "http://127.0.0.1:9"\n')
    env = clean_env(tmp_path, STORMDECK_CONFIG=str(path))
    res = run_cli("snapshot", env=env)
    assert res.rc == 3 and "choose one with --only NAME" in one_line(res.err)
    res = run_cli("snapshot", "--only", "c", env=env)
    assert res.rc == 3 and "no cluster 'c'" in one_line(res.err)
    # Port 9 refuses: the cluster was chosen, and could not be read.
    res = run_cli("snapshot", "--only", "b", "--no-host", "--timeout", "2", env=env)
    assert res.rc == 3 and "could not read the cluster" in res.err and "127.0.0.1:9" in res.err


# ---- stormdeck alone ---------------------------------------------------------------------


def test_no_command_and_no_cluster_is_one_sentence(tmp_path: Path) -> None:
    res = run_cli(env=clean_env(tmp_path))
    assert res.rc == 3
    line = one_line(res.err)
    assert "nothing to watch" in line and "config.toml" in line and "/etc/ceph/ceph.conf" in line


def screen_text(argv: list[str], env: dict[str, str], keys: list[tuple[float, bytes]],
                seconds: float) -> tuple[str, int | None]:
    """Run the real command on a pseudo-terminal, type `keys` at their times; the text
    drawn and the exit status."""
    raw, code = on_pty([sys.executable, "-m", "stormdeck", *argv],
                       {**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"},
                       seconds, keys)
    return plain(raw), code


def test_no_command_opens_the_console_on_the_config_files_clusters(tmp_path: Path) -> None:
    """And its help lists the keys as Textual shows them: `<`, not less_than_sign."""
    env = clean_env(tmp_path)
    cfg = tmp_path / "cfg" / "stormdeck" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[clusters.far]\nprometheus = "http://127.0.0.1:9"\nhost = false\n'
                   '[clusters.near]\nprometheus = "http://127.0.0.1:9"\nhost = false\n')
    text, code = screen_text([], env, [(4.0, b"?"), (6.0, b"\x1b"), (7.0, b"q")], 20)
    assert code == 0, text[-500:]
    assert "far" in text and "near" in text, "one tab per cluster of the file"
    assert "less_than_sign" not in text and "question_mark" not in text
    assert re.search(r"<\s+The previous cluster's tab", text), text[-2000:]
    assert re.search(r">\s+The next cluster's tab", text)
    assert re.search(r"\+ or =\s+Faster", text)


# ---- the exporter's unit ---------------------------------------------------------------


def test_the_unit_file_is_valid_and_asks_for_nothing() -> None:
    unit = (ROOT / "assets" / "stormdeck-exporter.service").read_text()
    settings = dict(re.findall(r"^(\w+)=(.*)$", unit, re.M))
    assert settings["DynamicUser"] == "yes" and settings["CapabilityBoundingSet"] == ""
    assert settings["AmbientCapabilities"] == "" and "User" not in settings
    if shutil.which("systemd-analyze"):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "stormdeck-exporter.service"
            path.write_text(unit.replace("/usr/local/bin/stormdeck",
                                         str(Path(sys.executable).parent / "stormdeck")))
            res = subprocess.run(["systemd-analyze", "verify", str(path)],
                                 capture_output=True, text=True)
            assert res.returncode == 0 and "stormdeck-exporter" not in res.stderr, res.stderr
