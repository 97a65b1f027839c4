"""The built wheel on an admin node: a clean venv over Debian's python3-rados, run outside
the checkout, reading the session's lab through a minimal ceph.conf (docs/install.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import LabCluster

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
# The distribution's interpreter: python3-rados is built for it alone (as ./dev says).
SYSTEM_PY = "/usr/bin/python3"


def run(argv: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def minimal_conf(lab: LabCluster) -> str:
    """What cephadm writes to an admin host's /etc/ceph/ceph.conf: fsid and mon_host."""
    cluster = lab.rados()
    try:
        ret, out, err = cluster.mon_command(
            json.dumps({"prefix": "config generate-minimal-conf"}), b"", timeout=30)
    finally:
        cluster.shutdown()
    assert ret == 0, err
    return out.decode()


def test_the_wheel_runs_on_an_admin_node(lab_cluster: LabCluster, tmp_path: Path) -> None:
    # The wheel and the sdist as CI builds them; the wheel is built from the sdist, so a
    # file the sdist forgets fails here too.
    dist = tmp_path / "dist"
    built = run([sys.executable, "-m", "build", "--outdir", dist, ROOT], cwd=tmp_path)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("stormdeck-*.whl")
    (sdist,) = dist.glob("stormdeck-*.tar.gz")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    # The layers come in through stormdeck/'s symlinks: real files in the wheel, and the
    # package data the console and the rules read at run time.
    for name in ("stormdeck/cli.py", "stormdeck/base/errors.py", "stormdeck/tui/app.py",
                 "stormdeck/assets/rules.toml", "stormdeck/assets/demo.sdrec"):
        assert name in names, name
    assert not any(n.startswith(("tests/", "lab/", "collectors/")) for n in names)
    with tarfile.open(sdist) as tf:
        members = {m.name.split("/", 1)[-1]: m for m in tf.getmembers()}
    assert members["stormdeck/collectors"].isdir(), "the sdist holds a link, not the files"

    # A clean venv of the distribution's Python that sees its python3-rados and nothing
    # of the checkout; pip from the project's venv installs the wheel and its dependencies
    # (--no-compile: byte-compiling every dependency was half of pip's CPU, and Python
    # compiles what it imports anyway).
    venv = tmp_path / "venv"
    made = run([SYSTEM_PY, "-m", "venv", "--system-site-packages", "--without-pip", venv],
               cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    pip = run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install",
               "-q", "--disable-pip-version-check", "--no-compile", wheel], cwd=tmp_path)
    assert pip.returncode == 0, pip.stderr[-3000:]

    # The admin node: a conf as cephadm leaves it, found the way `ceph` finds it
    # ($CEPH_CONF stands in for /etc/ceph/ceph.conf, which this shared host must not get),
    # and the command run from a directory where the checkout is not importable.
    etc = tmp_path / "etc-ceph"
    etc.mkdir()
    conf = etc / "ceph.conf"
    conf.write_text(minimal_conf(lab_cluster))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CEPH_ARGS", "STORMDECK_CONFIG")}
    env.update(PATH=f"{venv / 'bin'}:/usr/sbin:/usr/bin:/sbin:/bin", HOME=str(tmp_path / "home"),
               XDG_CONFIG_HOME=str(tmp_path / "cfg"), XDG_STATE_HOME=str(tmp_path / "state"),
               CEPH_CONF=str(conf))
    where = run(["python", "-c", "import rados, stormdeck; print(stormdeck.__file__); "
                 "print(rados.__file__)"], cwd=elsewhere, env=env)
    assert where.returncode == 0, where.stderr
    package, binding = where.stdout.split()
    assert Path(package).is_relative_to(venv), package
    assert not Path(binding).is_relative_to(venv), binding  # the distribution's binding

    # `check` as a monitoring plugin would run it: no source option, the default conf.
    check = run(["stormdeck", "check", "--for", "2", "-f", "json"], cwd=elsewhere, env=env,
                timeout=120)
    assert check.returncode in (0, 1, 2), check.stderr
    report = json.loads(check.stdout)
    assert report["exit"] == check.returncode
    assert report["sources"] and all(s["ok"] for s in report["sources"].values()), report["sources"]
    assert report["findings"] and not report["rule_errors"]  # the rules and rules.toml ran

    snap = run(["stormdeck", "snapshot", "--json", "-c", conf], cwd=elsewhere, env=env,
               timeout=120)
    assert snap.returncode == 0, snap.stderr
    snapshot = json.loads(snap.stdout)
    fsid = lab_cluster.command("fsid")["fsid"]  # type: ignore[index]
    assert snapshot["cluster"]["fsid"] == fsid
    osds = [d for d in snapshot["daemons"].values() if d["kind"] == "osd"]
    assert len(osds) == 3 and all(d["up"] for d in osds), osds
