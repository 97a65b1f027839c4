"""OSD processes in every shape deployers start them: id, conf and fsid from argv, environment
and the process's own root, as the host source and the exporter read them.

Command lines from the field: cephadm's (its unit.run, asserted in cephadm's own tests, and
`ps` on a podman host: `/usr/bin/ceph-mon -n mon.soko07 -f --setuser ceph --setgroup ceph
--default-log-to-file=false --default-log-to-journald=true --default-log-to-stderr=false`),
Rook's (pkg/operator/ceph/cluster/osd/spec.go, raw mode on a PVC: `ceph-osd --foreground
--id N --fsid FSID --setuser ceph --setgroup ceph --crush-location=...`; its older
directory mode: `--foreground --id N --conf PATH --osd-data ... --cluster ceph`), and
Debian's ceph-osd@.service (`-f --cluster ${CLUSTER} --id %i`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stormdeck.collectors.host.processes import (
    DaemonFsids,
    conf_from_argv,
    daemon_fsid,
    explicit_conf,
    fsid_from_argv,
    in_process_root,
    osd_id_from_argv,
    process_environ,
)

FSID = "c8d0cc22-84aa-4402-b34d-2a57ca9bd085"
OTHER = "82eca5ce-c080-4ae7-8900-acbb79931ceb"
CEPHADM = ["/usr/bin/ceph-osd", "-n", "osd.4", "-f", "--setuser", "ceph", "--setgroup", "ceph",
           "--default-log-to-file=false", "--default-log-to-journald=true",
           "--default-log-to-stderr=false"]
ROOK_RAW = ["ceph-osd", "--foreground", "--id", "7", "--fsid", FSID, "--setuser", "ceph",
            "--setgroup", "ceph", "--crush-location=root=default host=node-a"]
ROOK_DIR = ["ceph-osd", "--foreground", "--id", "2", "--conf",
            "/var/lib/rook/osd2/rook-ceph.config", "--osd-data", "/var/lib/rook/osd2",
            "--cluster", "ceph", "--osd-uuid", OTHER]
SYSTEMD = ["/usr/bin/ceph-osd", "-f", "--cluster", "east", "--id", "11", "--setuser", "ceph",
           "--setgroup", "ceph"]


@pytest.mark.parametrize(("argv", "osd"), [
    (CEPHADM, 4),
    (ROOK_RAW, 7),
    (ROOK_DIR, 2),
    (SYSTEMD, 11),
    (["ceph-osd", "--name", "osd.12", "-f"], 12),
    (["ceph-osd", "--name=osd.13", "-f"], 13),
    (["ceph-osd", "-f", "--id=5"], 5),
    (["ceph-osd", "-i", "3"], 3),
    (["ceph-osd", "-i8"], 8),
    (["ceph-osd", "-n", "mon.a"], None),  # not an OSD's name
    (["ceph-osd", "-n", "osd.x"], None),
    (["ceph-osd", "-n"], None),  # a flag without its value
    (["ceph-osd", "-f"], None),
])
def test_the_osd_id_in_every_shape(argv: list[str], osd: int | None) -> None:
    assert osd_id_from_argv(argv) == osd


def test_the_conf_from_argv_then_ceph_conf_then_the_cluster_default() -> None:
    assert explicit_conf(ROOK_DIR) == "/var/lib/rook/osd2/rook-ceph.config"
    assert explicit_conf(CEPHADM) is None
    env = {"CEPH_CONF": "/var/lib/ceph/x/osd.4/config"}
    assert conf_from_argv(ROOK_DIR, env) == "/var/lib/rook/osd2/rook-ceph.config"
    assert conf_from_argv(CEPHADM, env) == "/var/lib/ceph/x/osd.4/config"
    assert conf_from_argv(CEPHADM, {}) == "/etc/ceph/ceph.conf"
    assert conf_from_argv(SYSTEMD, {"PATH": "/bin"}) == "/etc/ceph/east.conf"
    assert conf_from_argv(["ceph-osd", "-c", "/a.conf", "--conf=/b.conf"]) == "/a.conf"


def test_the_fsid_from_rooks_argv() -> None:
    assert fsid_from_argv(ROOK_RAW) == FSID
    assert fsid_from_argv(["ceph-osd", f"--fsid={FSID.upper()}"]) == FSID
    assert fsid_from_argv(["ceph-osd", "--fsid", "not-a-uuid"]) is None
    assert fsid_from_argv(CEPHADM) is None


def fake_process(proc: Path, pid: int, root: Path, environ: dict[str, str]) -> None:
    """/proc/PID as the kernel shows a containerised process: root, cwd and environ."""
    d = proc / str(pid)
    d.mkdir(parents=True)
    (d / "root").symlink_to(root)
    (d / "cwd").symlink_to(root / "var/lib/ceph")
    (d / "environ").write_bytes(b"".join(f"{k}={v}".encode() + b"\0"
                                         for k, v in environ.items()))


def conf(path: Path, fsid: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"[global]\n\tfsid = {fsid}\n\tmon host = [v2:127.0.0.1:3300]\n")


def test_the_fsid_is_read_through_the_process_root(tmp_path: Path) -> None:
    proc, container = tmp_path / "proc", tmp_path / "container"
    # The host's own conf names another cluster: reading it would be the old mistake.
    conf(container / "etc/ceph/ceph.conf", FSID)
    conf(container / "var/lib/ceph/osd.4/config", FSID)
    fake_process(proc, 100, container, {"PATH": "/bin"})
    fake_process(proc, 101, container, {"CEPH_CONF": "/var/lib/ceph/osd.4/config"})
    fake_process(proc, 102, container, {"CEPH_CONF": "/nowhere.conf"})
    fake_process(proc, 103, container, {})

    assert daemon_fsid(100, CEPHADM, proc) == FSID  # /etc/ceph/ceph.conf inside
    assert daemon_fsid(101, CEPHADM, proc) == FSID  # CEPH_CONF inside
    assert daemon_fsid(102, CEPHADM, proc) is None  # named but absent: not guessed
    assert daemon_fsid(103, ["ceph-osd", "-c", "osd.4/config", "-n", "osd.4"], proc) == FSID
    assert daemon_fsid(103, ROOK_RAW, proc) == FSID  # --fsid wins, no file read
    assert daemon_fsid(999, CEPHADM, proc) is None  # gone
    assert process_environ(101, proc) == {"CEPH_CONF": "/var/lib/ceph/osd.4/config"}
    assert in_process_root(101, "/x", proc) == proc / "101/root/x"


def test_fsids_are_cached_per_process(tmp_path: Path) -> None:
    proc, container = tmp_path / "proc", tmp_path / "container"
    conf(container / "etc/ceph/ceph.conf", FSID)
    fake_process(proc, 100, container, {})
    fsids = DaemonFsids(proc)
    assert fsids.of(100, CEPHADM) == FSID
    conf(container / "etc/ceph/ceph.conf", OTHER)  # a running daemon does not reread it
    assert fsids.of(100, CEPHADM) == FSID
    assert fsids.of(100, [*CEPHADM, "--debug-osd=1"]) == OTHER  # another process


def test_our_own_process_reads_through_its_root() -> None:
    me = os.getpid()
    assert process_environ(me).get("PATH") == os.environ.get("PATH")
    assert in_process_root(me, "/etc/os-release").read_text() == \
        Path("/etc/os-release").read_text()
