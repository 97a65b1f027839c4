"""Output formats as the ceph CLI names them: -f json|json-pretty|plain, and --json."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

FORMATS = ("json", "json-pretty", "plain")


def add_format_options(p: argparse.ArgumentParser, what: str) -> None:
    """`--json` is `-f json-pretty`; the last of them given wins, as in argparse."""
    p.add_argument("-f", "--format", choices=FORMATS, default="plain",
                   help=f"{what}: json (one line), json-pretty or plain (default), as "
                        "`ceph -f`")
    p.add_argument("--json", dest="format", action="store_const", const="json-pretty",
                   help="the same as -f json-pretty")


def is_json(args: argparse.Namespace) -> bool:
    return args.format in ("json", "json-pretty")


def dump(obj: Any, args: argparse.Namespace, out: TextIO | None = None, **kw: Any) -> None:
    """JSON as the format asks: one line (json), or indented (json-pretty)."""
    out = out or sys.stdout
    if args.format == "json":
        json.dump(obj, out, separators=(",", ":"), **kw)
    else:
        json.dump(obj, out, indent=4, **kw)
    out.write("\n")


def dumps(obj: Any, args: argparse.Namespace, **kw: Any) -> str:
    if args.format == "json":
        return json.dumps(obj, separators=(",", ":"), **kw) + "\n"
    return json.dumps(obj, indent=4, **kw) + "\n"
