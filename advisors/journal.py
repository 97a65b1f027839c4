"""The change journal: append-only JSONL, an intent fsync'd before each change, its end after.

A crash between the two leaves an intent without an end, which `stormdeck
journal` shows as incomplete; its before-value is already on disk, so undo
still knows the way back. A torn last line (a crash mid-write) is skipped.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stormdeck.advisors.model import Change
from stormdeck.advisors.overrides import is_overridden
from stormdeck.base.errors import UserError


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
    outcome: str | None = None  # "applied" | "pending restart" | "failed" |
    #                             "overridden by <reason>" (advisors/overrides.py)
    detail: str = ""
    after: str | None = None
    undoes: str | None = None  # the entry this one reverses
    undone_by: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        return self.outcome or "INCOMPLETE"


class Journal:
    def __init__(self, path: Path) -> None:
        self.path = path

    def _append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(record, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def intent(self, change: Change, before: str | None, plan: str | None = None,
               rule: str | None = None, cluster: str | None = None,
               undoes: str | None = None) -> str:
        entry_id = uuid.uuid4().hex[:10]
        self._append({"type": "intent", "id": entry_id, "time": time.time(), "plan": plan,
                      "rule": rule, "cluster": cluster, "change": asdict(change),
                      "before": before, "undoes": undoes})
        return entry_id

    def end(self, entry_id: str, outcome: str, detail: str = "", after: str | None = None) -> None:
        self._append({"type": "end", "id": entry_id, "time": time.time(), "outcome": outcome,
                      "detail": detail, "after": after})

    def records(self) -> Iterator[dict[str, Any]]:
        try:
            lines = self.path.read_bytes().split(b"\n")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise UserError(f"cannot read the journal {self.path}: {exc}") from None
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except ValueError:
                if number >= len(lines) - 1:
                    continue  # the torn tail of a crash mid-write
                raise UserError(f"{self.path} line {number} is not a journal record; "
                                "the journal is append-only: look at it before going on") from None
            yield rec

    def entries(self) -> list[Entry]:
        by_id: dict[str, Entry] = {}
        order: list[str] = []
        for rec in self.records():
            if rec.get("type") == "intent":
                try:
                    by_id[rec["id"]] = Entry(
                        id=rec["id"], plan=rec.get("plan"), rule=rec.get("rule"),
                        cluster=rec.get("cluster"), change=Change(**rec["change"]),
                        before=rec.get("before"), started=rec["time"], undoes=rec.get("undoes"))
                except (KeyError, TypeError):
                    continue
                order.append(rec["id"])
            elif rec.get("type") == "end" and rec.get("id") in by_id:
                e = by_id[rec["id"]]
                by_id[rec["id"]] = Entry(**{**asdict(e), "change": e.change,
                                            "ended": rec.get("time"),
                                            "outcome": rec.get("outcome"),
                                            "detail": rec.get("detail", ""),
                                            "after": rec.get("after")})
        for e in by_id.values():
            # An undo the daemons' scheduler overrides still put the stored value back.
            if e.undoes in by_id and (e.outcome in ("applied", "pending restart")
                                      or is_overridden(e.outcome)):
                by_id[e.undoes].undone_by.append(e.id)
        return [by_id[i] for i in order]

    def find(self, entry_id: str | None) -> Entry:
        entries = self.entries()
        if not entries:
            raise UserError(f"the journal {self.path} holds no change")
        if entry_id is None:
            live = [e for e in entries if not e.undone_by and e.undoes is None]
            if not live:
                raise UserError("every change in the journal is already undone")
            return live[-1]
        matches = [e for e in entries if e.id.startswith(entry_id)]
        if len(matches) != 1:
            raise UserError(f"no journal entry {entry_id!r}" if not matches else
                            f"{entry_id!r} names {len(matches)} entries; give more of the id")
        return matches[0]
