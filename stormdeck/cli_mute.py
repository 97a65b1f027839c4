"""`stormdeck mute | unmute`: silence a finding for a while; it stays visible as muted."""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

from stormdeck.advisors.mutes import WAIT, canonical_fsid
from stormdeck.assembly import mutes_store
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.cli_change import findings_now, one_finding
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

    unmute = sub.add_parser("unmute", help="lift a mute",
                            description="Lift a mute. A mute belongs to the cluster it was "
                                        "made on: when several clusters hold one of this "
                                        "rule and target, name the cluster (-c or --fsid).")
    unmute.add_argument("rule")
    unmute.add_argument("target", help="the muted target, or * for a rule-wide mute")
    unmute.add_argument("-c", "--conf", metavar="FILE", default=None,
                        help="the cluster whose mute to lift, by its ceph.conf (its fsid)")
    unmute.add_argument("--fsid", default=None,
                        help="the cluster whose mute to lift, by its fsid (mute --list shows it)")
    _wait_option(unmute)
    unmute.set_defaults(handler=cmd_unmute)


def _wait_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", type=float, default=WAIT, metavar="SECONDS",
                   help="how long to wait for another stormdeck changing this state "
                        f"directory (an apply, another mute; default {WAIT:g})")


def store(wait: float | None = None):  # -> MuteStore

    return mutes_store(wait)


def cmd_mute(args: argparse.Namespace) -> int:
    if args.list:
        mutes = store().list()
        if not mutes:
            print("no mutes in force")
        for m in mutes:
            left = (m.until - time.time()) / 3600
            print(f"{m.rule:<32} {printable(m.target, 60):<28} {cluster_name(m.fsid):<36} "
                  f"{left:6.1f} h left  {printable(m.reason, 120)}")
        return 0
    if not args.rule or args.ttl is None:
        raise UserError("give the rule and --for TIME (or --list)")
    ttl = parse_ttl(args.ttl)

    engine, findings, snap = findings_now(args, args.rule, 2.0)
    # The mute silences this cluster's finding only; None: the source names no cluster.
    fsid = snap.cluster.fsid if snap is not None and snap.cluster is not None else None
    # A rule-wide mute takes its baseline (severity, badness) from the worst finding now.
    finding = (one_finding(findings[:1], args.rule, None) if args.all_targets
               else one_finding(findings, args.rule, args.target))
    mute = store(args.wait).add(finding, ttl, badness=engine.badness(finding),
                       all_targets=args.all_targets, reason=args.reason, fsid=fsid)
    until = time.strftime("%Y-%m-%d %H:%M", time.localtime(mute.until))
    print(f"muted {mute.rule} on {printable(mute.target)} ({cluster_name(mute.fsid)}) until "
          f"{until}; it lifts by itself if the finding grows worse")
    return 0


def cluster_name(fsid: str | None) -> str:
    return f"cluster {fsid}" if fsid else "every cluster"


def _named_fsid(args: argparse.Namespace) -> tuple[bool, str | None]:
    """(whether a cluster was named, its fsid): --fsid, or the fsid -c's conf records."""
    if args.fsid is not None:
        fsid = canonical_fsid(args.fsid)
        if fsid is None:
            raise UserError(f"--fsid {printable(args.fsid, 60)!r} is not a cluster's fsid "
                            "(like 8f1c2a7e-3b5d-4e6f-9a0b-1c2d3e4f5a6b; mute --list shows them)")
        return True, fsid
    if args.conf is not None:
        from stormdeck.config import _fsid_in_conf

        fsid = canonical_fsid(_fsid_in_conf(args.conf))
        if fsid is None:
            raise UserError(f"{printable(args.conf, 200)} records no fsid in its [global]: "
                            "name the cluster with --fsid (mute --list shows it)")
        return True, fsid
    return False, None


def cmd_unmute(args: argparse.Namespace) -> int:
    named, fsid = _named_fsid(args)
    mutes = store(args.wait)
    what = f"{printable(args.rule, 60)} on {printable(args.target, 60)}"
    if not named:
        holders = mutes.holders(args.rule, args.target)
        if not holders:
            raise UserError(f"no mute of {what}")
        if len(holders) > 1:
            raise UserError(f"{len(holders)} clusters hold a mute of {what} ("
                            + ", ".join(cluster_name(h) for h in holders)
                            + "): name one with -c FILE or --fsid FSID")
        fsid = holders[0]
    if not mutes.remove(args.rule, args.target, fsid):
        held = mutes.holders(args.rule, args.target)
        raise UserError(f"no mute of {what} on {cluster_name(fsid)}"
                        + (f" (held on {', '.join(cluster_name(h) for h in held)})"
                           if held else ""))
    print(f"unmuted {what} on {cluster_name(fsid)}")
    return 0
