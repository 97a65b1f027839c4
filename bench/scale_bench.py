"""Benchmark: the whole console at scale, collection and judging included.

The real CephSource answers from canned outputs of N OSDs (100 PGs per OSD, 64
pools; bench/snapshot_bench.py's captures scaled up) whose figures move as a live
cluster's do: `osd perf`, `osd status` and `status` change every second, the
osdmap epoch every minute. The real data loop (Hub, History, Session, Engine with
every rule) feeds the real console on a pty at 200x50, on the daemons view. The
History is filled first by fast-forward (ten minutes of polls on a simulated
clock), then 60 s at 1 Hz are measured; then the engine alone in a process of its
own, History full, and each rule's CPU a tick. The same for the record loop (what
`stormdeck record` runs), then a 10-minute seek back in a replay of a 1,000-OSD
recording, `check --json` over N OSDs, and htop on the same pty.

Each figure is one line; --json prints them as one object.

    .venv/bin/python bench/scale_bench.py [--osds 1000] [--seconds 60] [--json] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import random
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from snapshot_bench import CannedCeph, synthesize  # noqa: E402

from stormdeck.collectors.model import SourceHealth  # noqa: E402

FILL = 600  # snapshots of History: ten minutes at 1 s
VARIANTS = 8  # distinct answers cycled through by the moving commands
CONFIG_SHOW = ROOT / "tests" / "data" / "pacific" / "config_show" / "osd.0-file-over-mon.json"


def prepare(osds: int, directory: Path, seed: int = 5) -> Path:
    """Write the canned outputs of `osds` OSDs, with VARIANTS answers of the moving
    commands, to `directory` (made once, in the parent: the measured process only
    reads them, as it would read librados' answers)."""
    directory.mkdir(parents=True, exist_ok=True)
    base = synthesize(osds, osds * 100)
    rnd = random.Random(seed)
    perf = json.loads(base["osd perf"])
    for k in range(VARIANTS):
        for info in perf["osdstats"]["osd_perf_infos"]:
            c = rnd.randint(1, 9)
            info["perf_stats"].update(commit_latency_ms=c, apply_latency_ms=c,
                                      commit_latency_ns=c * 1_000_000,
                                      apply_latency_ns=c * 1_000_000)
        (directory / f"perf.{k}").write_bytes(json.dumps(perf).encode())
    rows = base["osd status"].decode().splitlines()
    for k in range(VARIANTS):
        out = [rows[0]]
        for line in rows[1:]:
            p = line.split()
            out.append(f"{p[0]:>5}  {p[1]}  1.2T  2.3T  {rnd.randint(0, 9999)}  "
                       f"{rnd.randint(1, 900)}M  {rnd.randint(0, 9999)}  "
                       f"{rnd.randint(1, 900)}M  exists,up")
        (directory / f"table.{k}").write_bytes("\n".join(out).encode())
    # The PG dump is read from its file on each fetch: a new 100 MB answer each time,
    # as librados would hand over, not one held for the whole run.
    (directory / "pgdump").write_bytes(base.pop("pg dump"))
    for name, body in base.items():
        (directory / ("cmd." + name.replace(" ", "_"))).write_bytes(body)
    return directory


class _OnDisk(Mapping[str, bytes]):
    """Canned outputs read from their files when asked, as librados hands over a new
    buffer per command: the measured process holds none of them between commands."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def __getitem__(self, name: str) -> bytes:
        return self.files[name].read_bytes()

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)


class MovingCeph(CannedCeph):
    """The real CephSource; its canned cluster's figures move with the source's clock."""

    def __init__(self, directory: Path) -> None:
        super().__init__(_OnDisk({f.name[4:].replace("_", " "): f  # type: ignore[arg-type]
                                  for f in directory.glob("cmd.*")}))
        self.pgdump = directory / "pgdump"
        self.perf = [directory / f"perf.{k}" for k in range(VARIANTS)]
        self.table = [directory / f"table.{k}" for k in range(VARIANTS)]
        self.status = json.loads(self.outputs["status"])
        self.epoch0 = int(self.status["osdmap"].get("epoch") or 100)
        # The osd dump's epoch is spliced into its bytes as read (held parsed, 50 MB at
        # 10,000 OSDs, or as bytes, 12 MB, the canned server itself would weigh on the
        # measured process, which librados' answers do not).
        self.dump = directory / "cmd.osd_dump"
        self._made: dict[str, tuple[int, bytes]] = {}

    def _moving(self, what: str, key: int, make: Any) -> bytes:
        made = self._made.get(what)
        if made is None or made[0] != key:
            made = self._made[what] = (key, make())
        return made[1]

    def _send(self, target: str, cmd: dict[str, Any], timeout: float) -> bytes:
        sec = int(self.wall())
        epoch = self.epoch0 + sec // 60
        prefix = cmd["prefix"]
        if prefix == "osd perf":
            return self.perf[sec % VARIANTS].read_bytes()
        if prefix == "osd status":
            return self.table[sec % VARIANTS].read_bytes()
        if prefix == "status":
            def status() -> bytes:
                s = self.status
                s["osdmap"]["epoch"] = epoch
                s["pgmap"].update(read_op_per_sec=1000 + sec % 97 * 10,
                                  write_op_per_sec=2000 + sec % 89 * 10,
                                  read_bytes_sec=(1 << 20) * (sec % 13 + 1),
                                  write_bytes_sec=(1 << 20) * (sec % 11 + 1))
                return json.dumps(s).encode()
            return self._moving("status", sec, status)
        if prefix == "pg dump":
            return self.pgdump.read_bytes()
        if prefix == "config show":
            # As a cluster whose ceph.conf sets each OSD's memory target (the lab's does),
            # under a database that says another: each OSD read keeps one value.
            return CONFIG_SHOW.read_bytes()
        if prefix == "osd dump":
            dump = self.dump.read_bytes()
            head = b'{"epoch": '
            if not dump.startswith(head):
                raise ValueError("the canned osd dump does not start with its epoch")
            return head + str(epoch).encode() + dump[dump.index(b",", len(head)):]
        return super()._send(target, cmd, timeout)


def engine_all_rules() -> Any:
    from stormdeck.advisors.engine import Engine
    from stormdeck.advisors.settings import load_settings

    return Engine(load_settings(None))


class Timed:
    """Wraps an engine's evaluate: how long each call took, once measuring has begun."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.times: list[float] = []
        # The same calls' CPU time on their thread: on a shared 2-core machine the wall
        # time also holds waits for a core and for the interpreter lock.
        self.cpu: list[float] = []
        self.on = False
        real = engine.evaluate

        def evaluate(history: Any) -> Any:
            t, c = time.perf_counter(), time.thread_time()
            try:
                return real(history)
            finally:
                if self.on:
                    self.times.append(time.perf_counter() - t)
                    self.cpu.append(time.thread_time() - c)
        engine.evaluate = evaluate


def fast_forward(src: MovingCeph, history: Any, session: Any, n: int, hub: Any = None) -> None:
    """`n` polls a second apart on a simulated clock: the History fills. The clocks of
    the source (and `hub`) then run on from where the fill ended, so the live part
    continues the History without a gap and the source's cadences without a jump."""
    from stormdeck.collectors.hub import MergeMemo, merge

    memo = MergeMemo()
    wall0, mono0 = time.time() - n, time.monotonic() - n
    for i in range(n):
        src.wall = lambda i=i: wall0 + i
        src.clock = lambda i=i: mono0 + i
        t = wall0 + i
        snap = merge([src.poll()], {"ceph": SourceHealth("ceph", True, t)}, now=t,
                     memo=memo)
        history.append(snap)
        if session is not None:
            session.step(snap, history)
    wall_off = time.time() - (wall0 + n)
    mono_off = time.monotonic() - (mono0 + n)
    src.wall = lambda: time.time() - wall_off
    src.clock = lambda: time.monotonic() - mono_off
    if hub is not None:
        hub.wall = src.wall


def stats_writer(path: str, timed: Timed, loop: Any) -> Any:
    def write() -> None:
        t = timed.times
        Path(path).write_text(json.dumps({
            "engine_ms": 1000 * sum(t) / len(t) if t else None,
            "engine_ms_max": 1000 * max(t) if t else None,
            "engine_cpu_ms": 1000 * sum(timed.cpu) / len(timed.cpu) if timed.cpu else None,
            "ticks": len(t), "missed": loop.missed}))
    return write


# ---- the console, in a child on a pty ----------------------------------------------------


def console_child(canned: Path, fill: int, stats: str) -> None:
    from stormdeck.tui.app import StormdeckApp
    from stormdeck.tui.feed import Feed

    src = MovingCeph(canned)
    engine = engine_all_rules()
    timed = Timed(engine)
    feed = Feed([src], engine)
    fast_forward(src, feed.loop.history, feed.session, fill, feed.loop.hub)
    write = stats_writer(stats, timed, feed.loop)
    arrive = feed._arrive

    def counted(frame: Any) -> None:
        arrive(frame)
        write()
    feed._arrive = counted  # type: ignore[method-assign]

    class Bench(StormdeckApp):
        def on_mount(self) -> None:
            # Textual calls every on_mount along the class's MRO, StormdeckApp's too:
            # calling it here as well started the feed twice (two data loops ticking).
            self.call_later(self.action_view, "daemons")

    app = Bench(feed, cluster_name="bench")
    timed.on = True
    os.write(1, b"\x1b]2;FILLED\x07")  # the History is full: the console starts now
    app.run()


def on_pty(argv: list[str], seconds: float, cols: int, rows: int, start: bytes | None,
           ready: bytes, timeout: float = 3600) -> dict[str, float]:
    """Run argv on a pty; from `start` (or the fork) on: first paint, then CPU %, bytes/s,
    peak RSS over `seconds` once `ready` was seen."""
    import fcntl
    import struct
    import termios

    import psutil

    pid, fd = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execvp(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    proc = psutil.Process(pid)
    began = time.monotonic()
    t_start = began if start is None else None
    first_paint = None
    seen = b""
    total = 0
    cpu0 = None
    t0 = 0.0
    peak = 0
    try:
        while True:
            now = time.monotonic()
            if now - began > timeout:
                raise RuntimeError("the child never painted")
            if cpu0 is not None and now - t0 >= seconds:
                break
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    data = os.read(fd, 65536)
                except OSError:
                    break
                if first_paint is None:
                    seen += data
                    if t_start is None and start in seen:
                        t_start = time.monotonic()
                        seen = seen[seen.index(start) + len(start):]
                    if t_start is not None and ready in seen:
                        first_paint = time.monotonic() - t_start
                        c = proc.cpu_times()
                        cpu0, t0, total = c.user + c.system, time.monotonic(), 0
                elif cpu0 is not None:
                    total += len(data)
            try:
                peak = max(peak, proc.memory_info().rss)
            except psutil.NoSuchProcess:
                break
        c = proc.cpu_times()
        span = time.monotonic() - t0
    finally:
        os.kill(pid, 15)
        os.waitpid(pid, 0)
    return {"first_paint_s": first_paint if first_paint is not None else float("nan"),
            "cpu_pct": 100 * ((c.user + c.system) - (cpu0 or 0)) / span,
            "bytes_per_s": total / span, "peak_rss_mib": peak / (1 << 20)}


def console(canned: Path, seconds: float, fill: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        stats = str(Path(tmp) / "stats.json")
        argv = [sys.executable, __file__, "--child", "console", "--dir", str(canned),
                "--fill", str(fill), "--stats", stats]
        r = on_pty(argv, seconds, 200, 50, b"FILLED", b"osd.")
        r.update(json.loads(Path(stats).read_text()))
    return r


# ---- the record loop, in a child ----------------------------------------------------------


def record_child(canned: Path, fill: int, stats: str, seconds: float, path: str) -> None:
    from stormdeck.advisors.loop import Loop
    from stormdeck.collectors.recording import Recorder

    src = MovingCeph(canned)
    engine = engine_all_rules()
    timed = Timed(engine)
    loop = Loop([src], engine)
    fast_forward(src, loop.history, loop.session, fill, loop.hub)
    loop.session.recorder = Recorder(Path(path))  # type: ignore[union-attr]
    write = stats_writer(stats, timed, loop)
    timed.on = True
    print("FILLED", flush=True)
    loop.start()
    try:
        loop.run(lambda step: write(), duration=seconds + 5)
    finally:
        loop.stop()


def record(canned: Path, seconds: float, fill: int) -> dict[str, Any]:
    import psutil

    with tempfile.TemporaryDirectory() as tmp:
        stats, rec = str(Path(tmp) / "stats.json"), str(Path(tmp) / "bench.sdrec")
        child = subprocess.Popen(
            [sys.executable, __file__, "--child", "record", "--dir", str(canned), "--fill",
             str(fill), "--stats", stats, "--seconds", str(seconds), "--file", rec],
            stdout=subprocess.PIPE)
        proc = psutil.Process(child.pid)
        assert child.stdout is not None
        peak = 0
        line = child.stdout.readline()
        if b"FILLED" not in line:
            child.wait()
            raise RuntimeError("the record child failed")
        time.sleep(min(3.0, seconds / 4))  # past the first poll
        c = proc.cpu_times()
        cpu0, t0 = c.user + c.system, time.monotonic()
        while time.monotonic() - t0 < seconds:
            peak = max(peak, proc.memory_info().rss)
            time.sleep(0.2)
        c = proc.cpu_times()
        cpu = 100 * (c.user + c.system - cpu0) / (time.monotonic() - t0)
        child.wait()
        out = {"cpu_pct": cpu, "peak_rss_mib": peak / (1 << 20),
               "file_kib_per_min": Path(rec).stat().st_size / 1024 / ((seconds + 5) / 60)}
        out.update(json.loads(Path(stats).read_text()))
    return out


# ---- seek back in a replay ------------------------------------------------------------------


def seek(canned: Path, minutes: float, back: float) -> dict[str, Any]:
    """A replay of a `minutes`-long recording: opened at its end (what `replay --start`
    does: the run-up judged), then seeking `back` seconds back; and, played from the
    start to the end, seeking back twice as far (beyond the look-back: a checkpoint)."""
    from stormdeck.advisors.loop import REPLAY_RUNUP
    from stormdeck.collectors.hub import History
    from stormdeck.collectors.recording import Recorder, Recording
    from stormdeck.tui.feed import ReplayFeed

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seek.sdrec"
        src = MovingCeph(canned)
        tape = Recorder(path)

        class Tape:
            def step(self, snap: Any, history: Any) -> None:
                tape.add_snapshot(snap)

        fast_forward(src, History(2), Tape(), int(minutes * 60))
        tape.close()

        def opened(start: float | None) -> tuple[ReplayFeed, float]:
            feed = ReplayFeed(Recording(path), engine_all_rules, start=start)
            feed._run = lambda: None  # type: ignore[method-assign]  # no playing: seeks only
            t = time.perf_counter()
            feed.start(lambda frame: None)
            return feed, time.perf_counter() - t

        def seek_to(feed: ReplayFeed, when: float) -> float:
            t = time.perf_counter()
            feed.seek(when)
            took = time.perf_counter() - t
            assert abs(feed.past[-1 - feed.offset].snapshot.time - when) <= 1.5
            return took

        feed, open_s = opened(None)
        end = feed.recording.end
        feed_end, open_end_s = opened(end)
        back_s = seek_to(feed_end, end - back)
        feed_end.stop()
        t = time.perf_counter()
        feed.seek(end)  # play it all, judged in order, as watching it through would
        play_s = time.perf_counter() - t
        far_s = seek_to(feed, end - 2 * back)
        n = len(feed.recording)
        feed.stop()
        return {"open_at_end_s": open_end_s, "seek_back_s": back_s, "seek_far_back_s": far_s,
                "play_through_s": play_s, "runup": REPLAY_RUNUP, "snapshots": n,
                "open_s": open_s}


# ---- what ten minutes of History hold, by idea ---------------------------------------------

IDEAS = {"copies": "every poll's Daemons new (as before)",
         "shared": "structural sharing: unchanged records reused by identity",
         "shared+columns": "sharing, and older snapshots' figures packed in columns"}


def history_child(canned: Path, fill: int, idea: str) -> None:
    import gc
    from dataclasses import replace

    from stormdeck.collectors.hub import History

    src = MovingCeph(canned)

    class Copying(History):
        def append(self, snap: Any) -> None:
            c = snap.cluster
            pools = tuple(replace(p, primaries=dict(p.primaries)) for p in c.pools) if c \
                else ()
            super().append(replace(snap, daemons={k: replace(d)
                                                  for k, d in snap.daemons.items()},
                                   cluster=replace(c, pools=pools) if c else None))

    history = Copying(fill, whole=10**9) if idea == "copies" else \
        (History(fill, whole=10**9) if idea == "shared" else History(fill))
    import tracemalloc

    class Probe:
        """After the first poll (every command's caches filled), the count starts."""

        base: int | None = None

        def step(self, snap: Any, history: Any) -> None:
            if self.base is None:
                gc.collect()
                self.base = tracemalloc.get_traced_memory()[0]

    # What the fill leaves allocated (the heap reuses freed space, so RSS would not say).
    tracemalloc.start()
    probe = Probe()
    fast_forward(src, history, probe, fill)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - (probe.base or 0)
    print(json.dumps({"mib": grown / (1 << 20)}))


def rss_now() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def history_memory(canned: Path, fill: int) -> dict[str, float]:
    out = {}
    for idea in IDEAS:
        res = subprocess.run([sys.executable, __file__, "--child", "history", "--dir",
                              str(canned), "--fill", str(fill), "--idea", idea],
                             capture_output=True, text=True, check=True)
        out[idea] = json.loads(res.stdout.strip().splitlines()[-1])["mib"]
    return out


# ---- check --json ----------------------------------------------------------------------------


def check_child(canned: Path) -> None:
    from stormdeck.advisors.engine import worst
    from stormdeck.cli_check import report
    from stormdeck.watching import watch

    src = MovingCeph(canned)
    polled: list[float] = []
    real = src.poll

    def poll() -> Any:
        out = real()
        polled.append(time.monotonic())
        return out
    src.poll = poll  # type: ignore[method-assign]
    engine = engine_all_rules()
    started = time.monotonic()
    # Two polls before judging, as `plan` takes them: the figure is the answer's time after
    # the second poll, and a first poll slower than the 1 s run (2.8 s here, every command
    # parsed for the first time) would otherwise leave only one.
    findings, snap = watch([src], engine, 1.0, 1.0, 10.0, first_polls=2)
    text = json.dumps(report(snap, findings, engine.errors, time.monotonic() - started,
                             worst(findings)), indent=1, allow_nan=False)
    done = time.monotonic()
    print(json.dumps({"after_second_poll_s": done - polled[1], "total_s": done - started,
                      "first_poll_s": polled[0] - started, "bytes": len(text)}))


def rules_child(canned: Path, fill: int, ticks: int) -> None:
    """Each rule's CPU a tick, in a process of its own with the History full: which rule
    a tick's engine time goes to (the console's figure is the engine's whole)."""
    import gc

    from stormdeck.advisors.session import Session
    from stormdeck.collectors.hub import History

    src = MovingCeph(canned)
    engine = engine_all_rules()
    history = History(fill)
    session = Session(engine)
    fast_forward(src, history, session, fill)
    spent: dict[str, float] = {}
    for rule in engine.rules:
        def timed(ctx: Any, real: Any = rule.check, rid: str = rule.id) -> list[Any]:
            began = time.thread_time()
            try:
                return list(real(ctx))
            finally:
                spent[rid] = spent.get(rid, 0.0) + time.thread_time() - began
        rule.check = timed  # type: ignore[method-assign]
    steps: list[float] = []
    # The ticks on from where the fill's clock ended, a second apart (a stats period's
    # mapping shared by its snapshots, the osdmap moving once a minute, as in the console).
    from stormdeck.collectors.hub import MergeMemo, merge

    memo = MergeMemo()
    wall0, mono0 = src.wall(), src.clock()
    for i in range(ticks):
        src.wall = lambda i=i: wall0 + i
        src.clock = lambda i=i: mono0 + i
        t = wall0 + i
        snap = merge([src.poll()], {"ceph": SourceHealth("ceph", True, t)}, now=t, memo=memo)
        history.append(snap)
        gc.freeze()  # as the data loop does each tick
        began = time.thread_time()
        session.step(snap, history)
        steps.append(time.thread_time() - began)
    top = sorted(spent.items(), key=lambda kv: -kv[1])[:6]
    print(json.dumps({"engine_ms": 1000 * sum(steps) / len(steps),
                      "engine_ms_median": 1000 * sorted(steps)[len(steps) // 2],
                      "rules_ms": {k: 1000 * v / len(steps) for k, v in top}}))


def rules(canned: Path, fill: int, ticks: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", "rules", "--dir", str(canned),
                          "--fill", str(fill), "--seconds", str(ticks)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def check(canned: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", "check", "--dir", str(canned)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def htop(seconds: float) -> dict[str, Any] | None:
    if shutil.which("htop") is None:
        return None
    return on_pty(["htop", "-d", "10"], seconds, 200, 50, None, b"")


def blast_step(osds: int) -> dict[str, Any] | None:
    """What `stormdeck whatif out osd.17` costs on bench/blast_bench.py's canned cluster of
    `osds` OSDs (a binary osdmap made by osdmaptool, hosts of 20 in racks of 25, 128 PGs per
    OSD, and the pg dump that map gives): the whole path whatif runs, timed."""
    if shutil.which("osdmaptool") is None or shutil.which("crushtool") is None:
        return None
    import blast_bench

    with tempfile.TemporaryDirectory(prefix="stormdeck-blast-bench-") as d:
        built = blast_bench.build(osds, Path(d))
        conn = blast_bench.Canned(Path(d))
        steps = blast_bench.Steps()
        started = time.monotonic()
        p = blast_bench.whatif_out(conn, min(17, osds - 1), steps)
        took = time.monotonic() - started
    return {"osds": osds, "pgs": built["pgs"], "map_built_s": built["build_s"],
            "predict_out_s": took, "pgs_remapped": len(p.pgs_remapped)}


# ---- main -----------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--osds", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60, help="measured at 1 Hz (default 60)")
    ap.add_argument("--fill", type=int, default=FILL, help="History filled first (snapshots)")
    ap.add_argument("--seek-osds", type=int, default=1000)
    ap.add_argument("--json", action="store_true", help="the figures as one JSON object")
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds on a small cluster, to see that it runs (CI)")
    ap.add_argument("--only", choices=("console", "rules", "record", "seek", "check", "htop",
                                       "history", "blast"),
                    action="append", help="run only these parts")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--stats", help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--idea", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child == "console":
        console_child(args.dir, args.fill, args.stats)
        return 0
    if args.child == "record":
        record_child(args.dir, args.fill, args.stats, args.seconds, args.file)
        return 0
    if args.child == "check":
        check_child(args.dir)
        return 0
    if args.child == "rules":
        rules_child(args.dir, args.fill, int(args.seconds))
        return 0
    if args.child == "history":
        history_child(args.dir, args.fill, args.idea)
        return 0
    minutes, back = 30.0, 600.0
    if args.smoke:
        args.osds, args.seconds, args.fill, args.seek_osds = 60, 3.0, 30, 60
        minutes, back = 4.0, 60.0
    parts = args.only or ["history", "console", "rules", "record", "seek", "check", "htop",
                          "blast"]
    out: dict[str, Any] = {"osds": args.osds, "pgs": args.osds * 100, "seconds": args.seconds,
                           "history": args.fill}
    say = (lambda *a: None) if args.json else print
    say(f"scale: {args.osds:,} OSDs, {args.osds * 100:,} PGs, 64 pools; History filled with "
        f"{args.fill} snapshots, then {args.seconds:g} s at 1 Hz")
    tmp = tempfile.TemporaryDirectory(prefix="stormdeck-scale-")
    canned = prepare(args.osds, Path(tmp.name) / "n")
    seek_canned = canned if args.seek_osds == args.osds else \
        prepare(args.seek_osds, Path(tmp.name) / "seek") if "seek" in parts else canned
    if "history" in parts:
        r = out["history_mib"] = history_memory(canned, args.fill)
        for idea, what in IDEAS.items():
            say(f"  History of {args.fill} snapshots, {idea}: {r[idea]:.0f} MiB  [{what}]")
    if "console" in parts:
        r = out["console"] = console(canned, args.seconds, args.fill)
        say(f"  console 200x50 daemons view: CPU {r['cpu_pct']:.1f}% of a core")
        say(f"  console peak RSS: {r['peak_rss_mib']:.0f} MiB")
        say(f"  console engine: {r['engine_ms']:.1f} ms per tick (max {r['engine_ms_max']:.1f}), "
            f"{r['engine_cpu_ms']:.1f} ms of CPU")
        say(f"  console ticks missed: {r['missed']} of {r['ticks']}")
        say(f"  console first paint: {r['first_paint_s']:.2f} s")
        say(f"  console terminal: {r['bytes_per_s'] / 1024:.2f} KiB/s")
    if "rules" in parts:
        r = out["rules"] = rules(canned, args.fill, max(3, int(args.seconds / 2)))
        say(f"  engine alone, History full: {r['engine_ms']:.1f} ms of CPU a tick (median "
            f"{r['engine_ms_median']:.1f}); costliest rules: " + ", ".join(
                f"{k} {v:.1f}" for k, v in r["rules_ms"].items()))
    if "record" in parts:
        r = out["record"] = record(canned, args.seconds, args.fill)
        say(f"  record CPU: {r['cpu_pct']:.1f}% of a core")
        say(f"  record peak RSS: {r['peak_rss_mib']:.0f} MiB")
        say(f"  record engine: {r['engine_ms']:.1f} ms per tick (max {r['engine_ms_max']:.1f}), "
            f"{r['engine_cpu_ms']:.1f} ms of CPU")
        say(f"  record ticks missed: {r['missed']} of {r['ticks']}")
        say(f"  record file: {r['file_kib_per_min']:.0f} KiB per minute")
    if "seek" in parts:
        r = out["seek"] = seek(seek_canned, minutes, back)
        say(f"  replay of {args.seek_osds:,} OSDs, {r['snapshots']} snapshots: opened at "
            f"its end in {r['open_at_end_s']:.1f} s (the {r['runup']}-snapshot run-up judged)")
        say(f"  replay seek back {back / 60:g} min: {r['seek_back_s']:.3f} s")
        say(f"  replay seek back {2 * back / 60:g} min after playing it through "
            f"({r['play_through_s']:.0f} s): {r['seek_far_back_s']:.3f} s")
    if "check" in parts:
        r = out["check"] = check(canned)
        say(f"  check --json: {r['after_second_poll_s']:.2f} s after its second poll "
            f"({r['total_s']:.2f} s in all)")
    if "htop" in parts:
        r = htop(args.seconds)
        out["htop"] = r
        if r is None:
            say("  htop is not installed here: no comparison (apt-get install htop)")
        else:
            say(f"  htop 200x50 beside it: CPU {r['cpu_pct']:.1f}% of a core, "
                f"{r['bytes_per_s'] / 1024:.2f} KiB/s")
    if "blast" in parts:
        r = out["blast"] = blast_step(args.osds)
        if r is None:
            say("  whatif out: osdmaptool/crushtool not installed here (ceph-base): not measured")
        else:
            say(f"  whatif out osd.17 on a canned map of {r['osds']:,} OSDs, {r['pgs']:,} "
                f"PGs: {r['predict_out_s']:.1f} s, read to render ({r['pgs_remapped']:,} PGs "
                f"remapped; canned cluster made in {r['map_built_s']:.1f} s)")
    tmp.cleanup()
    subprocess.run(["stty", "sane"], stderr=subprocess.DEVNULL, check=False)
    if args.json:
        print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
