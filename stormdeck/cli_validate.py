"""`stormdeck validate`: guided pre-production validation, on a screen or headless."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

from stormdeck.advisors.validate import runner
from stormdeck.advisors.validate.context import Options
from stormdeck.advisors.validate.runner import STEP_IDS
from stormdeck.assembly import validate_sources
from stormdeck.base.errors import UserError
from stormdeck.output import add_format_options, dumps, is_json
from stormdeck.sources import add_client_options, ceph_admin, ceph_client


def register(sub: Any) -> None:
    p = sub.add_parser(
        "validate", help="guided pre-production validation",
        description="Walk a new cluster through host checks, cluster settings, a response "
                    "curve, peering time and (on a test cluster) a CPU scaling sweep; every "
                    "step gives pass/warn/fail with its evidence and source, and removes what "
                    "it created, also when cancelled. Exit: 0 pass, 1 warn, 2 fail, "
                    "3 could not run, 130 cancelled.")
    p.add_argument("--headless", action="store_true",
                   help="no screen: progress on stderr, the report on stdout")
    p.add_argument("--quick", action="store_true",
                   help="short runs (seconds per point, 64 PGs): a rehearsal, not a measurement")
    p.add_argument("--skip", action="append", default=[], choices=STEP_IDS,
                   help="leave a step out (repeatable)")
    p.add_argument("--scratch-dir", default="/var/tmp",
                   help="where fio writes its scratch file (default /var/tmp)")
    p.add_argument("--peering-pgs", type=int, default=256,
                   help="PGs in the peering-time pool (default 256; --quick: 64)")
    p.add_argument("--cpu-sweep", action="store_true",
                   help="also run the CPU scaling sweep (test clusters only: it limits an "
                        "OSD's cores)")
    p.add_argument("--cpu-osd", default=None, metavar="osd.N",
                   help="the OSD to sweep (default: the first on this host)")
    p.add_argument("--confirm", action="append", default=[], metavar="TEXT",
                   help="headless: what you would type when asked (a device name, "
                        "'sweep osd.N'); repeatable")
    p.add_argument("--read-only", action="store_true",
                   help="run only the steps that write nothing: host and settings checks "
                        "(also $STORMDECK_READ_ONLY=1, or the config file's read_only for "
                        "this cluster)")
    add_format_options(p, "headless: the report; plain is Markdown")
    add_client_options(p)
    p.set_defaults(handler=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    from stormdeck.advisors.settings import state_dir

    client = ceph_client(args)
    conf = client.conf
    if not conf:
        raise UserError("validate needs the cluster: give -c CONF (or set CEPH_CONF)")
    if not Path(args.scratch_dir).is_dir():
        raise UserError(f"--scratch-dir {args.scratch_dir} is not a directory")
    if args.peering_pgs < 1:
        raise UserError("--peering-pgs takes a number of PGs above 0")
    snapshot = runner.take_snapshot(validate_sources(args))
    fsid = snapshot.cluster.fsid if snapshot.cluster else None
    why = read_only_reason(args, fsid)
    if why:
        print(f"validate: {runner.read_only_note(why)}", file=sys.stderr)
    options = Options(conf=conf, quick=args.quick, scratch_dir=Path(args.scratch_dir),
                      confirmed_devices=tuple(args.confirm), peering_pgs=args.peering_pgs,
                      cpu_sweep=args.cpu_sweep, cpu_osd=args.cpu_osd,
                      state_dir=state_dir() / "validate",
                      client_args=tuple(client.args(conf=False)), read_only=bool(why))
    admin = ceph_admin(args)
    try:
        if not args.headless:
            from stormdeck.tui.validate import ValidateApp

            app = ValidateApp(options, admin, snapshot, skip=args.skip)
            app.run()
            return app.exit_code
        return _headless(args, options, admin, snapshot)
    finally:
        admin.close()


def read_only_reason(args: argparse.Namespace, fsid: str | None) -> str | None:
    """Why this validation may write nothing, or None: the flag, the environment, or a
    read_only cluster of the config file named by its conf or reached by its fsid."""
    from stormdeck.config import forced_read_only, read_only_cluster

    if forced_read_only(args):
        return "--read-only or STORMDECK_READ_ONLY"
    return read_only_cluster(args, fsid=fsid)


def _headless(args: argparse.Namespace, options: Any, admin: Any, snapshot: Any) -> int:

    def progress(step: str, fraction: float, text: str) -> None:
        print(f"validate: {step:<8} {fraction:4.0%}  {text}", file=sys.stderr, flush=True)

    def confirm(prompt: str, phrase: str) -> bool:
        ok = phrase in args.confirm
        if not ok:
            print(f"validate: {prompt} (headless: not confirmed; give --confirm {phrase!r})",
                  file=sys.stderr)
        return ok

    run = runner.Validation(options, admin, snapshot, skip=args.skip, progress=progress,
                            confirm=confirm)

    def cancel(signum: int, frame: Any) -> None:
        print("validate: cancelling; removing what it created", file=sys.stderr, flush=True)
        run.cancel()

    old = {s: signal.signal(s, cancel) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        report = run.run()
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    saved = runner.save(report, options.state_dir)
    print(dumps(runner.to_dict(report), args, default=str).rstrip("\n") if is_json(args)
          else runner.to_markdown(report))
    print(f"validate: report saved as {saved} (and .json)", file=sys.stderr)
    if report.cleanup_failed:
        print("validate: could not remove: " + "; ".join(report.cleanup_failed),
              file=sys.stderr)
    return report.exit_code()
