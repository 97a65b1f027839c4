"""Starting and stopping the lab's processes by PID without ever touching anyone else's."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

MARK_VARIABLE = "STORMDECK_LAB"


def spawn(argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None) -> int:
    """Start `argv` detached from our session (it outlives us), output to `log_path`.

    `env` is added to ours (a cephadm-shaped daemon's CEPH_CONF and lab mark).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            env={**os.environ, **env} if env else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    return proc.pid


def cmdline(pid: int) -> list[str] | None:
    """The argv of a live process, or None if it is gone or a zombie."""
    try:
        proc = psutil.Process(pid)
        if proc.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
            _reap(pid)
            return None
        return [arg for arg in proc.cmdline() if arg]
    except psutil.ZombieProcess:
        _reap(pid)
        return None
    except psutil.Error:
        return None


def environ_has(pid: int, entry: str) -> bool:
    """True if the process's environment holds exactly `entry` ("NAME=value")."""
    name, _, value = entry.partition("=")
    try:
        return psutil.Process(pid).environ().get(name) == value
    except psutil.Error:
        return False


def mounts_below(prefix: str) -> list[str]:
    """Mount points under `prefix` (a path ending in "/"), as this mount namespace sees them.

    getmntent (psutil) decodes what /proc/mounts escapes: a lab directory with a space
    in its path reads as /tmp/my\\040lab there, and would never match its own prefix.
    """
    return [p.mountpoint for p in psutil.disk_partitions(all=True)
            if p.mountpoint.startswith(prefix)]


def is_ours(pid: int, marker: str) -> bool:
    """True if `pid` is alive and its command line names `marker` (the lab's own path),
    or, for a daemon started as cephadm does (whose argv names no path), its
    environment carries STORMDECK_LAB=marker.

    A recorded PID may have been reused by an unrelated process after a crash
    or reboot; the marker is what makes it safe to signal.
    """
    if pid <= 0:
        return False
    argv = cmdline(pid)
    # In the moment of exec the kernel shows a live process with an empty
    # command line; a freshly spawned daemon is in that moment. Look again.
    for _ in range(40):
        if argv != []:
            break
        time.sleep(0.005)
        argv = cmdline(pid)
    if argv is None:
        return False
    return any(marker in arg for arg in argv) or environ_has(pid, f"{MARK_VARIABLE}={marker}")


def _reap(pid: int) -> None:
    # Only our own children can be reaped; for anyone else's this is a no-op.
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def wait_gone(pid: int, marker: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not is_ours(pid, marker):
            return True
        time.sleep(0.05)
    return not is_ours(pid, marker)


def stop(pid: int, marker: str, timeout: float = 15.0, group: bool = False,
         sig: signal.Signals = signal.SIGTERM) -> bool:
    """Stop one of our processes: `sig`, then SIGKILL after `timeout`.

    With `group`, the whole process group it leads (a runner and its children).
    Returns False if the process was not ours to stop (already gone, or reused).
    """
    if not is_ours(pid, marker):
        return False
    send = (lambda s: os.killpg(pid, s)) if group else (lambda s: os.kill(pid, s))
    with contextlib.suppress(ProcessLookupError):
        send(sig)
    if wait_gone(pid, marker, timeout):
        return True
    with contextlib.suppress(ProcessLookupError):
        send(signal.SIGKILL)
    wait_gone(pid, marker, 5.0)
    return True


def stop_all(targets: Sequence[tuple[int, bool, signal.Signals]], marker: str,
             timeout: float = 15.0) -> list[bool]:
    """Stop several of our processes in parallel: (pid, whole group, first signal) each.

    Returns, per target, whether it was ours to stop.
    """
    ours = [is_ours(pid, marker) for pid, _, _ in targets]
    for (pid, group, sig), mine in zip(targets, ours, strict=True):
        if mine:
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if group else os.kill)(pid, sig)
    deadline = time.monotonic() + timeout
    for (pid, _, _), mine in zip(targets, ours, strict=True):
        if mine:
            wait_gone(pid, marker, max(0.0, deadline - time.monotonic()))
    for (pid, group, _), mine in zip(targets, ours, strict=True):
        if mine and is_ours(pid, marker):
            with contextlib.suppress(ProcessLookupError):
                (os.killpg if group else os.kill)(pid, signal.SIGKILL)
            wait_gone(pid, marker, 5.0)
    return ours


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True if nothing listens on host:port (a bind test, as the daemon will do)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True
