"""Safety and the ceph CLI's conventions on the lab: a real Prometheus over verified TLS with
basic auth (and a bearer-token proxy) holding two clusters' series, CEPH_ARGS, the
console's executor with its sources' identity, and the exporter unprivileged over TLS."""

from __future__ import annotations

import base64
import datetime
import http.server
import ipaddress
import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import LabCluster, ceph_json, eventually, free_ports, run_cli

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]
PASSWORD = "s3cret-horse"


@dataclass
class Pki:
    dir: Path
    ca: Path
    cert: Path
    key: Path


def make_pki(directory: Path) -> Pki:
    """A private CA and a server certificate for 127.0.0.1 signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "stormdeck test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    paths = Pki(directory, directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    paths.ca.write_bytes(ca.public_bytes(pem))
    paths.cert.write_bytes(cert.public_bytes(pem))
    paths.key.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    for p in (directory, *[paths.ca, paths.cert, paths.key]):
        p.chmod(0o755 if p.is_dir() else 0o644)  # the unprivileged exporter reads them
    return paths


@dataclass
class SecurePrometheus:
    url: str
    pki: Pki
    password_file: Path

    def get(self, path: str) -> bytes:
        ctx = ssl.create_default_context(cafile=str(self.pki.ca))
        req = urllib.request.Request(self.url + path, headers={"Authorization": "Basic " +
                                     base64.b64encode(f"stormdeck:{PASSWORD}".encode()).decode()})
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return resp.read()


@pytest.fixture(scope="module")
def secure_prometheus(lab_cluster: LabCluster) -> Iterator[SecurePrometheus]:
    """Debian's Prometheus with tls_server_config and basic_auth_users, scraping the lab's
    mgr twice, as two clusters (cluster="prod" and cluster="test") as ceph-mixin labels them."""
    import crypt  # deprecated, still in 3.11: bcrypt through the system's libxcrypt

    directory = Path(tempfile.mkdtemp(prefix="stormdeck-tls-", dir="/var/tmp"))
    try:
        pki = make_pki(directory)
        (port,) = free_ports(1)
        hashed = crypt.crypt(PASSWORD, crypt.mksalt(crypt.METHOD_BLOWFISH))
        (directory / "web.yml").write_text(
            f"tls_server_config:\n  cert_file: {pki.cert}\n  key_file: {pki.key}\n"
            f"basic_auth_users:\n  stormdeck: '{hashed}'\n")
        target = f"127.0.0.1:{lab_cluster.mgr_port}"
        jobs = "".join(f"""  - job_name: {name}
    static_configs:
      - targets: ["{target}"]
        labels: {{cluster: {name}}}
""" for name in ("prod", "test"))
        (directory / "prometheus.yml").write_text(
            f"global:\n  scrape_interval: 2s\nscrape_configs:\n{jobs}")
        password_file = directory / "password"
        password_file.write_text(PASSWORD + "\n")
        proc = subprocess.Popen(
            [shutil.which("prometheus") or "prometheus",
             f"--config.file={directory}/prometheus.yml", f"--web.config.file={directory}/web.yml",
             f"--storage.tsdb.path={directory}/data", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=(directory / "prometheus.log").open("w"))
        try:
            prom = SecurePrometheus(f"https://127.0.0.1:{port}", pki, password_file)

            def both_scraped() -> bool:
                try:
                    data = json.loads(prom.get("/api/v1/query?query=count(ceph_osd_up)"
                                               "%20by%20(cluster)"))
                except (OSError, ValueError):
                    return False
                return len(data["data"]["result"]) == 2

            eventually(both_scraped, timeout=60, interval=1)
            yield prom
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def no_ceph_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CEPH_CONF", "CEPH_ARGS", "STORMDECK_CONFIG")}
    env.update(XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_STATE_HOME=str(tmp_path / "state"))
    env.update(extra)
    return env


def config(tmp_path: Path, **keys: object) -> Path:
    path = tmp_path / "config.toml"
    lines = ["[clusters.prod]", "host = false"]
    lines += [f"{k} = {json.dumps(v)}" for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def snapshot(tmp_path: Path, *args: str, **env: str):
    return run_cli("snapshot", "-f", "json", "--timeout", "5", *args,
                   env=no_ceph_env(tmp_path, **env), timeout=120)


def test_https_is_verified_by_default(secure_prometheus: SecurePrometheus,
                                      tmp_path: Path) -> None:
    res = snapshot(tmp_path, "--no-host", "--prometheus", secure_prometheus.url)
    assert res.rc == 3
    assert "its certificate could not be verified" in res.err and "--prometheus-ca" in res.err


def test_ca_basic_auth_and_matcher_from_the_config_file(secure_prometheus: SecurePrometheus,
                                                        tmp_path: Path) -> None:
    prom = secure_prometheus
    good = config(tmp_path, prometheus=prom.url, prometheus_ca=str(prom.pki.ca),
                  prometheus_user="stormdeck", prometheus_password_file=str(prom.password_file),
                  prometheus_match='cluster="prod"')
    res = snapshot(tmp_path, "--config", str(good))
    assert res.rc == 0, res.err
    snap = json.loads(res.out)
    assert snap["sources"]["prometheus"]["ok"] is True
    assert sorted(snap["daemons"]) == ["osd.0", "osd.1", "osd.2"]
    assert snap["cluster"]["health"] in ("HEALTH_OK", "HEALTH_WARN")
    # The same, unverified by explicit choice.
    insecure = tmp_path / "insecure"
    insecure.mkdir()
    res = snapshot(insecure, "--config", str(config(
        insecure, prometheus=prom.url, prometheus_insecure=True, prometheus_user="stormdeck",
        prometheus_password_file=str(prom.password_file))))
    assert res.rc == 0, res.err
    # A wrong password: one sentence, could not run.
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "pw").write_text("wrong\n")
    res = snapshot(bad, "--config", str(config(
        bad, prometheus=prom.url, prometheus_ca=str(prom.pki.ca), prometheus_user="stormdeck",
        prometheus_password_file=str(bad / "pw"))))
    assert res.rc == 3 and "refused our credentials (HTTP Status Code 401)" in res.err


def test_the_matcher_narrows_every_query_to_one_cluster(
        secure_prometheus: SecurePrometheus) -> None:
    from stormdeck.collectors.prometheus.decode import _value
    from stormdeck.collectors.prometheus.queries import ALL_QUERIES
    from stormdeck.collectors.prometheus.source import PrometheusSource

    prom = secure_prometheus
    kw = {"ca": str(prom.pki.ca), "user": "stormdeck",
          "password_file": str(prom.password_file), "curve": True}
    narrowed = PrometheusSource(prom.url, match='cluster="prod"', **kw)
    mixed = PrometheusSource(prom.url, **kw)
    try:
        answered = 0
        for name in ALL_QUERIES:
            # The expression each read sends, its samples whole (the source reads the
            # per-daemon and per-disk ones as columns, without their labels).
            series = narrowed.client.query(narrowed._expr(name)[0], name)
            answered += bool(series)  # Prometheus parsed it, or the query raised
            for s in series:
                assert s["metric"].get("cluster", "prod") == "prod", (name, s)
        assert answered >= 8, "the lab's mgr series answered"
        # Every query keeps one series per daemon (max by the labels used), so the two
        # clusters' osd.N fold into one: the unnarrowed source says so and names the fix.
        assert len(mixed.query("up")) == len(narrowed.query("up")) == 3
        assert {_value(s) for s in mixed.query("duplicates")} == {2.0}
        assert not narrowed.query("duplicates")
        said = " ".join(mixed.poll().errors)
        assert "2 copies of ceph_osd_up" in said and "--prometheus-match" in said, said
        assert narrowed.poll().cluster.health is not None
    finally:
        narrowed.close()
        mixed.close()


class _BearerProxy(http.server.BaseHTTPRequestHandler):
    """An auth proxy in front of Prometheus, as sites put one: a bearer token, or 401."""

    token = ""
    upstream: SecurePrometheus

    def do_GET(self) -> None:
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_response(401)
            self.end_headers()
            self.wfile.write(b"Unauthorized\n")
            return
        body = self.upstream.get(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_bearer_token_from_a_file(secure_prometheus: SecurePrometheus,
                                    tmp_path: Path) -> None:
    handler = type("Proxy", (_BearerProxy,), {"token": "t0ken-abc",
                                               "upstream": secure_prometheus})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        (tmp_path / "token").write_text("t0ken-abc\n")
        res = snapshot(tmp_path, "--config", str(config(
            tmp_path, prometheus=url, prometheus_token_file=str(tmp_path / "token"),
            prometheus_match='cluster="test"')))
        assert res.rc == 0, res.err
        assert sorted(json.loads(res.out)["daemons"]) == ["osd.0", "osd.1", "osd.2"]
        (tmp_path / "token").write_text("stale\n")
        res = snapshot(tmp_path, "--config", str(tmp_path / "config.toml"))
        assert res.rc == 3 and "refused our credentials" in res.err
    finally:
        server.shutdown()


# ---- the ceph CLI's client options on the lab ------------------------------------------


def test_ceph_args_names_the_cluster_as_for_ceph(lab_cluster: LabCluster,
                                                 tmp_path: Path) -> None:
    env = {"CEPH_ARGS": f"-c {lab_cluster.conf} --id admin"}
    fsid = re.search(r"fsid = (\S+)", lab_cluster.conf.read_text()).group(1)
    ceph = subprocess.run(["ceph", "fsid"], capture_output=True, text=True,
                          env={**no_ceph_env(tmp_path), **env}, timeout=60)
    assert ceph.returncode == 0 and ceph.stdout.strip() == fsid, "ceph itself reads it"
    res = snapshot(tmp_path, "--no-host", **env)
    assert res.rc == 0, res.err
    assert json.loads(res.out)["cluster"]["fsid"] == fsid
    # librados reads the rest of CEPH_ARGS itself: a wrong mon address there wins
    # over the conf file's, as it does for `ceph`.
    res = snapshot(tmp_path, "--no-host", "--timeout", "3",
                   CEPH_ARGS=f"-c {lab_cluster.conf} --mon-host 127.0.0.1:9")
    assert res.rc == 3 and "could not read the cluster" in res.err


def test_validate_takes_the_client_options(lab_cluster: LabCluster, tmp_path: Path) -> None:
    skip = [a for s in ("hosts", "settings", "curve", "peering", "cpu") for a in ("--skip", s)]
    res = run_cli("validate", "--headless", "-f", "json", "--user", "admin", "--cluster",
                  "ceph", *skip, env=no_ceph_env(tmp_path, CEPH_ARGS=f"-c {lab_cluster.conf}"),
                  timeout=120)
    assert res.rc == 0, res.err
    report = json.loads(res.out)
    assert report and "\n" not in res.out.strip(), "-f json is one line"


def audit_entities(lab: LabCluster) -> set[str]:
    """Who sent the mons commands lately (even without cephx the mon logs the name)."""
    cluster = lab.rados()
    try:
        entries = ceph_json(cluster, "log last", num=200, level="debug", channel="audit")
    finally:
        cluster.shutdown()
    return {m.group(1) for e in entries or []
            for m in [re.search(r"entity='([^']+)'", e.get("message", ""))] if m}


def test_the_consoles_executor_has_the_sources_identity_and_closes(
        lab_cluster: LabCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stormdeck.advisors.findings import Change
    from stormdeck.advisors.plan import Plan
    from stormdeck.cli import build_parser
    from stormdeck.cli_watch import build_app

    for k, v in no_ceph_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    for k in ("CEPH_CONF", "CEPH_ARGS", "STORMDECK_CONFIG", "STORMDECK_READ_ONLY"):
        monkeypatch.delenv(k, raising=False)
    args = build_parser().parse_args(["watch", "-c", str(lab_cluster.conf), "--no-host",
                                      "-n", "client.stormdeck-test"])
    app = build_app(args)
    try:
        factory = app.tabs[0].executor_factory
        ex = factory()
        before = str(ex.ceph.config_get("osd.0", "osd_max_scrubs"))
        ex.close()
        change = Change("ceph_config", "osd.0", "osd_max_scrubs", before,
                        "2" if before != "2" else "3",
                        f"ceph config set osd.0 osd_max_scrubs {'2' if before != '2' else '3'}",
                        runtime=True)
        plan = Plan(id="conv1", created=time.time(), rule="test.rule", target="osd.0",
                    summary="s", source="test", fsid=None, changes=(change,))
        # As the console uses it: in a `with`, which closes the connection.
        with factory() as ex:
            (outcome,) = ex.apply(plan)
        assert outcome.outcome == "applied"
        assert not ex.ceph.connection.connected, "the connection is closed after the change"
        # The old executor connected as client.admin whatever the sources used.
        eventually(lambda: "client.stormdeck-test" in audit_entities(lab_cluster), timeout=20)
        undo = factory()
        from stormdeck.advisors.journal import Journal

        entry = Journal(Path(os.environ["XDG_STATE_HOME"]) / "stormdeck" /
                        "journal.jsonl").find(outcome.entry)
        with undo:
            undo.undo(entry)
        assert not undo.ceph.connection.connected
        check = factory()
        assert str(check.ceph.config_get("osd.0", "osd_max_scrubs")) == before
        check.close()
    finally:
        for tab in app.tabs:
            tab.feed.hub.stop(wait=0)


# ---- the exporter: TLS, and no privilege needed ----------------------------------------


def scrape(url: str, ca: Path | None = None) -> str:
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else None
    with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
        return resp.read().decode()


def series(text: str, name: str) -> set[str]:
    """The label sets of one metric, without ceph_fsid and cluster (the fsid again, for
    ceph-mixin's joins): the lab's conf, where the fsid is read, is root's only."""
    out = set()
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels = line[len(name):line.rindex("}") + 1]
            out.add(re.sub(r'(ceph_fsid|cluster)="[^"]*",?', "", labels))
    return out


def test_the_exporter_over_tls_as_an_unprivileged_user(lab_cluster: LabCluster,
                                                       tmp_path: Path) -> None:
    directory = Path(tempfile.mkdtemp(prefix="stormdeck-exp-", dir="/var/tmp"))
    procs = []
    try:
        pki = make_pki(directory)
        root_port, user_port = free_ports(2)
        for port, user in ((root_port, None), (user_port, "nobody")):
            argv = [sys.executable, "-m", "stormdeck", "exporter", "--listen",
                    f"127.0.0.1:{port}", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
            if user:
                argv = ["runuser", "-u", user, "--", *argv]
            procs.append(subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
        urls = [f"https://127.0.0.1:{p}/metrics" for p in (root_port, user_port)]
        texts = eventually(lambda: _both(urls, pki.ca), timeout=30)
        as_root, as_nobody = texts
        for name in ("stormdeck_daemon_cores_allowed", "stormdeck_daemon_threads",
                     "stormdeck_device_write_cache_on", "stormdeck_device_info"):
            assert series(as_root, name), name
            assert series(as_nobody, name) == series(as_root, name), name
        for osd in ("osd.0", "osd.1", "osd.2"):
            assert f'ceph_daemon="{osd}"' in as_nobody
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            scrape(f"http://127.0.0.1:{user_port}/metrics")  # https only
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            scrape(urls[1], ca=Path(ssl.get_default_verify_paths().cafile or "/dev/null"))
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)
        shutil.rmtree(directory, ignore_errors=True)


def _both(urls: list[str], ca: Path) -> list[str] | None:
    try:
        return [scrape(u, ca) for u in urls]
    except (urllib.error.URLError, OSError):
        return None
