"""Benchmark: what `stormdeck exporter` costs its host, in % of one core at a scrape interval.

Runs the real exporter (a child process, watching the lab's OSDs) and reads its CPU time
from /proc: idle for a while (what it costs between scrapes), then scraped N times in a
row (what one scrape costs). At a 15 s interval the cost is the idle rate plus one
scrape's CPU every 15 s.

    .venv/bin/python bench/exporter_bench.py [-c /var/tmp/stormdeck-lab/ceph.conf]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--conf", default="/var/tmp/stormdeck-lab/ceph.conf")
    ap.add_argument("--scrapes", type=int, default=60)
    ap.add_argument("--idle", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=15.0)
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds, every OSD of this host (no cluster needed), for CI")
    args = ap.parse_args()
    if args.smoke:
        args.scrapes, args.idle = 3, 1.0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = [] if args.smoke else ["-c", args.conf]
    proc = subprocess.Popen([sys.executable, "-m", "stormdeck", "exporter", "--listen",
                             f"127.0.0.1:{port}", *conf], cwd=ROOT,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        for _ in range(100):
            try:
                body = urllib.request.urlopen(url, timeout=5).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            raise SystemExit("the exporter did not start")
        time.sleep(1.0)
        c0, t0 = cpu(proc.pid), time.monotonic()
        time.sleep(args.idle)
        idle_rate = (cpu(proc.pid) - c0) / (time.monotonic() - t0)
        c0, t0 = cpu(proc.pid), time.perf_counter()
        for _ in range(args.scrapes):
            body = urllib.request.urlopen(url, timeout=5).read()
        wall = (time.perf_counter() - t0) / args.scrapes
        per = (cpu(proc.pid) - c0) / args.scrapes
        cost = idle_rate + per / args.interval
        series = sum(1 for line in body.decode().splitlines() if line and line[0] != "#")
        print(f"one scrape: {per * 1000:.1f} ms CPU, {wall * 1000:.1f} ms wall, {series} series, "
              f"{len(body) / 1024:.1f} KiB; idle {idle_rate * 100:.3f}% of a core")
        print(f"at a {args.interval:g} s scrape interval: {cost * 100:.2f}% of one core "
              f"(goal < 1%); RSS {rss(proc.pid) / 2**20:.0f} MiB")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
