"""`stormdeck record`, `replay` and `report`: sessions kept, studied again, and written up."""

from __future__ import annotations

import argparse
import json
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Any

from stormdeck.advisors import report
from stormdeck.advisors.journal import Journal
from stormdeck.assembly import assemble, make_engine
from stormdeck.base.errors import UserError
from stormdeck.base.secrets import write_private
from stormdeck.base.when import parse_when
from stormdeck.output import add_format_options, dumps, is_json
from stormdeck.sources import add_source_options


def register(sub: Any) -> None:
    p = sub.add_parser("record", help="record a session without a screen",
                       description="Poll the cluster and record every snapshot, the advisors' "
                                   "findings and the changes made, until --for runs out or "
                                   "Ctrl-C. Replay it with `stormdeck replay FILE`.")
    p.add_argument("file", help="the recording to create (it must not exist)")
    p.add_argument("--for", dest="duration", type=float, default=None, metavar="SECONDS",
                   help="stop after this many seconds (default: until interrupted)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    add_recording_options(p)
    p.add_argument("--rules", default=None, help="a rules.toml overriding thresholds")
    add_source_options(p)
    p.set_defaults(handler=cmd_record)

    p = sub.add_parser("replay", help="the console on a recording",
                       description="Open the console on a recording: p pauses, [ and ] step, "
                                   "{ and } jump 60 s, g goes to a time, + and - change the "
                                   "speed. The advisors judge it afresh; changes are off.")
    p.add_argument("file", help="a recording made by `stormdeck record` or `watch --record`")
    p.add_argument("--speed", type=float, default=1.0, help="times real time (default 1)")
    p.add_argument("--start", default=None, metavar="TIME",
                   help="where to begin: HH:MM:SS, +SECONDS from the start, or epoch seconds")
    p.add_argument("--rules", default=None, help="a rules.toml overriding thresholds")
    p.add_argument("--low-bandwidth", action="store_true", help="ASCII graphs, no animation")
    p.set_defaults(handler=cmd_replay)

    p = sub.add_parser("report", help="an incident report from a recording",
                       description="Replay a recording through the advisors and write what "
                                   "happened in a time window: the PG-state timeline, events, "
                                   "findings and changes made. Markdown, or JSON with --json.")
    p.add_argument("file", help="a recording")
    p.add_argument("--from", dest="start", default=None, metavar="TIME",
                   help="HH:MM:SS, +SECONDS from the recording's start, or epoch seconds")
    p.add_argument("--to", dest="end", default=None, metavar="TIME",
                   help="HH:MM:SS, -SECONDS from the recording's end, or epoch seconds")
    add_format_options(p, "the report: plain is Markdown")
    p.add_argument("-o", "--output", default=None, help="write here instead of stdout")
    p.add_argument("--rules", default=None, help="a rules.toml overriding thresholds")
    p.set_defaults(handler=cmd_report)


def add_recording_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-size", type=float, default=256.0, metavar="MIB",
                   help="start the recording afresh past this size, keeping the older part "
                        "as FILE.1 (default 256 MiB)")


def recorder(path: str, args: argparse.Namespace) -> Any:
    from stormdeck import __version__
    from stormdeck.collectors.recording import Recorder

    if not 0 < args.max_size < (1 << 30):  # MiB; NaN fails it too
        raise UserError("--max-size takes a number of MiB above 0")
    return Recorder(Path(path), max_bytes=int(args.max_size * (1 << 20)),
                    meta={"writer": f"stormdeck {__version__}", "host": platform.node(),
                          "interval": args.interval})


def _engine(args: argparse.Namespace) -> Any:
    """A replay's engine: the assembly's, without mutes (a replay's time is not now)."""
    return make_engine(args)


def cmd_record(args: argparse.Namespace) -> int:
    from stormdeck.advisors.apply import journal_path
    from stormdeck.advisors.loop import Loop

    # Written so that NaN fails them too (every comparison with NaN is false).
    if args.duration is not None and not args.duration > 0:
        raise UserError("--for takes a number of seconds above 0")
    if not 0.1 <= args.interval <= 86400:
        raise UserError("--interval takes 0.1 to 86400 seconds")
    if Path(args.file).exists():  # before any connection: say it first
        raise UserError(f"{args.file} already exists: record to a new file, or remove it first")
    pieces = assemble(args)
    tape = recorder(args.file, args)
    loop = Loop(pieces.sources, pieces.engine, interval=args.interval, timeout=args.timeout,
                recorder=tape, journal=Journal(journal_path()))
    stop = {"now": False}

    def stopping(signum: int, frame: Any) -> None:
        stop["now"] = True

    # Ctrl-C and SIGTERM end the recording between frames, never inside one.
    old = {sig: signal.signal(sig, stopping) for sig in (signal.SIGTERM, signal.SIGINT)}
    started = time.monotonic()
    try:
        loop.start()
        loop.run(stop=lambda: stop["now"], duration=None if args.duration is None else
                 max(0.0, args.duration - (time.monotonic() - started)))
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        loop.stop()
    snaps = loop.ticks
    size = Path(args.file).stat().st_size
    print(f"recorded {snaps} snapshots over {time.monotonic() - started:.0f} s to "
          f"{args.file} ({size / 1024:.0f} KiB"
          + (f"; {tape.rotations} older part(s) in {args.file}.1" if tape.rotations else "")
          + ")", file=sys.stderr)
    return 0


def open_recording(path: str) -> Any:
    from stormdeck.collectors.recording import Recording

    rec = Recording(Path(path))
    # Frames that pass their checksum may still hold no snapshot this version can read:
    # say so here, not with an empty console or "nothing in that window".
    if next(rec.snapshots(), None) is None:
        rec.close()
        raise UserError(f"{path} holds no readable snapshot ({rec.torn or 'none decodes'})")
    if rec.torn:
        print(f"stormdeck: {path}: {rec.torn}; replaying up to it", file=sys.stderr)
    return rec


def _when(text: str | None, anchor: float, what: str) -> float | None:
    if text is None:
        return None
    try:
        return parse_when(text, anchor)
    except ValueError as exc:
        raise UserError(f"{what}: {exc}") from None


def cmd_replay(args: argparse.Namespace) -> int:
    from stormdeck.advisors.session import RecordedJournal
    from stormdeck.tui.app import StormdeckApp
    from stormdeck.tui.feed import ReplayFeed

    if args.speed <= 0:
        raise UserError("--speed takes a number above 0")
    rec = open_recording(args.file)
    start = _when(args.start, rec.start, "--start")
    feed = ReplayFeed(rec, lambda: _engine(args), speed=args.speed, start=start)
    app = StormdeckApp(feed, executor_factory=None, journal=RecordedJournal(rec.path),
                       read_only=True, cluster_name=f"replay of {Path(args.file).name}",
                       low_bandwidth=args.low_bandwidth)
    if args.low_bandwidth:
        app.animation_level = "none"
    app.run()
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from stormdeck.advisors.loop import REPLAY_RUNUP
    from stormdeck.advisors.session import Session, recorded_changes, replay

    rec = open_recording(args.file)
    start = _when(args.start, rec.start, "--from")
    end = _when(args.end, rec.end, "--to")
    if start is not None and end is not None and end < start:
        raise UserError("--to is before --from")
    first = max(0, rec.snapshot_at(start) - REPLAY_RUNUP) if start is not None else 0
    engine = _engine(args)
    session = Session(engine, timeline_keep=1_000_000)
    steps: list[tuple[Any, Any]] = []
    for _, step, _ in replay(rec, engine, first, session=session):
        steps.append((step.snapshot, step.findings))
        if end is not None and step.snapshot.time > end:
            break
    try:
        r = report.build(steps, list(session.timeline.events), recorded_changes(rec),
                         source=f"recording {Path(args.file).name}", start=start, end=end)
    except ValueError:
        raise UserError("no snapshot of the recording falls in that window") from None
    text = dumps(json.loads(report.to_json(r)), args) if is_json(args) \
        else report.to_markdown(r)
    if args.output:
        try:
            write_private(Path(args.output), text)
        except OSError as exc:
            raise UserError(f"cannot write {args.output}: {exc.strerror}") from None
    else:
        sys.stdout.write(text)
    return 0
