"""Reading a file a user named: a regular file only, read to a bound, one sentence if not."""

from __future__ import annotations

import os
import stat

from stormdeck.base.errors import UserError
from stormdeck.base.text import printable

# What a user-named input file may be at most: a config, rules or secret file is a few
# KiB; /dev/zero, or a log given by mistake, must end in a sentence, not in memory.
DEFAULT_LIMIT = 1 << 20


class FileProblem(UserError):
    """Why a named file cannot be read; `reason` is the sentence without the file name."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class FileMissing(FileProblem):
    """The file is not there: some callers treat that as "none given"."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor of `path`, which must be a regular file (the caller closes it).

    O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever;
    it changes nothing for a regular file. The type is checked on the descriptor, so
    a file swapped after a check cannot slip through.
    """
    shown = printable(os.fspath(path), 200)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise FileMissing(f"no such file: {shown}", "no such file") from None
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        raise FileProblem(f"cannot read {shown}: {reason}", reason) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = _kind(mode)
        reason = f"it is {what}, not a regular file" if what.startswith("a ") else what
        raise FileProblem(f"cannot read {shown}: {reason}", reason)
    return fd


def check_regular(path: str | os.PathLike[str]) -> None:
    """UserError unless `path` is a regular file this process can open for reading."""
    os.close(open_regular(path))


def read_bytes(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT) -> bytes:
    """The whole of a regular file of at most `limit` bytes, or one sentence why not."""
    shown = printable(os.fspath(path), 200)
    fd = open_regular(path)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            try:
                chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            except OSError as exc:
                raise UserError(f"cannot read {shown}: {exc.strerror}") from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UserError(f"{shown} is larger than {limit // 1024} KiB: it is not the "
                            "file meant here")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int = DEFAULT_LIMIT) -> str:
    """read_bytes() as UTF-8 (what TOML and JSON are), or one sentence naming the byte."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise UserError(f"{printable(os.fspath(path), 200)} is not UTF-8 text (byte "
                        f"0x{data[exc.start]:02x} on line {line})") from None
