"""Benchmark: one whole read of the fleet through a real Prometheus, gzip'd and plain.

Builds bench/fleet_bench.py's Fleet (a real Prometheus scraping synthetic targets
at N OSDs), then forces `reads` full reads each way with the real source
(`forget_newest()`, `poll()`), alternating Accept-Encoding, and prints per read
the process's CPU (the client), Prometheus' CPU and the wall time, then medians.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def main() -> int:
    import fleet_bench as fb

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--osds", type=int, default=1000)
    ap.add_argument("--reads", type=int, default=3)
    ap.add_argument("--interval", type=float, default=15.0)
    ap.add_argument("--smoke", action="store_true", help="small and quick, for the tests")
    args = ap.parse_args()
    if args.smoke:
        args.osds, args.reads, args.interval = 20, 1, 1.0
    fleet = fb.Fleet(args.osds, args.interval, False, rules=False)
    try:
        while fleet.scrapes() < 3:
            time.sleep(min(2.0, args.interval / 2))
        src = fb.make_source(fleet.url, args.interval)
        src.poll()
        rows: dict[str, list[tuple[float, float, float]]] = {}
        for _ in range(args.reads):
            for enc in ("gzip, deflate", "identity"):
                src.client._session.headers["Accept-Encoding"] = enc
                src.forget_newest()
                c0, p0, t0 = time.process_time(), fleet.cpu(), time.monotonic()
                part = src.poll()
                row = (time.process_time() - c0, fleet.cpu() - p0, time.monotonic() - t0)
                rows.setdefault(enc, []).append(row)
                print(f"{enc}: client CPU {row[0]:.2f} s, Prometheus CPU {row[1]:.2f} s, "
                      f"wall {row[2]:.2f} s, {len(part.daemons):,} OSDs", flush=True)
        for enc, r in rows.items():
            med = [sorted(x[i] for x in r)[len(r) // 2] for i in range(3)]
            print(f"median {enc}: client CPU {med[0]:.2f} s, Prometheus CPU {med[1]:.2f} s, "
                  f"wall {med[2]:.2f} s")
    finally:
        fleet.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
