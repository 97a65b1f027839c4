"""Run a real command on a pseudo-terminal, type keys into it, and read what it draws."""

from __future__ import annotations

import os
import pty
import re
import select
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).parents[1]
ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\x1b[()][A-Z0-9]")


def on_pty(argv: Sequence[str], env: dict[str, str], seconds: float,
           keys: Sequence[tuple[float, bytes]] = ()) -> tuple[bytes, int | None]:
    """Run `argv` from the project's root with exactly `env`; type each key at its time.

    The raw bytes written in `seconds` (or until it exits) and its exit status, None when
    it was still running and had to be stopped."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(ROOT)
        os.execve(argv[0], list(argv), env)
    out = b""
    start = time.monotonic()
    pending = list(keys)
    status = None
    try:
        while time.monotonic() - start < seconds:
            if pending and time.monotonic() - start >= pending[0][0]:
                os.write(fd, pending.pop(0)[1])
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    out += os.read(fd, 65536)
                except OSError:  # the child closed the terminal: it is exiting
                    time.sleep(0.05)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return out, os.waitstatus_to_exitcode(status)
        os.kill(pid, 15)
        os.waitpid(pid, 0)
        return out, None
    finally:
        os.close(fd)


def plain(raw: bytes) -> str:
    """What a reader sees of terminal output: escape sequences removed."""
    return ESCAPES.sub(b"", raw).decode("utf-8", "replace")
