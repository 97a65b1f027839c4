"""`stormdeck mute | unmute`: silence a finding for a while; it stays visible as muted."""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.sources import add_source_options

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_ttl(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not m:
        raise UserError(f"--for {text!r}: give a time like 30m, 2h or 1d")
    return float(m.group(1)) * UNITS[m.group(2) or "s"]


def register(sub: Any) -> None:
    mute = sub.add_parser("mute", help="silence a finding for a while",
                          description="Mute a firing finding for a time (required). It stays "
                                      "visible as muted, and the mute lifts by itself when "
                                      "the finding grows worse. --list shows the mutes.")
    mute.add_argument("rule", nargs="?", help="the rule id")
    mute.add_argument("--target", help="which target, when the rule fires on several")
    mute.add_argument("--all-targets", action="store_true", help="mute the rule everywhere")
    mute.add_argument("--for", dest="ttl", default=None, metavar="TIME",
                      help="how long: 30m, 2h, 1d (at most 30 days)")
    mute.add_argument("--reason", default="", help="why, for whoever sees it muted")
    mute.add_argument("--list", action="store_true", help="list the mutes in force")
    _wait_option(mute)
    add_source_options(mute)
    mute.set_defaults(handler=cmd_mute)

    unmute = sub.add_parser("unmute", help="lift a mute")
    unmute.add_argument("rule")
    unmute.add_argument("target", help="the muted target, or * for a rule-wide mute")
    _wait_option(unmute)
    unmute.set_defaults(handler=cmd_unmute)


def _wait_option(p: argparse.ArgumentParser) -> None:
    from stormdeck.advisors.mutes import WAIT

    p.add_argument("--wait", type=float, default=WAIT, metavar="SECONDS",
                   help="how long to wait for another stormdeck changing this state "
                        f"directory (an apply, another mute; default {WAIT:g})")


def store(wait: float | None = None):  # -> MuteStore
    from stormdeck.advisors.mutes import WAIT, MuteStore
    from stormdeck.advisors.settings import state_dir

    if wait is not None and not 0 <= wait < float("inf"):
        raise UserError("--wait takes a number of seconds, 0 or more")
    return MuteStore(state_dir() / "mutes.json", wait=WAIT if wait is None else wait)


def cmd_mute(args: argparse.Namespace) -> int:
    if args.list:
        mutes = store().list()
        if not mutes:
            print("no mutes in force")
        for m in mutes:
            left = (m.until - time.time()) / 3600
            print(f"{m.rule:<32} {printable(m.target, 60):<28} {left:6.1f} h left  "
                  f"{printable(m.reason, 120)}")
        return 0
    if not args.rule or args.ttl is None:
        raise UserError("give the rule and --for TIME (or --list)")
    ttl = parse_ttl(args.ttl)
    from stormdeck.cli_change import findings_now, one_finding

    engine, findings, _ = findings_now(args, args.rule, 2.0)
    # A rule-wide mute takes its baseline (severity, badness) from the worst finding now.
    finding = (one_finding(findings[:1], args.rule, None) if args.all_targets
               else one_finding(findings, args.rule, args.target))
    mute = store(args.wait).add(finding, ttl, badness=engine.badness(finding),
                       all_targets=args.all_targets, reason=args.reason)
    until = time.strftime("%Y-%m-%d %H:%M", time.localtime(mute.until))
    print(f"muted {mute.rule} on {printable(mute.target)} until {until}; it lifts by itself "
          "if the finding grows worse")
    return 0


def cmd_unmute(args: argparse.Namespace) -> int:
    if not store(args.wait).remove(args.rule, args.target):
        raise UserError(f"no mute of {printable(args.rule, 60)} on {printable(args.target, 60)}")
    print(f"unmuted {printable(args.rule, 60)} on {printable(args.target, 60)}")
    return 0
