"""The experiments run here, one line per start and per end, beside the change journal."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from stormdeck.advisors.journal import encode
from stormdeck.base.errors import UserError


class ExperimentLog:
    """`experiments.jsonl`: a start is made durable before the first change of a run, and
    its end after the last undo. A start with no end, whose process is gone, is a run that
    was cut (kill -9, a lost host): the journal holds what it changed, and undo works."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _append(self, record: dict[str, Any]) -> None:
        line = encode({**record, "time": time.time()})
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise UserError(f"cannot record the experiment in {self.path} "
                            f"({exc.strerror}); nothing was changed") from None

    def start(self, exp_id: str, what: str, settings: dict[str, Any]) -> None:
        self._append({"type": "start", "id": exp_id, "what": what, "settings": settings,
                      "pid": os.getpid()})

    def end(self, exp_id: str, outcome: str, reason: str = "",
            result: dict[str, Any] | None = None) -> None:
        self._append({"type": "end", "id": exp_id, "outcome": outcome, "reason": reason[:2000],
                      "result": result})

    def runs(self) -> list[dict[str, Any]]:
        """Every run, oldest first: its start with "outcome" ("done", "cut", "running")
        and its end's reason and result merged in. Damaged lines are skipped."""
        runs: dict[str, dict[str, Any]] = {}
        with contextlib.suppress(FileNotFoundError):
            for raw in self.path.read_bytes().splitlines():
                rec = _decode(raw)
                if rec is None:
                    continue
                if rec["type"] == "start":
                    runs[rec["id"]] = {**rec, "outcome": "running", "reason": ""}
                elif rec["type"] == "end" and rec["id"] in runs:
                    runs[rec["id"]].update(outcome=rec.get("outcome"),
                                           reason=rec.get("reason", ""),
                                           result=rec.get("result"), ended=rec["time"])
        for run in runs.values():
            if run["outcome"] == "running" and not _alive(run.get("pid")):
                run["outcome"] = "cut"
                run["reason"] = ("its process ended before the experiment did (killed, or "
                                 "the host went down): see stormdeck journal for what it "
                                 "changed")
        return list(runs.values())


def _decode(raw: bytes) -> dict[str, Any] | None:
    import zlib

    try:
        rec = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(rec, dict) or rec.get("type") not in ("start", "end") or \
            not isinstance(rec.get("id"), str) or "crc" not in rec:
        return None
    crc = rec.pop("crc")
    body = json.dumps(rec, separators=(",", ":"), sort_keys=True)
    return rec if f"{zlib.crc32(body.encode()):08x}" == crc else None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def beside(journal: Any) -> ExperimentLog:
    """The record of runs beside the change journal the runs' changes go to."""
    return ExperimentLog(journal.path.with_name("experiments.jsonl"))
