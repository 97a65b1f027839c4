"""Benchmark: `stormdeck whatif out osd.N` on a canned cluster of N OSDs, the whole path timed.

The canned cluster is self-consistent: its binary osdmap is made by osdmaptool (hosts of
20, racks of 25, straw2, one size-3 pool of 128 PGs per OSD: 10,000 OSDs give 1,280,000
PGs), `osd dump` is that map's own JSON dump, and `pg dump pgs` holds every PG's up set as
that map places it (mapped once while building, not measured) with bytes per PG. The
measured path is the one `stormdeck whatif out osd.N` runs (stormdeck/cli_whatif.py):
read the cluster (advisors.blast.state_of over canned answers), find the tools, predict,
render the lines and the JSON. Each step is timed; --verify also maps every PG with
osdmaptool with the OSD marked out and checks the prediction against it.

    .venv/bin/python bench/blast_bench.py [--osds 10000] [--osd 17] [--verify] [--json] [--smoke]
"""

from __future__ import annotations

import argparse
import array
import json
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VERSION_LINE = "ceph version {v} (618f440892089921c3e944a991122ddc44e60516) {r} (stable)"


def run(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def full_up_sets(mapfile: str, extra: tuple[str, ...] = ()) -> dict[str, tuple[int, ...]]:
    """Every PG's up set, osdmaptool --test-map-pgs-dump-all (the reference, slow)."""
    from stormdeck.advisors.blast import parse_dump_all

    return parse_dump_all(run("osdmaptool", mapfile, "--test-map-pgs-dump-all",
                              "--clear-temp", *extra))


def build(osds: int, directory: Path, pg_bits: int = 7, seed: int = 3,
          upmaps: int = 0) -> dict[str, Any]:
    """Write the canned cluster to `directory`; returns what building took. `upmaps`:
    that many pg_upmap_items from osdmaptool's own balancer, saved in the map."""
    directory.mkdir(parents=True, exist_ok=True)
    mapfile, crush = str(directory / "osdmap"), str(directory / "crush")
    started = time.monotonic()
    run("osdmaptool", "--createsimple", str(osds), "--pg-bits", str(pg_bits), "--pgp-bits",
        str(pg_bits), "--with-default-pool", "--clobber", mapfile)
    run("crushtool", "-o", crush, "--build", "--num_osds", str(osds), "host", "straw2", "20",
        "rack", "straw2", "25", "root", "straw2", "0")
    run("osdmaptool", mapfile, "--import-crush", crush)
    # --mark-up-in is saved only beside a change --save accepts: a no-op weight.
    run("osdmaptool", mapfile, "--mark-up-in", "--adjust-crush-weight", "0:1", "--save")
    if upmaps:
        run("osdmaptool", mapfile, "--upmap", str(directory / "upmaps.txt"),
            "--upmap-deviation", "1", "--upmap-max", str(upmaps), "--save")
    dump = json.loads(run("osdmaptool", mapfile, "--dump", "json"))
    version = run("osdmaptool", "--version").split()[2]
    up = full_up_sets(mapfile)
    rnd = random.Random(seed)
    rows = []
    per_osd: dict[int, int] = {}
    for pgid, s in up.items():
        b = rnd.randrange(1 << 30, 7 << 30)
        for o in s:
            per_osd[o] = per_osd.get(o, 0) + b
        ids = ",".join(map(str, s))
        rows.append(f'{{"pgid":"{pgid}","state":"active+clean","stat_sum":{{"num_bytes":{b},'
                    f'"num_objects":{b >> 22},"num_omap_bytes":0,"num_omap_keys":0}},'
                    f'"up":[{ids}],"acting":[{ids}],"up_primary":{s[0]},'
                    f'"acting_primary":{s[0]}}}')
    (directory / "pgdump").write_bytes(
        ('{"pg_ready":true,"pg_stats":[' + ",".join(rows) + "]}").encode())
    tib = 1 << 30  # kB in a TiB
    df = {"nodes": [{"id": i, "name": f"osd.{i}", "kb": 2 * tib,
                     "kb_used": per_osd.get(i, 0) // 1024} for i in range(osds)]}
    vline = VERSION_LINE.format(v=version, r="pacific")
    answers = {
        "osd dump": dump, "osd df": df,
        "status": {"pgmap": {"num_pgs": len(up), "pgs_by_state": [
            {"state_name": "active+clean", "count": len(up)}]}},
        "versions": {"mon": {vline: 3}, "overall": {vline: 3 + osds}},
    }
    for name, body in answers.items():
        (directory / ("cmd." + name.replace(" ", "_"))).write_bytes(json.dumps(body).encode())
    return {"osds": osds, "pgs": len(up), "build_s": time.monotonic() - started,
            "version": version}


# A row of the canned `pg dump pgs` as build() writes it.
ROW = re.compile(rb'\{"pgid":"(\d+)\.[0-9a-f]+","state":"([^"]*)","stat_sum":\{[^}]*\},'
                 rb'"up":\[([-\d,]*)\],"acting":\[([-\d,]*)\],"up_primary":(-?\d+),'
                 rb'"acting_primary":(-?\d+)\}')


def derive(directory: Path) -> None:
    """From the canned `pg dump pgs`, once (not measured): the `pgs_brief` answer, in
    Pacific's shape and field order ({"pg_ready", "pg_stats": [{pgid, state, up, acting,
    up_primary, acting_primary}]}, as the lab's mgr answers), and an index of each row's
    place in the dump by acting OSD, so that `pg ls-by-osd` is answered as fast as a mgr
    walking its pg map would."""
    raw = (directory / "pgdump").read_bytes()
    brief = []
    by_osd: dict[int, array.array[int]] = {}
    for m in ROW.finditer(raw):
        pgid = raw[m.start() + 9:raw.index(b'"', m.start() + 9)]
        brief.append(b'{"pgid":"%s","state":"%s","up":[%s],"acting":[%s],"up_primary":%s,'
                     b'"acting_primary":%s}' % (pgid, m.group(2), m.group(3), m.group(4),
                                               m.group(5), m.group(6)))
        for o in m.group(4).split(b","):
            if o:
                by_osd.setdefault(int(o), array.array("q")).extend((m.start(), m.end()))
    (directory / "pgbrief").write_bytes(b'{"pg_ready":true,"pg_stats":[' + b",".join(brief)
                                        + b"]}")
    with open(directory / "pgdump.byosd", "wb") as f:
        pickle.dump(by_osd, f)


class Canned:
    """Answers the commands a prediction sends (collectors.placement.Commands) from the
    canned files, in the shapes Pacific's mgr gives (tests/integration's lab checks them);
    a pg dump is read from its file each time, as librados hands over a new answer."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.answers = {f.name[4:].replace("_", " "): f.read_bytes()
                        for f in directory.glob("cmd.*")}
        self.sent: list[str] = []
        if not (directory / "pgdump.byosd").exists() or not (directory / "pgbrief").exists():
            derive(directory)
        with open(directory / "pgdump.byosd", "rb") as f:
            self.by_osd: dict[int, array.array[int]] = pickle.load(f)

    def _rows(self, spans: list[tuple[int, int]]) -> bytes:
        with open(self.dir / "pgdump", "rb") as f:
            rows = []
            for start, end in spans:
                f.seek(start)
                rows.append(f.read(end - start))
        return b'{"pg_ready":true,"pg_stats":[' + b",".join(rows) + b"]}"

    def command(self, target: str, cmd: dict[str, Any], timeout: float | None = None) -> bytes:
        prefix = cmd["prefix"]
        self.sent.append(prefix)
        if prefix == "osd getmap":
            return (self.dir / "osdmap").read_bytes()
        if prefix == "pg dump":
            brief = cmd.get("dumpcontents") == ["pgs_brief"]
            return (self.dir / ("pgbrief" if brief else "pgdump")).read_bytes()
        if prefix == "pg ls-by-osd":
            at = self.by_osd.get(int(cmd["osd"]), array.array("q"))
            return self._rows(list(zip(at[::2], at[1::2], strict=True)))
        if prefix == "pg ls-by-pool":
            pools = {p["pool_name"]: p["pool"]
                     for p in json.loads(self.answers["osd dump"])["pools"]}
            raw = (self.dir / "pgdump").read_bytes()
            want = str(pools[cmd["poolstr"]]).encode()
            return self._rows([m.span() for m in ROW.finditer(raw) if m.group(1) == want])
        if prefix == "config get":
            return b"600\n" if cmd.get("key") == "mon_osd_down_out_interval" else b"0.05\n"
        if prefix in self.answers:
            return self.answers[prefix]
        raise KeyError(f"the canned cluster has no answer to {prefix!r}")


class Steps:
    """Wall and CPU time per named step (CPU: this process and the tools it ran; on a
    shared 2-core machine the wall time also holds other processes' turns)."""

    def __init__(self) -> None:
        self.took: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._t = (0.0, 0.0)

    @staticmethod
    def _cpu() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def start(self) -> None:
        self._t = (time.monotonic(), self._cpu())

    def stop(self, name: str) -> None:
        self.took[name] = self.took.get(name, 0.0) + time.monotonic() - self._t[0]
        self.cpu[name] = self.cpu.get(name, 0.0) + self._cpu() - self._t[1]


def whatif_out(conn: Canned, osd: int, steps: Steps, full_dump: bool = False) -> Any:
    """What `stormdeck whatif out osd.N -f json` does after connecting, step by step.
    `full_dump`: read the whole `pg dump pgs` up front, as before pgs_brief (to compare)."""
    from stormdeck.advisors import blast
    from stormdeck.collectors import placement

    steps.start()
    state = placement.fetch(conn, brief=False) if full_dump else blast.state_of(conn)
    steps.stop("read the cluster (commands, JSON, parsing)")
    steps.start()
    tools = blast.find_tools(state.version, state.release)
    steps.stop("find the tools")
    steps.start()
    p = blast.predict_out(state, tools, [osd])
    steps.stop("predict")
    steps.start()
    json.dumps(p.to_dict())
    p.lines()
    steps.stop("render (JSON and lines)")
    return p


def verify(directory: Path, osd: int, p: Any) -> dict[str, Any]:
    """The prediction against osdmaptool's full mapping, without and with --mark-out."""
    mapfile = str(directory / "osdmap")
    before = full_up_sets(mapfile)
    after = full_up_sets(mapfile, ("--mark-out", str(osd)))
    moved = sorted(pg for pg, up in after.items() if before.get(pg) != up)
    return {"full_mapping_remapped": len(moved), "same": moved == sorted(p.pgs_remapped)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--osds", type=int, default=10000)
    ap.add_argument("--osd", type=int, default=17, help="the OSD going out")
    ap.add_argument("--dir", type=Path, help="keep the canned cluster here (built if absent)")
    ap.add_argument("--verify", action="store_true",
                    help="check the PGs predicted against osdmaptool's full mapping")
    ap.add_argument("--full-dump", action="store_true",
                    help="read the whole pg dump pgs up front (the path before pgs_brief)")
    ap.add_argument("--json", action="store_true", help="the figures as one JSON object")
    ap.add_argument("--smoke", action="store_true",
                    help="a small cluster, verified, to see that it runs (CI)")
    args = ap.parse_args()
    say = (lambda *a: None) if args.json else print
    if shutil.which("osdmaptool") is None or shutil.which("crushtool") is None:
        say("blast: osdmaptool/crushtool not installed here (ceph-base): not measured")
        if args.json:
            print(json.dumps({"skipped": "osdmaptool not installed"}))
        return 0
    if args.smoke:
        args.osds, args.verify = 200, True
        args.osd = min(args.osd, args.osds - 1)
    tmp = None
    directory = args.dir
    if directory is None:
        tmp = tempfile.TemporaryDirectory(prefix="stormdeck-blast-bench-")
        directory = Path(tmp.name)
    out: dict[str, Any] = {}
    if not (directory / "pgdump").exists():
        out["built"] = build(args.osds, directory)
        say(f"canned cluster: {out['built']['osds']:,} OSDs, {out['built']['pgs']:,} PGs, "
            f"built in {out['built']['build_s']:.1f} s (not measured)")
    conn = Canned(directory)  # the canned mgr's answers and index, ready before the clock
    steps = Steps()
    started, cpu0 = time.monotonic(), Steps._cpu()
    p = whatif_out(conn, args.osd, steps, args.full_dump)
    total, cpu = time.monotonic() - started, Steps._cpu() - cpu0
    out.update(osd=args.osd, total_s=total, cpu_s=cpu, steps_s=steps.took,
               steps_cpu_s=steps.cpu, load_average=os.getloadavg()[0],
               predicted_s=p.seconds, pgs_remapped=len(p.pgs_remapped),
               copies_to_create=p.copies_to_create, bytes_to_move=p.bytes_to_move,
               method=p.method, sent=conn.sent)
    say(f"whatif out osd.{args.osd}: {total:.2f} s in all ({cpu:.2f} s CPU; load average "
        f"{out['load_average']:.1f}), {len(p.pgs_remapped):,} PGs remapped, "
        f"{p.copies_to_create:,} copies")
    for name, s in steps.took.items():
        say(f"  {name}: {s:.2f} s ({steps.cpu[name]:.2f} s CPU)")
    say(f"  method: {p.method}")
    say(f"  asked: {', '.join(conn.sent)}")
    if args.verify:
        v = out["verify"] = verify(directory, args.osd, p)
        say(f"  against osdmaptool's full mapping ({v['full_mapping_remapped']:,} PGs "
            f"remapped): {'the same PGs' if v['same'] else 'DIFFERENT'}")
        if not v["same"]:
            if args.json:
                print(json.dumps(out, indent=1))
            return 1
    if args.json:
        print(json.dumps(out, indent=1))
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
