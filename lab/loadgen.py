"""Background client load for the lab: `rados bench` writes in bounded rounds until told to stop.

A single long `rados bench --no-cleanup` would fill the lab's small disks
(2,600 4K writes a second is ~10 MB/s); rounds that clean up after
themselves keep the load real and the disk use bounded.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import subprocess
import sys
import time
from types import FrameType

ROUND_SECONDS = 60
PREFIX = "benchmark_data"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stormdeck.lab.loadgen")
    ap.add_argument("--conf", required=True)
    ap.add_argument("--pool", required=True)
    ap.add_argument("--size", type=int, required=True, help="bytes per write")
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--seconds", type=float, required=True, help="0 runs until stopped")
    ap.add_argument("--round", type=float, default=ROUND_SECONDS,
                    help="seconds per rados bench round")
    args = ap.parse_args(argv)

    rados = shutil.which("rados") or "rados"
    base = [rados, "-c", args.conf, "-p", args.pool]
    child: subprocess.Popen[bytes] | None = None
    stopping = False

    def on_term(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    def cleanup() -> None:
        # Objects of a round cut short by an earlier stop. Done at start, not
        # at stop, so stopping is immediate; at most one round is left over.
        with contextlib.suppress(subprocess.TimeoutExpired):
            subprocess.run([*base, "cleanup", "--prefix", PREFIX], timeout=60,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    cleanup()
    end = time.monotonic() + args.seconds if args.seconds > 0 else float("inf")
    while not stopping:
        left = end - time.monotonic()
        if left < 1:
            break
        secs = int(min(args.round, left))
        print(f"loadgen: {secs} s of {args.size}-byte writes, {args.threads} in flight",
              flush=True)
        child = subprocess.Popen([*base, "bench", str(secs), "write", "-b", str(args.size),
                                  "-t", str(args.threads)])
        child.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
