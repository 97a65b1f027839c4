"""Talking to Curve: a kept-alive HTTP connection per brpc endpoint, tools run with a bound."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)

from stormdeck.collectors.curve.parse import CurveError, Value, parse_prometheus_text, parse_vars

# Endpoints kept in the pool manager at once: one pool per address, so a cluster's
# every MDS and chunkserver keeps its connection from poll to poll. Fewer would make
# the least recently used pool go first, which with a poll that walks every address
# in turn is every pool, every poll.
MAX_ENDPOINTS = 1 << 16


def _refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def why_failed(exc: BaseException, timeout: float) -> str:
    if _refused(exc):
        return "connection refused"
    if isinstance(exc, NewConnectionError):  # a subclass of ConnectTimeoutError
        return f"cannot connect: {str(exc).rpartition(': ')[2]}"
    if isinstance(exc, (TimeoutError, ReadTimeoutError, ConnectTimeoutError)):
        return f"no answer in {timeout:g} s"
    if isinstance(exc, CurveError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class Connection:
    """HTTP to Curve's brpc endpoints, each over its own kept-alive connection."""

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        # Keep-alive: brpc serves HTTP/1.1 and keeps a connection open between requests
        # (its own http channels reuse one per server: policy/http_rpc_protocol.cpp),
        # so each endpoint's connection is opened once, not once a request (a thousand
        # chunkservers polled each second were 1,100 new connections a second).
        # An endpoint's requests in one poll follow each other, so one connection each.
        # No retries: the next poll is the retry, and a retried timeout doubles the wait.
        self._http = urllib3.PoolManager(
            num_pools=MAX_ENDPOINTS, maxsize=1, block=False, retries=False,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            headers={"User-Agent": "stormdeck"})
        self._metrics_path: dict[str, str] = {}  # addr -> the Prometheus path that worked

    def close(self) -> None:
        self._http.clear()

    def get(self, addr: str, path: str) -> tuple[int, str]:
        """Status and body, over the endpoint's kept-alive connection; CurveError with
        why (`no answer in 2 s`, `connection refused`) when there is no answer."""
        host, _, port = addr.rpartition(":")
        # The endpoint's own pool, asked by path: a URL through the manager is parsed and
        # percent-checked byte by byte twice more, a third of a poll's CPU at 1,000.
        pool = self._http.connection_from_host(host, int(port), scheme="http")
        try:
            try:
                resp = pool.urlopen("GET", path)
            except ProtocolError as exc:
                if _refused(exc):
                    raise
                # A kept connection the server closed as we sent on it: once more, on a
                # new one; a second failure is the endpoint's, not the pool's.
                resp = pool.urlopen("GET", path)
        except HTTPError as exc:
            raise CurveError(why_failed(exc, self.timeout)) from None
        return resp.status, resp.data.decode("utf-8", errors="replace")

    def post_json(self, addr: str, path: str, doc: object) -> tuple[int, str]:
        """Status and body of a JSON POST: brpc's HTTP face of a protobuf service."""
        host, _, port = addr.rpartition(":")
        pool = self._http.connection_from_host(host.strip("[]"), int(port), scheme="http")
        try:
            resp = pool.urlopen("POST", path, body=json.dumps(doc).encode(),
                                headers={"Content-Type": "application/json",
                                         "User-Agent": "stormdeck"})
        except HTTPError as exc:
            raise CurveError(why_failed(exc, self.timeout)) from None
        return resp.status, resp.data.decode("utf-8", errors="replace")

    def fetch_vars(self, addr: str, patterns: Iterable[str]) -> dict[str, Value]:
        """/vars/<patterns>; where /vars is not served, the Prometheus endpoint instead."""
        status, body = self.get(addr, "/vars/" + ",".join(patterns))
        if status == 200:
            return parse_vars(body)
        for path in (self._metrics_path.get(addr), "/metrics", "/brpc_metrics"):
            if path is None:
                continue
            status, body = self.get(addr, path)
            if status == 200:
                self._metrics_path[addr] = path
                return parse_prometheus_text(body)
        raise CurveError(f"HTTP {status} from /vars, /metrics and /brpc_metrics")


def run_tool(argv: list[str], timeout: float) -> tuple[int, str, str]:
        """Exit status, stdout and stderr; CurveError only when nothing ran to the end."""
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError:
            raise CurveError(f"{argv[0]} is not installed") from None
        except PermissionError:
            raise CurveError(f"{argv[0]} cannot be run (permission denied)") from None
        except subprocess.TimeoutExpired:
            raise CurveError(f"{argv[0]} {argv[1]} did not finish in "
                             f"{timeout:g} s") from None
        return res.returncode, res.stdout, res.stderr
