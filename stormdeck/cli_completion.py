"""`stormdeck completion SHELL` and `stormdeck manpage`: both generated from the parser itself."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from stormdeck import __version__
from stormdeck.base.errors import UserError

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


def completion_script(shell: str, parser: argparse.ArgumentParser) -> str:
    import shtab

    if shell not in SHELLS:
        raise UserError(f"no completion for {shell!r}; give one of {', '.join(SHELLS)}")
    script = shtab.complete(parser, shell=shell)
    return script if script.endswith("\n") else script + "\n"


def manpage(parser: argparse.ArgumentParser) -> str:
    from argparse_manpage.manpage import Manpage

    page = Manpage(parser)
    # Attributes, not the private _data argument, as argparse-manpage asks (its issue #7).
    page.source = f"stormdeck {__version__}"
    page.manual = "stormdeck manual"
    page.description = "a terminal console for Ceph and Curve block-storage operators"
    return escape_control_lines(str(page))


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
