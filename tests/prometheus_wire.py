"""A Prometheus stand-in and a proxy that adds a round trip, both on 127.0.0.1.

The proxy sits in front of any Prometheus (the stand-in, or a real one) and
delays each request by `delay` seconds and each new connection by as much
again (the TCP handshake a far server costs): what a console across a WAN
sees. It counts accepted connections, requests, the most requests in flight
at once and the credentials each request carried, so that tests and
bench/prometheus_bench.py can tell a concurrent, pooled poll from a serial one.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMPTY_VECTOR = json.dumps({"status": "success",
                           "data": {"resultType": "vector", "result": []}}).encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


class Answers:
    """A Prometheus that answers each expression with the rows the test gives it."""

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = {}
        self.refused: set[str] = set()  # answered 400 bad_data, as a query that will not parse
        self.asked: list[str] = []
        answers = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # kept alive, as Prometheus' are
            disable_nagle_algorithm = True  # no delayed ACK between headers and body

            def do_GET(self) -> None:
                q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                expr = q.get("query", [""])[0]
                answers.asked.append(expr)
                bad = expr in answers.refused
                body = json.dumps({"status": "error", "errorType": "bad_data",
                                   "error": "parse error"} if bad else
                                  {"status": "success", "data": {
                                      "resultType": "vector",
                                      "result": answers.rows.get(expr, [])}}).encode()
                self.send_response(400 if bad else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Answers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def row(value: float, **labels: str) -> dict[str, Any]:
    """One sample of an instant query's answer."""
    return {"metric": labels, "value": [1700000000.0, str(value)]}


class StandIn:
    """Answers every instant query with `body`: an empty vector, as a Prometheus with no
    series, unless a test sets other bytes (Prometheus' own, say)."""

    def __init__(self) -> None:
        self.body = EMPTY_VECTOR
        me = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: with Nagle on, a kept-alive
            # connection waits out the peer's delayed ACK (40 ms) between them.
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                body = me.body
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> StandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DelayProxy:
    """Forwards GETs to `upstream` after `delay` seconds; keeps client connections alive."""

    def __init__(self, upstream: str, delay: float) -> None:
        self.delay = delay
        self.connections = 0
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.authorizations: set[str | None] = set()
        self.tenants: set[str | None] = set()  # X-Scope-OrgID of each request
        self.queries: list[str] = []
        lock = threading.Lock()
        target = urllib.parse.urlsplit(upstream)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: with Nagle on, a kept-alive
            # connection waits out the peer's delayed ACK (40 ms) between them.
            disable_nagle_algorithm = True

            def setup(self) -> None:
                super().setup()
                with lock:
                    proxy.connections += 1
                time.sleep(proxy.delay)  # the handshake's round trip

            def do_GET(self) -> None:
                with lock:
                    proxy.requests += 1
                    proxy.in_flight += 1
                    proxy.max_in_flight = max(proxy.max_in_flight, proxy.in_flight)
                    proxy.authorizations.add(self.headers.get("Authorization"))
                    proxy.tenants.add(self.headers.get("X-Scope-OrgID"))
                    query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                    proxy.queries += query.get("query", [])
                try:
                    time.sleep(proxy.delay)
                    conn = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                    try:
                        conn.request("GET", self.path, headers={
                            k: v for k, v in self.headers.items()
                            if k.lower() in ("authorization", "accept")})
                        resp = conn.getresponse()
                        body = resp.read()
                        status = resp.status
                    finally:
                        conn.close()
                finally:
                    with lock:
                        proxy.in_flight -= 1
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def reset(self) -> None:
        self.connections = self.requests = self.max_in_flight = 0
        self.authorizations.clear()
        self.tenants.clear()
        self.queries.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
