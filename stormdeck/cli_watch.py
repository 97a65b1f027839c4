"""`stormdeck watch`: the full-screen console. The only command that imports textual."""

from __future__ import annotations

import argparse
from typing import Any

from stormdeck.cli_record import add_recording_options, recorder
from stormdeck.sources import add_source_options, build_sources, conf_path


def register(sub: Any) -> None:
    p = sub.add_parser("watch", help="the full-screen console",
                       description="The console: what limits the cluster, the advisors' "
                                   "findings, and their changes on confirmation.")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    p.add_argument("--read-only", action="store_true",
                   help="refuse every change (also $STORMDECK_READ_ONLY=1)")
    p.add_argument("--low-bandwidth", action="store_true",
                   help="for slow links: polls no faster than every 2 s, ASCII graphs, "
                        "no animation")
    p.add_argument("--rules", default=None, help="a rules.toml overriding thresholds")
    p.add_argument("--record", default=None, metavar="FILE",
                   help="record the session while watching (replay: stormdeck replay FILE)")
    add_recording_options(p)
    add_source_options(p)
    p.set_defaults(handler=cmd_watch)


def cmd_watch(args: argparse.Namespace) -> int:
    from pathlib import Path

    from advisors.apply import CephAdmin, Executor, journal_path
    from advisors.engine import Engine
    from advisors.journal import Journal
    from advisors.mutes import MuteStore
    from advisors.settings import load_settings, state_dir
    from stormdeck.cli_change import read_only
    from tui.feed import Feed

    sources = build_sources(args)
    mutes = MuteStore(state_dir() / "mutes.json")
    engine = Engine(load_settings(Path(args.rules) if args.rules else None), mutes=mutes)
    interval = max(2.0, args.interval) if args.low_bandwidth else args.interval
    journal = Journal(journal_path())
    tape = recorder(args.record, args) if args.record else None
    feed = Feed(sources, engine, interval=interval, timeout=args.timeout, recorder=tape,
                journal=journal)
    ro = read_only(args)
    conf = conf_path(args)

    def executor() -> Executor:
        ceph = CephAdmin(conf, timeout=args.timeout) if conf else None
        return Executor(journal, ceph=ceph, read_only=ro)

    from tui.app import StormdeckApp

    app = StormdeckApp(feed, executor_factory=executor, mutes=mutes, journal=journal,
                       read_only=ro, low_bandwidth=args.low_bandwidth)
    if args.low_bandwidth:
        app.animation_level = "none"
    app.run()
    return 0
