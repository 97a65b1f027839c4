"""Capture a lab cluster's command outputs into tests/data/<release>/, as tests/data/pacific holds.

    python -m tests.capture_release --dir LAB_DIR [--out tests/data/reef]
    python -m tests.capture_release --dir LAB_DIR --helps-only
    python -m tests.capture_release --dir LAB_DIR --static-only

The second form asks `config help` of every watched option again and adds the
answers to the release's config_help_watched.json (the other files stay as
captured): what a new entry of WATCHED_OPTIONS needs. The third captures only the
commands in STATIC (added to the source after the release's first capture), so the
other files and the figures the tests read from them stay as they were.

Runs the real CephSource against the lab (through this host's librados) and
keeps every reply exactly as the parsers receive it, once with the cluster
quiet and once under `stormdeck lab load`; then the few commands the lab and
the change tools read. The release's name comes from the cluster's own
`ceph versions`, so a capture cannot be filed under the wrong release.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from stormdeck.collectors.ceph.source import WATCHED_OPTIONS, CephSource

DATA = Path(__file__).parent / "data"
# CephSource's command -> the file tests/data/pacific keeps it in (quiet, under load).
FILES = {
    "status": ("status.json", "status_load.json"),
    "health": ("health_detail.json", None),
    "osd perf": ("osd_perf.json", "osd_perf_load.json"),
    "osd status": ("osd_status_table.txt", "osd_status_table_load.txt"),
    "osd df": ("osd_df.json", None),
    "osd dump": ("osd_dump.json", None),
    "pg dump": ("pg_dump_pgs_brief.json", None),
    "osd pool ls": ("osd_pool_ls_detail.json", None),
    "config dump": ("config_dump.json", None),
    "osd metadata": ("osd_metadata.json", None),
    "versions": ("versions.json", None),
    "log last": ("log_last.json", None),
    "config log": ("config_log.json", None),
}
STATIC = {  # CephSource's slow-cadence commands, captured later (--static-only)
    "features": "features.json",
    "osd pool autoscale-status": "osd_pool_autoscale_status.json",
    # Every poll, but a mon's few bytes: which mgr serves (docs/mgr-failure.md).
    "mgr stat": "mgr_stat.json",
}
EXTRA = {  # read by the lab and the change tools, not by CephSource's poll
    "osd_stat.json": ("mon", {"prefix": "osd stat"}),
    "pg_stat_clean.json": ("mgr", {"prefix": "pg stat"}),
    "osd_erasure_code_profile_ls.json": ("mon", {"prefix": "osd erasure-code-profile ls"}),
    "mgr_dump.json": ("mon", {"prefix": "mgr dump"}),
    "mgr_module_ls.json": ("mon", {"prefix": "mgr module ls"}),
}


class Recording(CephSource):
    """The real CephSource, keeping each reply it gets."""

    def __init__(self, conffile: str) -> None:
        super().__init__(conffile=conffile)
        self.replies: dict[str, bytes] = {}
        self.helps: dict[str, Any] = {}

    def _send(self, target: str, cmd: dict[str, Any], timeout: float) -> bytes:
        out = super()._send(target, cmd, timeout)
        if cmd["prefix"] == "config help":
            self.helps[cmd["key"]] = json.loads(out) if out.strip() else None
        else:
            self.replies[cmd["prefix"]] = out
        return out


def release_of(versions: bytes) -> str:
    found = {m.group(1) for k in json.loads(versions).get("overall", {})
             if (m := re.search(r"\) (\w+) \(", k))}
    if len(found) != 1:
        raise SystemExit(f"the cluster runs {sorted(found) or 'no known release'}; "
                         "capture from a lab of one release")
    return found.pop()


def poll(conf: str) -> Recording:
    src = Recording(conf)
    try:
        src.poll()
        for target, cmd in EXTRA.values():
            src.replies[cmd["prefix"]] = src._send(target, cmd, 30)
    finally:
        src.close()
    return src


def lab(args: list[str], lab_dir: Path) -> None:
    subprocess.run([sys.executable, "-m", "stormdeck", "lab", *args, "--dir", str(lab_dir)],
                   check=True, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, required=True, help="the running lab's directory")
    ap.add_argument("--out", type=Path, default=None, help="default tests/data/<release>")
    ap.add_argument("--load-seconds", type=float, default=12.0)
    ap.add_argument("--quiet-seconds", type=float, default=15.0)
    ap.add_argument("--helps-only", action="store_true",
                    help="only (re)capture config help of the watched options")
    ap.add_argument("--static-only", action="store_true",
                    help="only capture the slow-cadence commands (STATIC)")
    args = ap.parse_args(argv)
    conf = str(args.dir / "ceph.conf")
    if args.helps_only:
        return helps_only(conf, args.out)
    if args.static_only:
        return static_only(conf, args.out)

    # Load first: its pool gives the OSDs PGs, and the quiet capture follows it.
    lab(["load", "--seconds", str(args.load_seconds + 10)], args.dir)
    try:
        time.sleep(args.load_seconds)
        loaded = poll(conf)
    finally:
        lab(["load", "--stop"], args.dir)
    time.sleep(args.quiet_seconds)  # the mgr's rates decay over a few reports
    quiet = poll(conf)
    release = release_of(quiet.replies["versions"])
    out = args.out or DATA / release
    out.mkdir(parents=True, exist_ok=True)
    for prefix, (name, load_name) in FILES.items():
        (out / name).write_bytes(quiet.replies[prefix])
        if load_name:
            (out / load_name).write_bytes(loaded.replies[prefix])
    for prefix, name in STATIC.items():
        (out / name).write_bytes(quiet.replies[prefix])
    for name, (_, cmd) in EXTRA.items():
        (out / name).write_bytes(quiet.replies[cmd["prefix"]])
    (out / "config_help_watched.json").write_text(json.dumps(quiet.helps, indent=1) + "\n")
    missing = sorted(set(WATCHED_OPTIONS) - set(quiet.helps))
    if missing:
        print(f"config help not asked for: {missing}", file=sys.stderr)
    print(f"captured {release} into {out}")
    return 0


def helps_only(conf: str, out: Path | None) -> int:
    src = Recording(conf)
    try:
        release = release_of(src._send("mon", {"prefix": "versions"}, 30))
        src._config_help()
    finally:
        src.close()
    path = (out or DATA / release) / "config_help_watched.json"
    helps = json.loads(path.read_text()) if path.exists() else {}
    added = sorted(set(src.helps) - set(helps))
    helps.update(src.helps)
    path.write_text(json.dumps(helps, indent=1) + "\n")
    print(f"config help of {len(src.helps)} options into {path}; new: {', '.join(added)}")
    return 0


def static_only(conf: str, out: Path | None) -> int:
    src = Recording(conf)
    try:
        src.poll()
    finally:
        src.close()
    release = release_of(src.replies["versions"])
    where = out or DATA / release
    for prefix, name in STATIC.items():
        (where / name).write_bytes(src.replies[prefix])
    print(f"captured {', '.join(STATIC)} of {release} into {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
