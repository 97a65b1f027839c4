"""Benchmark: one Prometheus poll across a round trip, serial against concurrent queries.

A proxy on 127.0.0.1 (tests/prometheus_wire.py) delays each request by the
round trip, and each new connection by one more (its handshake), in front of
a real Prometheus (Debian's, started here with an empty TSDB) or, with
--stand-in, a server that answers every query with an empty vector. Each poll
is the real PrometheusSource.poll(): 37 queries, 55 with --curve. Reports the
poll's wall time against a 1 s interval, the round trips it cost, the most
queries in flight at once and the connections opened.

    .venv/bin/python bench/prometheus_bench.py [--delay 0.03] [--polls 5] [--curve]
"""

from __future__ import annotations

import argparse
import inspect
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stormdeck.collectors.prometheus.source import PrometheusSource  # noqa: E402
from tests.prometheus_wire import DelayProxy, StandIn  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def real_prometheus() -> Iterator[str]:
    binary = shutil.which("prometheus")
    if binary is None:
        raise SystemExit("prometheus_bench: no prometheus binary; ./dev installs it, or "
                         "use --stand-in")
    with tempfile.TemporaryDirectory(prefix="prom-bench-") as d:
        port = free_port()
        (Path(d) / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: self\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{port}']\n")
        proc = subprocess.Popen(
            [binary, f"--config.file={d}/prometheus.yml", f"--storage.tsdb.path={d}/data",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("prometheus_bench: Prometheus did not start")
                time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            proc.wait(10)


@contextmanager
def stand_in() -> Iterator[str]:
    with StandIn() as s:
        yield s.url


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.03,
                    help="round trip added per request, in seconds (default 0.03)")
    ap.add_argument("--polls", type=int, default=5)
    ap.add_argument("--concurrency", default="1,8",
                    help="queries in flight at once, each measured (default 1,8)")
    ap.add_argument("--curve", action="store_true", help="the Curve queries too")
    ap.add_argument("--stand-in", action="store_true",
                    help="an empty-vector stand-in instead of a real Prometheus")
    ap.add_argument("--smoke", action="store_true",
                    help="the stand-in, a 10 ms round trip, 2 polls: that it runs, quickly")
    args = ap.parse_args()
    if args.smoke:
        args.stand_in, args.delay, args.polls = True, 0.01, 2
    concurrent = "concurrency" in inspect.signature(PrometheusSource).parameters
    levels = [int(x) for x in args.concurrency.split(",")] if concurrent else [0]
    with (stand_in() if args.stand_in else real_prometheus()) as upstream, \
            DelayProxy(upstream, args.delay) as proxy:
        print(f"Prometheus poll ({'stand-in' if args.stand_in else 'real Prometheus'}, "
              f"{'Ceph and Curve' if args.curve else 'Ceph'} queries) behind "
              f"{args.delay * 1000:g} ms of round trip per request and per new connection")
        for level in levels:
            kw = {"concurrency": level} if level else {}
            src = PrometheusSource(proxy.url, timeout=10, curve=args.curve, **kw)
            proxy.reset()
            walls = []
            try:
                for _ in range(args.polls):
                    w0 = time.perf_counter()
                    src.poll()
                    walls.append(time.perf_counter() - w0)
            finally:
                src.close()
            queries = proxy.requests // args.polls
            later = sorted(walls[1:]) or walls
            median = later[len(later) // 2]
            trips = median / args.delay
            label = f"concurrency {level:>2}" if level else "this build (no concurrency)"
            print(f"  {label}: {queries} queries a poll; first poll {walls[0]:.3f} s, "
                  f"later median {median:.3f} s (~{trips:.0f} round trips) -> "
                  f"{'fits' if median < 1 else 'OVER'} a 1 s poll, up to "
                  f"~{1000 / trips:.0f} ms of round trip; at most {proxy.max_in_flight} in "
                  f"flight; {proxy.connections} connections over {args.polls} polls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
