"""Secrets stop at the collector boundary; URLs' passwords are never shown; files stormdeck
writes are its owner's alone; the exporter's web config is read as exporter-toolkit's."""

from __future__ import annotations

import base64
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from stormdeck.base.errors import UserError
from stormdeck.base.secrets import (
    REDACTED,
    is_secret_option,
    redact_urls,
    redact_value,
    safe_url,
    write_private,
)
from stormdeck.collectors.ceph.parse import parse_config_dump, parse_config_log
from tests.conftest import free_ports, run_cli

# Pacific's options whose value is a secret (or, for the last two, a secret file's name).
PACIFIC_SECRETS = {
    "key", "rgw_crypt_default_encryption_key", "rgw_crypt_kmip_password",
    "rgw_crypt_s3_kms_encryption_keys", "rgw_keystone_admin_password",
    "rgw_keystone_admin_token", "rgw_keystone_barbican_password", "rgw_opa_token",
    "rgw_sts_client_secret", "rgw_sts_key", "rgw_ldap_secret", "rgw_crypt_kmip_client_key",
}
MGR_SECRETS = {"mgr/dashboard/GRAFANA_API_PASSWORD", "mgr/dashboard/RGW_API_SECRET_KEY",
               "mgr/dashboard/RGW_API_ACCESS_KEY", "mgr/cephadm/registry_password",
               "mgr/influx/password", "s3.sk", "s3.ak"}
# A word matches, the value is no secret: kept, or the operator loses what they need.
NOT_SECRETS = {
    "osd_pool_default_erasure_code_profile", "mon_keyvaluedb", "keyring", "keyfile",
    "bluestore_freelist_blocks_per_key", "rocksdb_bloom_bits_per_key",
    "rgw_keystone_admin_password_path", "rgw_keystone_admin_token_path",
    "rgw_keystone_token_cache_size", "rgw_crypt_vault_secret_engine",
    "rgw_crypt_vault_token_file", "rgw_crypt_kmip_s3_key_template",
    "rgw_crypt_kmip_kms_key_template", "rgw_swift_token_expiration", "osd_deep_scrub_keys",
    "mon_sync_max_payload_keys", "ms_pq_max_tokens_per_priority", "mgr/dashboard/jwt_token_ttl",
    "rgw_keystone_admin_user", "auth_cluster_required", "osd_max_scrubs",
    "rgw_sts_token_introspection_url", "mgr/dashboard/GRAFANA_API_USERNAME",
}


@pytest.mark.parametrize("name", sorted(PACIFIC_SECRETS | MGR_SECRETS))
def test_secret_options_are_known(name: str) -> None:
    assert is_secret_option(name)


@pytest.mark.parametrize("name", sorted(NOT_SECRETS))
def test_options_that_only_look_secret_are_kept(name: str) -> None:
    assert not is_secret_option(name)


@pytest.mark.skipif(shutil.which("ceph-conf") is None, reason="Ceph is not installed")
def test_of_every_option_the_installed_ceph_has_exactly_the_secrets_are_redacted() -> None:
    out = subprocess.run(["ceph-conf", "-c", "/dev/null", "--show-config"],
                         capture_output=True, text=True, timeout=60).stdout
    names = {line.split(" ", 1)[0] for line in out.splitlines() if " = " in line}
    assert len(names) > 1000
    found = {n for n in names if is_secret_option(n)}
    # Options a later release adds may join; none of Pacific's may go, no other may come.
    assert PACIFIC_SECRETS & names <= found
    assert found - PACIFIC_SECRETS == set(), found - PACIFIC_SECRETS


def test_config_dump_and_log_are_redacted_where_they_are_parsed() -> None:
    dump = parse_config_dump([
        {"section": "client.rgw", "name": "rgw_keystone_admin_password", "value": "hunter2"},
        {"section": "osd", "name": "osd_pool_default_erasure_code_profile",
         "value": "plugin=jerasure k=2 m=1"},
        {"section": "client.rgw", "name": "rgw_keystone_url",
         "value": "https://admin:pw-in-url@keystone:5000"},
        {"section": "osd", "mask": "host:a", "name": "osd_max_scrubs", "value": "2"}])
    assert dump["rgw_keystone_admin_password"] == {"client.rgw": REDACTED}
    assert dump["osd_pool_default_erasure_code_profile"]["osd"] == "plugin=jerasure k=2 m=1"
    assert dump["rgw_keystone_url"]["client.rgw"] == "https://admin:***@keystone:5000"
    assert dump["osd_max_scrubs"] == {"osd/host:a": "2"}
    log = parse_config_log([{"version": 7, "timestamp": "2026-11-22T05:36:52.009888+0000",
                             "changes": [{"name": "client.rgw/rgw_keystone_admin_password",
                                          "previous_value": "old-secret",
                                          "new_value": "hunter2"},
                                         {"name": "osd_max_scrubs", "new_value": "3"}]}])
    by_name = {c.name: c for c in log}
    # Ceph names a change WHO/OPTION.
    assert (by_name["client.rgw/rgw_keystone_admin_password"].old,
            by_name["client.rgw/rgw_keystone_admin_password"].new) == (REDACTED, REDACTED)
    assert by_name["osd_max_scrubs"].new == "3" and by_name["osd_max_scrubs"].old is None
    assert "hunter2" not in repr(log) + repr(dump)


def test_a_secret_removed_stays_told_apart_from_one_set() -> None:
    assert redact_value("rgw_keystone_admin_token", "") == ""
    assert redact_value("rgw_keystone_admin_token", None) is None
    assert redact_value("rgw_keystone_admin_token", "t0k") == REDACTED


def test_curve_conf_values_through_bvars_are_redacted() -> None:
    from stormdeck.collectors.curve.metrics import chunkserver_daemon

    p = "chunkserver_10_0_0_1_8200"
    d = chunkserver_daemon("10.0.0.1:8200", {
        f"{p}_config_s3_sk": {"conf_name": "s3.sk", "conf_value": "very-secret"},
        f"{p}_config_copyset_check": {"conf_name": "copyset.check", "conf_value": "true"}})
    assert d.config == {"s3.sk": REDACTED, "copyset.check": "true"}


@pytest.mark.parametrize(("url", "shown"), [
    ("http://user:pw@prom:9090", "http://user:***@prom:9090"),
    ("https://user:p%40ss@prom:9090/api?x=1", "https://user:***@prom:9090/api?x=1"),
    ("https://TOKEN@prom", "https://***@prom"),
    ("https://:pw@prom", "https://***@prom"),
    ("http://127.0.0.1:9090", "http://127.0.0.1:9090"),
    ("https://[::1]:9090/", "https://[::1]:9090/"),
])
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert safe_url(url) == shown
    assert redact_urls(f"Prometheus at {url} did not answer") == \
        f"Prometheus at {shown} did not answer"


def test_the_prometheus_source_never_shows_the_password_of_its_url() -> None:
    from stormdeck.collectors.prometheus.client import PrometheusError
    from stormdeck.collectors.prometheus.source import PrometheusSource

    src = PrometheusSource("http://scraper:pa55word@127.0.0.1:9/", timeout=1)
    try:
        with pytest.raises(PrometheusError) as err:
            src.query("health")
    finally:
        src.close()
    assert "pa55word" not in str(err.value)
    assert "http://scraper:***@127.0.0.1:9" in str(err.value)


def test_the_cli_shows_no_password_of_a_prometheus_url(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    res = run_cli("snapshot", "--no-host", "--prometheus", "http://scraper:pa55word@127.0.0.1:9",
                  "--timeout", "2", env=env, timeout=120)
    assert res.rc == 3
    assert "pa55word" not in res.out + res.err
    assert "scraper:***@" in res.err


def test_a_recording_that_holds_a_secret_gives_none_to_its_readers(tmp_path: Path) -> None:
    """A recording from before the collectors redacted (or from another writer)."""
    from stormdeck.collectors.model import (
        Cluster,
        ConfigChange,
        ConfigOption,
        Daemon,
        Snapshot,
    )
    from stormdeck.collectors.recording import Recorder, Recording

    cluster = Cluster(fsid="f", config_log=(
        ConfigChange(version=1, stamp=1.0, name="client.rgw/rgw_keystone_admin_password",
                     old=None, new="hunter2"),
        ConfigChange(version=2, stamp=2.0, name="osd/osd_max_scrubs", old="1", new="2")),
        config={"rgw_sts_key": ConfigOption(name="rgw_sts_key", exists=True,
                                            values={"client.rgw": "hunter2"})})
    daemons = {"cs": Daemon(id="cs", kind="chunkserver", config={"s3.sk": "hunter2",
                                                                  "s3.endpoint": "x"})}
    rec = Recorder(tmp_path / "old.sdrec")
    for t in (1.0, 2.0):
        rec.add_snapshot(Snapshot(time=t, cluster=cluster, daemons=daemons, disks={},
                                  sources={}))
    rec.close()
    recording = Recording(tmp_path / "old.sdrec")
    try:
        snaps = list(recording.snapshots())
    finally:
        recording.close()
    assert len(snaps) == 2
    for snap in snaps:
        assert "hunter2" not in repr(snap)
        assert snap.cluster.config_log[0].new == REDACTED
        assert snap.cluster.config_log[1].new == "2"
        assert snap.cluster.config["rgw_sts_key"].values == {"client.rgw": REDACTED}
        assert snap.daemons["cs"].config == {"s3.sk": REDACTED, "s3.endpoint": "x"}


# ---- file modes ------------------------------------------------------------------------


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_write_private_is_0600_whatever_the_umask_or_old_mode(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        path = tmp_path / "f"
        path.write_text("x")
        path.chmod(0o644)
        write_private(path, "secret data")
        assert mode(path) == 0o600 and path.read_text() == "secret data"
        write_private(tmp_path / "g", b"\x00" * 70000)
        assert mode(tmp_path / "g") == 0o600 and (tmp_path / "g").stat().st_size == 70000
    finally:
        os.umask(old)


def test_the_state_directory_is_its_owners_alone(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from stormdeck.advisors.settings import state_dir

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    (tmp_path / "stormdeck").mkdir(mode=0o755)
    (tmp_path / "stormdeck").chmod(0o755)  # as an older stormdeck left it
    d = state_dir()
    assert d == tmp_path / "stormdeck" and mode(d) == 0o700
    shutil.rmtree(d)
    assert mode(state_dir()) == 0o700


def test_recordings_and_reports_are_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    from stormdeck.advisors import report
    from stormdeck.collectors.recording import Recorder

    old = os.umask(0o022)
    try:
        rec = Recorder(tmp_path / "x.sdrec")
        rec.close()
        assert mode(tmp_path / "x.sdrec") == 0o600
        r = report.Report(source="test", start=0.0, end=1.0, snapshots=1, cluster=None,
                          health_start=None, health_end=None, timeline=[], peaks={},
                          not_clean_from=None, clean_again_at=None, events=[], flapping={},
                          findings=[])
        base = report.save(r, tmp_path / "reports")
        assert mode(tmp_path / "reports") == 0o700
        assert mode(base.with_suffix(".md")) == 0o600
        assert mode(base.with_suffix(".json")) == 0o600
    finally:
        os.umask(old)


def test_a_mute_in_the_state_directory_is_0600(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from stormdeck.advisors.findings import Finding, Severity
    from stormdeck.advisors.mutes import MuteStore
    from stormdeck.advisors.settings import state_dir

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    old = os.umask(0o022)
    try:
        store = MuteStore(state_dir() / "mutes.json")
        store.add(Finding(rule="ceph.osd.cpu_throttled", title="t", severity=Severity(1),
                          target="osd.0", summary="s", explanation="e", source="K1.3",
                          state="firing", first_seen=0.0, last_seen=0.0), 3600.0)
        assert mode(state_dir()) == 0o700
        assert mode(state_dir() / "mutes.json") == 0o600
    finally:
        os.umask(old)


# ---- the exporter's web config ------------------------------------------------------------


def bcrypt_hash(password: str) -> str:
    import bcrypt

    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()


@pytest.fixture
def pem(tmp_path: Path) -> tuple[Path, Path]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


def test_a_full_web_config_is_read(tmp_path: Path, pem: tuple[Path, Path]) -> None:
    from stormdeck.webconfig import parse_web_config

    h = bcrypt_hash("pw")
    y_hash = h.replace("$2b$", "$2y$", 1)  # htpasswd's spelling
    cfg = parse_web_config(f"""
tls_server_config:
  cert_file: cert.pem
  key_file: {pem[1]}
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: cert.pem
  min_version: TLS13
http_server_config:
  http2: false
  headers:
    X-Frame-Options: deny
basic_auth_users:
  prom: '{h}'
  other: '{y_hash}'
""", tmp_path / "web.yml")
    assert cfg.cert_file == str(tmp_path / "cert.pem")  # relative to the file, as the toolkit
    assert cfg.client_auth == "RequireAndVerifyClientCert" and cfg.min_version == "TLS13"
    assert set(cfg.users) == {"prom", "other"}
    assert cfg.headers == {"X-Frame-Options": "deny"}
    ctx = cfg.ssl_context()
    assert ctx is not None
    import ssl

    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert parse_web_config("", tmp_path / "empty.yml").tls is False


@pytest.mark.parametrize(("text", "says"), [
    ("tls_server_config: [\n", "not valid YAML at line"),
    ("- a\n- b\n", "must be a mapping"),
    ("basic_auth_user:\n  a: b\n", "unknown key 'basic_auth_user'"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  cipher_suites: [x]\n",
     "cipher_suites is not supported"),
    ("tls_server_config:\n  cert_file: cert.pem\n", "missing key_file"),
    ("tls_server_config:\n  cert_file: nope.pem\n  key_file: key.pem\n", "cannot read"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
     "  client_auth_type: RequireAndVerifyClientCert\n", "needs client_ca_file"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
     "  client_auth_type: RequireAnyClientCert\n", "not supported"),
    ("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n  min_version: SSL3\n",
     "must be one of TLS10"),
    ("basic_auth_users:\n  prom: plaintext\n", "must be a bcrypt hash"),
    ("basic_auth_users:\n  'a:b': '$2b$04$ZZTQZ8MdCisrOmDeeff5UuOMEZAwrkxT5NVQcTKveJH949WtuVJIW'\n",
     "is not a user name"),
    ("http_server_config:\n  headers:\n    Authorization: x\n", "may not set Authorization"),
])
def test_a_bad_web_config_is_one_sentence(tmp_path: Path, pem: tuple[Path, Path], text: str,
                                          says: str) -> None:
    from stormdeck.webconfig import parse_web_config

    with pytest.raises(UserError, match=says.replace("$", r"\$").replace("[", r"\[")) as err:
        parse_web_config(text, tmp_path / "web.yml")
    assert "\n" not in str(err.value)


def call(app, auth: str | None = None) -> tuple[str, dict[str, str], bytes]:
    got: dict = {}

    def start_response(status, headers, exc_info=None):
        got["status"], got["headers"] = status, dict(headers)

    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics"}
    if auth is not None:
        environ["HTTP_AUTHORIZATION"] = auth
    body = b"".join(app(environ, start_response))
    return got["status"], got["headers"], body


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_basic_auth_lets_in_the_right_password_only(tmp_path: Path) -> None:
    from stormdeck.webconfig import guarded, parse_web_config

    cfg = parse_web_config(f"basic_auth_users:\n  prom: '{bcrypt_hash('right')}'\n"
                           "http_server_config:\n  headers:\n    X-Test: yes-it-is\n",
                           tmp_path / "web.yml")

    def metrics(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"up 1\n"]

    app = guarded(metrics, cfg)
    for auth in (None, basic("prom", "wrong"), basic("nobody", "right"), "Basic !!!",
                 "Bearer right", "Basic " + base64.b64encode(b"prom").decode()):
        status, headers, body = call(app, auth)
        assert status.startswith("401"), auth
        assert headers["WWW-Authenticate"].startswith('Basic realm="stormdeck exporter"')
        assert b"up" not in body
    for _ in range(2):  # the second from the remembered check
        status, headers, body = call(app, basic("prom", "right"))
        assert status == "200 OK" and body == b"up 1\n"
        assert headers["X-Test"] == "yes-it-is"


def test_the_exporter_refuses_a_bad_web_config_in_one_sentence(tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    web.write_text("tls_server_config:\n  certfile: x\n")
    res = run_cli("exporter", "--listen", "127.0.0.1:1", "--web.config.file", str(web),
                  timeout=120)
    assert res.rc == 3, res.err
    assert "unknown key 'certfile' in tls_server_config" in res.err
    assert "Traceback" not in res.err and len(res.err.strip().splitlines()) == 1
    res = run_cli("exporter", "--web.config.file", str(tmp_path / "missing.yml"), timeout=120)
    assert res.rc == 3 and "cannot read the web config" in res.err


def test_the_shipped_unit_binds_to_localhost() -> None:
    unit = (Path(__file__).parents[2] / "assets" / "stormdeck-exporter.service").read_text()
    execs = [ln for ln in unit.splitlines() if ln.startswith("ExecStart=")]
    assert execs and all("--listen 127.0.0.1:" in ln for ln in execs)
    assert "0.0.0.0" not in "\n".join(ln for ln in unit.splitlines()
                                      if not ln.startswith("#"))


def make_cert(directory: Path, name: str) -> None:
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                    str(directory / f"{name}.key"), "-out", str(directory / f"{name}.crt"),
                    "-days", "1", "-subj", f"/CN={name}"], check=True, capture_output=True)


def served_cert(port: int) -> bytes:
    import socket
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw) as tls:
        tls.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        assert b"200 OK" in tls.recv(4096)
        return tls.getpeercert(binary_form=True)


def test_a_renewed_certificate_is_served_without_a_restart(tmp_path: Path) -> None:
    from stormdeck.webconfig import parse_web_config, serve

    for name in ("first", "second"):
        make_cert(tmp_path, name)
    shutil.copy(tmp_path / "first.crt", tmp_path / "cert.pem")
    shutil.copy(tmp_path / "first.key", tmp_path / "key.pem")
    cfg = parse_web_config("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n",
                           tmp_path / "web.yml")

    def metrics(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"up 1\n"]

    warnings: list[str] = []
    (port,) = free_ports(1)
    server = serve(metrics, "127.0.0.1", port, cfg, warn=warnings.append)
    try:
        first = served_cert(port)
        shutil.copy(tmp_path / "second.key", tmp_path / "key.pem")
        shutil.copy(tmp_path / "second.crt", tmp_path / "cert.pem")
        second = served_cert(port)
        assert second != first and not warnings
        (tmp_path / "cert.pem").write_text("not a certificate")  # a renewal gone wrong
        assert served_cert(port) == second
        assert len(warnings) == 1 and "still serving the previous certificate" in warnings[0]
    finally:
        server.shutdown()
        server.server_close()


def test_only_a_loopback_address_goes_without_the_exposure_note() -> None:
    from stormdeck.cli_exporter import is_loopback

    assert all(map(is_loopback, ("127.0.0.1", "::1", "localhost", "127.0.0.53")))
    assert not any(map(is_loopback, ("0.0.0.0", "::", "10.0.0.5", "storage-1")))


def test_write_private_leaves_a_device_mode_alone(tmp_path: Path) -> None:
    before = stat.S_IMODE(os.stat("/dev/null").st_mode)
    write_private(Path("/dev/null"), "x")
    assert stat.S_IMODE(os.stat("/dev/null").st_mode) == before == 0o666
