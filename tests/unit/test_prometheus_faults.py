"""The Prometheus source against servers that hang or talk garbage, on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stormdeck.collectors.host.source import HostSource
from stormdeck.collectors.hub import Hub
from stormdeck.collectors.prometheus.client import PrometheusError
from stormdeck.collectors.prometheus.source import PrometheusSource


@pytest.fixture
def silent_server() -> Iterator[str]:
    """Accepts connections and never answers: a hung Prometheus."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
                held.append(conn)
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    t.join()
    for c in held:
        c.close()
    sock.close()


def serve(body: bytes, status: int = 200) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_a_hung_prometheus_is_an_error_and_delays_no_other_source(silent_server: str) -> None:
    prom = PrometheusSource(silent_server, timeout=1)
    with pytest.raises(PrometheusError, match="did not answer"):
        prom.poll()
    hub = Hub([HostSource(), PrometheusSource(silent_server, timeout=1)], interval=0.2,
              timeout=5)
    hub.start()
    try:
        assert hub.wait_polls(2, timeout=10)
        snap = hub.snapshot()
        assert snap.sources["host"].ok and snap.disks
        assert not snap.sources["prometheus"].ok
        assert "did not answer" in (snap.sources["prometheus"].error or "")
    finally:
        hub.stop()


@pytest.mark.parametrize(("body", "status", "words"), [
    (b"{torn", 200, "malformed JSON"),
    (b'{"status":"success","data":{"resultType":"vector","result":"garbage"}}', 200,
     "no vector"),
    (b'{"status":"error","error":"parse error"}', 400, "refused"),
    (b'{"status":"success"}', 200, "malformed JSON"),
])
def test_garbage_from_prometheus_is_one_clear_error(body: bytes, status: int,
                                                    words: str) -> None:
    server, url = serve(body, status)
    try:
        with pytest.raises(PrometheusError, match=words):
            PrometheusSource(url, timeout=2).poll()
    finally:
        server.shutdown()


def test_unknown_series_and_odd_values_are_skipped() -> None:
    body = (b'{"status":"success","data":{"resultType":"vector","result":['
            b'{"metric":{"ceph_daemon":"osd.1"},"value":[1,"NaN"]},'
            b'{"metric":{"ceph_daemon":"osd.2"},"value":[1,"+Inf"]},'
            b'{"metric":{"ceph_daemon":"osd.3"},"value":[1,"1"]},'
            b'{"metric":{},"value":[1,"5"]},'
            b'{"metric":{"ceph_daemon":"mds.a"},"value":[1,"1"]},'
            b'{"value":"nonsense"}]}}')
    server, url = serve(body)
    try:
        part = PrometheusSource(url, timeout=2).poll()
    finally:
        server.shutdown()
    # Only OSDs; a sample with no daemon label names nobody.
    assert set(part.daemons) == {"osd.1", "osd.2", "osd.3"}
    assert part.daemons["osd.3"].up is True
    assert part.daemons["osd.1"].up is None, "NaN is unknown, not down"
    assert part.daemons["osd.2"].commit_latency is None, "Inf is unknown"
    # Every query got this body: the health series' first value is NaN, which is unknown.
    assert part.cluster is not None and part.cluster.health is None


def test_answers_are_decoded_from_bytes_and_shape_checked() -> None:
    """The client reads the body itself (orjson on the bytes, not requests' .json()):
    a sample without a label set names nobody, one with a torn value is dropped, and
    a 401 still names the credentials."""
    import orjson

    from stormdeck.collectors.prometheus import client as client_module
    from stormdeck.collectors.prometheus.client import PrometheusClient

    assert client_module._loads is orjson.loads
    body = (b'{"status":"success","data":{"resultType":"vector","result":['
            b'{"metric":{"ceph_daemon":"osd.1","h":"\xc3\xa9"},"value":[1,"2"]},'
            b'{"metric":"nonsense","value":[1,"3"]},'
            b'{"metric":{},"value":[1]},'
            b'7]}}')
    server, url = serve(body)
    try:
        got = PrometheusClient(url, timeout=2).query("up", "up", at=12.5)
    finally:
        server.shutdown()
    assert got == [{"metric": {"ceph_daemon": "osd.1", "h": "\u00e9"}, "value": [1, "2"]},
                   {"metric": {}, "value": [1, "3"]}]
    server, url = serve(b"no", 401)
    try:
        with pytest.raises(PrometheusError,
                           match=r"refused our credentials \(HTTP Status Code 401\)"):
            PrometheusClient(url, timeout=2).query("up", "up")
    finally:
        server.shutdown()
