"""Benchmark: build a Snapshot from a synthetic 10,000-OSD, 1,000,000-PG cluster's outputs.

The outputs are the lab's real captures (tests/data/pacific) scaled up: the
same JSON shapes, with ids, hosts and devices varied. They are served to
the real CephSource.poll() in place of librados' answers, so the figures
cover JSON decoding, parsing, the primaries count and assembly, then the
merge with a host partial. Each measurement runs in a fresh process so its
peak RSS is its own.

    .venv/bin/python bench/snapshot_bench.py [--osds 10000] [--pgs 1000000] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stormdeck.collectors.ceph.source import CephSource  # noqa: E402
from stormdeck.collectors.hub import merge  # noqa: E402
from stormdeck.collectors.model import Daemon, Partial  # noqa: E402

CAPTURES = ROOT / "tests" / "data" / "pacific"
OSDS_PER_HOST = 12


def _cap(name: str) -> Any:
    return json.loads((CAPTURES / name).read_text())


def synthesize(osds: int, pgs: int) -> dict[str, bytes]:
    """Every command's output for a cluster of `osds` OSDs and `pgs` PGs, as librados returns."""
    rnd = random.Random(7)
    host = lambda i: f"stor-{i // OSDS_PER_HOST:04d}"  # noqa: E731
    dev = lambda i: f"nvme{i % OSDS_PER_HOST}n1"  # noqa: E731

    status = _cap("status.json")
    status["pgmap"]["pgs_by_state"] = [{"state_name": "active+clean", "count": pgs - 40},
                                       {"state_name": "peering", "count": 40}]
    status["pgmap"]["num_pgs"] = pgs
    status["osdmap"].update(num_osds=osds, num_up_osds=osds, num_in_osds=osds)

    meta0 = _cap("osd_metadata.json")[0]
    metadata = []
    for i in range(osds):
        m = dict(meta0)
        m.update(id=i, hostname=host(i), devices=dev(i), bluestore_bdev_devices=dev(i),
                 bluestore_bdev_dev_node=f"/dev/{dev(i)}", rotational="0",
                 osd_data=f"/var/lib/ceph/osd/ceph-{i}")
        metadata.append(m)

    df0 = _cap("osd_df.json")
    node0 = df0["nodes"][0]
    nodes = [{**node0, "id": i, "name": f"osd.{i}", "pgs": pgs * 3 // osds,
              "utilization": rnd.uniform(30, 70)} for i in range(osds)]
    df = {"nodes": nodes, "stray": [], "summary": df0["summary"]}

    perf = {"pg_ready": True, "osdstats": {"osd_perf_infos": [
        {"id": i, "perf_stats": {"commit_latency_ms": (c := rnd.randint(1, 9)),
                                 "apply_latency_ms": c, "commit_latency_ns": c * 1_000_000,
                                 "apply_latency_ns": c * 1_000_000}} for i in range(osds)]}}

    table = ["ID  HOST  USED  AVAIL  WR OPS  WR DATA  RD OPS  RD DATA  STATE"]
    table += [f"{i:>5}  {host(i)}  1.2T  2.3T  {rnd.randint(0, 9999)}  {rnd.randint(1, 900)}M  "
              f"{rnd.randint(0, 9999)}  {rnd.randint(1, 900)}M  exists,up" for i in range(osds)]

    dump = _cap("osd_dump.json")
    osd0, xinfo0 = dump["osds"][0], dump["osd_xinfo"][0]
    dump["osds"] = [{**osd0, "osd": i} for i in range(osds)]
    dump["osd_xinfo"] = [{**xinfo0, "osd": i} for i in range(osds)]
    dump["max_osd"] = osds

    # One million pgs_brief entries, written as Ceph writes them (compact JSON).
    pieces = []
    for n in range(pgs):
        up = [rnd.randrange(osds) for _ in range(3)]
        pieces.append(f'{{"pgid":"{n % 64 + 1}.{n // 64:x}","state":"active+clean",'
                      f'"up":[{up[0]},{up[1]},{up[2]}],"acting":[{up[0]},{up[1]},{up[2]}],'
                      f'"up_primary":{up[0]},"acting_primary":{up[0]}}}')
    pgs_brief = ('{"pg_ready":true,"pg_stats":[' + ",".join(pieces) + "]}").encode()

    pools = _cap("osd_pool_ls_detail.json")
    pools = [{**pools[0], "pool_id": i + 1, "pool_name": f"pool{i}", "pg_num": pgs // 64}
             for i in range(64)]
    help0 = (CAPTURES / "config_help_osd_scrub_sleep.json").read_bytes()
    return {
        "status": json.dumps(status).encode(),
        "health": (CAPTURES / "health_detail_storm.json").read_bytes(),
        "osd perf": json.dumps(perf).encode(),
        "osd status": "\n".join(table).encode(),
        "osd df": json.dumps(df).encode(),
        "osd dump": json.dumps(dump).encode(),
        "pg dump": pgs_brief,
        "osd pool ls": json.dumps(pools).encode(),
        "config dump": (CAPTURES / "config_dump.json").read_bytes(),
        "osd metadata": json.dumps(metadata).encode(),
        "versions": (CAPTURES / "versions.json").read_bytes(),
        "config help": help0,
        "log last": (CAPTURES / "log_last.json").read_bytes(),
        "config log": (CAPTURES / "config_log.json").read_bytes(),
        "mgr dump": (CAPTURES / "mgr_dump.json").read_bytes(),
        "mgr stat": (CAPTURES / "mgr_stat.json").read_bytes(),
        # `df`: each pool's fill, in the shape of the lab's capture (tests/data/pacific).
        "df": json.dumps({**json.loads((CAPTURES / "df.json").read_bytes()), "pools": [
            {"name": p["pool_name"], "id": p["pool_id"],
             "stats": {"stored": 10**9 * (i + 1), "objects": 1000 * (i + 1),
                       "percent_used": 0.01 * (i % 90), "max_avail": 10**12}}
            for i, p in enumerate(pools)]}).encode(),
        # The slow-cadence commands: the lab's clients, the autoscaler's target per pool.
        "features": (CAPTURES / "features.json").read_bytes(),
        "osd pool autoscale-status": json.dumps([
            {"pool_name": p["pool_name"], "pg_num_final": p["pg_num"],
             "pg_autoscale_mode": "off"} for p in pools]).encode(),
    }


class CannedCeph(CephSource):
    """The real CephSource, answered from synthetic outputs instead of a cluster."""

    def __init__(self, outputs: dict[str, bytes]) -> None:
        super().__init__(conffile=None)
        self.outputs = outputs

    def _send(self, target: str, cmd: dict[str, Any], timeout: float) -> bytes:
        return self.outputs[cmd["prefix"]]


def rss_mib() -> float:
    """Peak RSS of this address space. (getrusage's ru_maxrss survives fork+exec, so a
    child would report its parent's peak.)"""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def write_outputs(directory: Path, osds: int, pgs: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, body in synthesize(osds, pgs).items():
        (directory / name.replace(" ", "_")).write_bytes(body)


def read_outputs(directory: Path) -> dict[str, bytes]:
    return {f.name.replace("_", " "): f.read_bytes() for f in directory.iterdir()}


def measure(kind: str, directory: Path) -> dict[str, Any]:
    outputs = read_outputs(directory)
    input_mib = sum(len(v) for v in outputs.values()) / (1 << 20)
    src = CannedCeph(outputs)
    host = Partial("host", time.time(), daemons={
        f"osd.{i}": Daemon(id=f"osd.{i}", kind="osd", host="stor-0000", cores_used=2.5,
                           cores_allowed=4.0, threads=80, rss_bytes=4 << 30)
        for i in range(OSDS_PER_HOST)})
    if kind != "full":
        src.poll()  # fill the cache, as the first poll of a session does
    if kind == "epoch":
        # The map moved (a storm, an OSD restart): what derives from it is fetched again.
        status = json.loads(outputs["status"])
        status["osdmap"]["epoch"] += 1
        src.outputs = {**outputs, "status": json.dumps(status).encode()}
        for key in ("osd dump", "pools", "pgs_brief"):
            src._cache[key].at -= 11  # type: ignore[operator]
    base = rss_mib()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    part = src.poll()
    snap = merge([part, host])
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    assert snap.cluster is not None and not part.errors, part.errors
    pgs = snap.cluster.num_pgs
    assert sum(d.primary_pgs or 0 for d in snap.daemons.values()) == pgs
    return {"kind": kind, "osds": len(snap.daemons), "pgs": pgs, "cpu_s": round(cpu, 3),
            "wall_s": round(wall, 3), "peak_rss_mib": round(rss_mib(), 1),
            "rss_growth_mib": round(rss_mib() - base, 1), "inputs_mib": round(input_mib, 1)}


CASES = (("full", "first poll: every command, the PG dump and metadata too"),
         ("steady", "later polls: status, health, osd perf, osd status"),
         ("epoch", "osdmap moved: + osd dump, pools, the PG dump"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--osds", type=int, default=10_000)
    ap.add_argument("--pgs", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="runs per case (default 3)")
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds on a small cluster, to see that it runs (CI)")
    ap.add_argument("--one", choices=[k for k, _ in CASES], help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.dir)))
        return 0
    if args.smoke:
        args.osds, args.pgs, args.repeat = 120, 12_000, 1
    with tempfile.TemporaryDirectory(prefix="stormdeck-bench-") as tmp:
        write_outputs(Path(tmp), args.osds, args.pgs)
        print(f"snapshot build, {args.osds:,} OSDs, {args.pgs:,} PGs, through CephSource.poll() "
              "and merge (each case in a fresh process)")
        for kind, what in CASES:
            runs = []
            for _ in range(args.repeat):
                out = subprocess.run([sys.executable, __file__, "--one", kind, "--dir", tmp],
                                     capture_output=True, text=True, check=True)
                runs.append(json.loads(out.stdout))
            best = min(runs, key=lambda r: r["cpu_s"])
            worst = max(r["cpu_s"] for r in runs)
            print(f"  {kind:<6} {best['cpu_s']:.3f} s CPU (worst of {args.repeat}: {worst:.3f}); "
                  f"peak RSS {max(r['peak_rss_mib'] for r in runs):.0f} MiB, of which "
                  f"{best['inputs_mib']:.0f} MiB is the raw command output  [{what}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
