"""The lab's release roots and what it reads from each release: mirrors from apt sources,
the build lock, the release named by `ceph versions`, a mgr whose modules cannot run, and
the environment mark of a cephadm-shaped daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from stormdeck.lab import procs, roots
from stormdeck.lab.state import failed_mgr_modules, parse_version
from tests.conftest import DATA

DEB822 = """Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"""
ONE_LINE = """# deb cdrom:[Debian GNU/Linux 12]/ bookworm main
deb http://security.debian.org/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://mirror.example.net/debian/ bookworm main
"""


def test_the_mirror_comes_from_the_hosts_apt_sources(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STORMDECK_DEBIAN_MIRROR", raising=False)
    assert list(roots.mirror_candidates(DEB822)) == ["http://deb.debian.org/debian"]
    assert list(roots.mirror_candidates(ONE_LINE)) == ["http://mirror.example.net/debian"]
    apt = tmp_path / "apt"
    (apt / "sources.list.d").mkdir(parents=True)
    (apt / "sources.list.d" / "old.list.disabled").write_text(ONE_LINE)  # not read by apt
    assert roots.host_mirror(apt) is None
    (apt / "sources.list.d" / "debian.sources").write_text(DEB822)
    assert roots.host_mirror(apt) == "http://deb.debian.org/debian"
    monkeypatch.setenv("STORMDECK_DEBIAN_MIRROR", "http://127.0.0.1:8000/debian/")
    assert roots.host_mirror(apt) == "http://127.0.0.1:8000/debian"


def test_commands_run_chrooted_in_a_private_mount_namespace() -> None:
    argv = roots.in_root(Path("/var/tmp/r"), ["/usr/bin/ceph", "-s"], binds=[Path("/d")])
    assert argv[1:5] == ["--mount", "--propagation", "private", "--"]
    assert argv[-6:] == ["sh", "/var/tmp/r", "/d", "--", "/usr/bin/ceph", "-s"]


def test_the_ceph_version_of_a_root_from_its_dpkg_status(tmp_path: Path) -> None:
    status = tmp_path / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text("Package: ceph-base\nStatus: install ok installed\nVersion: 1.0\n\n"
                      "Package: ceph-common\nStatus: install ok installed\n"
                      "Architecture: amd64\nVersion: 20.2.4+ds-2\n\n")
    assert roots.ceph_version_of(tmp_path) == "20.2.4+ds-2"
    assert roots.ceph_version_of(tmp_path / "none") is None


def test_an_unknown_release_is_one_sentence() -> None:
    with pytest.raises(roots.RootError, match="no root recipe for release 'squid'"):
        roots.ensure_root("squid", print)


def test_a_second_builder_waits_for_the_first_and_reuses_its_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STORMDECK_ROOTS_DIR", str(tmp_path))
    built: list[str] = []
    # The first build runs until the second builder has said it waits: no sleep decides
    # which of the two comes first, however busy the host.
    building, waiting = threading.Event(), threading.Event()

    def slow_build(rel: roots.Release, progress: roots.Progress) -> Path:
        built.append(rel.name)
        building.set()
        waiting.wait(60)
        root = roots.root_path(rel.name)
        root.mkdir()
        (root / roots.MARKER).write_text(json.dumps({"recipe": roots.RECIPE}))
        return root

    monkeypatch.setattr(roots, "_build", slow_build)
    said: list[str] = []

    def say(message: str) -> None:
        said.append(message)
        if "another process is building" in message:
            waiting.set()

    first = threading.Thread(target=roots.ensure_root, args=("tentacle", lambda m: None))
    first.start()
    assert building.wait(60)
    assert roots.ensure_root("tentacle", say) == tmp_path / "stormdeck-root-tentacle"
    waiting.set()
    first.join()
    assert built == ["tentacle"], "built once"
    assert any("another process is building the tentacle root" in m for m in said)


@pytest.mark.parametrize(("release", "version"), [
    ("pacific", "16.2.15"), ("reef", "18.2.7"), ("tentacle", "20.2.4")])
def test_the_release_is_named_by_ceph_versions(release: str, version: str) -> None:
    overall = json.loads((DATA / release / "versions.json").read_text())["overall"]
    assert {parse_version(k) for k in overall} == {(version, release)}
    assert parse_version("ceph version 20.2.4 (d4e1d5d8a1d1a6e2) tentacle (stable - RelWithDebInfo)"
                         ) == ("20.2.4", "tentacle")
    assert parse_version("not ceph") is None


def test_a_mgr_that_cannot_load_prometheus_is_found_in_its_dump() -> None:
    broken = json.loads((DATA / "reef/mgr_pyo3_bcrypt/mgr_dump.json").read_text())
    failed = failed_mgr_modules(broken)
    assert len(failed) == len(broken["available_modules"]) == 27
    assert failed["prometheus"].startswith("PyO3 modules do not yet support subinterpreters")
    for release in ("pacific", "reef", "tentacle"):
        fine = failed_mgr_modules(json.loads((DATA / release / "mgr_dump.json").read_text()))
        assert "prometheus" not in fine and "influx" in fine  # no influxdb library: normal


def test_a_daemon_is_ours_by_its_environment_mark(tmp_path: Path) -> None:
    marker = f"{tmp_path}/"
    pid = procs.spawn([sys.executable, "-c", "import time; time.sleep(30)"],
                      tmp_path / "out.log", env={procs.MARK_VARIABLE: marker})
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert procs.is_ours(pid, marker)
        assert not procs.is_ours(pid, f"{tmp_path}-other/")
        assert not procs.is_ours(other.pid, marker)
        assert procs.stop(pid, marker, timeout=5)
        assert not procs.is_ours(pid, marker)
    finally:
        other.kill()
        other.wait()
        if procs.cmdline(pid):
            os.kill(pid, 9)


def test_a_cephadm_osds_cgroup_on_v1_and_v2(tmp_path: Path) -> None:
    from stormdeck.lab.cluster import Lab
    from stormdeck.lab.state import Ports, State

    lab = Lab(tmp_path / "lab", progress=lambda m: None)
    lab.dir.mkdir()
    state = State(fsid="f", objectstore="memstore", ports=Ports(), created=0.0, cephadm=True,
                  osd_cpu_limit=1.5)
    v1 = tmp_path / "v1"
    for ctrl in ("cpu,cpuacct", "cpuset"):
        (v1 / ctrl).mkdir(parents=True)
        (v1 / ctrl / "cgroup.procs").write_text("")
    (v1 / "cpuset" / "cpuset.cpus").write_text("0-1\n")
    (v1 / "cpuset" / "cpuset.mems").write_text("0\n")
    made = lab._make_cgroups(state, "osd.3", v1)
    cpu, cpuset = (Path(m) for m in made)
    assert cpu == v1 / "cpu,cpuacct/stormdeck-lab/ceph-f@osd.3.service"
    assert (cpu / "cpu.cfs_quota_us").read_text() == "150000"
    assert (cpu / "cpu.cfs_period_us").read_text() == "100000"
    assert (cpuset / "cpuset.cpus").read_text() == "0-1"  # every level needs cpus and mems
    assert (cpuset.parent / "cpuset.mems").read_text() == "0"

    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    state.cgroups = []
    (cg,) = (Path(m) for m in lab._make_cgroups(state, "osd.3", v2))
    assert (cg / "cpu.max").read_text() == "150000 100000"
    assert (v2 / "cgroup.subtree_control").read_text() == "+cpu"
    assert state.cgroups == [str(cg)]  # recorded, so `down` removes it


def test_mount_points_go_but_the_roots_own_directories_stay(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "var/tmp/lab-a/cluster").mkdir(parents=True)
    (root / "var/tmp/lab-b/cluster").mkdir(parents=True)
    roots.remove_mount_points(root, [Path("/var/tmp/lab-a/cluster")])
    assert not (root / "var/tmp/lab-a").exists()
    assert (root / "var/tmp/lab-b/cluster").is_dir()
    roots.remove_mount_points(root, [Path("/var/tmp/lab-b/cluster")])
    assert (root / "var/tmp").is_dir() and not any((root / "var/tmp").iterdir())
