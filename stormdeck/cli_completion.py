"""`stormdeck completion SHELL` and `stormdeck manpage`: both generated from the parser itself."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from stormdeck import __version__
from stormdeck.advisors.rules import ALL
from stormdeck.base.errors import UserError
from stormdeck.parsing import EXIT_CODES

# Of the shells shtab writes for (bash, zsh, tcsh, fish, powershell), the ones operators'
# hosts run.
SHELLS = ("bash", "zsh", "fish", "tcsh")

# The requests argparse-manpage writes; a wrapped text line that starts with any other
# `.word`, or with `'`, would be read by roff as a request and vanish from the page.
_MACROS = frozenset({"TH", "SH", "SS", "TP", "PP", "P", "LP", "IP", "RS", "RE", "B", "I",
                     "BR", "BI", "IR", "RB", "RI", "IB", "UR", "UE", "MT", "ME", "nf", "fi",
                     "br", "sp", "in", "ti", "ad", "na", "nh", "hy"})
_REQUEST = re.compile(r"^\.\s*([A-Za-z]+)\b")


def register(sub: Any, root: argparse.ArgumentParser) -> None:
    """Add both commands; they describe `root`, the whole command line, once it is built."""
    comp = sub.add_parser(
        "completion", help="print a shell completion script",
        description="Print the completion script for SHELL, generated from this command's "
                    "own parser (shtab), so it always knows every command and option. "
                    "bash: stormdeck completion bash > "
                    "~/.local/share/bash-completion/completions/stormdeck; zsh: into a "
                    "directory on $fpath as _stormdeck; fish: "
                    "> ~/.config/fish/completions/stormdeck.fish. ./dev setup installs them.")
    comp.add_argument("shell", choices=SHELLS, help="the shell: " + ", ".join(SHELLS))
    comp.set_defaults(handler=lambda args: cmd_completion(args, root))

    man = sub.add_parser(
        "manpage", help="print the manual page (roff)",
        description="Print stormdeck(1) in roff, generated from the parser, every command "
                    "and option in it. Read it with: stormdeck manpage | man -l -")
    man.add_argument("-o", "--output", metavar="FILE", default=None,
                     help="write it to FILE instead of standard output")
    man.set_defaults(handler=lambda args: cmd_manpage(args, root))


def rule_ids() -> list[str]:
    return sorted(r.id for r in ALL)


def _words(name: str, words: list[str]) -> dict[str, Any]:
    """A shtab completer offering fixed words (rule ids), for each shell we write."""
    joined = " ".join(words)
    return {"bash": f"_stormdeck_{name}", "zsh": f"({joined})", "tcsh": f"({joined})",
            "fish": joined,
            "preamble": {"bash": f'_stormdeck_{name}() {{\n  compgen -W "{joined}" -- "$1"\n}}\n'}}


# What a value is, by the command that takes it and its dest (positionals) or option.
_POSITIONAL_FILES = {("apply", "file"): ("*.json",),  # `plan -o` writes plan-<id>.json
                     ("replay", "file"): ("*.sdrec",), ("report", "file"): ("*.sdrec",)}
_RULE_ARGS = {("plan", "rule"), ("mute", "rule"), ("unmute", "rule")}
_OPTION_FILES = {"--conf": ("*.conf",), "--rules": ("*.toml",)}


def attach_completers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> None:
    """Teach the parser's arguments what their values are: rule ids after `plan` (and
    `mute`, `unmute`), plan files after `apply`, conf files after -c, rules.toml after
    --rules. The rule ids are the registry's, written into the script when it is made."""
    import shtab

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                attach_completers(child, (*path, name))
            continue
        key = (path[-1] if path else "", action.dest)
        if key in _RULE_ARGS:
            action.complete = _words("rule_ids", rule_ids())  # type: ignore[attr-defined]
        elif key in _POSITIONAL_FILES:
            action.complete = shtab.glob(*_POSITIONAL_FILES[key])  # type: ignore[attr-defined]
        else:
            for option, patterns in _OPTION_FILES.items():
                if option in action.option_strings:
                    action.complete = shtab.glob(*patterns)  # type: ignore[attr-defined]


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    import shtab

    if shell not in SHELLS:
        raise UserError(f"no completion for {shell!r}; give one of {', '.join(SHELLS)}")
    attach_completers(parser)
    script = shtab.complete(parser, shell=shell)
    return script if script.endswith("\n") else script + "\n"


def manpage(parser: argparse.ArgumentParser) -> str:
    from argparse_manpage.manpage import Manpage

    page = Manpage(parser)
    # Attributes, not the private _data argument, as argparse-manpage asks (its issue #7).
    page.source = f"stormdeck {__version__}"
    page.manual = "stormdeck manual"
    page.description = "a terminal console for Ceph and Curve block-storage operators"
    roff = str(page)
    # The epilog's exit-code table becomes EXIT STATUS, beside the console's KEYS and VIEWS,
    # FILES and ENVIRONMENT.
    head, sep, tail = roff.partition("\n.SH COMMENTS\n")
    extra = "\n".join((keys_section(), views_section(), exit_status_section(),
                       environment_section(), files_section()))
    if sep:
        rest = tail.split("\n.SH ", 1)
        roff = head + "\n" + extra + ("\n.SH " + rest[1] if len(rest) > 1 else "\n")
    else:
        roff = roff.rstrip("\n") + "\n" + extra
    return escape_control_lines(roff)


def _roff(text: str) -> str:
    """Plain text as roff: backslashes and hyphens escaped; a line start is guarded later."""
    return text.replace("\\", "\\e").replace("-", "\\-")


def _entries(rows: list[tuple[str, str]]) -> list[str]:
    out = []
    for term, what in rows:
        out += [".TP", f"\\fB{_roff(term)}\\fR", _roff(what)]
    return out


def keys_section() -> str:
    """Every key, mouse action and palette command of the console, from the registry its
    bindings are made from (stormdeck.tui.keys: no textual needed to read it)."""
    from stormdeck.tui.keys import help_sections

    out = [".SH KEYS", "The console (stormdeck watch, stormdeck replay) answers these keys; "
           "? shows them in the console too."]
    for title, rows in help_sections():
        out += [f".SS {_roff(title)}", *_entries(rows)]
    return "\n".join(out)


def views_section() -> str:
    from stormdeck.tui.keys import VIEWS

    out = [".SH VIEWS", "Each view has its digit key; the header above them shows where in "
           "time the screen is (LIVE, N s back, REPLAY), PAUSED, the filter, and each "
           "source's state (ok, STALE Ns at once when a poll is missed, ERROR)."]
    out += _entries([(f"{v.key}  {v.name}", v.description) for v in VIEWS])
    return "\n".join(out)


def exit_codes() -> list[tuple[str, str]]:
    """The exit-code table every command's --help ends with, read from that very text."""
    rows: list[tuple[str, str]] = []
    for line in EXIT_CODES.splitlines()[1:]:
        m = re.match(r"\s{2}(\d+)\s+(.*)", line)
        if m:
            rows.append((m.group(1), m.group(2).strip()))
        elif rows:
            rows[-1] = (rows[-1][0], f"{rows[-1][1]} {line.strip()}")
    return rows


def exit_status_section() -> str:
    return "\n".join([".SH EXIT STATUS", *_entries(exit_codes())])


# Every variable the program reads (a test holds the code to this list).
ENVIRONMENT = (
    ("CEPH_CONF", "the Ceph configuration file when -c is not given (default "
                  "/etc/ceph/ceph.conf), as for the ceph CLI"),
    ("CEPH_ARGS", "more Ceph client options (--id, --name, --keyring ...), as for the "
                  "ceph CLI"),
    ("STORMDECK_CONFIG", "the config file of clusters (default "
                         "$XDG_CONFIG_HOME/stormdeck/config.toml)"),
    ("STORMDECK_RULES", "a rules.toml overriding rule thresholds (default "
                        "$XDG_CONFIG_HOME/stormdeck/rules.toml)"),
    ("STORMDECK_READ_ONLY", "set (not 0): read-only, as --read-only; nothing is changed"),
    ("STORMDECK_CONFIRM_STDIN", "set: apply and undo read their confirmation from a "
                                "standard input that is not a terminal"),
    ("STORMDECK_LAB_DIR", "the lab's directory (default /var/tmp/stormdeck-lab, "
                          "or /var/tmp/stormdeck-lab-UID when not root)"),
    ("STORMDECK_ROOTS_DIR", "where the Reef and Tentacle lab roots are built "
                            "(default /var/tmp)"),
    ("STORMDECK_DEBIAN_MIRROR", "the Debian mirror those roots are built from"),
    ("STORMDECK_DEBUG", "set: an internal error shows its traceback"),
    ("XDG_CONFIG_HOME", "where the config directory is (default ~/.config)"),
    ("XDG_STATE_HOME", "where the state directory is (default ~/.local/state)"),
    ("NO_COLOR", "set: the console draws without colour"),
)

FILES = (
    ("~/.config/stormdeck/config.toml", "the clusters to watch, one table each, with each "
                                        "one's sources and read_only default"),
    ("~/.config/stormdeck/rules.toml", "rule thresholds overriding the defaults"),
    ("~/.local/state/stormdeck/", "the state directory (made 0700): what follows"),
    ("~/.local/state/stormdeck/journal.jsonl", "the journal of every change made, and undone"),
    ("~/.local/state/stormdeck/mutes.json", "muted findings of every cluster, each mute "
                                            "naming its cluster's fsid"),
    ("~/.local/state/stormdeck/reports/", "incident reports (the console's R, stormdeck "
                                          "report)"),
    ("~/.local/state/stormdeck/console.json", "the console's chosen theme"),
    ("plan-ID.json", "a plan written by stormdeck plan (-o to name it), read by "
                     "stormdeck apply"),
    ("/etc/ceph/ceph.conf", "the Ceph configuration file, unless -c or $CEPH_CONF"),
    ("/var/tmp/stormdeck-lab/", "the lab cluster's directory (stormdeck lab)"),
)


def environment_section() -> str:
    return "\n".join([".SH ENVIRONMENT", *_entries(list(ENVIRONMENT))])


def files_section() -> str:
    return "\n".join([".SH FILES", *_entries(list(FILES))])


def escape_control_lines(roff: str) -> str:
    """Guard text lines that roff would take for requests (help wrapped at a `.` or `'`)."""
    out = []
    for line in roff.splitlines():
        if line.startswith(".TH "):
            # No hyphenation: an option or a metavar split at a line end reads as another.
            out += [line, ".nh"]
            continue
        if line.startswith("'"):
            line = "\\&" + line
        elif line.startswith("."):
            m = _REQUEST.match(line)
            if m is None or m.group(1) not in _MACROS:
                line = "\\&" + line
        out.append(line)
    return "\n".join(out) + "\n"


def install(roots: list[str], parser: argparse.ArgumentParser) -> list[Path]:
    """Write the man page and the completions under each share/ root (as ./dev setup does).

    Where each shell and man look under a prefix's share/; a file already as it would be
    written is left alone, so a second run changes nothing. Returns the files written.
    """
    files = {
        "man/man1/stormdeck.1": manpage(parser),
        "bash-completion/completions/stormdeck": completion_script("bash", parser),
        "zsh/site-functions/_stormdeck": completion_script("zsh", parser),
        "fish/vendor_completions.d/stormdeck.fish": completion_script("fish", parser),
    }
    written = []
    for root in roots:
        for rel, text in files.items():
            path = Path(root) / rel
            try:
                if path.is_file() and path.read_text() == text:
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            except OSError as exc:
                raise UserError(f"cannot write {path}: {exc.strerror}") from None
            written.append(path)
    return written


def cmd_completion(args: argparse.Namespace, root: argparse.ArgumentParser) -> int:
    sys.stdout.write(completion_script(args.shell, root))
    return 0


def cmd_manpage(args: argparse.Namespace, root: argparse.ArgumentParser) -> int:
    text = manpage(root)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.output, "w") as f:
            f.write(text)
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror}") from None
    return 0
