"""The argument parser every stormdeck command uses, and the one exit-code table."""

from __future__ import annotations

import argparse

# One table for every command: scripts and monitoring plugins read these codes.
EXIT_CODES = """\
exit codes (every command):
  0    done; check: nothing above info; validate: pass
  1    check: warnings; validate: warn; apply/undo: a change began and then failed,
       did not verify or got no answer (see `stormdeck journal`); lab status: no lab runs
  2    check: critical; validate: fail
  3    could not run: a usage error, an unreadable or missing file, no cluster to
       watch, the cluster not answering, a change refused or cancelled (nothing
       was changed)
  70   internal error (a bug: please report it)
  130  interrupted (Ctrl-C); validate: cancelled, and what it created removed"""
USAGE_ERROR = 3


class _Formatter(argparse.HelpFormatter):
    """Descriptions wrapped as usual; the exit-code table kept as laid out."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("exit codes"):
            return text
        return super()._fill_text(text, width, indent)


class Parser(argparse.ArgumentParser):
    """argparse that says what is wrong in one line and exits 3, without the usage dump.

    Abbreviations are off: `--y` must never be taken for `--yes`, nor `--con` for
    `--conf`. Every parser of stormdeck is this class, subparsers included.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs["allow_abbrev"] = False
        kwargs.setdefault("epilog", EXIT_CODES)
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(USAGE_ERROR, f"{self.prog}: {message} (see {self.prog} --help)\n")
