"""The executor: read-only guard, stale-plan check, apply, read back, journal; and undo.

Generic over the actuators (advisors/actuators.py): each kind of change says
how it is read, applied, verified and inverted; this module only orders those
steps and journals around them. Every change is journaled (intent fsync'd)
before it is made and ended after. Undo applies the targeted inverse of one
entry, never `config reset`, which would roll back everyone's later changes (K7.4).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from stormdeck.advisors import blast
from stormdeck.advisors.actuators.base import Backends, same
from stormdeck.advisors.actuators.table import actuator
from stormdeck.advisors.ceph_admin import CephAdmin, Refused
from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Entry, Journal, JournalError
from stormdeck.advisors.lock import Busy, writer
from stormdeck.advisors.plan import Plan, validate_change
from stormdeck.advisors.review import Review, review_plan, review_undo, undo_plan
from stormdeck.base import pgstate
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable

__all__ = ["CephAdmin", "Executor", "NothingChanged", "Outcome", "ReadOnlyError", "StaleError",
           "journal_path"]


class NothingChanged(UserError):
    """Refused before anything was sent, or refused by the cluster: nothing changed."""


class ReadOnlyError(NothingChanged):
    pass


class StaleError(NothingChanged):
    pass


@dataclass(frozen=True, slots=True)
class Outcome:
    entry: str
    change: Change
    outcome: str  # "applied" | "pending" | "pending restart" | "overridden by <reason>"
    #               (a refused or unknown outcome raises, after it is journaled)
    after: str | None
    detail: str = ""


class Executor:
    """Applies plans and undoes journal entries; refuses everything in read-only mode.

    One writer at a time: apply and undo hold the state directory's lock (advisors/lock.py)
    from the stale check to the last end record, so two terminals cannot both apply one
    plan or both undo one entry; the console takes it only while it changes something.
    """

    def __init__(self, journal: Journal, ceph: CephAdmin | None = None,
                 read_only: bool = False, curve_tool: list[str] | None = None,
                 verify_seconds: float = 15.0, curve_follow: Callable[[str], Any] | None = None,
                 converge_seconds: float = 120.0, wait: float = 0.0,
                 predict: bool = True) -> None:
        self.journal = journal
        # Whether changes that move data are predicted (advisors/blast.py) and guarded.
        self.predict = predict
        self.read_only = read_only
        self.wait = wait
        self.backends = Backends(ceph=ceph, curve_tool=tuple(curve_tool or ["curve_ops_tool"]),
                                 curve_follow=curve_follow, verify_seconds=verify_seconds,
                                 converge_seconds=converge_seconds)
        self.began: list[str] = []  # journal entries this executor wrote an intent for
        self.sent: list[str] = []  # of those, the ones whose change was sent (not refused)
        # The last prediction and the changes it was for: apply reuses the one the review
        # showed while the osdmap epoch has not moved (a prediction costs seconds at scale).
        self._predicted: tuple[tuple[Any, ...], blast.Prediction] | None = None

    def told(self, exc: UserError) -> UserError:
        """`exc` as the operator should read it: a refusal that came after a change of the
        same run was sent names that change ("nothing was changed" must not stand alone,
        nor exit 3, nothing done)."""
        if isinstance(exc, NothingChanged) and self.sent:
            return UserError(f"{exc}; but this run had already changed journal "
                             f"{', '.join(self.sent)} (see stormdeck journal; stormdeck undo "
                             "puts it back)", exit_code=1)
        return exc

    @property
    def ceph(self) -> CephAdmin | None:
        return self.backends.ceph

    def close(self) -> None:
        """Close the cluster connection (each apply from the console makes its own)."""
        if self.backends.ceph is not None:
            self.backends.ceph.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def review(self, plan: Plan) -> Review:
        """The plan as the operator is asked to confirm it, every check run first
        (advisors/review.py); `Review.carry_out` then applies it on this executor."""
        return review_plan(self, plan, lambda c: actuator(c.kind).runtime(self.ceph, c))

    def review_undo(self, entry: Entry) -> Review:
        """Undoing `entry` as the operator is asked to confirm it (advisors/review.py)."""
        return review_undo(self, entry)

    def refuse_if_read_only(self, what: str) -> None:
        self._guard(what)

    def _guard(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"read-only mode: {what} refused (start without --read-only, "
                                "or set read_only = false for this cluster, to make changes)")

    def _lock(self, what: str) -> contextlib.AbstractContextManager[None]:
        return writer(self.journal.path.parent, what, self.wait)

    # -- reading --

    def current(self, c: Change) -> str | None:
        """The value now, in the same terms as the plan's `current`."""
        return actuator(c.kind).read(self.backends, c)

    # -- applying --

    def check_stale(self, plan: Plan) -> None:
        ceph = self.backends.ceph
        if plan.fsid and ceph is not None and ceph.fsid() != plan.fsid:
            raise StaleError(f"the plan was made for cluster {printable(plan.fsid)}, not this "
                             f"one ({ceph.fsid()})")
        moved = []
        for c in plan.changes:
            if not actuator(c.kind).has_value:
                continue
            now = self.current(c)
            if not same(now, c.current):
                moved.append(f"{printable(c.key)} on {printable(c.target)} was "
                             f"{printable(c.current)} when planned and is {printable(now)} now")
        if moved:
            raise StaleError("refused, the cluster moved since the plan: " + "; ".join(moved)
                             + "; make a new plan")

    # -- what it moves --

    def prediction(self, plan: Plan) -> blast.Prediction | None:
        """What the plan's data-moving changes do, predicted from the cluster now; None when
        none moves data (or prediction is off). A prediction that cannot be made refuses:
        a change whose reach is unknown is not made blind."""
        ceph = self.backends.ceph
        if not self.predict or ceph is None or \
                not any(blast.moves_data(c) for c in plan.changes):
            return None
        key = blast.changes_key(plan.changes)
        if self._predicted is not None and self._predicted[0] == key:
            try:
                epoch = int((ceph.cmd("osd stat") or {}).get("epoch") or 0)
            except (UserError, ValueError, TypeError, AttributeError):
                epoch = None
            if blast.reusable(self._predicted[1], epoch):
                return self._predicted[1]
        try:
            p = blast.plan_prediction(ceph.connection, plan.changes)
            if p is not None:
                self._predicted = (key, p)
            return p
        except NothingChanged:
            raise
        except UserError as exc:
            raise NothingChanged(f"refused: what {printable(plan.rule)} would move could not "
                                 f"be predicted ({exc}); nothing was changed") from None

    def guard(self, plan: Plan, prediction: blast.Prediction | None) -> None:
        """Refuse a change that makes a PG inactive or fills an OSD past backfillfull; one
        past nearfull only if the plan the operator confirmed already said so (its typed
        phrase was asked for that reason)."""
        if prediction is None:
            return
        reason = prediction.refusal()
        if reason:
            raise NothingChanged(f"refused: {reason}; nothing was changed (the plan's command "
                                 "is shown above, for an operator who decides otherwise by "
                                 "hand)")
        near = {i for p in prediction.stages() for i in p.osds_past_nearfull}
        told = set()
        if plan.prediction is not None:
            told = {i for p in blast.Prediction.from_dict(plan.prediction).stages()
                    for i in p.osds_past_nearfull}
        if near - told:
            raise NothingChanged(f"refused: it fills "
                                 f"{', '.join(f'osd.{i}' for i in sorted(near - told))} past "
                                 "nearfull, which the reviewed plan did not say; review it "
                                 "again (stormdeck apply predicts it and asks the phrase)")

    def apply(self, plan: Plan) -> list[Outcome]:
        self.sent = []  # this run's: an executor kept across plans names none of another's
        self._guard(f"applying {printable(plan.rule)}")
        for c in plan.changes:
            validate_change(c)
        with self._lock(f"applying plan {printable(plan.id, 40)}"):
            # Under the lock: a second terminal with the same plan finds it stale here.
            self.check_stale(plan)
            prediction = self.prediction(plan)
            self.guard(plan, prediction)
            predicted = prediction.to_dict() if prediction is not None else None
            return [self._one(c, c.proposed, plan=plan.id, rule=plan.rule, cluster=plan.fsid,
                              prediction=predicted if blast.moves_data(c) else None)
                    for c in plan.changes]

    def _one(self, c: Change, value: str | None, plan: str | None = None,
             rule: str | None = None, cluster: str | None = None,
             undoes: str | None = None, prediction: dict[str, Any] | None = None) -> Outcome:
        """Set what `c` names to `value` (None: back to unset), journaled around it.

        Nothing is sent before its intent is durable. Afterwards the journal says what is
        known: "refused" (Ceph said no: nothing changed), "unknown" (sent, no answer or no
        read-back: undo may still be needed), or how the read-back ended."""
        act = actuator(c.kind)
        before = act.before(self.backends, c)
        failpoint("before-intent")
        entry = self.journal.intent(c, before, plan=plan, rule=rule, cluster=cluster,
                                    undoes=undoes, value=value, prediction=prediction)
        self.began.append(entry)
        failpoint("after-intent")
        shown = printable(c.command, 200)
        try:
            act.apply(self.backends, c, value)
            self.sent.append(entry)
            failpoint("after-send")
        except Refused as exc:
            self._end(entry, c, "refused", str(exc))
            raise NothingChanged(f"{exc}; nothing was changed (journal {entry})") from None
        except Exception as exc:  # no answer, or a fault mid-way: it may have been made
            if entry not in self.sent:
                self.sent.append(entry)
            detail = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            self._end(entry, c, "unknown", f"sent; {detail}")
            raise UserError(f"{shown} was sent but its outcome is unknown ({detail}); "
                            f"stormdeck journal shows entry {entry}, and stormdeck undo "
                            f"{entry} puts back {_shown(before)}", exit_code=1) from None
        try:
            v = act.verify(self.backends, c, value)
        except Exception as exc:
            detail = str(exc) if isinstance(exc, UserError) else f"{type(exc).__name__}: {exc}"
            self._end(entry, c, "unknown", f"sent; the read-back failed: {detail}")
            raise UserError(f"{shown} was sent but could not be read back ({detail}); "
                            f"stormdeck journal shows entry {entry} as unknown, and stormdeck "
                            f"undo {entry} puts back the value before", exit_code=1) from None
        failpoint("after-verify")
        observed = self.observed() if prediction is not None else None
        self._end(entry, c, v.outcome, v.detail, v.after, observed)
        failpoint("after-end")
        return Outcome(entry, c, v.outcome, v.after, v.detail)

    def observed(self) -> dict[str, Any] | None:
        """What the cluster says right after a data-moving change (`ceph status`): PGs
        remapped, objects misplaced and degraded; kept beside the prediction."""
        ceph = self.backends.ceph
        if ceph is None:
            return None
        try:
            pgmap = (ceph.cmd("status") or {}).get("pgmap") or {}
        except UserError:
            return None
        states = pgmap.get("pgs_by_state") or ()

        def count(word: str) -> int:
            return sum(int(s.get("count", 0)) for s in states
                       if word in str(s.get("state_name", "")).split("+"))

        num_pgs = int(pgmap.get("num_pgs") or 0)
        # Clean as base/pgstate.py judges it: a split's new PGs are often scrubbed at
        # once, and a scrub is no movement left to wait for.
        clean = sum(int(s.get("count", 0)) for s in states
                    if pgstate.is_healthy(str(s.get("state_name", ""))))
        misplaced = int(pgmap.get("misplaced_objects") or 0)
        objects = int(pgmap.get("num_objects") or 0)
        # `ceph status` counts misplaced objects, not bytes: at the pool's mean object size
        # they come to about this many bytes (an estimate, said so where it is shown).
        mean = int(pgmap.get("data_bytes") or 0) / objects if objects else 0.0
        return {"time": time.time(), "pgs_remapped": count("remapped"),
                "pgs_backfilling": count("backfilling") + count("backfill_wait"),
                "pgs_inactive": sum(int(s.get("count", 0)) for s in states
                                    if "active" not in str(s.get("state_name", ""))),
                "misplaced_objects": misplaced,
                "misplaced_bytes": int(misplaced * mean),
                "misplaced_ratio": float(pgmap.get("misplaced_ratio") or 0.0),
                "degraded_objects": int(pgmap.get("degraded_objects") or 0),
                "num_pgs": num_pgs, "clean": bool(num_pgs) and clean == num_pgs}

    def _end(self, entry: str, c: Change, outcome: str, detail: str = "",
             after: str | None = None, observed: dict[str, Any] | None = None) -> None:
        try:
            self.journal.end(entry, outcome, detail, after, observed=observed)
        except JournalError as exc:
            raise UserError(f"{printable(c.command, 200)} ended {outcome}, but its end could not "
                            f"be journaled ({exc}); its intent is on disk, so stormdeck journal "
                            f"shows entry {entry} as incomplete and undo can put the value "
                            "back", exit_code=1) from None

    # -- reading an entry again --

    def refresh(self, entry: Entry) -> Entry:
        """Read again what an entry left open (an unknown outcome, a change on its way to
        its target) and journal what is now known; the entry as the journal now tells it."""
        c = entry.change
        act = actuator(c.kind)
        if not act.has_value or (entry.made is not None and entry.status != "pending"):
            return entry
        if entry.status == "pending":
            arrived = act.arrived(self.backends, c, entry.value)
            if arrived is None:
                return entry
            # A later end supersedes: what `ceph status` said right after goes on with it.
            self.journal.end(entry.id, "applied", f"reached {arrived}", arrived,
                             observed=entry.observed, settled=entry.settled,
                             measured=entry.measured)
        else:
            stored = act.before(self.backends, c)
            if same(stored, entry.value):
                self.journal.end(entry.id, "pending" if act.arrived(
                    self.backends, c, entry.value) is None else "applied",
                    "read again: the change was made", stored,
                    observed=entry.observed, settled=entry.settled,
                    measured=entry.measured)
            elif same(stored, entry.before):
                self.journal.end(entry.id, "not made", "read again: the value is the one "
                                 "before the change", stored)
            else:
                return entry
        return self.journal.find(entry.id)

    def refresh_open(self, entries: list[Entry] | None = None) -> int:
        """Read again every open entry (unknown, incomplete, converging) of this cluster and
        journal what is now known; how many were settled. Skipped (0) while another
        stormdeck holds the lock: it is changing things and will end its own entries."""
        ceph = self.backends.ceph
        fsid = ceph.fsid() if ceph is not None else None
        listed = entries if entries is not None else self.journal.entries(last=200)
        todo = [e for e in listed
                if (e.made is None or e.status == "pending") and not e.undone_by
                and (e.cluster is None or e.cluster == fsid)
                and (ceph is not None or not actuator(e.change.kind).needs_ceph)]
        watch = [e for e in listed if e.awaiting_clean and ceph is not None
                 and (e.cluster is None or e.cluster == fsid)]
        seen = self.observed() if watch else None
        if seen is None or not seen.get("clean"):
            # Nothing to journal until the cluster is clean: the console looks every 10 s,
            # and a look takes no lock another terminal's apply would wait for.
            watch = []
        if not todo and not watch:
            return 0
        try:
            with self._lock("reading open journal entries again"):
                settled = 0
                for e in todo:
                    now = self.refresh(self.journal.find(e.id))
                    settled += now.status != e.status
                if watch and seen is not None:
                    # After the refresh: a pg_num change that just arrived, or one still
                    # stepping (settle asks the pool), is not counted as done.
                    settled += len(self.settle([self.journal.find(e.id) for e in watch],
                                               seen, final=False,
                                               by="a later read of the journal"))
                return settled
        except Busy:
            return 0

    # -- how the data movement ended --

    def settle(self, entries: list[Entry], seen: dict[str, Any], final: bool,
               by: str, samples: list[dict[str, Any]] | None = None) -> list[str]:
        """Journal, for each entry awaiting active+clean, what `seen` (and the earlier
        `samples` of the same watch) tell: active+clean at seen's time, with the most
        misplaced and degraded met on the way. Not clean: journaled only when `final` (a
        watch that gives up keeps its maxima and when it last saw the movement); a later
        read finds clean and says between which two reads it happened. The ids journaled."""
        done = []
        for e in entries:
            if not e.awaiting_clean:
                continue
            now = seen
            if e.status == "pending" or self.placing(e.change):
                # pg_num or pgp_num still stepping: clean between steps is not done (split
                # children are clean where their parent is until pgp_num moves them).
                now = {**seen, "clean": False}
            if not now.get("clean") and not final:
                continue
            record = merge_settled(e, [*(samples or ()), now], by)
            self.journal.end(e.id, e.status, e.detail, e.after, observed=e.observed,
                             settled=record, measured=e.measured)
            done.append(e.id)
        return done

    def placing(self, c: Change) -> bool:
        """Whether a pg_num/pgp_num change's pool is still on its way: pg_num or pgp_num
        short of the target the mon keeps (`osd pool set pg_num` sets both targets; the mgr
        steps pgp_num after a split, and only then does data move). Not pgp_num against
        pg_num: a pool may keep pgp_num below pg_num on purpose."""
        ceph = self.backends.ceph
        if ceph is None or not blast.splits_pool(c):
            return False
        try:
            return pool_stepping(ceph.cmd("osd dump") or {}, c.target)
        except UserError:
            return False

    def watch(self, entry_ids: list[str], seconds: float, poll: float = 1.0,
              sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> list[Entry]:
        """`apply --follow`: read `ceph status` every `poll` seconds, for at most `seconds`,
        until the changes' data movement is done (active+clean), and journal how it ended
        (or, at the bound or on Ctrl-C, what was seen so far). Returns the entries as the
        journal then tells them."""
        deadline = clock() + seconds
        samples: list[dict[str, Any]] = []
        seen: dict[str, Any] | None = None
        try:
            while True:
                with self._lock("following a change to active+clean"):
                    entries = [self.refresh(self.journal.find(i)) for i in entry_ids]
                seen = self.observed()
                if seen is None:
                    break
                arrived = all(e.status != "pending" and not self.placing(e.change)
                              for e in entries)
                if (seen.get("clean") and arrived) or clock() >= deadline:
                    break
                samples.append(seen)
                sleep(min(poll, max(deadline - clock(), 0.0)))
        finally:
            # Ctrl-C or the bound: what was seen is kept; the movement goes on regardless.
            if seen is not None:
                with self._lock("journaling how the data movement ended"):
                    self.settle([self.journal.find(i) for i in entry_ids], seen, final=True,
                                by="apply --follow", samples=samples)
        return [self.journal.find(i) for i in entry_ids]

    # -- undo --

    def inverse(self, entry: Entry) -> Change:
        """The change that undoes `entry`, with the exact command: shown before confirming.

        Raises UserError when the entry has no way back, before anything is touched.
        """
        c = entry.change
        if entry.undone_by:
            raise UserError(f"{entry.id} is already undone by {', '.join(entry.undone_by)}")
        if entry.undoes is not None:
            raise UserError(f"{entry.id} is itself an undo; undo {entry.undoes} is done")
        act = actuator(c.kind)
        reason = act.cannot_undo(c)
        if reason:
            raise UserError(f"{entry.id}: {reason}")
        if entry.made is False:
            raise UserError(f"{entry.id} ended {entry.status} and changed nothing to undo")
        return act.inverse(c, entry.before)

    def undo_prediction(self, entry: Entry, inverse: Change) -> blast.Prediction | None:
        """What undoing `entry` moves (pg_num back is a split or a merge like any other):
        predicted and guarded as apply is. None when the inverse moves no data."""
        return self.prediction(undo_plan(entry, inverse))

    def guard_undo(self, entry: Entry, inverse: Change, prediction: blast.Prediction | None,
                   told: blast.Prediction | None = None) -> None:
        """The apply guard, for an undo: inactive PGs or past backfillfull refused; past
        nearfull only when `told` (what the operator confirmed) already said so."""
        self.guard(undo_plan(entry, inverse, told.to_dict() if told is not None else None),
                   prediction)

    def undo(self, entry: Entry, told: blast.Prediction | None = None) -> Outcome:
        """Undo `entry`. An inverse that moves data is predicted under the lock and guarded
        as apply is; `told` is the prediction the operator confirmed (its nearfull OSDs)."""
        self.sent = []
        self._guard(f"undoing {entry.id}")
        with self._lock(f"undoing {entry.id}"):
            # Read again under the lock: another terminal may have undone it meanwhile.
            entry = self.journal.find(entry.id)
            self.inverse(entry)
            self.check_undo_cluster(entry)
            entry = self.refresh(entry)
            if entry.made is False:
                raise UserError(f"nothing to undo: {entry.id} was read again and was not made "
                                f"({printable(entry.detail, 200)})", exit_code=0)
            inverse = self.inverse(entry)
            self.check_undo_stale(entry, inverse)
            prediction = self.undo_prediction(entry, inverse)
            self.guard_undo(entry, inverse, prediction, told)
            return self._one(inverse, entry.before, rule=entry.rule, cluster=entry.cluster,
                             undoes=entry.id,
                             prediction=prediction.to_dict() if prediction is not None
                             else None)

    def check_undo_cluster(self, entry: Entry) -> None:
        """An entry is undone on the cluster it was made on, nowhere else."""
        ceph = self.backends.ceph
        if entry.cluster and ceph is not None and (now := ceph.fsid()) != entry.cluster:
            raise UserError(f"{entry.id} was made on cluster {printable(entry.cluster)}, "
                            f"not on this one ({now}): undo it there")

    def check_undo_stale(self, entry: Entry, inverse: Change) -> None:
        """Undo puts back the value before only over the value this entry set: a later
        change by anyone else is theirs to keep (as apply refuses a plan the cluster moved
        under)."""
        c = entry.change
        act = actuator(c.kind)
        if not act.has_value:
            return
        now = act.before(self.backends, c)
        if same(now, entry.value) or same(now, entry.before):
            # As the entry left it, or already back where undo puts it (a scheduler that
            # took the value out of the database again): the inverse then changes nothing,
            # and closes the entry, so it is not offered again.
            return
        shown = _shown(now)
        raise StaleError(f"refused: {printable(c.key)} on {printable(c.target)} is {shown} "
                         f"now, not {_shown(entry.value)} as {entry.id} left it; someone "
                         "changed it since, and undo would "
                         f"overwrite that change; nothing was changed (to put the old value "
                         f"back all the same: {printable(inverse.command, 200)})")


def pool_stepping(dump: dict[str, Any], name: str) -> bool:
    """From `osd dump`: pool `name`'s pg_num or pgp_num (pg_placement_num) is short of its
    target. A pool that is gone steps no more."""
    for p in dump.get("pools") or ():
        if p.get("pool_name") == name:
            pg, pgp = p.get("pg_num"), p.get("pg_placement_num")
            return pg != p.get("pg_num_target", pg) or \
                pgp != p.get("pg_placement_num_target", pgp)
    return False


def merge_settled(e: Entry, seen: list[dict[str, Any]], by: str) -> dict[str, Any]:
    """An entry's `settled` record with more reads of `ceph status` folded in: the maxima
    of misplaced and degraded, the last read that still saw movement, and (when the newest
    read is clean) when active+clean was seen: between that last busy read and this one."""
    old = dict(e.settled or {})
    right_after = e.observed or {}
    start = float(right_after.get("time") or e.ended or e.started)
    reads = ([right_after] if right_after else []) + list(seen)
    busy = [r for r in reads if not r.get("clean")]
    out: dict[str, Any] = {"since": start, "by": by}
    for key in ("pgs_remapped", "misplaced_objects", "misplaced_bytes", "degraded_objects",
                "pgs_inactive"):
        values = [int(r.get(key) or 0) for r in reads] + [int(old.get(f"{key}_max") or 0)]
        out[f"{key}_max"] = max(values)
    last_busy = max([float(r.get("time") or start) for r in busy]
                    + [float(old.get("busy_at") or start)])
    out["busy_at"] = last_busy
    newest = seen[-1] if seen else {}
    if newest.get("clean"):
        out["clean_at"] = float(newest.get("time") or time.time())
        out["seconds"] = out["clean_at"] - start
        # Active+clean came after the last read that still saw movement.
        out["seconds_at_least"] = last_busy - start
    else:
        out["clean_at"] = None
        out["seconds_so_far"] = float(newest.get("time") or last_busy) - start
    return out


FAILPOINT = "STORMDECK_FAILPOINT"


def failpoint(step: str) -> None:
    """Die (kill -9) or stop (SIGSTOP) at `step` when $STORMDECK_FAILPOINT names it, as
    "after-intent" or "after-intent:stop": how the fault tests crash a change at each step
    of its way (etcd's and TiKV's failpoints, in one line). Unset, it costs a lookup."""
    point = os.environ.get(FAILPOINT)
    if not point:
        return
    name, _, how = point.partition(":")
    if name == step:
        os.kill(os.getpid(), signal.SIGSTOP if how == "stop" else signal.SIGKILL)


def _shown(value: str | None) -> str:
    return printable(value) if value is not None else "unset"


def journal_path() -> Path:
    from stormdeck.advisors.settings import state_dir

    return state_dir() / "journal.jsonl"
