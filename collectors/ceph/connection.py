"""One persistent librados connection to the mons and mgr, and what its failures mean."""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
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


class MgrBusy(NoAnswer):
    """Not sent: an earlier mgr command is still waiting for a mgr to answer it."""


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


def _client_conf(keyring: str | None, timeout: float, mon_op_timeout: bool) -> dict[str, str]:
    conf = {"rados_osd_op_timeout": str(int(timeout)),
            "client_mount_timeout": str(int(timeout)),
            "rados_mon_op_timeout": str(int(timeout)) if mon_op_timeout else "0"}
    if keyring:
        conf["keyring"] = keyring
    return conf


class _Job:
    """One mgr command and what became of it."""

    __slots__ = ("abandoned", "body", "done", "prefix", "result")

    def __init__(self, body: str, prefix: str) -> None:
        self.body, self.prefix = body, prefix
        self.result: list[Any] = []  # (ret, out, err) or the exception it ended in
        self.done = threading.Event()
        self.abandoned = False  # its caller stopped waiting


class MgrLane:
    """mgr commands on a librados handle of their own, one at a time, each in a thread of
    its own that waits for as long as librados does: forever, if need be.

    Why (docs/mgr-failure.md): librados' mgr_command gives up after
    rados_mon_op_timeout but leaves the command in MgrClient's table, pointing at its
    caller's completion and output buffers, which are gone once it returns. When a mgr is
    active again, MgrClient resends every command in that table and writes each reply
    through those pointers: a segfault, or `free(): invalid pointer`. Here librados is never
    given a timeout (its handle has rados_mon_op_timeout 0), so its call returns only with
    an answer and nothing it points at is ever freed early; the caller waits in Python
    instead, and while a command is unanswered no other is sent (MgrBusy at once): a poll
    waits for the mgr once, not once per command. Ceph's own CLI does the same
    (ceph_argparse.run_in_thread). An answer that comes after its caller gave up is kept
    for a while, and the same command asked again takes it: a slow mgr is not asked forever.
    """

    LATE_KEEP = 60.0  # seconds a late answer stands in for asking again

    def __init__(self, conffile: str | None, client_name: str | None, keyring: str | None,
                 cluster: str, timeout: float) -> None:
        self._args = (conffile, client_name, keyring, cluster, timeout)
        self._lock = threading.Lock()
        self._rados: Any = None
        self._job: _Job | None = None  # the command in librados now
        self._sent = 0.0  # when it was sent (monotonic)
        self._late: dict[str, tuple[float, Any]] = {}  # body -> (when, (ret, out, err))
        self._closing = False

    @property
    def pending(self) -> tuple[str, float] | None:
        """The command a mgr has not answered yet, and when it was sent (monotonic)."""
        job = self._job
        return (job.prefix, self._sent) if job is not None else None

    def command(self, cmd: dict[str, Any], timeout: float) -> tuple[int, bytes, str]:
        """(ret, out, err) of one mgr command; NoAnswer when none came within `timeout`
        (the command stays with librados until a mgr answers it), MgrBusy when an
        earlier one still waits."""
        prefix = str(cmd["prefix"])
        body = json.dumps({**cmd, "format": "json"})
        wait = max(1.0, timeout)
        with self._lock:
            late = self._late.pop(body, None)
            if late is not None and time.monotonic() - late[0] <= self.LATE_KEEP:
                return late[1]  # type: ignore[no-any-return]
            if self._job is not None:
                raise MgrBusy(f"{prefix}: not sent: the mgr has not answered "
                              f"`{self._job.prefix}` for {time.monotonic() - self._sent:.0f} s")
            job = self._job = _Job(body, prefix)
            self._sent = time.monotonic()
            self._closing = False
        threading.Thread(target=self._run, args=(job,), name=f"mgr {prefix}",
                         daemon=True).start()
        if not job.done.wait(wait):
            with self._lock:
                if not job.result:
                    job.abandoned = True
                    raise NoAnswer(f"{prefix}: no mgr answered within {wait:g} s (the "
                                   "command waits in librados until one does)")
        outcome = job.result[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome  # type: ignore[no-any-return]

    def _run(self, job: _Job) -> None:
        try:
            if self._rados is None:
                conffile, client_name, keyring, cluster, timeout = self._args
                self._rados = _open(conffile, client_name, keyring, cluster, timeout,
                                    mon_op_timeout=False)
            outcome: Any = self._rados.mgr_command(job.body, b"")
        except CommandError as exc:
            outcome = exc
        except Exception as exc:  # rados.Error and its kin: the handle is suspect
            self._shutdown()
            outcome = NoAnswer(f"{job.prefix}: {exc}")
        with self._lock:
            job.result.append(outcome)
            if job.abandoned and not isinstance(outcome, BaseException):
                self._late[job.body] = (time.monotonic(), outcome)
            self._job = None
            closing = self._closing
        if closing:
            self._shutdown()
        job.done.set()

    def _shutdown(self) -> None:
        handle, self._rados = self._rados, None
        if handle is not None:
            with contextlib.suppress(Exception):
                handle.shutdown()

    def close(self) -> None:
        """Shut the handle down now, or, under a command still unanswered, when librados
        lets go of it: shutting down under it would free what that command points at."""
        with self._lock:
            self._late.clear()
            if self._job is not None:
                self._closing = True
                return
        self._shutdown()


def _open(conffile: str | None, client_name: str | None, keyring: str | None, cluster: str,
          timeout: float, mon_op_timeout: bool = True) -> Any:
    """A connected librados handle; ConnectError, in one sentence, when none could be made."""
    try:
        import rados
    except ImportError:
        raise CommandError("librados for Python is missing (Debian: apt-get install "
                           "python3-rados; run ./dev setup)") from None
    conf = _client_conf(keyring, timeout, mon_op_timeout)
    try:
        handle = rados.Rados(conffile=conffile or "", name=client_name,
                             clustername=cluster, conf=conf)
        # CEPH_ARGS over the conf file, as `ceph` and librados' own tools read it
        # (--mon-host, --keyring, ...); the client options in it were taken earlier.
        handle.conf_parse_env()
        if not mon_op_timeout:
            # Over whatever ceph.conf or CEPH_ARGS say: a timeout here is the crash.
            handle.conf_set("rados_mon_op_timeout", "0")
    except rados.Error as exc:
        raise ConnectError(f"cannot connect to the Ceph cluster: {exc}") from None
    try:
        handle.connect(timeout=int(timeout))
    except rados.Error as exc:
        why = connect_failure(handle, getattr(exc, "errno", None), client_name, timeout)
        with contextlib.suppress(Exception):
            handle.shutdown()
        raise ConnectError(f"cannot connect to the Ceph cluster: {why or exc}") from None
    return handle


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
        self.mgr = MgrLane(conffile, client_name, keyring, cluster, timeout)

    @property
    def connected(self) -> bool:
        return self._rados is not None

    def _connect(self) -> Any:
        return _open(self.conffile, self.client_name, self.keyring, self.cluster_name,
                     self.timeout)

    def close(self) -> None:
        self.mgr.close()
        if self._rados is not None:
            try:
                self._rados.shutdown()
            finally:
                self._rados = None

    def command(self, target: str, cmd: dict[str, Any], timeout: float | None = None
                ) -> bytes:
        """One mon ("mon"), mgr ("mgr") or OSD ("osd.N", as `ceph tell`) command, its JSON
        output as bytes; CommandError when Ceph refuses it or cannot be reached."""
        wait = max(1, timeout or self.timeout)
        if target == "mgr":
            ret, out, err = self.mgr.command(cmd, wait)
        elif target.startswith("osd."):
            ret, out, err = self._tell(int(target.removeprefix("osd.")), cmd)
        else:
            if self._rados is None:
                self._rados = self._connect()
            body = json.dumps({**cmd, "format": "json"})
            try:
                # The monitors' client cancels a command at rados_mon_op_timeout and
                # completes it: safe to give up on, unlike the mgr's (MgrLane).
                ret, out, err = self._rados.mon_command(body, b"", timeout=int(wait))
            except Exception as exc:  # rados.Error and its kin: the connection is suspect
                self._rados, handle = None, self._rados
                with contextlib.suppress(Exception):
                    handle.shutdown()
                raise NoAnswer(f"{cmd['prefix']}: {exc}") from None
        if ret == -ENOENT and cmd["prefix"] == "config help":
            return b""
        if ret != 0:
            raise CommandError(f"{cmd['prefix']}: {err or f'error {ret}'}")
        return out

    def _tell(self, osd: int, cmd: dict[str, Any]) -> tuple[int, bytes, str]:
        """A command to one OSD. Unlike the mgr's (MgrLane), librados' OSD commands go
        through the Objecter, which cancels one at rados_osd_op_timeout (set on this
        handle) and completes it itself: giving up leaves nothing behind that points at
        freed memory."""
        if self._rados is None:
            self._rados = self._connect()
        body = json.dumps({**cmd, "format": "json"})
        try:
            return self._rados.osd_command(osd, body, b"")  # type: ignore[no-any-return]
        except Exception as exc:  # rados.Error and its kin: the connection is suspect
            self._rados, handle = None, self._rados
            with contextlib.suppress(Exception):
                handle.shutdown()
            raise NoAnswer(f"{cmd['prefix']} on osd.{osd}: {exc}") from None
