"""Recordings: snapshots, findings and journal events in a compact, append-only, crash-safe file.

Format 1 (docs/recording.md says the same for people who write other readers):

    "STORMDECK-REC\\n"                  magic
    one line of JSON, "\\n"             header: {"format": 1, "created": ..., ...}
    frames, until the end of the file:
        kind    1 byte   K keyframe snapshot (a new deflate stream starts here)
                         S snapshot delta, F findings, J journal event (the
                         stream goes on)
        time    8 bytes  big-endian IEEE double, epoch seconds
        length  4 bytes  big-endian, of the payload
        crc32   4 bytes  big-endian, of the payload
        payload raw deflate (wbits -15), ended with a sync flush, of one
                JSON object in UTF-8

A keyframe holds a whole snapshot; a delta holds what changed since the
snapshot before it ({"=": set, "~": changed mappings, "-": keys gone}). The
deflate stream runs from one keyframe to the next, so what repeats between
polls costs almost nothing, and a reader can start at any keyframe. Every
frame is flushed to the file as it is written, so a crash loses at most the
frame being written; a reader stops at a torn or corrupt frame and keeps what
came before it. A write that fails (a full disk) cuts the frame it tore and
ends the recording there, on a whole frame. Floats are kept to 4 significant
digits (a console shows 3), and those of 1e8 and more (epoch times, byte
counts) to the millisecond or byte.
"""

from __future__ import annotations

import collections.abc
import contextlib
import dataclasses
import enum
import functools
import json
import os
import struct
import time
import types
import typing
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.base.secrets import redact_value
from stormdeck.collectors.model import ConfigChange, ConfigOption, Daemon, Records, Snapshot

MAGIC = b"STORMDECK-REC\n"
FORMAT = 1
_HEAD = struct.Struct(">cdII")
KEYFRAME, DELTA, FINDINGS, JOURNAL = b"K", b"S", b"F", b"J"
_KINDS = {KEYFRAME, DELTA, FINDINGS, JOURNAL}
_MAX_PAYLOAD = 256 << 20  # a length beyond this is a torn header, not a frame
_MAX_TIME = 1 << 34  # epoch seconds (year 2514): beyond it, or NaN, a damaged header


# ---- values <-> JSON ------------------------------------------------------------


def non_default_fields(value: Any) -> Iterator[tuple[str, Any]]:
    """A dataclass's fields that differ from their defaults: all a recording keeps."""
    for f in dataclasses.fields(value):
        v = getattr(value, f.name)
        if f.default is not dataclasses.MISSING and v == f.default:
            continue
        if f.default_factory is not dataclasses.MISSING and v == f.default_factory():
            continue
        yield f.name, v


def encode(value: Any) -> Any:
    """Dataclasses as dicts of their non-default fields; floats shortened (see above)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {name: encode(v) for name, v in non_default_fields(value)}
    if isinstance(value, bool | None | str):
        return value
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        # Epoch times need their milliseconds; rates and ratios need no more than this.
        return round(value, 3) if abs(value) >= 1e8 else float(f"{value:.4g}")
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    if isinstance(value, frozenset):  # sorted: the same set is the same line
        return sorted(encode(v) for v in value)
    raise TypeError(f"cannot record a {type(value).__name__}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _redacted_change(c: ConfigChange) -> ConfigChange:
    old, new = redact_value(c.name, c.old), redact_value(c.name, c.new)
    return c if (old, new) == (c.old, c.new) else dataclasses.replace(c, old=old, new=new)


def _redacted_option(o: ConfigOption) -> ConfigOption:
    values = {who: redact_value(o.name, v) or "" for who, v in o.values.items()}
    # The values a daemon runs with, as the database's: a recording keeps no secret.
    running = {who: dataclasses.replace(
        r, value=redact_value(o.name, r.value),
        overrides=tuple((src, redact_value(o.name, v) or "") for src, v in r.overrides))
        for who, r in o.running.items()}
    if values == dict(o.values) and running == dict(o.running):
        return o
    return dataclasses.replace(o, values=values, running=running)


def _redacted_daemon(d: Daemon) -> Daemon:
    if not d.config:
        return d
    config = {k: redact_value(k, v) or "" for k, v in d.config.items()}
    return d if config == dict(d.config) else dataclasses.replace(d, config=config)


# A recording made before the collectors redacted secrets (or by another writer) still
# gives none to a replay or a report: the same rule, applied as its snapshots are read.
_REDACT: dict[type, Any] = {ConfigChange: _redacted_change, ConfigOption: _redacted_option,
                            Daemon: _redacted_daemon}


def decode(tp: Any, value: Any) -> Any:
    """The inverse of encode, led by the type annotations of `tp`."""
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return decode(args[0], value) if len(args) == 1 else value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        out = tp(**{k: decode(hints[k], v) for k, v in value.items() if k in hints})
        return _REDACT[tp](out) if tp in _REDACT else out
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], v) for v in value)
        return tuple(decode(a, v) for a, v in zip(args, value, strict=False))
    if origin is list:
        return [decode(typing.get_args(tp)[0], v) for v in value]
    if origin is frozenset:
        return frozenset(decode(typing.get_args(tp)[0], v) for v in value)
    if origin in (dict, collections.abc.Mapping):
        vt = typing.get_args(tp)[1]
        return {k: decode(vt, v) for k, v in value.items()}
    if tp is float:
        return float(value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(value)
    return value


class Encoder:
    """encode(), remembering what it made for each object of the last snapshot: an
    object still there (a Daemon, a pool, a mapping the source kept) is not encoded
    again, and its encoding is the same object, which diff() skips at once."""

    def __init__(self) -> None:
        self._prev: dict[int, tuple[Any, Any]] = {}
        self._cur: dict[int, tuple[Any, Any]] = {}

    def snapshot(self, snap: Snapshot) -> dict[str, Any]:
        self._cur = {}
        try:
            return self._encode(snap)
        finally:
            self._prev = self._cur

    def _encode(self, value: Any) -> Any:
        if isinstance(value, Records):  # the mapping a source kept, shared across snapshots
            value = value.inner
        is_data = dataclasses.is_dataclass(value) and not isinstance(value, type)
        if isinstance(value, frozenset) and len(value) > 4:
            # Kept by identity like a long tuple: the OSDs read are one set for hours.
            key = id(value)
            hit = self._prev.get(key)
            if hit is not None and hit[0] is value:
                self._cur[key] = hit
                return hit[1]
            self._cur[key] = (value, encode(value))
            return self._cur[key][1]
        if not (is_data or isinstance(value, Mapping) or
                (isinstance(value, tuple | list) and len(value) > 4)):
            return encode(value)
        key = id(value)
        hit = self._prev.get(key)
        if hit is not None and hit[0] is value:
            self._cur[key] = hit
            return hit[1]
        if is_data:
            out: Any = {name: self._encode(v) for name, v in non_default_fields(value)}
        elif isinstance(value, Mapping):
            out = {str(k): self._encode(v) for k, v in value.items()}
        else:
            out = [self._encode(v) for v in value]
        self._cur[key] = (value, out)
        return out


class Decoder:
    """decode(), remembering what it made from each JSON object of the last snapshot.

    patch() keeps the objects of what a delta did not touch, so a snapshot decoded
    after the one before it builds only what changed, and shares the rest with it
    (the live History's sharing, kept through a replay)."""

    def __init__(self) -> None:
        self._prev: dict[int, tuple[Any, Any, Any]] = {}
        self._cur: dict[int, tuple[Any, Any, Any]] = {}

    def snapshot(self, data: Mapping[str, Any]) -> Snapshot:
        self._cur = {}
        try:
            return self._decode(Snapshot, data)
        finally:
            self._prev = self._cur

    def _decode(self, tp: Any, value: Any) -> Any:
        if not isinstance(value, dict | list):
            return decode(tp, value)
        key = id(value)
        hit = self._prev.get(key)
        if hit is not None and hit[0] is value and hit[1] is tp:
            self._cur[key] = hit
            return hit[2]
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            return self._decode(args[0], value) if len(args) == 1 else value
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            hints = _hints(tp)
            out = tp(**{k: self._decode(hints[k], v) for k, v in value.items() if k in hints})
            if tp in _REDACT:
                out = _REDACT[tp](out)
        elif origin in (dict, collections.abc.Mapping):
            vt = typing.get_args(tp)[1]
            out = {k: self._decode(vt, v) for k, v in value.items()}
        else:
            out = decode(tp, value)
        self._cur[key] = (value, tp, out)
        return out


def diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """What turns `old` into `new`: keys set, mappings changed within, keys gone."""
    put: dict[str, Any] = {}
    sub: dict[str, Any] = {}
    for k, v in new.items():
        if k not in old:
            put[k] = v
        elif old[k] is v:
            continue
        elif old[k] != v:
            if isinstance(v, dict) and isinstance(old[k], dict):
                sub[k] = diff(old[k], v)
            else:
                put[k] = v
    gone = [k for k in old if k not in new]
    out: dict[str, Any] = {}
    if put:
        out["="] = put
    if sub:
        out["~"] = sub
    if gone:
        out["-"] = gone
    return out


def patch(old: Mapping[str, Any], d: Mapping[str, Any]) -> dict[str, Any]:
    new = dict(old)
    for k in d.get("-", ()):
        new.pop(k, None)
    new.update(d.get("=", {}))
    for k, sub in d.get("~", {}).items():
        new[k] = patch(old.get(k, {}), sub)
    return new


def _object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("not a JSON object")
    return value


# ---- writing -----------------------------------------------------------------------


def _write_all(fd: int, data: bytes) -> None:
    """os.write until all of `data` is written: a write may be short (a disk filling up),
    and the next one then says why (ENOSPC)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Recorder:
    """Appends to a new recording; past `max_bytes` it starts afresh, keeping one older file
    as FILE.1, so a recording never takes more than twice `max_bytes` of disk."""

    def __init__(self, path: Path, max_bytes: int = 256 << 20, keyframe_every: int = 60,
                 meta: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.max_bytes = max(4096, max_bytes)
        self.keyframe_every = max(1, keyframe_every)
        self.meta = dict(meta or {})
        self.rotations = 0
        self._fd: int | None = None
        self._open_new()

    def _open_new(self) -> None:
        try:
            # 0600: a recording carries the cluster's layout and config, wherever it is put.
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
        except FileExistsError:
            raise UserError(f"{self.path} already exists: record to a new file, or remove "
                            "it first") from None
        except OSError as exc:
            raise UserError(f"cannot create {self.path}: {exc.strerror}") from None
        header = {"format": FORMAT, "created": time.time(), **self.meta}
        try:
            _write_all(fd, MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n")
        except OSError as exc:  # a full disk: a header alone is no recording
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise UserError(f"cannot create {self.path}: {exc.strerror}") from None
        self._fd = fd
        self.snapshots = 0  # in this file (not its older part)
        self.size = len(MAGIC) + 1
        self._last: dict[str, Any] | None = None
        self._since_key = 0
        self._zip: Any = None
        self._findings_sig: Any = None
        self._journal_seen: set[tuple[str, str]] = set()
        self._encoder = Encoder()

    def _frame(self, kind: bytes, at: float, obj: Any) -> None:
        if kind == KEYFRAME:
            self._zip = zlib.compressobj(6, zlib.DEFLATED, -15)
        data = self._zip.compress(json.dumps(obj, separators=(",", ":")).encode())
        data += self._zip.flush(zlib.Z_SYNC_FLUSH)
        assert self._fd is not None
        whole = os.fstat(self._fd).st_size  # where this frame starts
        try:
            _write_all(self._fd, _HEAD.pack(kind, at, len(data), zlib.crc32(data)) + data)
            if kind == KEYFRAME:
                os.fsync(self._fd)
        except OSError as exc:
            self._stop_at(whole, at, exc)
        self.size += _HEAD.size + len(data)

    def _stop_at(self, whole: int, at: float, exc: OSError) -> None:
        """A write failed (a full disk, a quota): cut the frame it tore, so the file ends
        on a whole frame and replays to there, close it, and say what is kept."""
        assert self._fd is not None
        with contextlib.suppress(OSError):  # truncating frees space: it works on a full disk
            os.ftruncate(self._fd, whole)
            os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        when = time.strftime("%H:%M:%S", time.localtime(at)) if 0 <= at < _MAX_TIME else "?"
        older = f" (and the older part in {self.path}.1)" if self.rotations else ""
        if self.snapshots == 0:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            raise UserError(f"cannot record to {self.path}: {exc.strerror} at {when}; nothing "
                            f"was recorded in it{older}") from None
        raise UserError(f"recording stopped at {when}: {exc.strerror} writing {self.path}; "
                        f"the {self.snapshots} snapshot(s) recorded before it are kept and "
                        f"readable{older}: stormdeck replay {self.path}") from None

    def add_snapshot(self, snap: Snapshot) -> None:
        if self._fd is None:
            raise ValueError("the recording is closed")
        if self.size > self.max_bytes:
            self._rotate()
        state = self._encoder.snapshot(snap)
        if self._last is None or self._since_key >= self.keyframe_every:
            self._frame(KEYFRAME, snap.time, {"s": state})
            self.snapshots += 1
            self._since_key = 0
            # The new stream must stand alone: findings are repeated after a keyframe.
            self._findings_sig = None
        else:
            self._frame(DELTA, snap.time, {"d": diff(self._last, state)})
            self.snapshots += 1
            self._since_key += 1
        self._last = state

    def add_findings(self, at: float, findings: Sequence[Any]) -> None:
        """Findings are written when what fires changes, not on every poll."""
        if self._last is None:
            return
        sig = tuple((f.rule, f.target, f.state, int(f.severity), f.muted) for f in findings)
        if sig == self._findings_sig:
            return
        self._findings_sig = sig
        self._frame(FINDINGS, at, {"f": [encode(f) for f in findings]})

    def add_journal(self, at: float, entries: Sequence[Any]) -> None:
        """Journal entries not seen in this state yet (new, or ended since)."""
        if self._last is None:
            return
        for e in entries:
            key = (e.id, e.status)
            if key not in self._journal_seen:
                self._journal_seen.add(key)
                self._frame(JOURNAL, at, {"e": encode(e)})

    def _rotate(self) -> None:
        self.close()
        older = self.path.with_name(self.path.name + ".1")
        os.replace(self.path, older)
        self.rotations += 1
        self._open_new()

    def close(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None


# ---- reading -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FrameInfo:
    offset: int  # of the payload
    kind: bytes
    time: float
    length: int


@dataclass(frozen=True, slots=True)
class Record:
    kind: str  # "snapshot" | "findings" | "journal"
    time: float
    data: dict[str, Any]  # the encoded snapshot (whole), {"f": [...]} or {"e": {...}}
    index: int  # of the frame


class Recording:
    """A recording opened for reading: an index of its frames, records decoded on demand."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        from stormdeck.base.files import FileMissing, open_regular

        # A regular file only: a FIFO would hang the open, /dev/zero the scan.
        try:
            self._file = os.fdopen(open_regular(self.path), "rb")
        except FileMissing:
            raise UserError(f"cannot open {self.path}: no such file") from None
        self.header = self._read_header()
        self.frames: list[FrameInfo] = []
        self.torn: str | None = None  # why reading stopped early, if it did
        self._scan()
        self.snapshot_frames = [i for i, f in enumerate(self.frames)
                                if f.kind in (KEYFRAME, DELTA)]
        if not self.snapshot_frames:
            raise UserError(f"{self.path} holds no snapshot"
                            + (f" ({self.torn})" if self.torn else ""))

    def _read_header(self) -> dict[str, Any]:
        if self._file.read(len(MAGIC)) != MAGIC:
            raise UserError(f"{self.path} is not a stormdeck recording")
        line = self._file.readline(1 << 16)
        try:
            header = json.loads(line)
            version = int(header["format"])
        except (ValueError, KeyError, TypeError, OverflowError):
            raise UserError(f"{self.path}: the recording's header is damaged") from None
        if version > FORMAT:
            raise UserError(f"{self.path} is a recording of format {version}; this stormdeck "
                            f"reads format {FORMAT} and older: upgrade stormdeck to replay it")
        self._body = self._file.tell()
        return header

    def _scan(self) -> None:
        f = self._file
        f.seek(self._body)
        while True:
            at = f.tell()
            head = f.read(_HEAD.size)
            if not head:
                return
            if len(head) < _HEAD.size:
                self.torn = f"torn frame at byte {at}"
                return
            kind, t, length, crc = _HEAD.unpack(head)
            if kind not in _KINDS or length > _MAX_PAYLOAD or not 0 <= t < _MAX_TIME:
                self.torn = f"damaged frame at byte {at}"
                return
            if not self.frames and kind != KEYFRAME:
                self.torn = f"no keyframe at byte {at}"
                return
            payload = f.read(length)
            if len(payload) < length:
                self.torn = f"torn frame at byte {at}"
                return
            if zlib.crc32(payload) != crc:
                self.torn = f"corrupt frame at byte {at}"
                return
            self.frames.append(FrameInfo(at + _HEAD.size, kind, t, length))

    def close(self) -> None:
        self._file.close()

    @property
    def start(self) -> float:
        return self.frames[self.snapshot_frames[0]].time

    @property
    def end(self) -> float:
        return self.frames[self.snapshot_frames[-1]].time

    def __len__(self) -> int:
        return len(self.snapshot_frames)

    def snapshot_at(self, when: float) -> int:
        """The ordinal of the last snapshot at or before `when` (0 if none is)."""
        import bisect

        times = [self.frames[i].time for i in self.snapshot_frames]
        return max(0, bisect.bisect_right(times, when) - 1)

    def records(self, start: int = 0) -> Iterator[Record]:
        """Every record from the frame `start` on, decoded from the keyframe before it."""
        k = start
        while k > 0 and self.frames[k].kind != KEYFRAME:
            k -= 1
        unzip: Any = None
        state: dict[str, Any] | None = None
        for i in range(k, len(self.frames)):
            info = self.frames[i]
            self._file.seek(info.offset)
            payload = self._file.read(info.length)
            if info.kind == KEYFRAME:
                unzip = zlib.decompressobj(-15)
            try:
                obj = json.loads(unzip.decompress(payload))
                if info.kind == KEYFRAME:
                    state = _object(obj["s"])
                elif info.kind == DELTA:
                    state = patch(state or {}, _object(obj["d"]))
                else:
                    _object(obj)
            except (ValueError, zlib.error, KeyError, TypeError, AttributeError):
                self.torn = f"undecodable frame at byte {info.offset - _HEAD.size}"
                return
            if i < start:
                continue
            if info.kind in (KEYFRAME, DELTA):
                yield Record("snapshot", info.time, state or {}, i)
            elif info.kind == FINDINGS:
                yield Record("findings", info.time, obj, i)
            else:
                yield Record("journal", info.time, obj, i)

    def snapshots(self, start: int = 0) -> Iterator[Snapshot]:
        """Snapshots from the `start`th on."""
        first = self.snapshot_frames[start] if start < len(self.snapshot_frames) else \
            len(self.frames)
        decoder = Decoder()
        for r in self.records(first):
            if r.kind == "snapshot":
                try:
                    snap = decoder.snapshot(r.data)
                except (ValueError, KeyError, TypeError, AttributeError):
                    self.torn = f"undecodable snapshot in frame {r.index}"
                    return
                yield snap
