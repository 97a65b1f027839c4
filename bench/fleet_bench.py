"""Benchmark: the fleet console through a real Prometheus at N OSDs, with data in it.

A real Prometheus (the `prometheus` on PATH, Debian's 2.42 here) listens on
127.0.0.1 with its own temporary directory and scrapes synthetic targets served
by a child of this script: the mgr module's page (bench/data: a real Pacific
page, its per-OSD series repeated for N OSDs, 20 OSDs a host), and per host one
node_exporter page and one `stormdeck exporter` page (real pages too, their
per-device and per-OSD series repeated). The figures stormdeck reads move at
planted rates (OSD i reads 20 + i % 37 ops/s...), so a poll's rates can be
checked against the truth; everything else is served as captured.

Once Prometheus holds `--fill-scrapes` scrapes:
- polls: the real PrometheusSource polled at 1 Hz (as the console's hub does) for
  `--poll-seconds`: per poll the wall time, the process' CPU, the series and bytes
  read, and the share of up OSDs whose read IOPS are within 2% of the planted;
- console: the real console (the app, the data loop with every rule) on a pty at
  200x50 on the daemons view, its History first filled with `--fill` snapshots
  (one real poll per scrape interval, each held for an interval's snapshots), then
  measured for `--seconds`: whole-process CPU, RSS at the start and the end and its
  peak, engine time per tick; and Prometheus' CPU while the console polls, against
  its idle CPU over as long a window before and after.

    .venv/bin/python bench/fleet_bench.py [--osds 1000] [--interval 15] [--json] [--smoke]
        [--duplicate]   (every mgr and exporter target scraped by two jobs)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DATA = ROOT / "bench" / "data"
OSDS_PER_HOST = 20
FILL = 600

# ---- the planted truth ---------------------------------------------------------------------


def planted(i: int) -> dict[str, float]:
    """OSD i's true rates: what a poll's figures are checked against."""
    r, w = 20.0 + i % 37, 50.0 + i % 41
    return {"read_iops": r, "write_iops": w, "read_bps": r * 4096, "write_bps": w * 16384,
            "read_lat": 0.002 + (i % 7) * 0.0005, "write_lat": 0.004 + (i % 5) * 0.001,
            "cores": 0.3 + (i % 6) * 0.1}


def is_up(i: int) -> bool:
    return i % 250 != 7  # a few down OSDs (osd.7 among them), so the counts mean something


def host_of(i: int) -> str:
    return f"stor{i // OSDS_PER_HOST:04d}"


def dev_of(i: int) -> str:
    return f"nvme{i % OSDS_PER_HOST}n1"


# ---- the synthetic targets -----------------------------------------------------------------

POOL_MOVING = ("ceph_pool_rd", "ceph_pool_wr", "ceph_pool_rd_bytes", "ceph_pool_wr_bytes")
MGR_MOVING = ("ceph_osd_up", "ceph_osd_in", "ceph_osd_op_r", "ceph_osd_op_w",
              "ceph_osd_op_r_out_bytes", "ceph_osd_op_w_in_bytes", "ceph_osd_op_r_latency_sum",
              "ceph_osd_op_r_latency_count", "ceph_osd_op_w_latency_sum",
              "ceph_osd_op_w_latency_count", "ceph_osd_apply_latency_ms",
              "ceph_osd_commit_latency_ms", "ceph_osd_numpg", "ceph_osd_stat_bytes",
              "ceph_osd_stat_bytes_used")
NODE_MOVING = ("node_disk_io_time_seconds_total", "node_disk_reads_completed_total",
               "node_disk_writes_completed_total", "node_disk_read_bytes_total",
               "node_disk_written_bytes_total", "node_disk_read_time_seconds_total",
               "node_disk_write_time_seconds_total", "node_disk_io_time_weighted_seconds_total")
HEALTH_CHECKS = (("OSD_DOWN", "HEALTH_WARN"), ("SLOW_OPS", "HEALTH_WARN"),
                 ("PG_DEGRADED", "HEALTH_WARN"), ("MON_DOWN", "HEALTH_WARN"),
                 ("OSD_NEARFULL", "HEALTH_WARN"), ("POOL_FULL", "HEALTH_ERR"))


def _name(line: str) -> str:
    return line.split("{", 1)[0].split(" ", 1)[0]


class Pages:
    """Every target's page, the captured lines repeated and the read figures moving."""

    def __init__(self, osds: int) -> None:
        self.osds = osds
        self.hosts = sorted({host_of(i) for i in range(osds)})
        self.t0 = time.time()
        mgr = (DATA / "mgr-pacific-16.2.15.prom").read_text().splitlines()
        per_osd = [ln for ln in mgr if '"osd.0"' in ln and _name(ln) not in MGR_MOVING]
        rest = [ln for ln in mgr if '"osd.' not in ln and "ceph_health_detail" not in ln
                and _name(ln) not in POOL_MOVING]
        down = sum(1 for i in range(osds) if not is_up(i))
        health = [f'ceph_health_detail{{name="{n}",severity="{s}"}} '
                  f"{1.0 if n == 'OSD_DOWN' and down else 0.0}" for n, s in HEALTH_CHECKS]
        out = [ln.replace('hostname="vm"', f'hostname="{self.hosts[0]}"') for ln in rest]
        out += ["# HELP ceph_health_detail healthcheck status by type (0=inactive, 1=active)",
                "# TYPE ceph_health_detail gauge", *health]
        for i in range(osds):
            h, d = host_of(i), dev_of(i)
            out += [ln.replace('"osd.0"', f'"osd.{i}"').replace('"vm"', f'"{h}"')
                    .replace("loop0", d) for ln in per_osd]
        self.mgr_static = ("\n".join(out) + "\n").encode()
        node = (DATA / "node-exporter-1.5.0.prom").read_text().splitlines()
        self.node_static = [ln for ln in node if not ln.startswith("node_disk_")
                            or ('device="vda"' in ln and _name(ln) not in NODE_MOVING)]
        exp = (DATA / "stormdeck-exporter.prom").read_text().splitlines()
        self.exp_osd = [ln for ln in exp if '"osd.0"' in ln
                        and not _name(ln).startswith("stormdeck_daemon_cpu_seconds")]
        self.exp_dev = [ln for ln in exp if 'device="loop0"' in ln]
        self.exp_rest = [ln for ln in exp if '"osd.' not in ln and 'device="loop' not in ln]
        self.by_host: dict[str, list[int]] = {}
        for i in range(osds):
            self.by_host.setdefault(host_of(i), []).append(i)
        self._static: dict[str, bytes] = {}

    def mgr(self) -> bytes:
        t = time.time() - self.t0 + 3600  # counters that have run for an hour
        lines = []
        for i in range(self.osds):
            p, o = planted(i), f'{{ceph_daemon="osd.{i}"}}'
            up = is_up(i)
            r, w = (p["read_iops"], p["write_iops"]) if up else (0.0, 0.0)
            lines.append(
                f"ceph_osd_up{o} {1.0 if up else 0.0}\nceph_osd_in{o} 1.0\n"
                f"ceph_osd_op_r{o} {r * t:.1f}\nceph_osd_op_w{o} {w * t:.1f}\n"
                f"ceph_osd_op_r_out_bytes{o} {r * 4096 * t:.1f}\n"
                f"ceph_osd_op_w_in_bytes{o} {w * 16384 * t:.1f}\n"
                f"ceph_osd_op_r_latency_sum{o} {r * p['read_lat'] * t:.4f}\n"
                f"ceph_osd_op_r_latency_count{o} {r * t:.1f}\n"
                f"ceph_osd_op_w_latency_sum{o} {w * p['write_lat'] * t:.4f}\n"
                f"ceph_osd_op_w_latency_count{o} {w * t:.1f}\n"
                f"ceph_osd_apply_latency_ms{o} {i % 9}.0\nceph_osd_commit_latency_ms{o} {i % 9}.0\n"
                f"ceph_osd_numpg{o} 100.0\nceph_osd_stat_bytes{o} 4000787030016.0\n"
                f"ceph_osd_stat_bytes_used{o} {1.2e12 + (i % 100) * 1e10:.1f}\n")
        # The client IO of the pools: pool 2 takes what the up OSDs serve.
        up = [planted(i) for i in range(self.osds) if is_up(i)]
        rd, wr = sum(p["read_iops"] for p in up), sum(p["write_iops"] for p in up)
        rdb, wrb = sum(p["read_bps"] for p in up), sum(p["write_bps"] for p in up)
        for pool, k in (("1", 0.0), ("2", 1.0)):
            o = f'{{pool_id="{pool}"}}'
            lines.append(f"ceph_pool_rd{o} {k * rd * t:.1f}\nceph_pool_wr{o} {k * wr * t:.1f}\n"
                         f"ceph_pool_rd_bytes{o} {k * rdb * t:.1f}\n"
                         f"ceph_pool_wr_bytes{o} {k * wrb * t:.1f}\n")
        return self.mgr_static + "".join(lines).encode()

    def node(self, host: str) -> bytes:
        key = "node/" + host
        if key not in self._static:
            self._static[key] = ("\n".join(
                ln.replace('nodename="vm"', f'nodename="{host}"') for ln in self.node_static)
                + "\n").encode()
        t = time.time() - self.t0 + 3600
        lines = []
        for i in self.by_host.get(host, ()):
            p, d = planted(i), f'{{device="{dev_of(i)}"}}'
            lines.append(
                f"node_disk_io_time_seconds_total{d} {0.35 * t:.3f}\n"
                f"node_disk_reads_completed_total{d} {p['read_iops'] * t:.0f}\n"
                f"node_disk_writes_completed_total{d} {p['write_iops'] * t:.0f}\n"
                f"node_disk_read_bytes_total{d} {p['read_bps'] * t:.0f}\n"
                f"node_disk_written_bytes_total{d} {p['write_bps'] * t:.0f}\n"
                f"node_disk_read_time_seconds_total{d} {p['read_iops'] * 0.0005 * t:.3f}\n"
                f"node_disk_write_time_seconds_total{d} {p['write_iops'] * 0.001 * t:.3f}\n"
                f"node_disk_io_time_weighted_seconds_total{d} {0.8 * t:.3f}\n")
        return self._static[key] + "".join(lines).encode()

    def exporter(self, host: str) -> bytes:
        key = "exporter/" + host
        ids = self.by_host.get(host, [])
        if key not in self._static:
            out = [ln.replace('"vm"', f'"{host}"') for ln in self.exp_rest]
            for i in ids:
                out += [ln.replace('"osd.0"', f'"osd.{i}"').replace('"vm"', f'"{host}"')
                        for ln in self.exp_osd]
                out += [ln.replace("loop0", dev_of(i)).replace('"vm"', f'"{host}"')
                        for ln in self.exp_dev]
            self._static[key] = ("\n".join(out) + "\n").encode()
        t = time.time() - self.t0 + 3600
        fsid = "2189bd98-851b-4125-8500-934ee8242548"
        lines = [f'stormdeck_daemon_cpu_seconds_total{{ceph_daemon="osd.{i}",ceph_fsid="{fsid}",'
                 f'chunkserver="",cluster="{fsid}",hostname="{host}"}} '
                 f"{planted(i)['cores'] * t:.3f}\n" for i in ids]
        return self._static[key] + "".join(lines).encode()


def serve_child(osds: int, port_file: str) -> None:
    pages = Pages(osds)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = self.path.strip("/").split("/")
            if parts == ["mgr"]:
                body = pages.mgr()
            elif len(parts) == 2 and parts[0] == "node":
                body = pages.node(parts[1])
            elif len(parts) == 2 and parts[0] == "exporter":
                body = pages.exporter(parts[1])
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 1024

    server = Server(("127.0.0.1", 0), Handler)
    Path(port_file).write_text(str(server.server_address[1]))
    server.serve_forever()


# ---- Prometheus ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prometheus_yml(target: str, hosts: list[str], interval: float, duplicate: bool,
                   rules: str | None = None) -> str:
    iv = f"{interval:g}s"
    timeout = f"{min(interval, 10):g}s"
    jobs = [("ceph", ["/mgr"], True), ("stormdeck", [f"/exporter/{h}" for h in hosts], False),
            ("node", [f"/node/{h}" for h in hosts], False)]
    if duplicate:  # the same series under a second job: Thanos without dedup, say
        jobs += [("ceph-again", ["/mgr"], True),
                 ("stormdeck-again", [f"/exporter/{h}" for h in hosts], False)]
    out = [f"global: {{scrape_interval: {iv}, scrape_timeout: {timeout}, "
           f"evaluation_interval: {iv}}}"]
    if rules:
        out.append(f"rule_files: [{json.dumps(rules)}]")
    out.append("scrape_configs:")
    for job, paths, honor in jobs:
        out.append(f"  - job_name: {job}")
        out.append(f"    honor_labels: {'true' if honor else 'false'}")
        out.append("    static_configs:")
        for p in paths:
            inst = p.rsplit("/", 1)[-1] if p != "/mgr" else "mgr"
            out.append(f'      - targets: ["{target}"]')
            out.append(f'        labels: {{__metrics_path__: "{p}", instance: "{inst}"}}')
    return "\n".join(out) + "\n"


def get_json(url: str, timeout: float = 30) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def instant(base: str, expr: str) -> list[Any]:
    q = urllib.parse.urlencode({"query": expr})
    return get_json(f"{base}/api/v1/query?{q}")["data"]["result"]


class Fleet:
    """The targets' server and Prometheus, in a temporary directory, until closed."""

    def __init__(self, osds: int, interval: float, duplicate: bool,
                 rules: bool = False, window: str | None = None) -> None:
        """`rules`: Prometheus evaluates stormdeck's recording rules (assets/), their
        rates over `window`, by default the raw queries' at this scrape interval."""
        import psutil

        from stormdeck.collectors.prometheus.queries import rate_window, recording_rules_yaml

        self.tmp = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
        port_file = self.tmp / "port"
        self.targets = subprocess.Popen([sys.executable, __file__, "--child", "serve",
                                         "--osds", str(osds), "--port-file", str(port_file)])
        deadline = time.monotonic() + 300
        while not port_file.exists() or not port_file.read_text():
            if time.monotonic() > deadline or self.targets.poll() is not None:
                raise RuntimeError("the targets' server did not start")
            time.sleep(0.1)
        target = f"127.0.0.1:{port_file.read_text()}"
        hosts = sorted({host_of(i) for i in range(osds)})
        rules_file = None
        if rules:
            rules_file = self.tmp / "stormdeck-recording.yml"
            rules_file.write_text(recording_rules_yaml(window or rate_window(interval)))
        (self.tmp / "prometheus.yml").write_text(prometheus_yml(
            target, hosts, interval, duplicate, str(rules_file) if rules_file else None))
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = open(self.tmp / "prometheus.log", "wb")  # noqa: SIM115
        self.prom = subprocess.Popen(
            ["prometheus", f"--config.file={self.tmp / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--storage.tsdb.retention.time=1h"], stdout=self.log, stderr=self.log)
        self.proc = psutil.Process(self.prom.pid)
        while True:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=2)
                break
            if time.monotonic() > deadline or self.prom.poll() is not None:
                raise RuntimeError(f"Prometheus did not start: see {self.tmp / 'prometheus.log'}")
            time.sleep(0.2)

    def scrapes(self) -> int:
        """Scrapes of the mgr page Prometheus holds (the fewest of its jobs)."""
        got = instant(self.url, 'count_over_time(up{instance="mgr"}[1h])')
        return int(min((float(s["value"][1]) for s in got), default=0))

    def cpu(self) -> float:
        c = self.proc.cpu_times()
        return c.user + c.system

    def idle_pct(self, seconds: float) -> float:
        """Prometheus' CPU over `seconds` of nobody reading, % of a core."""
        c0, t0 = self.cpu(), time.monotonic()
        time.sleep(seconds)
        return 100 * (self.cpu() - c0) / (time.monotonic() - t0)

    def close(self) -> None:
        for p in (self.prom, self.targets):
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=30)
            if p.poll() is None:
                p.kill()
                p.wait()
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


# ---- polls, measured in a child of their own -------------------------------------------------


def make_source(url: str, interval: float) -> Any:
    """The source as `stormdeck watch --prometheus` makes it: recording rules where found."""
    from stormdeck.collectors.prometheus.source import PrometheusSource

    return PrometheusSource(url, scrape_interval=interval)


class Counted:
    """Counts what a source's session reads: responses, bytes (decoded), series."""

    def __init__(self, src: Any) -> None:
        self.bytes = self.requests = self.series = 0
        session = src.client._session

        def hook(resp: Any, *args: Any, **kwargs: Any) -> None:
            self.requests += 1
            # As decoded: on the wire it is gzip'd (requests asks, Prometheus obliges).
            self.bytes += len(resp.content)
        session.hooks["response"].append(hook)
        # Samples, or columns (a value per daemon or disk): a series each.
        for method in ("query", "query_column"):
            real = getattr(src.client, method)

            def counted(*args: Any, real: Any = real, **kwargs: Any) -> Any:
                out = real(*args, **kwargs)
                self.series += len(out)
                return out
            setattr(src.client, method, counted)


def within(part: Any, tolerance: float = 0.02) -> float:
    """The share of up OSDs whose read and write IOPS are within `tolerance` of the truth."""
    good = n = 0
    for key, d in part.daemons.items():
        if not key.startswith("osd.") or not d.up:
            continue
        n += 1
        p = planted(int(key[4:]))
        if all(v is not None and abs(v - p[k]) <= tolerance * p[k]
               for v, k in ((d.read_iops, "read_iops"), (d.write_iops, "write_iops"))):
            good += 1
    return good / n if n else 0.0


def polls_child(url: str, interval: float, seconds: float) -> None:
    src = make_source(url, interval)
    counted = Counted(src)
    rows = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        started = time.monotonic()
        b0, s0, q0 = counted.bytes, counted.series, counted.requests
        c0, w0 = time.process_time(), time.perf_counter()
        part = src.poll()
        rows.append({"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0,
                     "bytes": counted.bytes - b0,
                     "series": counted.series - s0,
                     "requests": counted.requests - q0, "within": within(part),
                     "osds": sum(1 for k in part.daemons if k.startswith("osd.")),
                     "mode": src.mode})
        left = 1.0 - (time.monotonic() - started)
        if left > 0:
            time.sleep(left)
    src.close()
    print(json.dumps(rows))


def poll_figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def q(xs: list[float], p: float) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")
    reading = [r for r in rows if r["series"] > 20]  # a poll that read the fleet
    walls = [r["wall"] for r in rows]
    return {
        "polls": len(rows), "reading_polls": len(reading),
        "requests": sum(r["requests"] for r in rows),
        "wall_median_s": q(walls, 0.5), "wall_p90_s": q(walls, 0.9), "wall_max_s": max(walls),
        "read_wall_median_s": q([r["wall"] for r in reading], 0.5),
        "read_cpu_median_s": q([r["cpu"] for r in reading], 0.5),
        "cpu_per_minute_s": 60 * sum(r["cpu"] for r in rows) / max(1e-9, sum(
            max(1.0, r["wall"]) for r in rows)),
        "series_per_read": q([r["series"] for r in reading], 0.5),
        "mb_per_read": q([r["bytes"] for r in reading], 0.5) / 1e6,
        "mb_per_minute": 60 * sum(r["bytes"] for r in rows) / 1e6 / max(1e-9, sum(
            max(1.0, r["wall"]) for r in rows)),
        "rates_within_2pct_min": min((r["within"] for r in rows), default=0.0),
        "rates_within_2pct_median": q([r["within"] for r in rows], 0.5),
        "osds": max((r["osds"] for r in rows), default=0),
    }


# ---- the console, in a child on a pty --------------------------------------------------------


def console_child(url: str, interval: float, fill: int, fill_seconds: float,
                  stats: str) -> None:
    import dataclasses

    from scale_bench import Timed, engine_all_rules

    from stormdeck.collectors.hub import MergeMemo, merge
    from stormdeck.collectors.model import SourceHealth
    from stormdeck.tui.app import StormdeckApp
    from stormdeck.tui.feed import Feed

    src = make_source(url, interval)
    engine = engine_all_rules()
    timed = Timed(engine)
    feed = Feed([src], engine)
    # The History filled on a simulated clock: one real poll per scrape interval (the
    # source forced to read again, as a new scrape would make it), each held for an
    # interval's snapshots, until `fill_seconds` of real polling; then the polls made
    # are cycled. What changes between polls is what Prometheus' scrapes changed.
    memo = MergeMemo()
    history, session = feed.loop.history, feed.session
    wall0 = time.time() - fill
    parts: list[Any] = []
    began = time.monotonic()
    per = max(1, round(interval))
    for i in range(fill):
        if i % per == 0:
            if time.monotonic() - began < fill_seconds or not parts:
                forget = getattr(src, "forget_newest", None)
                if forget is not None:
                    forget()
                parts.append(src.poll())
                part = parts[-1]
            else:
                part = parts[(i // per) % len(parts)]
        t = wall0 + i
        snap = merge([dataclasses.replace(part, time=t)],
                     {"prometheus": SourceHealth("prometheus", True, t)}, now=t, memo=memo)
        history.append(snap)
        session.step(snap, history)
    del parts

    def write() -> None:
        import psutil

        tm = timed.times
        # Whole or not at all: the parent reads it while frames keep coming.
        tmp = Path(stats + ".tmp")
        tmp.write_text(json.dumps({
            "engine_ms": 1000 * sum(tm) / len(tm) if tm else None,
            "engine_ms_max": 1000 * max(tm) if tm else None,
            "ticks": len(tm), "missed": feed.loop.missed,
            "rss_mib": psutil.Process().memory_info().rss / (1 << 20)}))
        os.replace(tmp, stats)
    arrive = feed._arrive

    def counted(frame: Any) -> None:
        arrive(frame)
        write()
    feed._arrive = counted  # type: ignore[method-assign]

    class Bench(StormdeckApp):
        def on_mount(self) -> None:
            self.call_later(self.action_view, "daemons")

    app = Bench(feed, cluster_name="fleet")
    timed.on = True
    os.write(1, b"\x1b]2;FILLED\x07")
    app.run()


def console(url: str, interval: float, seconds: float, fill: int,
            fill_seconds: float, fleet: Fleet) -> dict[str, Any]:
    import psutil
    from scale_bench import on_pty

    with tempfile.TemporaryDirectory() as tmp:
        stats = str(Path(tmp) / "stats.json")
        argv = [sys.executable, __file__, "--child", "console", "--url", url,
                "--interval", str(interval), "--fill", str(fill),
                "--fill-seconds", str(fill_seconds), "--stats", stats]
        box: dict[str, float] = {}

        def prom_cpu() -> None:
            # Prometheus' CPU from the console's first paint on: wait for the stats file.
            while not Path(stats).exists():
                time.sleep(0.2)
            c0, t0 = fleet.cpu(), time.monotonic()
            first = json.loads(Path(stats).read_text()).get("rss_mib") or 0
            time.sleep(seconds)
            box["prom_pct"] = 100 * (fleet.cpu() - c0) / (time.monotonic() - t0)
            box["rss_start_mib"] = first
        watcher = threading.Thread(target=prom_cpu, daemon=True)
        watcher.start()
        r = on_pty(argv, seconds, 200, 50, b"FILLED", b"osd.")
        watcher.join(timeout=seconds + 30)
        r.update(json.loads(Path(stats).read_text()))
        r.update(box)
    del psutil
    return r


# ---- main ------------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--osds", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=15.0, help="scrape interval, seconds")
    ap.add_argument("--fill-scrapes", type=int, default=4,
                    help="scrapes Prometheus holds before anything is measured")
    ap.add_argument("--poll-seconds", type=float, default=30.0)
    ap.add_argument("--seconds", type=float, default=60.0, help="the console, measured")
    ap.add_argument("--fill", type=int, default=FILL, help="History filled first (snapshots)")
    ap.add_argument("--fill-seconds", type=float, default=180.0,
                    help="real polling spent on the fill at most")
    ap.add_argument("--only", choices=["polls", "console"], default=None)
    ap.add_argument("--duplicate", action="store_true",
                    help="scrape the mgr and exporter targets twice, under two jobs")
    ap.add_argument("--rules", action="store_true",
                    help="Prometheus evaluates stormdeck's recording rules, which the "
                         "source then reads")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="small and quick, for the tests")
    ap.add_argument("--child", choices=["serve", "polls", "console"])
    ap.add_argument("--port-file")
    ap.add_argument("--url")
    ap.add_argument("--stats")
    args = ap.parse_args()
    if args.child == "serve":
        serve_child(args.osds, args.port_file)
        return 0
    if args.child == "polls":
        polls_child(args.url, args.interval, args.poll_seconds)
        return 0
    if args.child == "console":
        console_child(args.url, args.interval, args.fill, args.fill_seconds, args.stats)
        return 0
    if args.smoke:
        args.osds, args.interval, args.fill_scrapes = 40, 1.0, 3
        args.poll_seconds, args.seconds, args.fill, args.fill_seconds = 2, 2, 20, 2
    if shutil.which("prometheus") is None:
        print("fleet_bench: needs `prometheus` on PATH (Debian: apt install prometheus)",
              file=sys.stderr)
        return 3
    out: dict[str, Any] = {"osds": args.osds, "hosts": len({host_of(i)
                                                             for i in range(args.osds)}),
                           "interval_s": args.interval, "duplicate": args.duplicate,
                           "rules": args.rules}

    def say(text: str) -> None:
        if not args.json:
            print(text, flush=True)
    say(f"fleet: {args.osds:,} OSDs on {out['hosts']} hosts, scraped every {args.interval:g} s"
        + (", every mgr and exporter series twice" if args.duplicate else "")
        + (", recording rules loaded" if args.rules else ""))
    # A SIGTERM (a timeout, a kill) still stops Prometheus and the targets.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    fleet = Fleet(args.osds, args.interval, args.duplicate, rules=args.rules)
    try:
        while fleet.scrapes() < args.fill_scrapes:
            time.sleep(min(2.0, args.interval / 2))
        # Prometheus' own CPU with nobody reading, over as long a window as the console
        # is measured for: at 10,000 OSDs its ingest and garbage collections make any
        # 15 s of it read anywhere from 20% to 47% of a core (measured), so a short idle
        # window made "what one console adds" swing by tens of points.
        idle_seconds = max(2.0, args.seconds)
        out["prometheus_idle_pct"] = fleet.idle_pct(idle_seconds)
        out["prometheus_rss_mib"] = fleet.proc.memory_info().rss / (1 << 20)
        say(f"  Prometheus idle (scraping only): {out['prometheus_idle_pct']:.1f}% of a core, "
            f"{out['prometheus_rss_mib']:.0f} MiB")
        if args.only in (None, "polls"):
            c0, t0 = fleet.cpu(), time.monotonic()
            res = subprocess.run([sys.executable, __file__, "--child", "polls", "--url",
                                  fleet.url, "--interval", str(args.interval),
                                  "--poll-seconds", str(args.poll_seconds)],
                                 capture_output=True, text=True, check=True)
            prom = 100 * (fleet.cpu() - c0) / (time.monotonic() - t0)
            rows = json.loads(res.stdout.strip().splitlines()[-1])
            p = poll_figures(rows)
            p["prometheus_pct"] = prom
            p["mode"] = rows[-1]["mode"] if rows else None
            out["polls"] = p
            say(f"  polls at 1 Hz for {args.poll_seconds:g} s ({p['mode']}): {p['polls']} polls, "
                f"{p['reading_polls']} read the fleet, {p['requests']} HTTP requests")
            say(f"    a read: {p['series_per_read']:,.0f} series, {p['mb_per_read']:.2f} MB "
                f"(JSON, gzip'd on the wire), "
                f"wall {p['read_wall_median_s']:.2f} s, CPU {p['read_cpu_median_s']:.2f} s "
                f"(median)")
            say(f"    every poll: wall median {p['wall_median_s']:.3f} / p90 "
                f"{p['wall_p90_s']:.3f} / max {p['wall_max_s']:.3f} s; "
                f"{p['mb_per_minute']:.1f} MB and {p['cpu_per_minute_s']:.1f} CPU-s a minute")
            say(f"    OSDs seen {p['osds']:,}; up OSDs with IOPS within 2% of the truth: "
                f"{100 * p['rates_within_2pct_min']:.1f}% worst poll, "
                f"{100 * p['rates_within_2pct_median']:.1f}% median")
            say(f"    Prometheus meanwhile: {prom:.1f}% of a core")
        if args.only in (None, "console"):
            r = console(fleet.url, args.interval, args.seconds, args.fill, args.fill_seconds,
                        fleet)
            out["console"] = r
            say(f"  console, History of {args.fill} filled, {args.seconds:g} s on the daemons "
                f"view: {r['cpu_pct']:.1f}% of a core, RSS {r.get('rss_start_mib', 0):.0f} -> "
                f"{r.get('rss_mib', 0):.0f} MiB (peak {r['peak_rss_mib']:.0f}), first paint "
                f"{r['first_paint_s']:.1f} s")
            em = r.get("engine_ms") or float("nan")
            emx = r.get("engine_ms_max") or float("nan")
            say(f"    engine {em:.1f} ms a tick (max {emx:.1f}), "
                f"{r['ticks']} ticks, {r['missed']} missed")
            # Idle again after the console, one scrape interval on (its last read
            # answered): the added CPU is against the mean of the two idle windows.
            time.sleep(min(args.interval, 15.0))
            after = fleet.idle_pct(idle_seconds)
            idle = (out["prometheus_idle_pct"] + after) / 2
            r["prom_idle_after_pct"] = after
            r["prom_added_pct"] = r.get("prom_pct", float("nan")) - idle
            say(f"    Prometheus meanwhile: {r.get('prom_pct', float('nan')):.1f}% of a core "
                f"(idle {out['prometheus_idle_pct']:.1f}% before, {after:.1f}% after, "
                f"{idle_seconds:g} s each): {r['prom_added_pct']:.1f} points added")
    finally:
        fleet.close()
    if args.json:
        print(json.dumps(out, default=lambda x: None if x != x else x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
