"""Benchmark: one Curve polling cycle over 1,000 chunkservers, against a local server.

The server (tests/curve_wire.py: Curve's real formats) runs in its own
process, so it does not share the client's GIL. Each cycle is the real
CurveSource.poll(): MDS roles, the leader MDS's topology vars, then every
chunkserver's /vars (and /raft_stat on the first cycle), a bounded number at
once. Reports wall time per cycle against the poll interval, CPU, and the TCP
connections the server accepted: the first cycle must open one per endpoint,
later ones none while the connections are kept alive.

    .venv/bin/python bench/curve_bench.py [--chunkservers 1000] [--cycles 5] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stormdeck.collectors.curve.source import CurveSource  # noqa: E402

SERVER = """
import json, resource, sys
sys.path.insert(0, {root!r})
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 16384)), hard))
from tests.curve_wire import CurveWire
wire = CurveWire(chunkservers={n}, copysets={copysets})
print(json.dumps({{"mds": [m.addr for m in wire.mds], "cs": list(wire.addrs()),
                  "control": wire.control_port}}), flush=True)
sys.stdin.read()
wire.close()
"""


def connections(control: int) -> int:
    """Connections the server has accepted so far (asking costs one, not counted here)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{control}/_stand_in/stats",
                                timeout=10) as r:
        return int(json.load(r)["connections"]) - 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunkservers", type=int, default=1000)
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--interval", type=float, default=5.0,
                    help="the poll interval a cycle must fit in (default 5 s)")
    ap.add_argument("--concurrency", default="16,32,64")
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds on a small cluster, to see that it runs (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.chunkservers, args.cycles, args.concurrency = 30, 2, "8"
    n = args.chunkservers
    code = SERVER.format(root=str(ROOT), n=n, copysets=n * 33)
    server = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        ends = json.loads(server.stdout.readline())
        print(f"Curve poll cycle, {n:,} chunkservers (~33 leader copysets each), "
              f"server in its own process; interval {args.interval:g} s")
        for conc in (int(x) for x in args.concurrency.split(",")):
            src = CurveSource(mds=ends["mds"], chunkservers=ends["cs"], timeout=5,
                              concurrency=conc)
            walls, cpus, opened = [], [], []
            for _ in range(args.cycles):
                k0 = connections(ends["control"])
                c0, w0 = time.process_time(), time.perf_counter()
                part = src.poll()
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
                opened.append(connections(ends["control"]) - k0 - 1)
                assert part.curve is not None and not part.curve.endpoint_errors, \
                    part.curve.endpoint_errors if part.curve else part.errors
                assert len(part.daemons) == n
            src.close()
            first, later = walls[0], sorted(walls[1:])
            print(f"  concurrency {conc:>3}: first cycle {first:.2f} s (with /raft_stat; client "
                  f"CPU {cpus[0]:.2f} s), "
                  f"later cycles median {later[len(later) // 2]:.2f} s, worst {later[-1]:.2f} s;"
                  f" client CPU {sum(cpus[1:]) / len(cpus[1:]):.2f} s a cycle"
                  f" -> {'within' if max(later) < args.interval else 'OVER'} the interval")
            per_cycle = sum(opened[1:]) / len(opened[1:])
            print(f"{'':18}new TCP connections: first cycle {opened[0]:,}, later cycles "
                  f"{per_cycle:,.0f} each ({per_cycle / args.interval:,.0f}/s at one cycle "
                  f"per {args.interval:g} s; {per_cycle:,.0f}/s at one a second)")
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
