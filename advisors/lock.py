"""One writer at a time: the advisory lock that apply, undo and mute hold on a state directory."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from stormdeck.base.errors import UserError

LOCK_NAME = "writer.lock"


class Busy(UserError):
    """Another stormdeck holds the lock; nothing was changed."""


def secure_dir(directory: Path) -> Path:
    """`directory`, made if missing, readable by its owner alone (it holds plans, mutes and
    the journal: what was changed on which cluster, and values that may be private)."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # not ours to chmod (a shared, read-only mount)
        if directory.stat().st_mode & 0o077:
            directory.chmod(0o700)
    return directory


def holder(directory: Path) -> str:
    """Who holds the lock, as its holder wrote it ("pid 123: applying ..."), or ''."""
    try:
        return (directory / LOCK_NAME).read_text(errors="replace").strip()[:200]
    except OSError:
        return ""


@contextlib.contextmanager
def writer(directory: Path, what: str, wait: float = 0.0) -> Iterator[None]:
    """Hold the state directory's lock while `what` runs; wait up to `wait` seconds for it.

    flock, not a pid file: the kernel drops it when the holder dies (kill -9 included), so a
    crash never leaves the cluster locked against its operator.
    """
    secure_dir(directory)
    path = directory / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise UserError(f"cannot open the lock {path}: {exc.strerror}") from None
    try:
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    who = holder(directory) or "another process"
                    waited = f" after waiting {wait:g} s" if wait > 0 else ""
                    raise Busy(f"another stormdeck ({who}) is changing this cluster"
                               f"{waited}; nothing was changed: let it finish, or give "
                               "--wait SECONDS") from None
                time.sleep(0.1)
        with contextlib.suppress(OSError):  # who holds it is a courtesy, not the lock
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}: {what}\n".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
