"""Each release's lab and the shapes its daemons take: cephadm's OSDs (-n osd.N, conf through
CEPH_CONF inside the daemon's root, a CPU-limited cgroup) seen by the host source and the
exporter, stormdeck run inside the Tentacle root with that root's own Python and librados,
and a root that cannot be built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stormdeck.collectors.exporter import HostCollector
from stormdeck.collectors.host.processes import fsid_from_conf
from stormdeck.collectors.host.source import HostSource
from stormdeck.lab import roots
from tests.conftest import (
    LabCluster,
    eventually,
    free_ports,
    lab_home,
    lab_port_args,
    not_required,
    run_cli,
)

pytestmark = pytest.mark.integration
ROOT_VENV = "/opt/stormdeck-venv"
# What stormdeck needs inside a root for snapshot and check (Prometheus' client is lazy).
ROOT_DEPS = ("textual", "rich", "psutil", "prometheus-client", "pyudev", "numpy")


def lab_state(directory: Path) -> dict:
    return json.loads((directory / "lab.json").read_text())


def assert_cephadm_shaped(directory: Path, conf: Path, limit: float) -> None:
    """Every OSD started as cephadm does, and the host source and exporter see its cores."""
    state = lab_state(directory)
    fsid = fsid_from_conf(str(conf))
    osds = {n: p for n, p in state["procs"].items() if n.startswith("osd.")}
    assert osds
    for name, proc in osds.items():
        pid = proc["pid"]
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
        assert [a.decode() for a in argv[-3:]] == ["-n", name, "-f"], argv
        assert not any(a in (b"-c", b"--conf", b"-i", b"--id") for a in argv), argv
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        conf_in = next(e for e in environ if e.startswith(b"CEPH_CONF=")).decode()[10:]
        assert conf_in.endswith(f"/{name}/config")
        if state["root"]:  # inside the root only, as a container's conf is
            assert not Path(conf_in).exists()
            assert Path(f"/proc/{pid}/root{conf_in}").is_file()
        cgroup = Path(f"/proc/{pid}/cgroup").read_text()
        assert f"@{name}.service" in cgroup, cgroup

    src = HostSource(ceph_conf=str(conf))
    src.poll()
    assert run_cli("lab", "load", "--dir", str(directory), "--threads", "16").rc == 0
    try:
        time.sleep(6)
        daemons = src.poll().daemons
        scraped = list(HostCollector(ceph_conf=str(conf)).collect())
    finally:
        run_cli("lab", "load", "--dir", str(directory), "--stop")
    assert sorted(daemons) == sorted(osds), daemons
    for d in daemons.values():
        assert d.cores_allowed == pytest.approx(min(limit, os.cpu_count() or 1)), d
        assert d.cores_used is not None and 0.0 < d.cores_used <= limit + 0.15, d
    allowed = next(m for m in scraped if m.name == "stormdeck_daemon_cores_allowed")
    seen = {s.labels["ceph_daemon"]: (s.value, s.labels["ceph_fsid"]) for s in allowed.samples}
    assert seen == {n: (pytest.approx(limit), fsid) for n in osds}


def test_cephadm_shaped_osds_on_the_host_release(lab_dir: Path) -> None:
    """In every run: the shape on the host's own Ceph (memstore, so it is quick)."""
    mon, mgr = free_ports(2)
    res = run_cli("lab", "up", "--dir", str(lab_dir), "--memstore", "--osds", "2",
                  "--cephadm", "--osd-cpu-limit", "0.5", "--mon-port", str(mon),
                  "--mgr-port", str(mgr))
    try:
        assert res.rc == 0, res.err
        assert "as cephadm starts them (0.5 cores each)" in res.out
        state = lab_state(lab_dir)
        cgroups = state["cgroups"]
        assert cgroups and all(Path(c).is_dir() for c in cgroups)
        assert_cephadm_shaped(lab_dir, lab_dir / "ceph.conf", 0.5)
        # stop and start keep the shape: the restarted OSD is back in its cgroup.
        assert run_cli("lab", "stop", "osd.1", "--dir", str(lab_dir)).rc == 0
        assert run_cli("lab", "start", "osd.1", "--dir", str(lab_dir)).rc == 0
        pid = lab_state(lab_dir)["procs"]["osd.1"]["pid"]
        # Its starter joins the cgroup, then becomes ceph-osd (same pid): a moment.
        eventually(lambda: "@osd.1.service" in Path(f"/proc/{pid}/cgroup").read_text(), 10,
                   interval=0.1)
        eventually(lambda: Path(f"/proc/{pid}/comm").read_text().strip() == "ceph-osd", 10,
                   interval=0.1)
        assert "@osd.1.service" in Path(f"/proc/{pid}/cgroup").read_text()
    finally:
        down = run_cli("lab", "down", "--dir", str(lab_dir))
    assert down.rc == 0, down.err
    assert not any(Path(c).exists() for c in cgroups)


def test_cephadm_shaped_osds_of_a_release_root(release_cluster: LabCluster) -> None:
    if release_cluster.osd_cpu_limit is None:
        not_required(f"the {release_cluster.release} lab starts bare OSDs (Tentacle's is "
                    "cephadm-shaped)")
    assert_cephadm_shaped(release_cluster.dir, release_cluster.conf,
                          release_cluster.osd_cpu_limit)


def in_root(root: Path, argv: list[str], binds: list[Path], timeout: float = 600
            ) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8", "HOME": "/root"}
    return subprocess.run(roots.in_root(root, argv, binds=binds), capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_stormdeck_inside_the_tentacle_root(release_cluster: LabCluster, tmp_path: Path
                                            ) -> None:
    """The other client: stormdeck with Tentacle's own Python 3.14 and librados."""
    if release_cluster.release != "tentacle":
        not_required("stormdeck runs inside the Tentacle root only")
    root = roots.root_path("tentacle")
    wheels = tmp_path / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                            str(wheels), str(Path(__file__).parents[2])],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = wheels.glob("stormdeck-*.whl")
    binds = [wheels, release_cluster.dir]
    try:
        roots.copy_host_trust(root)  # pip inside reaches the index through the host's CAs
        if not (root / ROOT_VENV.lstrip("/") / "bin/python").exists():
            made = in_root(root, ["python3", "-m", "venv", "--system-site-packages",
                                  ROOT_VENV], binds)
            assert made.returncode == 0, made.stderr
        pip = [f"{ROOT_VENV}/bin/python", "-m", "pip", "install", "-q"]
        for argv in ([*pip, *ROOT_DEPS], [*pip, "--no-deps", "--force-reinstall", str(wheel)]):
            res = in_root(root, argv, binds)
            assert res.returncode == 0, res.stderr[-2000:]
        probe = in_root(root, [f"{ROOT_VENV}/bin/python", "-c",
                               "import sys, rados; print(sys.version_info[:2], rados.__file__)"],
                        binds)
        assert probe.stdout.startswith("(3, 14)") and "/usr/lib/python3/" in probe.stdout, probe
        conf = str(release_cluster.conf)
        snap = in_root(root, [f"{ROOT_VENV}/bin/stormdeck", "snapshot", "-c", conf, "--json"],
                       binds, timeout=120)
        assert snap.returncode == 0, snap.stderr
        doc = json.loads(snap.stdout)
        assert doc["cluster"]["release"] == "tentacle"
        assert doc["cluster"]["version"].startswith("20.2.")
        assert sorted(k for k in doc["daemons"] if k.startswith("osd.")) == \
            ["osd.0", "osd.1", "osd.2"]
        check = in_root(root, [f"{ROOT_VENV}/bin/stormdeck", "check", "-c", conf, "--json",
                               "--for", "1"], binds, timeout=180)
        assert check.returncode in (0, 1, 2), check.stderr
        assert json.loads(check.stdout)["sources"]["ceph"]["ok"]
    finally:
        # Not the lab's directory: the lab's daemons have it bound there too.
        roots.remove_mount_points(root, [wheels])


def test_a_root_that_cannot_be_built_says_why_in_one_sentence() -> None:
    (port,) = free_ports(1)  # nothing listens there: the archive is unreachable
    with lab_home() as home:
        env = {**os.environ, "STORMDECK_ROOTS_DIR": str(home / "roots"),
               "STORMDECK_DEBIAN_MIRROR": f"http://127.0.0.1:{port}/debian"}
        # Ports of its own: the default mgr port (9283) may be held by any lab's mgr, and
        # this test is about the root, not the ports.
        res = run_cli("lab", "up", "--release", "reef", "--dir", str(home / "lab"),
                      "--memstore", *lab_port_args(free_ports(5)), env=env, timeout=300)
        assert res.rc == 3, res  # could not run (the exit-code table)
        assert "debootstrap of Debian trixie failed" in res.err, res.err
        assert len(res.err.strip().splitlines()) <= 2, res.err  # progress line + the reason
        assert not (home / "roots" / "stormdeck-root-reef").exists()
        assert not (home / "lab").exists()
