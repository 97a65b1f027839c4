"""Benchmark: what the console costs to run, on a real pseudo-terminal.

A synthetic feed makes a frame a second for N OSDs (10% of their figures
change each second, as on a live cluster); the real StormdeckApp renders it
on a pty whose output this script reads and counts: the bytes an SSH link
would carry. Reported: CPU (% of one core) at steady state, first paint,
peak RSS, terminal bytes per second; beside htop on the same pty when htop is
installed; and the time to refresh a 10,000-row daemon table in full.

    .venv/bin/python bench/console_bench.py [--osds 1000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import random
import select
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stormdeck.collectors.model import Cluster, Daemon, Snapshot, SourceHealth  # noqa: E402
from stormdeck.tui.feed import Frame  # noqa: E402


def synthetic(n: int, t: float, prev: Snapshot | None, rnd: random.Random) -> Snapshot:
    if prev is None:
        daemons = {f"osd.{i}": Daemon(
            id=f"osd.{i}", kind="osd", host=f"stor-{i // 12:04d}", devices=(f"nvme{i % 12}n1",),
            up=True, in_=True, cores_used=rnd.uniform(0.5, 3), cores_allowed=4.0,
            read_iops=rnd.uniform(100, 3000), write_iops=rnd.uniform(100, 3000),
            commit_latency=rnd.uniform(0.001, 0.01), apply_latency=0.002,
            primary_pgs=rnd.randint(80, 120), pgs=300) for i in range(n)}
    else:
        daemons = dict(prev.daemons)
        for key in rnd.sample(list(daemons), max(1, n // 10)):
            d = daemons[key]
            daemons[key] = replace(d, cores_used=rnd.uniform(0.5, 3),
                                   write_iops=rnd.uniform(100, 3000),
                                   commit_latency=rnd.uniform(0.001, 0.01))
    cluster = Cluster(fsid="bench", health="HEALTH_OK", num_pgs=n * 100,
                      pg_states={"active+clean": n * 100}, pg_flags={"active": n * 100},
                      num_osds=n, num_up_osds=n, num_in_osds=n, client_write_iops=n * 1500.0,
                      client_read_iops=n * 1500.0, slow_ops=0, release="reef", version="18.2.4")
    return Snapshot(time=t, cluster=cluster, daemons=daemons, disks={},
                    sources={"ceph": SourceHealth("ceph", True, t)})


class SyntheticFeed:
    def __init__(self, n: int) -> None:
        self.n = n
        self.interval = 1.0
        self.paused = False
        self._stop = False

    def start(self, on_frame) -> None:
        import threading

        def run() -> None:
            rnd = random.Random(1)
            prev, hist = None, []
            while not self._stop:
                snap = synthetic(self.n, time.time(), prev, rnd)
                hist = [*hist[-59:], snap]
                on_frame(Frame(snap, (), tuple(hist)))
                prev = snap
                time.sleep(self.interval)

        threading.Thread(target=run, daemon=True).start()

    def set_interval(self, s: float) -> float:
        self.interval = s
        return s

    def stop(self) -> None:
        self._stop = True


def child(n: int, view: str, low_bandwidth: bool) -> None:
    from stormdeck.tui.app import StormdeckApp

    class Bench(StormdeckApp):
        def on_mount(self) -> None:
            # Textual calls every on_mount along the class's MRO, StormdeckApp's too:
            # calling it here as well started the feed twice (two data loops ticking).
            self.call_later(self.action_view, view)

    feed = SyntheticFeed(n)
    app = Bench(feed, cluster_name="bench", low_bandwidth=low_bandwidth)
    if low_bandwidth:  # as `watch --low-bandwidth` does
        feed.interval = 2.0
        app.animation_level = "none"
    app.run()


def btop_argv(home: Path) -> list[str] | None:
    """btop at a 1 s update, like the others (its default is 2 s), from a config of its own."""
    btop = shutil.which("btop")
    if btop is None:
        return None
    conf = home / ".config" / "btop"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "btop.conf").write_text("update_ms = 1000\n")
    return ["env", f"HOME={home}", "LANG=C.UTF-8", btop, "--utf-force"]


def on_pty(argv: list[str], seconds: float, warmup: float, cols: int, rows: int,
           ready: bytes) -> dict[str, float]:
    """Run argv on a pty; (first paint s, CPU %, bytes/s, peak RSS MiB) at steady state."""
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
    start = time.monotonic()
    first_paint = None
    seen = b""
    total = 0
    cpu0 = None
    t0 = 0.0
    peak = 0
    while time.monotonic() - start < warmup + seconds:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if first_paint is None:
                seen += data
                if ready in seen:
                    first_paint = time.monotonic() - start
            if cpu0 is not None:
                total += len(data)
        if cpu0 is None and time.monotonic() - start >= warmup:
            c = proc.cpu_times()
            cpu0, t0, total = c.user + c.system, time.monotonic(), 0
        try:
            peak = max(peak, sum(p.memory_info().rss for p in [proc, *proc.children(True)]))
        except psutil.NoSuchProcess:
            break
    c = proc.cpu_times()
    span = time.monotonic() - t0
    os.kill(pid, 15)
    os.waitpid(pid, 0)
    return {"first_paint": first_paint or float("nan"),
            "cpu_pct": 100 * ((c.user + c.system) - (cpu0 or 0)) / span,
            "bytes_per_s": total / span, "rss_mib": peak / (1 << 20)}


def full_refresh(n: int) -> float:
    """Milliseconds for a 10,000-row daemon table to take a frame where every row changed."""
    from stormdeck.tui.app import StormdeckApp
    from stormdeck.tui.feed import StaticFeed
    from stormdeck.tui.views import DaemonTable

    rnd = random.Random(2)
    first = synthetic(n, 0.0, None, rnd)
    second = replace(first, daemons={k: replace(d, cores_used=(d.cores_used or 0) + 0.5,
                                                write_iops=(d.write_iops or 0) + 1)
                                     for k, d in first.daemons.items()})

    async def run() -> float:
        app = StormdeckApp(StaticFeed([Frame(first, (), (first,))]))
        async with app.run_test(size=(200, 50)) as pilot:
            await pilot.press("2")
            await pilot.pause()
            table = app.query_one(DaemonTable)
            t = time.perf_counter()
            table.show(Frame(second, (), (first, second)))
            await pilot.pause()
            return (time.perf_counter() - t) * 1000

    return asyncio.run(run())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--osds", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=15)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--low-bandwidth", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--smoke", action="store_true",
                    help="a few seconds on a small cluster, to see that it runs (CI)")
    args = ap.parse_args()
    if args.child:
        child(args.osds, args.child, args.low_bandwidth)
        return 0
    if args.smoke:
        args.osds, args.seconds = 100, 2.0
    print(f"console on a pty, {args.osds:,} OSDs, a frame a second, 10% of figures changing; "
          f"steady state over {args.seconds:g} s")
    sizes = ((200, 50),) if args.smoke else ((200, 50), (80, 24))
    for cols, rows in sizes:
        for low in ((False,) if args.smoke else (False, True)):
            for view in (("daemons",) if args.smoke else ("daemons", "overview")):
                argv = [sys.executable, __file__, "--osds", str(args.osds), "--child", view]
                r = on_pty(argv + (["--low-bandwidth"] if low else []), args.seconds,
                           1.0 if args.smoke else 5.0,
                           cols, rows, b"stormdeck")
                mode = "low-bw " if low else ""
                print(f"  {cols}x{rows} {mode}{view:<8}: CPU {r['cpu_pct']:.1f}% of a core, "
                      f"{r['bytes_per_s'] / 1024:.2f} KiB/s to the terminal, first paint "
                      f"{r['first_paint']:.2f} s, peak RSS {r['rss_mib']:.0f} MiB")
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        others = {"htop": [shutil.which("htop") or "htop", "-d", "10"],
                  "btop": btop_argv(Path(home))}
        for name, argv in others.items():
            if argv is None or shutil.which(argv[0]) is None:
                print(f"  {name} is not installed here: no comparison (apt-get install {name})")
                continue
            for cols, rows in sizes:
                r = on_pty(argv, args.seconds, 1.0 if args.smoke else 3.0, cols, rows, b"")
                print(f"  {cols}x{rows} {name}    : CPU {r['cpu_pct']:.1f}% of a core, "
                      f"{r['bytes_per_s'] / 1024:.2f} KiB/s to the terminal")
    n = 500 if args.smoke else 10_000
    print(f"  full refresh of a {n:,}-row daemon table: {full_refresh(n):.0f} ms")
    subprocess.run(["stty", "sane"], stderr=subprocess.DEVNULL, check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
