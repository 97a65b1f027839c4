"""Mutes: a finding silenced for a while, kept across runs, dropped when it grows worse."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stormdeck.advisors.findings import Finding, Severity
from stormdeck.advisors.lock import Busy, writer
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable

MAX_TTL = 30 * 86400.0
WORSEN = 1.25  # badness this many times the muted value counts as worse
# Clocks of hosts sharing a home directory (NFS) drift a little: a mute made a minute
# "ahead" is theirs, not a forgery.
SKEW = 300.0
# What stormdeck itself writes: a file bigger than this was not.
MAX_BYTES = 4 * 1024 * 1024
# A mute is a moment's judgement: waiting longer than this for another writer (an apply
# that follows a pg_num merge holds the lock for minutes) is refused with the reason.
WAIT = 10.0


@dataclass(frozen=True, slots=True)
class Mute:
    rule: str
    target: str  # "*" mutes the rule for every target
    until: float
    created: float
    severity: int
    badness: float
    reason: str = ""
    # The cluster it was made on: it silences that cluster's finding only. None: no
    # identity was known (a Curve-only source), or a file written before mutes named
    # their cluster; such a mute holds on every cluster, as it did when it was made (and
    # lapses within MAX_TTL), so an upgrade does not wake every muted finding at once.
    fsid: str | None = None


# (fsid, rule, target): one cluster's mute never overwrites another's.
MuteKey = tuple[str | None, str, str]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def canonical_fsid(text: str | None) -> str | None:
    """A cluster's fsid as mutes keep it (lower case, dashed), or None if it is not one."""
    if not isinstance(text, str):
        return None
    text = text.strip().lower()
    return text if _UUID.fullmatch(text) else None


def _key(m: Mute) -> MuteKey:
    return (m.fsid, m.rule, m.target)


class MuteStore:
    """Mutes in a JSON file, rewritten atomically; a TTL is required, as Ceph's mutes allow.

    Every change is a read-modify-write under the state directory's writer lock, the file
    read again under the lock: two `stormdeck mute` at once both land. The file is
    checked whole as it is read: a mute stormdeck would never have written (an `until` of
    1e300, NaN, a string, a mute made in the future) is refused, never obeyed.
    """

    def __init__(self, path: Path, wait: float = WAIT,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self.wait = wait
        self.clock = clock  # what "now" is when a file is checked (a replay's time in tests)
        self._mutes = self._load()

    # -- reading --

    def _load(self) -> dict[MuteKey, Mute]:
        try:
            with open(self.path, "rb") as f:
                data = f.read(MAX_BYTES + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise UserError(f"cannot read the mutes file {self.path}: {exc.strerror}") from None
        if len(data) > MAX_BYTES:
            raise UserError(f"{self.path} is over {MAX_BYTES // 2**20} MiB: not a mutes file "
                            "stormdeck wrote; move it away to start afresh")
        try:
            raw = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"{self.path} is not a mutes file stormdeck can read "
                            f"({printable(str(exc), 120)}); move it away to start "
                            "afresh") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("mutes"), list) or \
                raw.get("version") != 1:
            raise UserError(f"{self.path} is not a mutes file stormdeck can read (no "
                            "version 1 and list of mutes); move it away to start afresh")
        now = self.clock()
        out = {}
        for i, entry in enumerate(raw["mutes"]):
            mute = _checked(entry, now, lambda why, i=i: UserError(
                f"{self.path}: mute {i + 1} is refused: {why}; fix or delete that entry (or "
                "move the file away): stormdeck never wrote it"))
            out[_key(mute)] = mute
        return out

    # -- writing --

    def _change(self, what: str, edit: Callable[[dict[MuteKey, Mute]], Any],
                wait: float | None = None) -> Any:
        """Under the lock: read the file again, edit, write it whole; edit's result."""
        with writer(self.path.parent, what, self.wait if wait is None else wait):
            mutes = self._load()
            result = edit(mutes)
            self._save(mutes)
            self._mutes = mutes
            return result

    def _save(self, mutes: dict[MuteKey, Mute]) -> None:
        """Atomically: a temp file of our own beside it (two writers never share one),
        fsync'd, then renamed; a full disk leaves the old file as it was."""
        text = json.dumps({"version": 1, "mutes": [asdict(m) for m in mutes.values()]},
                          indent=1, allow_nan=False).encode()
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.",
                                   suffix=".tmp")  # 0600, as every state file
        try:
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(text)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        except OSError as exc:
            raise UserError(f"cannot save the mutes in {self.path} ({exc.strerror}); nothing "
                            "was changed: the mutes file is as it was") from None
        with contextlib.suppress(OSError):  # the rename made durable; a courtesy
            dfd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    # -- the store --

    def list(self, now: float | None = None) -> list[Mute]:
        now = self.clock() if now is None else now
        return [m for m in self._mutes.values() if m.until > now]

    def for_cluster(self, fsid: str | None, now: float | None = None) -> list[Mute]:
        """The mutes in force that hold on this cluster: its own, and those made with no
        cluster known (which hold everywhere)."""
        fsid = canonical_fsid(fsid)
        self._mutes = self._load()  # the console's store is hours old: the CLI's mutes too
        return [m for m in self.list(now) if m.fsid in (None, fsid)]

    def holders(self, rule: str, target: str) -> list[str | None]:
        """The clusters (fsids; None: every cluster) holding a mute of rule on target, as
        the file says now."""
        return [k[0] for k in self._load() if k[1:] == (rule, target)]

    def add(self, finding: Finding, ttl: float, badness: float = 0.0, all_targets: bool = False,
            reason: str = "", now: float | None = None, fsid: str | None = None) -> Mute:
        if not 0 < ttl <= MAX_TTL:
            raise UserError(f"a mute needs a time to live between 1 s and {MAX_TTL / 86400:g} "
                            f"days, not {ttl:g} s")
        if fsid is not None and canonical_fsid(fsid) is None:
            raise UserError(f"{printable(fsid, 60)} is not a cluster's fsid: nothing muted")
        if not math.isfinite(badness):
            badness = 0.0  # a rule's badness of inf or NaN: any worsening lifts it
        now = self.clock() if now is None else now
        mute = Mute(finding.rule, "*" if all_targets else finding.target, now + ttl, now,
                    int(finding.severity), badness, reason, canonical_fsid(fsid))

        def edit(mutes: dict[MuteKey, Mute]) -> Mute:
            for key in [k for k, m in mutes.items() if m.until <= now]:
                del mutes[key]
            mutes[_key(mute)] = mute
            return mute

        return self._change(f"muting {mute.rule}", edit)

    def remove(self, rule: str, target: str, fsid: str | None = None) -> bool:
        """Lift the mute of rule on target made on this cluster (None: the one made with no
        cluster known); the others' stay."""
        key = (canonical_fsid(fsid), rule, target)
        if key not in self._load():
            return False
        return bool(self._change(f"unmuting {rule}",
                                 lambda mutes: mutes.pop(key, None) is not None))

    def judge(self, finding: Finding, badness: float, now: float,
              fsid: str | None = None) -> tuple[Mute | None, str | None]:
        """The mute that holds for this finding of cluster `fsid` (None: unknown, when only
        a mute made with no cluster known holds), or None, and a note if one was dropped."""
        fsid = canonical_fsid(fsid)
        mute = None
        for key in ((fsid, finding.rule, finding.target), (fsid, finding.rule, "*"),
                    (None, finding.rule, finding.target), (None, finding.rule, "*")):
            mute = self._mutes.get(key)
            if mute is not None and mute.until > now:
                break
            mute = None
        if mute is None:
            return None, None
        worse_sev = int(finding.severity) > mute.severity
        worse = badness > mute.badness * WORSEN if mute.badness > 0 else badness > mute.badness
        if worse_sev or worse:
            key = _key(mute)
            self._mutes.pop(key, None)
            # Only the mute judged, and only if it is still the one judged: another
            # process may have renewed it meanwhile. Busy or a full disk: the finding is
            # shown unmuted here all the same, and the next judge lifts it from the file.
            with contextlib.suppress(Busy, UserError):
                self._change(f"lifting the mute of {mute.rule}",
                             lambda mutes: mutes.pop(key, None) if mutes.get(key) == mute
                             else None, wait=0.0)
            what = (f"severity rose to {Severity(int(finding.severity))}" if worse_sev
                    else f"it grew worse ({badness:g} against {mute.badness:g} when muted)")
            return None, f"unmuted: {what}"
        return mute, None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _checked(entry: Any, now: float, refuse: Callable[[str], UserError]) -> Mute:
    """One mute as stormdeck would have written it, or the reason it could not be."""
    if not isinstance(entry, dict):
        raise refuse("it is not an object")
    known = set(Mute.__dataclass_fields__)
    unknown = sorted(set(entry) - known)
    if unknown:
        raise refuse(f"it has an unknown field {printable(unknown[0], 40)!r}")
    for name in ("rule", "target"):
        value = entry.get(name)
        if not isinstance(value, str) or not value or len(value) > 200:
            raise refuse(f"its {name} is not a name")
    if not isinstance(entry.get("reason", ""), str):
        raise refuse("its reason is not text")

    def number(name: str) -> float:
        value = entry.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not math.isfinite(value):
            raise refuse(f"its {name} {printable(repr(value), 40)} is not a finite number")
        return float(value)

    created, until, badness = number("created"), number("until"), number("badness")
    severity = entry.get("severity")
    if isinstance(severity, bool) or severity not in {int(s) for s in Severity}:
        raise refuse(f"its severity {printable(repr(severity), 40)} is not 1, 2 or 3")
    if created <= 0 or created > now + SKEW:
        when = "in the future" if created > now else "at or before 1970"
        raise refuse(f"it was created at {created:.15g}, {when}")
    if not created < until <= created + MAX_TTL + 1:
        raise refuse(f"its until {until:.15g} is not within {MAX_TTL / 86400:g} days after "
                     "it was made")
    if badness < 0:
        raise refuse(f"its badness {badness:g} is below 0")
    # Absent (a file from before mutes named their cluster) or null: every cluster.
    fsid = entry.get("fsid")
    if fsid is not None and (not isinstance(fsid, str) or canonical_fsid(fsid) != fsid):
        raise refuse(f"its fsid {printable(repr(fsid), 60)} is not a cluster's fsid (a "
                     "lower-case UUID) or null")
    return Mute(entry["rule"], entry["target"], until, created, int(severity), badness,
                entry.get("reason", ""), fsid)
