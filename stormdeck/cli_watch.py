"""`stormdeck watch`: the full-screen console. The only command that imports textual."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from stormdeck.advisors.journal import Journal
from stormdeck.assembly import add_executor_options, assemble, settings_of
from stormdeck.base.errors import UserError
from stormdeck.cli_change import read_only
from stormdeck.cli_record import add_recording_options, recorder
from stormdeck.sources import add_source_options, ceph_client


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
    add_executor_options(p.add_argument_group("changes made from the console (as apply's)"))
    p.set_defaults(handler=cmd_watch)


def default_console(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """`stormdeck` alone: the console on the config file's clusters, else as `ceph` would."""
    from stormdeck.config import config_path, load_clusters

    args = parser.parse_args(["watch"])
    if not load_clusters() and ceph_client(args).conf is None:
        raise UserError(f"nothing to watch: {config_path()} names no cluster and no "
                        "ceph.conf was found ($CEPH_CONF, /etc/ceph/ceph.conf); give one with "
                        "-c CONF, or see stormdeck --help")
    return args


def cmd_watch(args: argparse.Namespace) -> int:
    app = build_app(args)
    if args.low_bandwidth:
        app.animation_level = "none"
    app.run()
    return 0


def build_app(args: argparse.Namespace) -> Any:
    """The console for the clusters the options (or the config file) name, not yet running."""
    from stormdeck.advisors.apply import journal_path
    from stormdeck.config import load_clusters, names_sources
    from stormdeck.tui.app import StormdeckApp

    if not (args.interval > 0 and math.isfinite(args.interval)):  # NaN fails it too
        raise UserError("--interval takes a number of seconds above zero")
    settings = settings_of(args)
    journal = Journal(journal_path())
    forced = read_only(args)
    clusters = [] if names_sources(args) else \
        load_clusters(Path(args.config) if args.config else None)
    if args.only:
        known = {c.name for c in clusters}
        missing = [n for n in args.only if n not in known]
        if missing:
            raise UserError(f"no cluster {missing[0]!r} in the config file"
                            + (f" (it names {', '.join(sorted(known))})" if known else ""))
        clusters = [c for c in clusters if c.name in args.only]
    if args.record and len(clusters) > 1:
        raise UserError("--record records one cluster: choose it with --only NAME")
    if clusters:
        tabs = [_tab(args, c.name, c.sources, forced or c.read_only, settings, journal)
                for c in clusters]
    else:
        tabs = [_tab(args, "", args, forced, settings, journal)]
    return StormdeckApp(tabs[0].feed, journal=journal, low_bandwidth=args.low_bandwidth,
                        tabs=tabs)


def _tab(args: argparse.Namespace, name: str, sources_args: argparse.Namespace, ro: bool,
         settings: Any, journal: Any) -> Any:
    """One cluster: the assembly's pieces for it, a feed, and an executor bound to it alone."""
    from stormdeck.config import read_only_cluster, read_only_reached
    from stormdeck.tui.app import ClusterTab
    from stormdeck.tui.feed import Feed

    pieces = assemble(args, sources_args, settings=settings)
    if not ro:  # a read_only cluster of the file named by its conf (-c) is read-only here too
        ro = bool(read_only_cluster(sources_args, config=args.config))
    interval = max(2.0, args.interval) if args.low_bandwidth else args.interval
    tape = recorder(args.record, args) if args.record else None
    feed = Feed(pieces.sources, pieces.engine, interval=interval, timeout=sources_args.timeout,
                recorder=tape, journal=journal)
    # The sources' own identity (client name, keyring, cluster), one connection per change.
    return ClusterTab(name=name, feed=feed,
                      executor_factory=pieces.executor_factory(
                          journal, ro,
                          reached=lambda admin: bool(read_only_reached(sources_args, admin,
                                                                       args.config))),
                      mutes=pieces.mutes, read_only=ro)
