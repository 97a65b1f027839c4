"""The `stormdeck` command line: parses arguments and turns user faults into one sentence."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from stormdeck import __version__
from stormdeck.base.errors import UserError

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """argparse that says what is wrong in one line and exits 2, without the usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="stormdeck",
        description="A terminal console for Ceph and Curve block-storage operators.",
    )
    parser.add_argument("--version", action="version", version=f"stormdeck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    from stormdeck import (
        cli_change,
        cli_check,
        cli_completion,
        cli_exporter,
        cli_lab,
        cli_mute,
        cli_record,
        cli_snapshot,
        cli_validate,
        cli_watch,
    )

    cli_watch.register(sub)
    cli_snapshot.register(sub)
    cli_check.register(sub)
    cli_change.register(sub)
    cli_mute.register(sub)
    cli_record.register(sub)
    cli_validate.register(sub)
    cli_exporter.register(sub)
    cli_lab.register(sub)
    cli_completion.register(sub, parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return handler(args)
    except UserError as exc:
        print(f"stormdeck: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("stormdeck: interrupted", file=sys.stderr)
        return 130
    except PermissionError as exc:
        print(f"stormdeck: permission denied: {exc.filename or exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1
    except Exception as exc:  # a bug of ours: still one sentence, the details on request
        if os.environ.get("STORMDECK_DEBUG"):
            raise
        print(f"stormdeck: internal error: {type(exc).__name__}: {exc} (run again with "
              "STORMDECK_DEBUG=1 for the details, and please report it)", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
