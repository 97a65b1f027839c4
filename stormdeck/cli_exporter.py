"""`stormdeck exporter`: the per-host agent Prometheus scrapes (cores allowed, cache state)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.sources import readable_file


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
    p.add_argument("-c", "--conf", metavar="FILE", default=None,
                   help="only OSDs of the cluster of this ceph.conf (default: every OSD)")
    tls = p.add_argument_group("TLS (prometheus-client's own https server)")
    tls.add_argument("--tls-cert", metavar="FILE", type=readable_file, default=None,
                     help="serve https with this certificate (PEM; the chain after it)")
    tls.add_argument("--tls-key", metavar="FILE", type=readable_file, default=None,
                     help="the certificate's private key (PEM)")
    tls.add_argument("--tls-client-ca", metavar="FILE", type=readable_file, default=None,
                     help="also require a client certificate signed by this CA (mutual TLS: "
                          "only your Prometheus may scrape)")
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
        from stormdeck.base.files import check_regular

        check_regular(args.conf)  # a FIFO would hang the open
    if bool(args.tls_cert) != bool(args.tls_key):
        raise UserError("--tls-cert and --tls-key go together: give both, or neither")
    if args.tls_client_ca and not args.tls_cert:
        raise UserError("--tls-client-ca needs --tls-cert and --tls-key")
    registry = CollectorRegistry(auto_describe=True)
    registry.register(HostCollector(ceph_conf=args.conf))
    import ssl

    try:
        server, _ = start_http_server(port, addr=addr, registry=registry,
                                      certfile=args.tls_cert, keyfile=args.tls_key,
                                      client_cafile=args.tls_client_ca,
                                      client_auth_required=bool(args.tls_client_ca))
    except ssl.SSLError as exc:
        raise UserError(f"cannot serve TLS with {args.tls_cert} and {args.tls_key}: "
                        f"{getattr(exc, 'reason', None) or exc}") from None  # not always set
    except OSError as exc:
        raise UserError(f"cannot listen on {args.listen}: {exc.strerror}") from None
    scheme = "https" if args.tls_cert else "http"
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    print(f"stormdeck exporter: serving {scheme}://{args.listen}/metrics", file=sys.stderr,
          flush=True)
    stop.wait()
    server.shutdown()
    return 0
