"""Benchmark: what a recording costs, in bytes per OSD per minute at a 1 s interval.

Two figures. The lab's own recording (assets/demo.sdrec: 3 OSDs under
`lab load`, a 256-PG storm, an OSD restart), whose fixed part (host, disks,
health, log) is shared by only 3 OSDs. And 1,000 OSDs whose every figure
moves each second as the lab's did: each snapshot of the demo is widened to
1,000 OSDs, OSD k taking the recorded values of lab osd.(k mod 3) scaled by
its own factor and jittered, so no two OSDs repeat each other. It also times
writing and reading, and the file's peak memory cost.

    .venv/bin/python bench/record_bench.py [--osds 1000] [--recording assets/demo.sdrec]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from dataclasses import fields, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stormdeck.collectors.model import Daemon, Snapshot  # noqa: E402
from stormdeck.collectors.recording import Recorder, Recording  # noqa: E402

MOVING = [f.name for f in fields(Daemon) if f.type in ("float | None", "int | None")
          and f.name not in ("pid", "curve_id", "pgs", "primary_pgs", "threads", "copysets")]


class Widen:
    """Each OSD's figure moves when its lab model's did, by a jitter of its own."""

    def __init__(self, osds: int, seed: int = 11) -> None:
        self.osds = osds
        self.rnd = random.Random(seed)
        self.factors = [self.rnd.uniform(0.6, 1.4) for _ in range(osds)]
        self.last: dict[tuple[int, str], tuple[object, float]] = {}

    def jitter(self, k: int, name: str, v: object) -> float:
        seen = self.last.get((k, name))
        if seen is None or seen[0] != v:
            seen = (v, self.factors[k] * self.rnd.uniform(0.97, 1.03))
            self.last[(k, name)] = seen
        return seen[1]

    def __call__(self, snap: Snapshot) -> Snapshot:
        return widen(snap, self)


def widen(snap: Snapshot, w: Widen) -> Snapshot:
    base = [d for d in snap.daemons.values() if d.kind == "osd"]
    daemons = {}
    for k in range(w.osds):
        src = base[k % len(base)]
        values = {}
        for name in MOVING:
            v = getattr(src, name)
            if isinstance(v, float):
                values[name] = v * w.jitter(k, name, v)
            elif isinstance(v, int) and not isinstance(v, bool):
                values[name] = int(v * w.jitter(k, name, v))
        daemons[f"osd.{k}"] = replace(src, id=f"osd.{k}", host=f"stor-{k // 12:03d}",
                                      devices=(f"nvme{k % 12}n1",), **values)
    return replace(snap, daemons=daemons)


def measure(path: Path, snaps: list[Snapshot]) -> tuple[float, float]:
    started = time.perf_counter()
    rec = Recorder(path)
    for s in snaps:
        rec.add_snapshot(s)
    rec.close()
    write = (time.perf_counter() - started) / len(snaps)
    started = time.perf_counter()
    n = sum(1 for _ in Recording(path).snapshots())
    read = (time.perf_counter() - started) / n
    return write, read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--osds", type=int, default=1000)
    ap.add_argument("--recording", default=str(ROOT / "assets" / "demo.sdrec"))
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds on a small cluster, to see that it runs (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.osds = 30

    demo = Recording(Path(args.recording))
    snaps = list(demo.snapshots())
    if args.smoke:
        snaps = snaps[:40]
    minutes = (snaps[-1].time - snaps[0].time) / 60
    n_osd = sum(1 for d in snaps[-1].daemons.values() if d.kind == "osd")
    size = Path(args.recording).stat().st_size
    print(f"lab recording: {len(snaps)} snapshots over {minutes * 60:.0f} s, {n_osd} OSDs, "
          f"{size / 1024:.0f} KiB: {size / n_osd / minutes / 1024:.2f} KiB per OSD per minute "
          f"(fixed part included)")

    w = Widen(args.osds)
    wide = [w(s) for s in snaps]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wide.sdrec"
        write, read = measure(path, wide)
        size = path.stat().st_size
    per = size / args.osds / minutes
    print(f"{args.osds} OSDs moving as the lab's did: {size / 1024:.0f} KiB for "
          f"{minutes * 60:.0f} s: {per:.0f} bytes per OSD per minute (goal < 1024); "
          f"write {write * 1000:.1f} ms and read {read * 1000:.1f} ms per snapshot")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB "
          f"(the widened snapshots held in memory included)")


if __name__ == "__main__":
    main()
