"""The exporter's --web.config.file (exporter-toolkit's format: TLS, bcrypt basic auth).

https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md, as
node_exporter reads it: `tls_server_config` (cert_file, key_file, client_auth_type,
client_ca_file, min_version, max_version), `http_server_config` (headers; http2 is
accepted and ignored: this server speaks HTTP/1.1) and `basic_auth_users` (user: bcrypt
hash). What the toolkit knows but this server cannot honour (cipher_suites, inline cert,
RequestClientCert, ...) is refused by name rather than silently dropped: it is a
security setting the operator believes is in force.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client.exposition import ThreadingWSGIServer

from stormdeck.base.errors import UserError
from stormdeck.base.text import printable

TOP_KEYS = ("tls_server_config", "http_server_config", "basic_auth_users")
TLS_KEYS = ("cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version",
            "max_version")
# The toolkit's, which this server does not implement: named so the refusal says why.
TLS_UNSUPPORTED = ("cert", "key", "client_ca", "cipher_suites", "curve_preferences",
                   "prefer_server_cipher_suites", "client_allowed_sans")
HTTP_KEYS = ("http2", "headers")
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
# Go's crypto/tls asks for a client certificate without verifying it; Python's ssl cannot.
CLIENT_AUTH_UNSUPPORTED = ("RequestClientCert", "RequireAnyClientCert")
TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_BCRYPT = re.compile(r"^\$2[aby]?\$\d\d\$[./A-Za-z0-9]{53}$")
REALM = 'Basic realm="stormdeck exporter", charset="UTF-8"'


@dataclass(frozen=True)
class WebConfig:
    """What the exporter serves with: TLS (when cert_file is set) and who may scrape."""

    cert_file: str | None = None
    key_file: str | None = None
    client_auth: str = "NoClientCert"
    client_ca_file: str | None = None
    min_version: str = "TLS12"  # the toolkit's default
    max_version: str | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def tls(self) -> bool:
        return self.cert_file is not None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The server's TLS context, certificates loaded now: a bad one stops the start."""
        if not self.tls:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = TLS_VERSIONS[self.min_version]
        if self.max_version:
            ctx.maximum_version = TLS_VERSIONS[self.max_version]
        try:
            ctx.load_cert_chain(str(self.cert_file), str(self.key_file))
            if self.client_ca_file:
                ctx.load_verify_locations(cafile=self.client_ca_file)
        except ssl.SSLError as exc:
            raise UserError(f"cannot serve TLS with {self.cert_file} and {self.key_file}: "
                            f"{exc.reason or exc}") from None
        except OSError as exc:
            raise UserError(f"cannot read the TLS files ({exc.filename or self.cert_file}): "
                            f"{exc.strerror}") from None
        ctx.verify_mode = CLIENT_AUTH[self.client_auth]
        return ctx


def _where(path: Path, key: str) -> str:
    return f"{path}: {key}"


def _mapping(value: Any, path: Path, key: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{_where(path, key)} must be a mapping of keys to values")
    return value


def _known(table: Mapping[str, Any], known: Iterable[str], path: Path, where: str,
           unsupported: Iterable[str] = ()) -> None:
    known = tuple(known)
    for key in table:
        if key in unsupported:
            raise UserError(f"{_where(path, f'{where}.{key}')} is not supported by stormdeck's "
                            f"exporter (it supports: {', '.join(known)}); remove it")
        if key not in known:
            raise UserError(f"{path}: unknown key {printable(key, 60)!r} in {where} "
                            f"(known: {', '.join(known)})")


def _text(value: Any, path: Path, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise UserError(f"{_where(path, key)} must be a non-empty string")
    return value


def _file(value: Any, path: Path, key: str) -> str:
    """A file named in the config: relative to the config file's folder, as the toolkit has it."""
    name = Path(_text(value, path, key))
    full = name if name.is_absolute() else path.parent / name
    try:
        with open(full, "rb"):
            pass
    except OSError as exc:
        raise UserError(f"{_where(path, key)}: cannot read {full}: {exc.strerror}") from None
    return str(full)


def parse_web_config(text: str, path: Path) -> WebConfig:
    """`text`, the content of the web config file `path`; one sentence for each mistake."""
    import yaml

    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{path} is not valid YAML{where}") from None
    top = _mapping(doc, path, "the file")
    _known(top, TOP_KEYS, path, "the file")
    tls = _mapping(top.get("tls_server_config"), path, "tls_server_config")
    _known(tls, TLS_KEYS, path, "tls_server_config", TLS_UNSUPPORTED)
    http = _mapping(top.get("http_server_config"), path, "http_server_config")
    _known(http, HTTP_KEYS, path, "http_server_config")
    kw: dict[str, Any] = {}
    if tls:
        for key in ("cert_file", "key_file"):
            if key not in tls:
                raise UserError(f"{path}: tls_server_config needs both cert_file and key_file "
                                f"(missing {key})")
            kw[key] = _file(tls[key], path, f"tls_server_config.{key}")
        auth = tls.get("client_auth_type", "NoClientCert")
        if auth in CLIENT_AUTH_UNSUPPORTED:
            raise UserError(f"{path}: client_auth_type {auth} (a client certificate asked for "
                            "but not verified) is not supported: use RequireAndVerifyClientCert "
                            "or VerifyClientCertIfGiven with client_ca_file")
        if auth not in CLIENT_AUTH:
            raise UserError(f"{path}: client_auth_type must be one of "
                            f"{', '.join(CLIENT_AUTH)}, not {printable(auth, 60)!r}")
        kw["client_auth"] = auth
        if tls.get("client_ca_file") is not None:
            kw["client_ca_file"] = _file(tls["client_ca_file"], path,
                                         "tls_server_config.client_ca_file")
        if auth != "NoClientCert" and "client_ca_file" not in kw:
            raise UserError(f"{path}: client_auth_type {auth} needs client_ca_file, the CA "
                            "that signs the clients' certificates")
        for key in ("min_version", "max_version"):
            if key in tls:
                if tls[key] not in TLS_VERSIONS:
                    raise UserError(f"{path}: tls_server_config.{key} must be one of "
                                    f"{', '.join(TLS_VERSIONS)}")
                kw[key] = tls[key]
    elif top.get("tls_server_config") is not None:
        raise UserError(f"{path}: tls_server_config is empty: give cert_file and key_file, "
                        "or remove it")
    if "http2" in http and not isinstance(http["http2"], bool):
        raise UserError(f"{path}: http_server_config.http2 must be true or false")
    headers = _mapping(http.get("headers"), path, "http_server_config.headers")
    for name, value in headers.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9-]+", name) \
                or not isinstance(value, str) or re.search(r"[\r\n]", value):
            raise UserError(f"{path}: http_server_config.headers: {printable(name, 60)!r} is "
                            "not a header name with a one-line text value")
        if name.lower() in ("authorization", "www-authenticate", "content-type",
                            "content-length", "content-encoding", "server", "date"):
            raise UserError(f"{path}: http_server_config.headers may not set {name}")
    kw["headers"] = dict(headers)
    users = _mapping(top.get("basic_auth_users"), path, "basic_auth_users")
    hashes: dict[str, bytes] = {}
    for user, hashed in users.items():
        if not isinstance(user, str) or not user or ":" in user:
            raise UserError(f"{path}: basic_auth_users: {printable(user, 60)!r} is not a user "
                            "name (a non-empty string without ':')")
        if not isinstance(hashed, str) or not _BCRYPT.match(hashed):
            raise UserError(f"{path}: basic_auth_users.{printable(user, 60)} must be a bcrypt "
                            "hash ($2y$10$..., e.g. from htpasswd -nBC 10 USER)")
        hashes[user] = hashed.encode()
    kw["users"] = hashes
    return WebConfig(**kw)


def load_web_config(path: str) -> WebConfig:
    p = Path(path)
    try:
        text = p.read_text()
    except UnicodeDecodeError:
        raise UserError(f"{p} is not UTF-8 text") from None
    except OSError as exc:
        raise UserError(f"cannot read the web config {p}: {exc.strerror}") from None
    return parse_web_config(text, p)


# ---- basic auth around a WSGI app ----------------------------------------------------

App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Checker:
    """bcrypt checks of Basic credentials. A check costs ~50 ms at cost 10 and Prometheus
    sends the same pair every scrape, so a pair that passed is remembered (by its digest,
    never in the clear), as the toolkit does. An unknown user costs a check too, so the
    time taken does not tell which users exist."""

    def __init__(self, users: Mapping[str, bytes]) -> None:
        import bcrypt

        self._bcrypt = bcrypt
        self.users = dict(users)
        self._dummy = bcrypt.hashpw(b"stormdeck", bcrypt.gensalt(rounds=10))
        self._passed: set[bytes] = set()
        self._lock = threading.Lock()

    def ok(self, header: str | None) -> bool:
        if not header or header[:6].lower() != "basic ":
            return False
        try:
            user, colon, password = base64.b64decode(header[6:].strip(), validate=True) \
                .decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        if not colon:
            return False
        hashed = self.users.get(user)
        key = hashlib.sha256(b"\0".join((user.encode(), password.encode(),
                                         hashed or b""))).digest()
        with self._lock:
            if hashed is not None and key in self._passed:
                return True
        good = self._bcrypt.checkpw(password.encode(), hashed or self._dummy)
        if good and hashed is not None:
            with self._lock:
                if len(self._passed) > 1024:  # a bound, should many passwords rotate
                    self._passed.clear()
                self._passed.add(key)
            return True
        return False


def guarded(app: App, config: WebConfig) -> App:
    """`app` behind basic auth (when users are set) and with the configured headers."""
    checker = Checker(config.users) if config.users else None
    extra = list(config.headers.items())

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]
                ) -> Iterable[bytes]:
        if checker is not None and not checker.ok(environ.get("HTTP_AUTHORIZATION")):
            start_response("401 Unauthorized", [
                ("WWW-Authenticate", REALM), ("Content-Type", "text/plain; charset=utf-8"),
                *extra])
            return [b"Unauthorized\n"]

        def respond(status: str, headers: list[tuple[str, str]], exc_info: Any = None
                    ) -> Any:
            return start_response(status, headers + extra, exc_info)

        return app(environ, respond)

    return wrapped


# ---- the server ----------------------------------------------------------------------


class _Quiet(WSGIRequestHandler):
    # A scraper that connects and never speaks would hold its thread for good.
    timeout = 30

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Certificates:
    """The TLS context, made again when the certificate or key file changes: a renewed
    certificate is served from the next connection on, as exporter-toolkit does, without a
    restart. A renewal that does not load keeps the old context and says so once."""

    def __init__(self, config: WebConfig, warn: Callable[[str], None]) -> None:
        self.config = config
        self.warn = warn
        self._stamp = self._files_stamp()
        self.context = config.ssl_context()
        self._lock = threading.Lock()
        self._warned: tuple[Any, ...] | None = None

    def _files_stamp(self) -> tuple[Any, ...]:
        out = []
        for name in (self.config.cert_file, self.config.key_file, self.config.client_ca_file):
            try:
                st = Path(name).stat() if name else None
                out.append((st.st_mtime_ns, st.st_size, st.st_ino) if st else None)
            except OSError:
                out.append(None)
        return tuple(out)

    def current(self) -> ssl.SSLContext:
        with self._lock:
            stamp = self._files_stamp()
            if stamp != self._stamp:
                try:
                    self.context = self.config.ssl_context()
                    self._stamp = stamp
                except UserError as exc:
                    if self._warned != stamp:
                        self._warned = stamp
                        self.warn(f"{exc}; still serving the previous certificate")
            assert self.context is not None
            return self.context


def serve(app: App, addr: str, port: int, config: WebConfig,
          warn: Callable[[str], None] = lambda text: None) -> Any:
    """Start serving `app` on addr:port in a daemon thread; the server, for shutdown()."""
    certs = Certificates(config, warn) if config.tls else None

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET

        def get_request(self) -> tuple[Any, Any]:
            sock, client = super().get_request()
            if certs is None:
                return sock, client
            # The handshake happens in the request's own thread (at its first read), not
            # here in accept(): one slow client must not stall every other scrape.
            return certs.current().wrap_socket(sock, server_side=True,
                                               do_handshake_on_connect=False), client

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that failed its TLS handshake or hung up is not our fault

    httpd = make_server(addr, port, guarded(app, config), Server, handler_class=_Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True,
                     name="exporter-http").start()
    return httpd
