"""One step of a watched session, shared by the console's feed, `record` and replay:
judge the new snapshot, read its events, and put all of it on tape."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from stormdeck.advisors.findings import Finding
from stormdeck.advisors.timeline import Event, Timeline
from stormdeck.base.errors import UserError
from stormdeck.collectors.model import Snapshot
from stormdeck.collectors.recording import Recorder, Recording, decode


@dataclass(frozen=True, slots=True)
class Step:
    snapshot: Snapshot
    findings: tuple[Finding, ...]
    events: tuple[Event, ...]  # the newest ones, oldest first


class Session:
    """Engine, timeline and (optionally) a recorder and the change journal, stepped together."""

    def __init__(self, engine: Any, recorder: Recorder | None = None, journal: Any = None,
                 events_kept: int = 300, timeline_keep: int = 2000) -> None:
        self.engine = engine
        self.recorder = recorder
        self.journal = journal
        self.timeline = Timeline(keep=timeline_keep)
        self.events_kept = events_kept
        self.started = time.time()
        self._journal_mtime: float | None = None

    def step(self, snap: Snapshot, history: Sequence[Snapshot]) -> Step:
        findings = tuple(self.engine.evaluate(history))
        self.timeline.add(snap)
        events = tuple(self.timeline.events)[-self.events_kept:]
        if self.recorder is not None:
            self.recorder.add_snapshot(snap)
            self.recorder.add_findings(snap.time, findings)
            self._tape_journal(snap.time)
        return Step(snap, findings, events)

    def checkpoint(self) -> tuple:
        """What judging has built up (engine and timeline), to resume from later."""
        return (self.engine.checkpoint(), self.timeline.checkpoint())

    def restore(self, state: tuple) -> None:
        engine, timeline = state
        self.engine.restore(engine)
        self.timeline.restore(timeline)

    def _tape_journal(self, at: float) -> None:
        """Changes made during the session go on tape as they start and as they end."""
        if self.journal is None or self.recorder is None:
            return
        try:
            mtime = self.journal.path.stat().st_mtime
        except OSError:
            return
        if mtime == self._journal_mtime:
            return
        self._journal_mtime = mtime
        try:
            entries = self.journal.since(self.started)
        except UserError:
            return  # the journal's own commands say what is wrong with it
        self.recorder.add_journal(at, entries)

    def close(self) -> None:
        if self.recorder is not None:
            self.recorder.close()


def replay(rec: Recording, engine: Any, start: int = 0, keep: int = 600,
           session: Session | None = None, history: Iterable[Snapshot] = ()
           ) -> Iterator[tuple[int, Step, tuple[Snapshot, ...]]]:
    """The recording's snapshots from the `start`th on, judged afresh by `engine`:
    (ordinal, step, the history the step was judged on). `history` and a `session`
    restored from a checkpoint resume a replay where it was."""
    from stormdeck.collectors.hub import History

    kept = History(keep)  # packs its older snapshots, as the live one does
    for snap in history:
        kept.append(snap)
    session = session or Session(engine)
    for i, snap in enumerate(rec.snapshots(start), start):
        kept.append(snap)
        yield i, session.step(snap, kept), tuple(kept)


def recorded_findings(rec: Recording) -> list[tuple[float, tuple[Finding, ...]]]:
    """The findings as they were seen live, each time what fired changed."""
    out = []
    for r in rec.records():
        if r.kind != "findings":
            continue
        try:
            out.append((r.time, tuple(decode(Finding, f) for f in r.data["f"])))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue  # a record this version cannot read: the others still tell
    return out


def recorded_changes(rec: Recording) -> list[Any]:
    """The journal entries made during the recording, each in its last known state."""
    from stormdeck.advisors.journal import Entry

    by_id: dict[str, Any] = {}
    for r in rec.records():
        if r.kind == "journal":
            try:
                e = decode(Entry, r.data["e"])
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            by_id[e.id] = e
    return list(by_id.values())


class RecordedJournal:
    """A recording's changes where the console expects the journal: shown, never undone."""

    def __init__(self, path: Any) -> None:
        self.path = path

    def entries(self, last: int | None = None) -> list[Any]:
        rec = Recording(self.path)
        try:
            changes = recorded_changes(rec)
        finally:
            rec.close()
        return changes if last is None else changes[-last:]
