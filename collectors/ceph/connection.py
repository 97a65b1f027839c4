"""One persistent librados connection to the mons and mgr, and what its failures mean."""

from __future__ import annotations

import contextlib
import json
import os
import re
from typing import Any

ENOENT = 2
EPERM, EACCES, ETIMEDOUT = 1, 13, 110  # Linux errno values librados passes through


class CommandError(Exception):
    """A command the cluster refused or did not answer; the text says which and why."""


class NoAnswer(CommandError):
    """The cluster did not answer (no connection, a timeout): a command sent may or may not
    have been carried out, unlike one the cluster refused."""


class ConnectError(NoAnswer):
    """No connection was made: nothing was sent to the cluster."""


def _keyrings(setting: str) -> list[str]:
    # Ceph splits the keyring search list on commas, semicolons and spaces.
    return [p for p in re.split(r"[,;\s]+", setting or "") if p]


def connect_failure(cluster: Any, errno: int | None, client_name: str | None,
                    timeout: float) -> str | None:
    """What librados' bare errno on connect meant, in Ceph's own terms; None: unknown.

    librados answers ENOENT ("object not found") both for a client that must use
    cephx but has no keyring (it logs "no keyring found at ..., disabling cephx",
    then has no way to authenticate) and for a conf that names no monitor.
    """
    def get(key: str) -> str:
        try:
            return str(cluster.conf_get(key) or "")
        except Exception:  # an option this release does not know
            return ""

    who = client_name or "client.admin"
    mons = get("mon_host")
    if errno == ENOENT:
        # In librados' order: the monitor map is built before any authentication.
        if not mons.strip():
            return ("the ceph.conf names no monitor (mon_host), and DNS SRV "
                    f"({get('mon_dns_srv_name') or 'ceph-mon'}) found none")
        auth = get("auth_client_required")
        if "cephx" in auth and not get("key") and not get("keyfile"):
            paths = _keyrings(get("keyring"))
            if not any(os.path.isfile(p) for p in paths):
                return (f"no keyring at {', '.join(paths) or '(none set)'}, and {who} must "
                        f"authenticate with cephx (auth_client_required = {auth}): give -k "
                        "KEYRING or set keyring in ceph.conf")
        return None
    if errno in (EACCES, EPERM):
        paths = [p for p in _keyrings(get("keyring")) if os.path.isfile(p)]
        return (f"access denied: the monitors at {mons} did not accept {who}'s key"
                + (f" from {paths[0]}" if paths else "")
                + " (is it the key `ceph auth get` shows for it?)")
    if errno == ETIMEDOUT:
        return f"no monitor answered at {mons or '(no mon_host)'} within {timeout:g} s"
    return None


class CephConnection:
    """One librados connection to a cluster: opened at the first command, closed on
    failure (the next command opens it again) and by close(). The source that reads
    and the admin that changes each hold one, built from the same client options."""

    def __init__(self, conffile: str | None = None, client_name: str | None = None,
                 keyring: str | None = None, cluster: str = "ceph",
                 timeout: float = 10.0) -> None:
        self.conffile = conffile
        self.client_name = client_name
        self.keyring = keyring
        self.cluster_name = cluster
        self.timeout = timeout
        self._rados: Any = None

    @property
    def connected(self) -> bool:
        return self._rados is not None

    def _connect(self) -> Any:
        try:
            import rados
        except ImportError:
            raise CommandError("librados for Python is missing (Debian: apt-get install "
                               "python3-rados; run ./dev setup)") from None
        conf = {"rados_mon_op_timeout": str(int(self.timeout)),
                "rados_osd_op_timeout": str(int(self.timeout)),
                "client_mount_timeout": str(int(self.timeout))}
        if self.keyring:
            conf["keyring"] = self.keyring
        try:
            cluster = rados.Rados(conffile=self.conffile or "", name=self.client_name,
                                  clustername=self.cluster_name, conf=conf)
            # CEPH_ARGS over the conf file, as `ceph` and librados' own tools read it
            # (--mon-host, --keyring, ...); the client options in it were taken earlier.
            cluster.conf_parse_env()
        except rados.Error as exc:
            raise ConnectError(f"cannot connect to the Ceph cluster: {exc}") from None
        try:
            cluster.connect(timeout=int(self.timeout))
        except rados.Error as exc:
            why = connect_failure(cluster, getattr(exc, "errno", None), self.client_name,
                                  self.timeout)
            with contextlib.suppress(Exception):
                cluster.shutdown()
            raise ConnectError(f"cannot connect to the Ceph cluster: {why or exc}") from None
        return cluster

    def close(self) -> None:
        if self._rados is not None:
            try:
                self._rados.shutdown()
            finally:
                self._rados = None

    def command(self, target: str, cmd: dict[str, Any], timeout: float | None = None
                ) -> bytes:
        """One mon ("mon") or mgr ("mgr") command, its JSON output as bytes; CommandError
        when Ceph refuses it or cannot be reached."""
        if self._rados is None:
            self._rados = self._connect()
        body = json.dumps({**cmd, "format": "json"})
        call = self._rados.mgr_command if target == "mgr" else self._rados.mon_command
        try:
            ret, out, err = call(body, b"", timeout=int(max(1, timeout or self.timeout)))
        except Exception as exc:  # rados.Error and its kin: the connection is suspect
            self.close()
            raise NoAnswer(f"{cmd['prefix']}: {exc}") from None
        if ret == -ENOENT and cmd["prefix"] == "config help":
            return b""
        if ret != 0:
            raise CommandError(f"{cmd['prefix']}: {err or f'error {ret}'}")
        return out
