"""`stormdeck exporter`: the per-host agent Prometheus scrapes (cores allowed, cache state)."""

from __future__ import annotations

import argparse
import ipaddress
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any

from prometheus_client import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

from stormdeck.base.errors import UserError
from stormdeck.base.files import check_regular
from stormdeck.sources import readable_file

if TYPE_CHECKING:
    from stormdeck.webconfig import WebConfig


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
    p.add_argument("--web.config.file", dest="web_config_file", metavar="FILE",
                   default=None,
                   help="TLS and basic auth in exporter-toolkit's format, as node_exporter "
                        "reads it: tls_server_config (cert_file, key_file, client_auth_type, "
                        "client_ca_file, min_version, max_version), basic_auth_users "
                        "(user: bcrypt hash), http_server_config.headers")
    tls = p.add_argument_group("TLS on the command line (or in --web.config.file)")
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


def web_config(args: argparse.Namespace) -> WebConfig:
    """The one WebConfig the server uses: from --web.config.file, or the --tls-* options."""
    from stormdeck.webconfig import WebConfig, load_web_config

    given = [o for o, v in (("--tls-cert", args.tls_cert), ("--tls-key", args.tls_key),
                            ("--tls-client-ca", args.tls_client_ca)) if v]
    if args.web_config_file is not None:
        if given:
            raise UserError(f"{given[0]} and --web.config.file both set TLS: give it in one "
                            "place (tls_server_config in the file)")
        return load_web_config(args.web_config_file)
    if bool(args.tls_cert) != bool(args.tls_key):
        raise UserError("--tls-cert and --tls-key go together: give both, or neither")
    if args.tls_client_ca and not args.tls_cert:
        raise UserError("--tls-client-ca needs --tls-cert and --tls-key")
    if not args.tls_cert:
        return WebConfig()
    return WebConfig(cert_file=args.tls_cert, key_file=args.tls_key,
                     client_auth="RequireAndVerifyClientCert" if args.tls_client_ca
                     else "NoClientCert", client_ca_file=args.tls_client_ca)


def is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return addr == "localhost"


def cmd_exporter(args: argparse.Namespace) -> int:
    from stormdeck.collectors.exporter import HostCollector
    from stormdeck.webconfig import serve

    addr, port = parse_listen(args.listen)
    if args.conf is not None:
        check_regular(args.conf)  # a FIFO would hang the open
    config = web_config(args)
    registry = CollectorRegistry(auto_describe=True)
    registry.register(HostCollector(ceph_conf=args.conf))
    try:
        server = serve(make_wsgi_app(registry), addr, port, config,
                       warn=lambda text: print(f"stormdeck exporter: {text}", file=sys.stderr,
                                               flush=True))
    except OSError as exc:
        raise UserError(f"cannot listen on {args.listen}: {exc.strerror}") from None
    scheme = "https" if config.tls else "http"
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    auth = f", basic auth for {len(config.users)} user(s)" if config.users else ""
    print(f"stormdeck exporter: serving {scheme}://{args.listen}/metrics{auth}",
          file=sys.stderr, flush=True)
    if not is_loopback(addr) and not (config.tls and config.users) \
            and config.client_auth == "NoClientCert":
        print("stormdeck exporter: note: anyone who reaches this address may scrape it; "
              "--web.config.file can require TLS and a password", file=sys.stderr, flush=True)
    stop.wait()
    server.shutdown()
    return 0
