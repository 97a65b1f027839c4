"""`stormdeck exporter`: the per-host agent Prometheus scrapes (cores allowed, cache state)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from stormdeck.base.errors import UserError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "exporter", help="per-host agent for Prometheus",
        description="Serve, for Prometheus, what no other exporter gives: per OSD or "
                    "chunkserver its CPU seconds, cores allowed (affinity and cgroup quota), "
                    "threads and RSS; per device the kernel's and the device's write cache, "
                    "rotational, transport, model; the host's tuned profile. Run it on each "
                    "storage host (assets/stormdeck-exporter.service).")
    p.add_argument("--listen", default="127.0.0.1:9567", metavar="ADDR:PORT",
                   help="where to serve /metrics (default 127.0.0.1:9567)")
    p.add_argument("-c", "--conf", default=None,
                   help="only OSDs of the cluster of this ceph.conf (default: every OSD)")
    p.set_defaults(handler=cmd_exporter)


def parse_listen(text: str) -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"--listen {text!r}: give ADDRESS:PORT, e.g. 127.0.0.1:9567")
    return host.strip("[]") or "0.0.0.0", int(port)


def cmd_exporter(args: argparse.Namespace) -> int:
    from prometheus_client import start_http_server
    from prometheus_client.registry import CollectorRegistry

    from stormdeck.collectors.exporter import HostCollector

    addr, port = parse_listen(args.listen)
    if args.conf is not None:
        try:
            open(args.conf).close()
        except OSError as exc:
            raise UserError(f"cannot read {args.conf}: {exc.strerror}") from None
    registry = CollectorRegistry(auto_describe=True)
    registry.register(HostCollector(ceph_conf=args.conf))
    try:
        server, _ = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        raise UserError(f"cannot listen on {args.listen}: {exc.strerror}") from None
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    print(f"stormdeck exporter: serving http://{args.listen}/metrics", file=sys.stderr,
          flush=True)
    stop.wait()
    server.shutdown()
    return 0
