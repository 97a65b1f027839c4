"""The change journal: a write-ahead log of every change, each record checksummed and fsynced.

Each change is an intent record, made durable and read back before anything is
sent, and one or more end records after (a converging change gets a later end
when it reaches its target). A record is one JSON line with a CRC32 of its
canonical form, so a torn or altered line is told from a record. A torn last
line (a crash mid-write) is moved to a side file before the next record is
written, so it can never glue itself onto that record. A small reserve file
keeps room for the end of a change whose intent was written: on a full disk
the intent is refused (nothing sent) rather than the end lost.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import time
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from stormdeck.advisors.actuators.table import known_actuator
from stormdeck.advisors.findings import Change
from stormdeck.advisors.lock import secure_dir
from stormdeck.advisors.overrides import is_overridden
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable

VERSION = 2
RESERVE_BYTES = 16 * 1024  # room for a few dozen end records; one is under 2 KiB
MAX_RECORD = 64 * 1024
CHUNK = 256 * 1024

# What each outcome tells about the cluster. "unknown": sent, and no answer or read-back
# said whether it was made. "refused": the cluster said no, nothing changed. "pending":
# on its way to the target (pg_num steps), a later end says when it arrived.
MADE = ("applied", "pending", "pending restart")
NOTHING_CHANGED = ("refused", "not made")


class JournalError(UserError):
    """The journal could not take a record whole: what was about to be sent was not."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One change's story: its intent, and how it ended (None while it has not)."""

    id: str
    plan: str | None
    rule: str | None
    cluster: str | None
    change: Change
    before: str | None  # the value to go back to; None = unset
    started: float
    ended: float | None = None
    outcome: str | None = None  # "applied" | "pending" | "pending restart" | "unknown" |
    #                             "refused" | "not made" | "failed" (older journals) |
    #                             "overridden by <reason>" (advisors/overrides.py)
    detail: str = ""
    after: str | None = None
    undoes: str | None = None  # the entry this one reverses
    undone_by: list[str] = field(default_factory=list)
    value: str | None = None  # what was sent; None = unset (`config rm`)
    # What a data-moving change was predicted to move (blast.Prediction.to_dict) and what
    # `ceph status` said right after it; absent from older records and other changes.
    prediction: dict[str, Any] | None = None
    observed: dict[str, Any] | None = None
    # How the data movement it started ended: when the cluster was seen active+clean again,
    # and the most misplaced/degraded seen on the way (Executor.settle); absent until then.
    settled: dict[str, Any] | None = None
    # What an experiment measured the change to do (advisors/experiment: per figure its
    # ratio, interval and verdict), on the entry that left it made; absent otherwise.
    measured: dict[str, Any] | None = None

    @property
    def awaiting_clean(self) -> bool:
        """A change that moved data when it was made (its actuator follows it to active+clean:
        a pool's pg_num/pgp_num, or its undo), whose active+clean has not been seen yet. An
        OSD's noup is predicted too, but moves nothing until that OSD next goes down: there
        is no movement of its own to follow."""
        act = known_actuator(self.change.kind)
        return self.prediction is not None and act is not None and \
            act.follows_to_clean(self.change) and self.made is True and \
            not self.undone_by and not (self.settled or {}).get("clean_at")

    @property
    def status(self) -> str:
        return self.outcome or "INCOMPLETE"

    @property
    def made(self) -> bool | None:
        """True: the change is in the cluster; False: it is not; None: nobody knows yet."""
        if self.outcome in MADE or is_overridden(self.outcome):
            return True
        if self.outcome in NOTHING_CHANGED or self.outcome == "failed":
            return False
        return None

    @property
    def counts_as_undo(self) -> bool:
        """An undo that took (or is converging, or put the stored value back under an
        overriding scheduler) undoes its entry: it is not offered again."""
        return self.undoes is not None and (self.outcome in MADE
                                            or is_overridden(self.outcome))


def _crc(record: dict[str, Any]) -> str:
    body = json.dumps(record, separators=(",", ":"), sort_keys=True)
    return f"{zlib.crc32(body.encode()):08x}"


def encode(record: dict[str, Any]) -> bytes:
    """One record as its line: canonical JSON with its checksum, newline-terminated."""
    rec = {**record, "v": VERSION}
    rec.pop("crc", None)
    rec["crc"] = _crc(rec)
    return (json.dumps(rec, separators=(",", ":"), sort_keys=True) + "\n").encode()


def decode(raw: bytes) -> dict[str, Any] | None:
    """The record on a line, or None when the line is not a whole, unaltered record.

    A version-1 line (no checksum, from stormdeck before the write-ahead journal) is
    accepted when it has a record's shape."""
    try:
        rec = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(rec, dict) or rec.get("type") not in ("intent", "end") or \
            not isinstance(rec.get("id"), str):
        return None
    if "crc" in rec:
        crc = rec.pop("crc")
        if crc != _crc(rec):
            return None
    elif rec.get("v", 1) != 1:
        return None
    t = rec.get("time")
    if not isinstance(t, int | float) or isinstance(t, bool) or not math.isfinite(t):
        return None
    return rec


def _entry(rec: dict[str, Any]) -> Entry | None:
    """An intent record as an Entry, or None when it does not hold a change."""
    change = rec.get("change")
    if not isinstance(change, dict):
        return None
    known = {f.name for f in fields(Change)}
    try:
        c = Change(**{k: v for k, v in change.items() if k in known})
    except TypeError:
        return None
    if not all(isinstance(getattr(c, k), str) for k in ("kind", "target", "key", "proposed")):
        return None
    undoes = _text(rec.get("undoes"))
    if "value" in rec:
        value = _text(rec.get("value"))
    else:  # a version-1 intent: an undo to "unset" of a kind that removes (a config
        # option's: `config rm`) sent no value
        act = known_actuator(c.kind)
        removed = undoes and act is not None and act.unset_removes and c.proposed == "unset"
        value = None if removed else c.proposed
    return Entry(id=rec["id"], plan=_text(rec.get("plan")), rule=_text(rec.get("rule")),
                 cluster=_text(rec.get("cluster")), change=c, before=_text(rec.get("before")),
                 started=float(rec["time"]), undoes=undoes, value=value,
                 prediction=_dict(rec.get("prediction")))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _dict(value: Any) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _ended(e: Entry, rec: dict[str, Any]) -> Entry:
    return Entry(id=e.id, plan=e.plan, rule=e.rule, cluster=e.cluster, change=e.change,
                 before=e.before, started=e.started, ended=float(rec["time"]),
                 outcome=_text(rec.get("outcome")) or "unknown",
                 detail=_text(rec.get("detail")) or "", after=_text(rec.get("after")),
                 undoes=e.undoes, value=e.value, prediction=e.prediction,
                 observed=_dict(rec.get("observed")), settled=_dict(rec.get("settled")),
                 measured=_dict(rec.get("measured")))


class Journal:
    """The journal file, its quarantine for torn records, and the reserve that keeps room
    for the ends of changes already begun. Writers hold the state directory's lock
    (advisors/lock.py); readers need none: records are appended whole."""

    def __init__(self, path: Path, warn: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.torn_path = path.with_name(path.name + ".torn")
        self.reserve_path = path.with_name(path.name + ".reserve")
        self.warn = warn or (lambda message: None)
        self.damaged: list[str] = []  # lines that are not records, as read last

    # ---- writing ----

    def _open(self) -> int:
        new = not self.path.exists()
        secure_dir(self.path.parent)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise JournalError(f"cannot open the journal {self.path}: {exc.strerror}") from None
        if new:
            _fsync_dir(self.path.parent)
        return fd

    def _heal_tail(self, fd: int) -> None:
        """A last line without its newline: a whole record gets the newline it lacked; torn
        bytes go to the quarantine file, so the next record starts on a line of its own."""
        size = os.fstat(fd).st_size
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return
        start = _last_line_start(fd, size)
        tail = os.pread(fd, size - start, start)
        if decode(tail) is not None:
            _write_all(fd, b"\n")
            os.fsync(fd)
            return
        header = (f"# {len(tail)} bytes quarantined from {self.path.name} offset {start} at "
                  f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n").encode()
        qfd = os.open(self.torn_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            _write_all(qfd, header + tail + b"\n")
            os.fsync(qfd)
        finally:
            os.close(qfd)
        os.ftruncate(fd, start)
        os.fsync(fd)
        self.warn(f"the journal's last record was torn (a crash while it was written): its "
                  f"{len(tail)} bytes were moved to {self.torn_path}")

    def _ensure_reserve(self) -> None:
        """Room for the ends of changes begun: made before an intent, given up for an end."""
        secure_dir(self.path.parent)
        try:
            if self.reserve_path.stat().st_size >= RESERVE_BYTES:
                return
        except FileNotFoundError:
            pass
        try:
            fd = os.open(self.reserve_path, os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                self.reserve_path.unlink()
            raise JournalError(f"no room to journal a change in {self.path.parent} "
                               f"({exc.strerror}); nothing was sent to the cluster") from None

    def _append(self, record: dict[str, Any], *, ending: bool = False) -> None:
        line = encode(record)
        if len(line) > MAX_RECORD:
            raise JournalError(f"a journal record of {len(line)} bytes is too large to keep")
        fd = self._open()
        try:
            try:
                self._heal_tail(fd)
            except OSError as exc:
                raise JournalError(f"cannot repair the journal's torn last line "
                                   f"({exc.strerror})") from None
            offset = os.fstat(fd).st_size
            try:
                self._write(fd, line, offset)
            except OSError as exc:
                if not ending or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise JournalError(f"the journal {self.path} could not take the record "
                                       f"({exc.strerror})") from None
                # The end of a change already sent: spend the reserve kept for it.
                with contextlib.suppress(OSError):
                    self.reserve_path.unlink()
                try:
                    self._write(fd, line, offset)
                except OSError as again:
                    raise JournalError(f"the journal {self.path} could not take the record "
                                       f"({again.strerror})") from None
        finally:
            os.close(fd)

    @staticmethod
    def _write(fd: int, line: bytes, offset: int) -> None:
        """Write, fsync and read back `line` at `offset`; on any fault cut the file back to
        `offset`, so a short write never leaves a torn record behind."""
        try:
            _write_all(fd, line)
            os.fsync(fd)
            if os.pread(fd, len(line), offset) != line:
                raise OSError(errno.EIO, "the record read back differs from the one written")
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, offset)
                os.fsync(fd)
            raise

    def intent(self, change: Change, before: str | None, plan: str | None = None,
               rule: str | None = None, cluster: str | None = None,
               undoes: str | None = None, value: str | object | None = ...,
               prediction: dict[str, Any] | None = None) -> str:
        """Make the intent durable; JournalError (nothing may be sent) when it is not.
        `value` is what will be sent (None: unset); the change's proposed value by default."""
        self._ensure_reserve()
        entry_id = uuid.uuid4().hex[:10]
        record = {"type": "intent", "id": entry_id, "time": time.time(), "plan": plan,
                  "rule": rule, "cluster": cluster, "change": asdict(change),
                  "before": before, "undoes": undoes,
                  "value": change.proposed if value is ... else value}
        if prediction is not None:
            record["prediction"] = prediction
        self._append(record)
        return entry_id

    def end(self, entry_id: str, outcome: str, detail: str = "", after: str | None = None,
            observed: dict[str, Any] | None = None,
            settled: dict[str, Any] | None = None,
            measured: dict[str, Any] | None = None) -> None:
        """How a change ended (a later end of the same entry supersedes an earlier one, so
        it carries on what the earlier one said: `observed`, `settled`, `measured`). The
        time until active+clean, and an experiment's measure, are such later ends, not
        record types of their own, so a journal with them stays readable by a stormdeck
        that predates them."""
        record = {"type": "end", "id": entry_id, "time": time.time(), "outcome": outcome,
                  "detail": detail[:2000], "after": after}
        if observed is not None:
            record["observed"] = observed
        if settled is not None:
            record["settled"] = settled
        if measured is not None:
            record["measured"] = measured
        self._append(record, ending=True)
        with contextlib.suppress(JournalError):
            self._ensure_reserve()  # given up for this end: take it back if there is room

    # ---- reading ----

    def records(self) -> Iterator[dict[str, Any]]:
        """Every whole record, oldest first; damaged lines are noted in `damaged`."""
        self.damaged = []
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UserError(f"cannot read the journal {self.path}: {exc.strerror}") from None
        lines = data.split(b"\n")
        last = len(lines) - 1
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            rec = decode(raw)
            if rec is None:
                self._note_damage(number, number - 1 == last)
                continue
            yield rec

    def _records_reversed(self) -> Iterator[dict[str, Any]]:
        """Whole records, newest first, read from the end in chunks: undo and the latest
        entries need the tail of a long journal, not all of it."""
        self.damaged = []
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UserError(f"cannot read the journal {self.path}: {exc.strerror}") from None
        try:
            pos = os.fstat(fd).st_size
            carry = b""
            newest = True  # the line after the last newline: torn unless it is empty
            while pos > 0:
                step = min(CHUNK, pos)
                pos -= step
                lines = (os.pread(fd, step, pos) + carry).split(b"\n")
                # The first piece may be the end of a line that starts in an earlier chunk.
                carry = lines.pop(0) if pos > 0 else b""
                for raw in reversed(lines):
                    last, newest = newest, False
                    if not raw.strip():
                        continue
                    rec = decode(raw)
                    if rec is None:
                        self._note_damage(None, last)
                        continue
                    yield rec
        finally:
            os.close(fd)

    def _note_damage(self, number: int | None, last: bool) -> None:
        where = f"line {number}" if number is not None else "a line"
        self.damaged.append(
            f"the journal's last line is torn (a crash while it was written); the next "
            f"change moves it to {self.torn_path}" if last else
            f"{where} of {self.path} is not a whole journal record (damaged or edited): "
            "it was skipped")

    def _assemble(self, recs: Iterator[dict[str, Any]], newest_first: bool,
                  stop: Callable[[Entry], bool] | None = None) -> list[Entry]:
        """Entries from records. Read newest first, an entry's ends and undos are seen
        before its intent, so `stop` may end the read early."""
        ends: dict[str, dict[str, Any]] = {}
        by_id: dict[str, Entry] = {}
        order: list[str] = []
        undos: dict[str, list[str]] = {}

        def finish(e: Entry) -> Entry:
            end = ends.get(e.id)
            return _ended(e, end) if end is not None else e

        for rec in recs:
            if rec["type"] == "end":
                # Oldest first, the later end wins; newest first, the first seen does.
                if not newest_first or rec["id"] not in ends:
                    ends[rec["id"]] = rec
                continue
            if rec["id"] in by_id:
                continue
            e = _entry(rec)
            if e is None:
                self.damaged.append(f"the intent of {printable(rec['id'])} holds no change "
                                    "stormdeck can read: it was skipped")
                continue
            if newest_first:
                e = finish(e)
                e.undone_by.extend(reversed(undos.get(e.id, ())))
                if e.counts_as_undo and e.undoes:
                    undos.setdefault(e.undoes, []).append(e.id)
                by_id[e.id] = e
                order.append(e.id)
                if stop is not None and stop(e):
                    break
            else:
                by_id[e.id] = e
                order.append(e.id)
        if newest_first:
            return [by_id[i] for i in reversed(order)]
        done = [finish(by_id[i]) for i in order]
        index = {e.id: e for e in done}
        for e in done:
            if e.counts_as_undo and e.undoes in index:
                index[e.undoes].undone_by.append(e.id)
        return done

    def entries(self, last: int | None = None) -> list[Entry]:
        """Every entry, oldest first; or the newest `last` of them, read from the end."""
        if last is None:
            return self._assemble(self.records(), newest_first=False)
        count = [0]

        def enough(_: Entry) -> bool:
            count[0] += 1
            return count[0] >= last

        return self._assemble(self._records_reversed(), newest_first=True, stop=enough)

    def since(self, started: float) -> list[Entry]:
        """The entries begun at or after `started`, oldest first, read from the end (intents
        are appended in time order, so the read stops at the first older one)."""
        found = self._assemble(self._records_reversed(), newest_first=True,
                               stop=lambda e: e.started < started)
        return [e for e in found if e.started >= started]

    def find(self, entry_id: str | None) -> Entry:
        """The entry named by its id or an unambiguous start of it; None: the newest entry
        that is neither an undo nor undone."""
        if entry_id is None:
            found = self._assemble(self._records_reversed(), newest_first=True, stop=_live)
            live = [e for e in found if _live(e)]
            if not live:
                if not found:
                    raise UserError(f"the journal {self.path} holds no change")
                raise UserError("no change in the journal is left to undo: each is undone "
                                "or changed nothing")
            return live[-1]
        if len(entry_id) >= 10:  # a whole id: the first match from the end is the one
            found = self._assemble(self._records_reversed(), newest_first=True,
                                   stop=lambda e: e.id == entry_id)
            matches = [e for e in found if e.id == entry_id]
        else:
            matches = [e for e in self.entries() if e.id.startswith(entry_id)]
        if len(matches) != 1:
            if not matches and not self.path.exists():
                raise UserError(f"the journal {self.path} holds no change")
            raise UserError(f"no journal entry {printable(entry_id)!r}" if not matches else
                            f"{printable(entry_id)!r} names {len(matches)} entries; give more "
                            "of the id")
        return matches[0]


def _live(e: Entry) -> bool:
    """An entry `undo` with no id would take: not an undo, not undone, not refused."""
    return e.undoes is None and not e.undone_by and e.made is not False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        view = view[n:]


def _last_line_start(fd: int, size: int) -> int:
    """The offset just after the last newline before `size` (0 if none)."""
    pos = size
    while pos > 0:
        step = min(CHUNK, pos)
        pos -= step
        chunk = os.pread(fd, step, pos)
        i = chunk.rfind(b"\n")
        if i >= 0:
            return pos + i + 1
    return 0


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
