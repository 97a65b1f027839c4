"""The `stormdeck` command line: parses arguments and turns user faults into one sentence."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence

from stormdeck import (
    __version__,
    cli_change,
    cli_check,
    cli_completion,
    cli_experiment,
    cli_explain,
    cli_exporter,
    cli_lab,
    cli_mute,
    cli_record,
    cli_snapshot,
    cli_validate,
    cli_watch,
    cli_whatif,
)
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.cli_watch import default_console
from stormdeck.parsing import USAGE_ERROR, Parser

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="stormdeck",
        description="A terminal console for Ceph and Curve block-storage operators. "
                    "Without a command: the console (watch) on the config file's clusters, "
                    "else on the cluster of $CEPH_CONF or /etc/ceph/ceph.conf.",
    )
    parser.add_argument("--version", action="version", version=f"stormdeck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    cli_watch.register(sub)
    cli_snapshot.register(sub)
    cli_check.register(sub)
    cli_explain.register(sub)
    cli_change.register(sub)
    cli_experiment.register(sub)
    cli_mute.register(sub)
    cli_record.register(sub)
    cli_validate.register(sub)
    cli_exporter.register(sub)
    cli_lab.register(sub)
    cli_whatif.register(sub)
    cli_completion.register(sub, parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        handler: Handler | None = getattr(args, "handler", None)
        if handler is None:
            # As htop and k9s: no command opens the console.
            args = default_console(parser)
            handler = args.handler
        elif args.command != "watch" and hasattr(args, "only") and \
                not getattr(args, "list", False):  # mute --list reads no cluster
            from stormdeck.config import choose_cluster

            choose_cluster(args)
        return handler(args)
    except UserError as exc:
        print(f"stormdeck: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("stormdeck: interrupted", file=sys.stderr)
        return 130
    except PermissionError as exc:
        print(f"stormdeck: permission denied: {printable(exc.filename or exc, 200)}",
              file=sys.stderr)
        return USAGE_ERROR
    except BrokenPipeError:  # the reader went away (| head): nothing left to say
        return USAGE_ERROR
    except OSError as exc:
        # A path the user named that is not what it must be (a file where a directory
        # goes, a missing directory), or a full or read-only disk: the user's to fix,
        # and exit 70 would call it our bug. Without a path or such an errno it is ours.
        if exc.filename is None and exc.errno not in _ENVIRONMENT:
            return _internal(exc)
        where = f"{printable(exc.filename, 200)}: " if exc.filename is not None else ""
        print(f"stormdeck: {where}{(exc.strerror or str(exc)).lower()}", file=sys.stderr)
        return USAGE_ERROR
    except Exception as exc:  # a bug of ours: still one sentence, the details on request
        return _internal(exc)


# Faults of the machine, not of stormdeck: no space, no quota, a read-only filesystem.
_ENVIRONMENT = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG)


def _internal(exc: Exception) -> int:
    """A bug of ours: still one sentence, the details on request (exit 70)."""
    if os.environ.get("STORMDECK_DEBUG"):
        raise exc
    print(f"stormdeck: internal error: {type(exc).__name__}: {printable(exc, 300)} (run "
          "again with STORMDECK_DEBUG=1 for the details, and please report it)",
          file=sys.stderr)
    return 70


if __name__ == "__main__":
    sys.exit(main())
