"""Why librados could not connect, in Ceph's own terms: each cause its own sentence.

librados answers a bare errno on connect; ENOENT ("RADOS object not found") means
either a client that must use cephx has no keyring, or a conf that names no
monitor. These need no running cluster: librados fails before it reaches one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

rados = pytest.importorskip("rados")

from stormdeck.advisors.ceph_admin import CephAdmin  # noqa: E402
from stormdeck.base.errors import UserError  # noqa: E402
from stormdeck.collectors.ceph.connection import CephConnection, ConnectError  # noqa: E402


def connect_error(conf: Path, timeout: float = 2.0) -> str:
    conn = CephConnection(str(conf), timeout=timeout)
    try:
        with pytest.raises(ConnectError) as caught:
            conn.command("mon", {"prefix": "status"})
    finally:
        conn.close()
    return str(caught.value)


def test_a_missing_keyring_is_said_as_such(tmp_path: Path) -> None:
    conf = tmp_path / "ceph.conf"
    conf.write_text("[global]\nmon host = 127.0.0.1:1\nauth client required = cephx\n"
                    "keyring = /nonexistent\n")
    said = connect_error(conf)
    assert "no keyring at /nonexistent" in said and "cephx" in said
    assert "object not found" not in said


def test_no_monitor_in_the_conf_is_said_as_such(tmp_path: Path) -> None:
    conf = tmp_path / "ceph.conf"
    # cephx by default and no keyring either: librados builds the monitor map first,
    # so the missing monitor is what it failed on.
    conf.write_text("[global]\n")
    said = connect_error(conf)
    assert "names no monitor (mon_host)" in said and "object not found" not in said


def test_a_monitor_that_does_not_answer_is_a_timeout(tmp_path: Path) -> None:
    conf = tmp_path / "ceph.conf"
    conf.write_text("[global]\nmon host = 127.0.0.1:1\nauth client required = none\n")
    said = connect_error(conf, timeout=1)
    assert "no monitor answered at 127.0.0.1:1 within 1 s" in said


def test_the_admin_does_not_call_a_failed_connection_a_refusal(tmp_path: Path) -> None:
    conf = tmp_path / "ceph.conf"
    conf.write_text("[global]\nmon host = 127.0.0.1:1\nauth client required = cephx\n"
                    "keyring = /nonexistent\n")
    admin = CephAdmin(str(conf), timeout=2)
    try:
        with pytest.raises(UserError) as caught:
            admin.fsid()
    finally:
        admin.close()
    assert "refused" not in str(caught.value)
    assert str(caught.value).startswith("cannot connect to the Ceph cluster: no keyring")
