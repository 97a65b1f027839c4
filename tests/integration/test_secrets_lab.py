"""No secret on disk or screen, on the lab: a password in the config database reaches no
snapshot, recording or report; the state directory is its owner's alone; the exporter
serves only who knows its bcrypt password, over TLS, to a real Prometheus."""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LabCluster, ceph_json, eventually, free_ports, run_cli
from tests.integration.test_conventions_lab import make_pki

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]
SECRET = "hunter2-" + os.urandom(6).hex()
URL_SECRET = "urlpw-" + os.urandom(6).hex()


def env_for(home: Path) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "CEPH_CONF"},
            "XDG_STATE_HOME": str(home / "state"), "XDG_CONFIG_HOME": str(home / "config")}


@pytest.fixture
def secret_set(lab_cluster: LabCluster) -> Iterator[None]:
    """A keystone password and a keystone URL with a password in it, in the config database
    (as `ceph config set` puts them), removed afterwards."""
    cluster = lab_cluster.rados()
    opts = {"rgw_keystone_admin_password": SECRET,
            "rgw_keystone_url": f"https://admin:{URL_SECRET}@keystone.example:5000"}
    try:
        for name, value in opts.items():
            ceph_json(cluster, "config set", who="client.rgw", name=name, value=value)
        yield
    finally:
        for name in opts:
            ceph_json(cluster, "config rm", who="client.rgw", name=name)
        cluster.shutdown()


def leaks(text: str | bytes) -> list[str]:
    raw = text.encode() if isinstance(text, str) else text
    return [s for s in (SECRET, URL_SECRET) if s.encode() in raw]


def test_a_secret_in_the_config_database_reaches_no_output_and_no_file(
        lab_cluster: LabCluster, secret_set: None) -> None:
    from stormdeck.collectors.model import to_json_dict
    from stormdeck.collectors.recording import Recording

    home = Path(tempfile.mkdtemp(prefix="stormdeck-secrets-", dir="/var/tmp"))
    try:
        env = env_for(home)
        conf = str(lab_cluster.conf)
        snap = run_cli("snapshot", "-c", conf, "--json", env=env)
        assert snap.rc == 0, snap.err
        assert not leaks(snap.out + snap.err)
        # It was read, and is there redacted: the config log names the change.
        log = json.loads(snap.out)["cluster"]["config_log"]
        # `config log` names a change WHO/OPTION (client.rgw/rgw_keystone_admin_password).
        mine = [c for c in log if c["name"].endswith("rgw_keystone_admin_password")]
        assert mine and mine[-1]["new"] == "<redacted>", log
        urls = [c for c in log if c["name"].endswith("rgw_keystone_url")]
        assert urls and urls[-1]["new"] == "https://admin:***@keystone.example:5000"
        text = run_cli("snapshot", "-c", conf, env=env)
        assert text.rc == 0 and not leaks(text.out + text.err)

        out = home / "out"
        out.mkdir()
        tape = out / "session.sdrec"
        rec = run_cli("record", str(tape), "--for", "6", "--interval", "1", "-c", conf, env=env)
        assert rec.rc == 0, rec.err
        assert not leaks(rec.out + rec.err)
        outputs = [run_cli("report", str(tape), env=env),
                   run_cli("report", str(tape), "--json", env=env),
                   run_cli("report", str(tape), "-o", str(out / "report.md"), env=env),
                   run_cli("report", str(tape), "--json", "-o", str(out / "report.json"),
                           env=env)]
        for res in outputs:
            assert res.rc == 0, res.err
            assert not leaks(res.out + res.err)
        # The recording's frames are deflated: decode every one before looking.
        recording = Recording(tape)
        try:
            decoded = json.dumps([r.data for r in recording.records()])
            names = {c.name for s in recording.snapshots() if s.cluster
                     for c in s.cluster.config_log}
            assert "client.rgw/rgw_keystone_admin_password" in names  # recorded, redacted
            assert not leaks(json.dumps([to_json_dict(s) for s in recording.snapshots()]))
        finally:
            recording.close()
        assert not leaks(decoded)
        files = [p for p in home.rglob("*") if p.is_file()]
        assert tape in files and out / "report.md" in files
        for p in files:
            assert not leaks(p.read_bytes()), p
        for p in (tape, out / "report.md", out / "report.json"):
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_state_directory_and_its_files_are_the_owners_alone(
        lab_cluster: LabCluster) -> None:
    home = Path(tempfile.mkdtemp(prefix="stormdeck-modes-", dir="/var/tmp"))
    old = os.umask(0o022)  # an operator's usual: stormdeck must not rely on theirs
    try:
        env = env_for(home)
        conf = str(lab_cluster.conf)
        state = home / "state" / "stormdeck"
        state.mkdir(parents=True, mode=0o755)
        state.chmod(0o755)  # as an older stormdeck left it
        tape = state / "session.sdrec"
        assert run_cli("record", str(tape), "--for", "4", "-c", conf, env=env).rc == 0
        assert run_cli("report", str(tape), "-o", str(state / "report.md"), env=env).rc == 0
        assert run_cli("check", "-c", conf, env=env).rc in (0, 1, 2)
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        files = [p for p in state.rglob("*") if p.is_file()]
        assert tape in files and state / "report.md" in files
        for p in files:
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
        for d in (p for p in state.rglob("*") if p.is_dir()):
            assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    finally:
        os.umask(old)
        shutil.rmtree(home, ignore_errors=True)


# ---- the exporter behind --web.config.file ----------------------------------------------


def get(url: str, ca: Path, auth: tuple[str, str] | None = None) -> tuple[int, dict, bytes]:
    ctx = ssl.create_default_context(cafile=str(ca))
    headers = {}
    if auth:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(auth).encode()).decode()
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=ctx,
                                    timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_the_exporter_with_a_web_config_serves_only_its_users_over_tls(
        lab_cluster: LabCluster) -> None:
    import bcrypt

    directory = Path(tempfile.mkdtemp(prefix="stormdeck-web-", dir="/var/tmp"))
    procs: list[subprocess.Popen] = []
    try:
        pki = make_pki(directory)
        password = "scrape-" + os.urandom(4).hex()
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()
        (directory / "web.yml").write_text(
            "tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"
            f"basic_auth_users:\n  prometheus: '{hashed}'\n")
        exporter_port, prom_port = free_ports(2)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "stormdeck", "exporter", "--listen",
             f"127.0.0.1:{exporter_port}", "-c", str(lab_cluster.conf),
             "--web.config.file", str(directory / "web.yml")],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        url = f"https://127.0.0.1:{exporter_port}/metrics"

        def up() -> tuple[int, dict, bytes] | None:
            try:
                return get(url, pki.ca, ("prometheus", password))
            except (urllib.error.URLError, OSError):
                return None

        status, _, body = eventually(up, timeout=30)
        assert status == 200 and b"stormdeck_daemon_cores_allowed" in body
        for auth in (None, ("prometheus", "wrong"), ("someone", password)):
            status, headers, body = get(url, pki.ca, auth)
            assert status == 401, auth
            assert headers["WWW-Authenticate"].startswith("Basic realm=")
            assert b"stormdeck_" not in body
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(f"http://127.0.0.1:{exporter_port}/metrics", timeout=5)

        # A real Prometheus scrapes it with basic_auth over verified TLS; a job with the
        # wrong password is refused.
        prom = shutil.which("prometheus")
        if prom is None:
            pytest.skip("no prometheus binary for the scrape half")
        (directory / "pw").write_text(password + "\n")
        jobs = "".join(f"""  - job_name: {name}
    scheme: https
    tls_config: {{ca_file: {pki.ca}}}
    basic_auth: {{username: prometheus, password_file: {directory / pw_file}}}
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"]}}]
""" for name, pw_file in (("stormdeck", "pw"), ("wrong", "wrong")))
        (directory / "wrong").write_text("not-it\n")
        (directory / "prometheus.yml").write_text(
            f"global:\n  scrape_interval: 1s\nscrape_configs:\n{jobs}")
        procs.append(subprocess.Popen(
            [prom, f"--config.file={directory}/prometheus.yml",
             f"--storage.tsdb.path={directory}/data",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=(directory / "prometheus.log").open("w")))

        def scraped() -> dict[str, float] | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/query?"
                                            "query=up", timeout=5) as resp:
                    data = json.loads(resp.read())
            except (OSError, ValueError):
                return None
            ups = {r["metric"]["job"]: float(r["value"][1]) for r in data["data"]["result"]}
            return ups if len(ups) == 2 and ups["stormdeck"] == 1 else None

        ups = eventually(scraped, timeout=60, interval=1)
        assert ups == {"stormdeck": 1.0, "wrong": 0.0}, ups
        with urllib.request.urlopen(f"http://127.0.0.1:{prom_port}/api/v1/query?query="
                                    "stormdeck_build_info", timeout=5) as resp:
            assert json.loads(resp.read())["data"]["result"]
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        time.sleep(0.1)
        shutil.rmtree(directory, ignore_errors=True)
