"""Shell completion and the man page, as the shells and man read them, against the parser."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from pathlib import Path

import pytest

from stormdeck.base.errors import UserError
from stormdeck.cli import build_parser
from stormdeck.cli_completion import completion_script, escape_control_lines, install
from tests.conftest import run_cli


def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> dict:
    """Every (sub)command path and its option strings, walked from the parser itself."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                path = (*prefix, name)
                out[path] = [s for a in child._actions for s in a.option_strings]
                out.update(commands(child, path))
    return out


ALL = commands(build_parser())

BASH_DRIVER = r"""
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
_shtab_stormdeck stormdeck "${COMP_WORDS[-1]}" "${COMP_WORDS[-2]}" 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"
"""


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    res = run_cli("completion", "bash")
    assert res.rc == 0, res.err
    path = tmp_path_factory.mktemp("bash") / "stormdeck"
    path.write_text(res.out)
    return path


def bash_complete(script: Path, *words: str) -> list[str]:
    """What bash offers for the last word, through the `complete -F` function as Tab calls it."""
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "bash",
                           str(script), "stormdeck", *words],
                          capture_output=True, text=True, timeout=30, check=True)
    return [w for w in proc.stdout.splitlines() if w]


def test_the_walk_sees_nested_commands() -> None:
    # Guards the walk the other tests rely on: lab's actions are two levels down.
    assert ("lab", "up") in ALL and "--memstore" in ALL[("lab", "up")]
    assert ("completion",) in ALL and ("manpage",) in ALL


def test_bash_completes_commands_and_options(bash_script: Path) -> None:
    assert bash_complete(bash_script, "expo") == ["exporter"]
    assert bash_complete(bash_script, "exporter", "--li") == ["--listen"]
    assert set(bash_complete(bash_script, "lab", "st")) == {"status", "storm", "stop", "start"}
    assert bash_complete(bash_script, "lab", "up", "--mem") == ["--memstore"]
    assert bash_complete(bash_script, "completion", "f") == ["fish"]
    top = set(bash_complete(bash_script, ""))
    assert top >= {path[0] for path in ALL}


def test_bash_offers_every_option_of_every_command(bash_script: Path) -> None:
    for path, options in ALL.items():
        if any(isinstance(a, argparse._SubParsersAction)
               for a in _parser_at(path)._actions):
            continue
        offered = set(bash_complete(bash_script, *path, "-"))
        assert offered >= set(options), (path, set(options) - offered)


def _parser_at(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed (./dev setup)")
def test_fish_completes_commands_and_options(tmp_path: Path) -> None:
    res = run_cli("completion", "fish")
    assert res.rc == 0, res.err
    script = tmp_path / "stormdeck.fish"
    script.write_text(res.out)

    def fish(line: str) -> list[str]:
        proc = subprocess.run(["fish", "--no-config", "-c",
                               f"source {script}; complete -C '{line}'"],
                              capture_output=True, text=True, timeout=30, check=True)
        return [row.split("\t")[0] for row in proc.stdout.splitlines()]

    assert fish("stormdeck expo") == ["exporter"]
    assert fish("stormdeck lab up --mem") == ["--memstore"]
    assert "--listen" in fish("stormdeck exporter --")


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (./dev setup)")
def test_zsh_script_parses_and_names_every_command(tmp_path: Path) -> None:
    res = run_cli("completion", "zsh")
    assert res.rc == 0 and res.out.startswith("#compdef stormdeck")
    script = tmp_path / "_stormdeck"
    script.write_text(res.out)
    subprocess.run(["zsh", "-n", str(script)], check=True, timeout=30)
    for path in ALL:
        assert f"\n    {path[-1]}:'" in res.out, path


def test_unknown_shell_is_one_line() -> None:
    res = run_cli("completion", "powershell-nope")
    assert res.rc == 3 and len(res.err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def man_text() -> str:
    res = run_cli("manpage")
    assert res.rc == 0, res.err
    # -ww: every warning; a text line read as a request is one (and vanishes from the page).
    proc = subprocess.run(["groff", "-man", "-Tutf8", "-ww"], input=res.out,
                          capture_output=True, text=True, timeout=60, check=True)
    assert proc.stderr == "", proc.stderr
    return proc.stdout


def plain(rendered: str) -> str:
    # groff's tty output overstrikes bold (X\bX) and underlines (_\bX); keep the letters.
    import re

    text = re.sub(r".\x08", "", rendered)
    # -Tutf8 sets \- as a minus sign and - as a hyphen.
    return text.replace("\u2212", "-").replace("\u2010", "-")


def sections_by_command(text: str) -> dict[str, str]:
    """The page's text under each heading that names a command ("OPTIONS 'stormdeck lab up'")."""
    import re

    out: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        m = re.fullmatch(r"[A-Z][A-Z ]*'stormdeck ([a-z -]+)'", line.strip())
        if m and not line.startswith(" "):
            current = m.group(1)
            out.setdefault(current, "")
        elif current is not None:
            out[current] += line + "\n"
    return out


def test_the_man_page_lists_every_command_and_option(man_text: str) -> None:
    text = plain(man_text)
    by_command = sections_by_command(text)
    for path, options in ALL.items():
        name = " ".join(path)
        assert "stormdeck " + name in text, path
        assert name in by_command, name
        # argparse-manpage leaves each command's -h/--help to its usage line.
        for opt in set(options) - {"-h", "--help"}:
            assert opt in by_command[name], (path, opt)
    assert "--version" in text


def test_help_wrapped_at_a_quote_stays_on_the_page(man_text: str) -> None:
    # --curve-ops-tool's help wraps to a line starting with "'curve_ops_tool": roff takes
    # such a line for a request and drops it unless it is escaped.
    assert "curve_ops_tool -confPath=/etc/curve/tools.conf" in plain(man_text)


def test_escape_control_lines_guards_only_text() -> None:
    roff = ".TH X 1\n.SH NAME\n'quoted\n.venv is a folder\n.TP\n\\fB\\-\\-x\\fR\n"
    assert escape_control_lines(roff).splitlines() == [
        ".TH X 1", ".nh", ".SH NAME", "\\&'quoted", "\\&.venv is a folder", ".TP",
        "\\fB\\-\\-x\\fR"]


@pytest.mark.skipif(shutil.which("man") is None, reason="man-db is not installed")
def test_man_reads_the_page(tmp_path: Path) -> None:
    page = tmp_path / "stormdeck.1"
    res = run_cli("manpage", "-o", str(page))
    assert res.rc == 0, res.err
    proc = subprocess.run(["man", "-l", str(page)], capture_output=True, text=True,
                          timeout=60, env={"MANWIDTH": "100", "MANPAGER": "cat",
                                           "PATH": "/usr/bin:/bin"}, check=True)
    assert "STORMDECK(1)" in proc.stdout and "stormdeck lab storm" in plain(proc.stdout)


def test_manpage_to_an_unwritable_place_is_one_line() -> None:
    res = run_cli("manpage", "-o", "/nonexistent/dir/stormdeck.1")
    assert res.rc == 3 and "cannot write" in res.err
    assert len(res.err.strip().splitlines()) == 1


def test_install_writes_each_file_where_its_reader_looks_and_only_when_changed(
        tmp_path: Path) -> None:
    parser = build_parser()
    share = tmp_path / "share"
    written = install([str(share)], parser)
    assert sorted(p.relative_to(share).as_posix() for p in written) == [
        "bash-completion/completions/stormdeck", "fish/vendor_completions.d/stormdeck.fish",
        "man/man1/stormdeck.1", "zsh/site-functions/_stormdeck"]
    bash = share / "bash-completion/completions/stormdeck"
    assert bash.read_text() == completion_script("bash", parser)
    assert install([str(share)], parser) == []  # a second run changes nothing
    bash.write_text("stale\n")
    assert install([str(share)], parser) == [bash]
    # man finds the page under a prefix's share/man, as it does beside .venv/bin on PATH.
    if shutil.which("man"):
        proc = subprocess.run(["man", "-w", "stormdeck"], capture_output=True, text=True,
                              env={"MANPATH": str(share / "man"), "PATH": "/usr/bin:/bin"})
        assert proc.stdout.strip() == str(share / "man/man1/stormdeck.1")


def test_install_into_an_unwritable_place_is_one_sentence(tmp_path: Path) -> None:
    blocker = tmp_path / "share"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(UserError, match="cannot write"):
        install([str(blocker)], build_parser())


def bash_complete_in(script: Path, cwd: Path, *words: str) -> list[str]:
    """As bash_complete, in the directory `cwd` (for file names)."""
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", BASH_DRIVER, "bash",
                           str(script), "stormdeck", *words],
                          capture_output=True, text=True, timeout=30, check=True, cwd=cwd)
    return [w for w in proc.stdout.splitlines() if w]


def test_bash_offers_rule_ids_where_a_rule_is_named(bash_script: Path) -> None:
    from stormdeck.advisors.rules import ALL

    ids = sorted(r.id for r in ALL)
    assert sorted(bash_complete(bash_script, "plan", "")) == ids
    cores = sorted(i for i in ids if i.startswith("ceph.osd.co"))
    assert cores and sorted(bash_complete(bash_script, "plan", "ceph.osd.co")) == cores
    assert sorted(bash_complete(bash_script, "mute", "ceph.osd.co")) == cores
    assert sorted(bash_complete(bash_script, "unmute", "ceph.osd.co")) == cores


def test_bash_offers_plan_files_after_apply_and_conf_files_after_c(
        bash_script: Path, tmp_path: Path) -> None:
    for name in ("plan-1a2b.json", "ceph.conf", "notes.txt", "rules.toml", "s.sdrec"):
        (tmp_path / name).write_text("")
    (tmp_path / "plans").mkdir()
    assert set(bash_complete_in(bash_script, tmp_path, "apply", "")) == {"plan-1a2b.json",
                                                                         "plans"}
    assert set(bash_complete_in(bash_script, tmp_path, "watch", "-c", "")) == {"ceph.conf",
                                                                               "plans"}
    assert set(bash_complete_in(bash_script, tmp_path, "check", "--conf", "c")) == \
        {"ceph.conf"}
    assert set(bash_complete_in(bash_script, tmp_path, "check", "--rules", "")) == \
        {"rules.toml", "plans"}
    assert set(bash_complete_in(bash_script, tmp_path, "replay", "")) == {"s.sdrec", "plans"}


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed (./dev setup)")
def test_fish_offers_rule_ids_after_plan(tmp_path: Path) -> None:
    res = run_cli("completion", "fish")
    script = tmp_path / "stormdeck.fish"
    script.write_text(res.out)
    proc = subprocess.run(["fish", "--no-config", "-c",
                           f"source {script}; complete -C 'stormdeck plan ceph.osd.co'"],
                          capture_output=True, text=True, timeout=30, check=True)
    offered = {row.split("\t")[0] for row in proc.stdout.splitlines()}
    assert "ceph.osd.cores_beyond_knee" in offered


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed (./dev setup)")
def test_zsh_script_names_the_rule_ids() -> None:
    res = run_cli("completion", "zsh")
    assert "ceph.osd.cores_beyond_knee" in res.out and "_files -g '(*.conf)'" in res.out


def man_sections(text: str) -> dict[str, str]:
    """The rendered page's text under each top-level heading."""
    out: dict[str, str] = {}
    current = ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.strip().isupper():
            current = line.strip()
            out[current] = ""
        elif current:
            out[current] += line + "\n"
    return out


def test_the_man_page_has_keys_views_files_environment_and_exit_status(man_text: str) -> None:
    from stormdeck.tui.keys import VIEWS, help_sections

    sections = man_sections(plain(man_text))
    for name in ("KEYS", "VIEWS", "FILES", "ENVIRONMENT", "EXIT STATUS"):
        assert name in sections, name
    keys = " ".join(sections["KEYS"].split())
    for title, rows in help_sections():
        assert title in keys, title
        for key, what in rows:
            assert " ".join(f"{key} {what}".split()) in keys or (key in keys and what in keys), \
                (key, what)
    views = " ".join(sections["VIEWS"].split())
    for v in VIEWS:
        assert f"{v.key} {v.name}" in views
    assert "ctrl+p" in keys.lower() and "PgDn" in keys and "click a column header" in keys


def test_exit_status_is_the_table_every_help_ends_with(man_text: str) -> None:
    import re

    from stormdeck.parsing import EXIT_CODES

    status = " ".join(man_sections(plain(man_text))["EXIT STATUS"].split())
    codes = re.findall(r"^\s{2}(\d+)\s", EXIT_CODES, flags=re.M)
    assert codes == ["0", "1", "2", "3", "70", "130"]
    for code in codes:
        assert re.search(rf"(^| ){code} ", status), code
    assert "internal error (a bug: please report it)" in status
    assert "a change refused or cancelled (nothing was changed)" in status
    assert "COMMENTS" not in plain(man_text)  # the table moved, not copied


def test_environment_names_every_variable_the_program_reads(man_text: str) -> None:
    import re

    root = Path(__file__).resolve().parents[2]
    read = set()
    for folder in ("stormdeck", "base", "advisors", "collectors", "tui", "lab"):
        for path in (root / folder).rglob("*.py"):
            read |= set(re.findall(r"os\.(?:environ\.get|getenv)\(\s*\"([A-Z_]+)\"",
                                   path.read_text()))
    assert {"CEPH_CONF", "STORMDECK_LAB_DIR", "XDG_STATE_HOME"} <= read
    env = man_sections(plain(man_text))["ENVIRONMENT"]
    missing = sorted(name for name in read if name not in env)
    assert not missing, missing
