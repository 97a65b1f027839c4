"""One experiment: a change applied and undone in alternated windows through the one review
and carry-out path, the OSDs' counters read each second, and each figure's effect judged."""

from __future__ import annotations

import contextlib
import math
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from stormdeck.advisors.actuators.base import same
from stormdeck.advisors.actuators.table import actuator
from stormdeck.advisors.experiment import stats
from stormdeck.advisors.experiment.counters import (
    Reader,
    Sample,
    harm_of,
    local_osd_pids,
    osds_to_read,
)
from stormdeck.advisors.experiment.figures import (
    CPU_PER_OP,
    FIGURES,
    LOAD,
    MIX,
    Figure,
    seconds_of,
)
from stormdeck.advisors.experiment.record import ExperimentLog
from stormdeck.advisors.plan import Plan
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable


@dataclass(frozen=True, slots=True)
class Settings:
    window: float = 10.0  # seconds each window is measured
    rounds: int = 6  # A/B pairs, in ABBA order (stats.py: what 4 and 6 resolve)
    settle: float = 3.0  # seconds after a change before its window is measured
    interval: float = 1.0  # seconds between reads
    keep: bool = False  # keep the change at the end when it helped and harmed nothing
    osd_limit: int = 32  # OSDs read at most (their `perf dump` each second)
    min_load: float = 5.0  # client ops per second below which nothing can be measured
    # Before/after only: seconds the run waits, after the change, for its data to move
    # or its OSDs to restart before it stops and undoes it.
    wait: float = 1800.0

    def check(self, flag: str = "--for") -> None:
        if not all(math.isfinite(x) for x in (self.window, self.interval, self.settle)) or \
                not (self.interval > 0 and self.window > 0 and self.settle >= 0):
            raise UserError("the window and the interval are seconds above zero, and the "
                            "settling time zero or more")
        if not (math.isfinite(self.wait) and 0 < self.wait <= 86400):
            raise UserError(f"--settled-within {self.wait:g}: seconds above zero, at most "
                            "a day")
        if self.window > 3600 or self.settle > 600:
            raise UserError(f"{flag} {self.window:g}: a window is at most 3600 s and the "
                            "settling time at most 600 s")
        if self.window / self.interval < 3:
            raise UserError(f"a window of {self.window:g} s holds fewer than three reads "
                            f"{self.interval:g} s apart: give {flag} {3 * self.interval:g} "
                            "or more")
        if self.rounds < 2 or self.rounds % 2:
            raise UserError(f"--rounds is an even number of A/B pairs, 2 or more, not "
                            f"{self.rounds}")


@dataclass(frozen=True, slots=True)
class WindowRun:
    arm: str
    started: float  # wall seconds
    reads: int


@dataclass(frozen=True)
class Result:
    id: str
    plan: Plan
    settings: Settings
    osds: tuple[str, ...]
    windows: tuple[WindowRun, ...]
    effects: tuple[stats.Effect, ...]
    load: stats.Effect | None
    load_moved: str | None
    not_judged: tuple[str, ...]  # figures without enough seconds, and why
    entries: tuple[str, ...]  # the journal entries the run wrote, in order
    kept: bool
    figures: dict[str, Figure] = field(default_factory=dict)
    # Why the run measured before and after the change rather than alternating it (it
    # moves data, or takes a restart), and the seconds it took to settle; None: ABBA.
    before_after: str | None = None
    settled_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "plan": self.plan.id, "rule": self.plan.rule,
                "changes": [c.command for c in self.plan.changes],
                "settings": asdict(self.settings), "osds": list(self.osds),
                "windows": [asdict(w) for w in self.windows],
                "figures": [e.as_dict() for e in self.effects],
                "load": self.load.as_dict() if self.load else None,
                "load_moved": self.load_moved, "not_judged": list(self.not_judged),
                "journal": list(self.entries), "kept": self.kept,
                "method": "before/after" if self.before_after else "alternated",
                "before_after": self.before_after, "settled_seconds": self.settled_seconds}


BASELINE_KEEP = 15.0  # seconds a baseline read before the confirmation stands
# Seconds a before/after run's cluster must read settled before its windows: PG states come
# from the mgr's PG map, which lags the OSD map by a stats period or two (5 s each), and
# a split's remap read clean for a moment before its PGs peered (the Reef lab went 11 PGs
# inactive in the first window with the change, fresh clone run 12).
STEADY = 10.0


class Cut(UserError):
    """The experiment stopped before its end; the change was undone where it could be."""


class Harm(Exception):
    """A read showed a harm the baseline did not have."""


class Stopped(Exception):
    """The operator stopped the run (the console's c), as Ctrl-C does the CLI's."""


RESTART = "takes effect only when the OSDs restart"
MOVES = "moves data"


def measurable(plan: Plan, runtime: Callable[[Any], bool | None]) -> str | None:
    """How a plan can be measured: None when its changes apply and undo at once (ABBA);
    why not, when it moves data or takes a restart (one before/after comparison, the
    data moved or the OSDs restarted in between: moving data back and forth, or
    restarting every round, is no experiment). A plan that cannot be undone, or that
    changes nothing, is refused in one sentence."""
    why = None
    for c in plan.changes:
        act = actuator(c.kind)
        what = f"{printable(c.key)} on {printable(c.target)}"
        if not act.reversible or act.cannot_undo(c):
            raise UserError(f"{what} cannot be undone: an experiment ends with the cluster "
                            "as it was")
        if act.has_value and same(c.current, c.proposed):
            raise UserError(f"{what} is {printable(c.current)} already: with and without "
                            "the change would be the same windows")
        if act.moves_data(c):
            why = f"{what} {MOVES}"
        elif takes_restart(c, runtime) and why is None:
            why = f"{what} {RESTART}"
    return why


def takes_restart(c: Any, runtime: Callable[[Any], bool | None]) -> bool:
    """Whether the change is on in a daemon only once it restarts."""
    act = actuator(c.kind)
    return (act.fixed_runtime if act.fixed_runtime is not None else runtime(c)) is False


class Experiment:
    """Runs one plan as A (without) and B (with) windows in ABBA order. Every apply and
    every undo is `Executor.review` / `review_undo` and `Review.carry_out`: the same
    checks, lock, guard and journal as the CLI's and the console's."""

    def __init__(self, executor: Any, plan: Plan, settings: Settings,
                 log: ExperimentLog | None = None,
                 progress: Callable[[str], None] = lambda _m: None,
                 sleep: Callable[[float], None] = time.sleep,
                 changed: Callable[[], None] = lambda: None) -> None:
        settings.check()
        self.ex = executor
        self.id = f"exp-{uuid.uuid4().hex[:8]}"
        # Every change of the run is journaled under the experiment's id.
        self.plan = replace(plan, id=self.id)
        self.settings = settings
        self.log = log
        self.progress = progress
        self.sleep = sleep
        self.entries: list[str] = []  # the journal entries written, in order
        self.applied: list[str] = []  # the entries applied and not yet undone
        self.reader: Reader | None = None
        self.base: Sample | None = None
        self.changed = changed  # after each apply and undo: the journal has a new entry
        # Set from another thread (the console's stop key): the next read stops the run.
        self.stopping = threading.Event()
        # Why the plan is measured before and after rather than alternated (review()).
        self.before_after: str | None = None
        self.settled_seconds: float | None = None
        self.latest: Sample | None = None  # the last read
        self.restart_targets: tuple[str, ...] = ()  # of the changes that take a restart

    # -- before anything changes --

    def review(self) -> Any:
        """The plan's review, as the operator confirms it; refused here when it cannot be
        measured (`measurable`), and `before_after` set when it cannot be alternated."""
        rv = self.ex.review(self.plan)
        self.before_after = measurable(rv.plan, rv.runtime)
        self.restart_targets = tuple(c.target for c in rv.plan.changes
                                     if takes_restart(c, rv.runtime))
        if rv.refused:
            raise UserError(rv.refused)
        return rv

    def baseline(self) -> float:
        """Choose the OSDs, read them twice, and refuse a cluster with no client load:
        the client ops per second seen."""
        ceph = self.ex.ceph
        if ceph is None:
            raise UserError("an experiment reads the OSDs' counters: it needs the Ceph "
                            "cluster (-c)")
        up = [f"osd.{i}" for i in ceph.osd_ids()]
        if not up:
            raise UserError("no OSD is up: nothing to measure")
        targets = [c.target for c in self.plan.changes]
        chosen = osds_to_read(up, targets, self.settings.osd_limit)
        self.reader = Reader(ceph, chosen, local_osd_pids(chosen, ceph.fsid()))
        first = self.reader.read()
        if first.failed:
            # An OSD that does not answer now would stop the run at its first read:
            # measured without it, and said in the run's OSD list.
            self.reader = Reader(ceph, [o for o in self.reader.osds if o not in first.failed],
                                 self.reader.pids)
            if not self.reader.osds:
                raise UserError(f"no OSD answered `perf dump` ({', '.join(first.failed[:4])}"
                                "): nothing to measure")
        self.sleep(self.settings.interval)
        second = self.reader.read()
        self.base = second
        load = seconds_of([first, second], (LOAD,))[LOAD.name]
        if not load:
            raise UserError(f"none of {', '.join(self.reader.osds[:4])} answered `perf dump`"
                            " twice: nothing to measure")
        if load[0] < self.settings.min_load:
            raise UserError(f"the cluster serves {load[0]:.1f} client ops/s: there is no "
                            "load to measure the change against (run the workload it is "
                            "for, or `stormdeck lab load` on a lab)")
        return load[0]

    # -- the run --

    def run(self, first: Any, lead_with_change: bool = False) -> Result:
        """Carry out the experiment whose first application `first` (the confirmed
        review) is. Cut (exit 1, or 130 on Ctrl-C) with the change undone when a harm,
        a refusal or an interrupt stops it. `lead_with_change` (`apply --measure`): the
        windows run BAAB..., so the run begins by applying and ends with the change made,
        its measure journaled beside it."""
        if self.base is None or time.monotonic() - self.base.time > BASELINE_KEEP:
            # Read again when the operator took a while to confirm: the harms are judged
            # against the cluster as the run starts, not as it was offered.
            self.baseline()
        if self.log is not None:
            self.log.start(self.id, "; ".join(c.command for c in self.plan.changes),
                           asdict(self.settings))
        windows: list[tuple[str, list[Sample]]] = []
        runs: list[WindowRun] = []
        review: Any = first
        try:
            state = stats.A
            if self.before_after:
                # N windows without, then N with: the change made once, between them.
                order = (stats.A,) * self.settings.rounds + (stats.B,) * self.settings.rounds
            else:
                order = stats.schedule(self.settings.rounds)
                if lead_with_change:
                    order = tuple(stats.B if a == stats.A else stats.A for a in order)
            for i, arm in enumerate(order):
                moved = arm != state
                if moved and arm == stats.B:
                    self._apply(review)
                    review = None
                    if self.before_after:
                        self.settled_seconds = self._await_settled()
                elif moved:
                    self._undo()
                state = arm
                if i == 0 or moved:
                    self._settle()
                self.progress(f"window {i + 1} of {2 * self.settings.rounds}: "
                              f"{'with' if arm == stats.B else 'without'} the change")
                started = time.time()
                samples = self._window()
                windows.append((arm, samples))
                runs.append(WindowRun(arm, started, len(samples)))
        except BaseException as exc:
            raise self._cut(exc) from None
        # Past the windows the cluster is as the run means to leave it; what fails now
        # (keeping the change, journaling its measure) is said, and the run recorded.
        result = self._judge(windows, runs)
        said = ""
        try:
            if self.before_after and self.applied and not lead_with_change and not (
                    self.settings.keep and _helped(result)):
                # Measured: the change is undone as an ABBA run's is, once, at the end
                # (its data moves back; a restart's option waits for the next restart).
                self.progress("measured: undoing the change")
                self._undo()
            kept = bool(self.applied)
            if not kept and self.settings.keep and _helped(result):
                self._apply(None)
                kept = True
            result = replace(result, entries=tuple(self.entries), kept=kept)
            if kept:
                self._journal_measure(result)
        except UserError as exc:
            said = f"measured, but {printable(str(exc), 300)}"
        finally:
            if self.log is not None:
                with contextlib.suppress(UserError):
                    self.log.end(self.id, "done", said, result=result.as_dict())
        if said:
            raise UserError(f"experiment {self.id} {said} (see stormdeck journal)",
                            exit_code=1)
        return result

    def _journal_measure(self, result: Result) -> None:
        """Beside each change left made, what the run measured it to do: a later end of
        its entry carrying on what the earlier said, under the writer's lock."""
        from stormdeck.advisors.lock import writer

        journal = self.ex.journal
        with writer(journal.path.parent, f"journaling the measure of {self.id}",
                    self.ex.wait):
            for entry_id in self.applied:
                e = journal.find(entry_id)
                journal.end(e.id, e.outcome or "applied", e.detail, e.after,
                            observed=e.observed, settled=e.settled,
                            measured=measure_of(result))

    def _apply(self, review: Any) -> None:
        # Each application after the first is reviewed again, as any apply is: the
        # cluster may have moved since (another operator, a value that drifted).
        rv = review if review is not None else self.ex.review(self.plan)
        try:
            outcomes = rv.carry_out()
        except BaseException:
            # A change sent whose outcome is unknown is journaled and may be on: it is
            # the run's to undo (Executor.sent names what this apply sent).
            for entry in self.ex.sent:
                if entry not in self.entries:
                    self.entries.append(entry)
                    self.applied.append(entry)
            raise
        finally:
            self.changed()
        for o in outcomes:
            self.entries.append(o.entry)
            self.applied.append(o.entry)
        # An option that takes a restart is "pending restart" until the OSDs restart:
        # what a before/after run then waits for.
        off = [o for o in outcomes if o.outcome != "applied" and not (
            o.outcome == "pending restart" and o.change.target in self.restart_targets)]
        if off:
            # Overridden, pending, not made: B would be measured without the change.
            raise UserError(f"{printable(off[0].change.command, 200)} ended "
                            f"{printable(off[0].outcome, 120)}, not applied: the windows "
                            "with it would measure without it")

    def _undo(self) -> None:
        while self.applied:
            entry = self.ex.journal.find(self.applied[-1])
            try:
                outcomes = self.ex.review_undo(entry).carry_out()
            finally:
                self.changed()
            self.entries += [o.entry for o in outcomes]
            self.applied.pop()

    def _read(self) -> Sample:
        assert self.reader is not None and self.base is not None
        if self.stopping.is_set():
            raise Stopped
        s = self.reader.read()
        self.latest = s
        why = harm_of(s, self.base)
        if why is not None:
            raise Harm(why)
        return s

    def _await_settled(self) -> float:
        """After a change that moves data or takes a restart, before its windows: read
        until the cluster is as settled as at the baseline (no more PGs off active+clean,
        OSDs down or slow ops than then) and, for a restart's option, every OSD read has
        restarted (its counters began again); the seconds that took. What a move or a
        restart does on the way (PGs peering, an OSD down, slow ops) is its doing, not a
        harm; not settling within --settled-within is, and stops the run."""
        assert self.reader is not None and self.base is not None
        restart = set(self._to_restart())
        gone: set[str] = set()
        # Counts only grow in a running OSD: below the last read's, it began again.
        last = {o: c.op_r + c.op_w + c.op_rw
                for o, c in (self.latest or self.base).osds.items()}
        started = time.monotonic()
        said = 0.0
        steady: float | None = None  # since when every read said settled
        base = self.base.harms
        while True:
            if self.stopping.is_set():
                raise Stopped
            s = self.reader.read()
            for osd in self.reader.osds:
                c = s.osds.get(osd)
                if c is None:
                    gone.add(osd)
                    continue
                ops = c.op_r + c.op_w + c.op_rw
                if osd in gone or ops < last.get(osd, 0.0):
                    restart.discard(osd)  # down and back, or counting from zero again
                gone.discard(osd)
                last[osd] = ops
            h = s.harms
            waiting = []
            if restart:
                waiting.append(f"{', '.join(sorted(restart)[:4])} to restart")
            if s.failed:
                waiting.append(f"{', '.join(s.failed[:4])} to answer")
            if None not in (h.up_osds, base.up_osds) and h.up_osds < base.up_osds:  # type: ignore[operator]
                waiting.append(f"{base.up_osds - h.up_osds} OSD(s) to come up")  # type: ignore[operator]
            if (h.pgs_unclean or 0) > (base.pgs_unclean or 0):
                waiting.append(f"{h.pgs_unclean} PGs to be active+clean")
            if h.slow_ops > base.slow_ops:
                waiting.append(f"{h.slow_ops} slow ops to clear")
            # A split is clean before the mgr steps pgp_num, and its data moves only then
            # (the Reef lab went 43 PGs inactive after such a pause): the pool must have
            # reached its targets too.
            waiting += [f"pool {printable(c.target)} to reach its pg_num and pgp_num"
                        for c in self.plan.changes if self.ex.placing(c)]
            now = time.monotonic()
            took = now - started
            if waiting:
                steady = None
            elif steady is None:
                steady = now
            if steady is not None and now - steady >= STEADY:
                if self._to_restart():
                    # The restarted OSDs are new processes: their CPU is read from those.
                    osds = self.reader.osds
                    self.reader = Reader(self.ex.ceph, osds,
                                         local_osd_pids(osds, self.ex.ceph.fsid()))
                return steady - started
            if took > self.settings.wait and steady is None:
                raise Harm(f"not settled {took:.0f} s after the change (--settled-within): "
                           f"waiting for {'; '.join(waiting)}")
            if waiting and (took - said >= 10 or not said):
                said = took or 0.001
                self.progress(f"the change is made; waiting for {'; '.join(waiting)} "
                              f"({took:.0f} s)")
            self.sleep(self.settings.interval)

    def _to_restart(self) -> list[str]:
        """The OSDs read that must restart before the change is on in them: those its
        options that take a restart are set for."""
        assert self.reader is not None
        read = set(self.reader.osds)
        out: set[str] = set()
        for target in self.restart_targets:
            out |= ({target} & read) if target.startswith("osd.") else read
        return sorted(out, key=lambda o: int(o.removeprefix("osd.")))

    def waits_for(self) -> str:
        """What a before/after run waits for once the change is made, in words."""
        restart = self._to_restart() if self.reader is not None else []
        parts = []
        if self.before_after and self.before_after.endswith(MOVES):
            parts.append("its data has moved")
        if restart:
            parts.append(f"{', '.join(restart[:6])}{' ...' if len(restart) > 6 else ''} "
                         "restarted (restart them once it is made)")
        return " and ".join(parts) or "the cluster is as settled as before it"

    def _settle(self) -> None:
        end = time.monotonic() + self.settings.settle
        while time.monotonic() < end:
            self._read()
            self.sleep(min(self.settings.interval, max(0.0, end - time.monotonic())))

    def _window(self) -> list[Sample]:
        # Whole intervals only: a short last one would weigh as much as a full second.
        samples = [self._read()]
        for _ in range(int(self.settings.window / self.settings.interval + 1e-9)):
            self.sleep(max(0.0, samples[-1].time + self.settings.interval - time.monotonic()))
            samples.append(self._read())
        return samples

    def _cut(self, exc: BaseException) -> BaseException:
        """The run stopped by `exc`: the change undone if it is on, the log ended, and the
        one sentence the operator reads."""
        if isinstance(exc, KeyboardInterrupt):
            why, code = "interrupted", 130
        elif isinstance(exc, Stopped):
            why, code = "stopped by the operator", 130
        elif isinstance(exc, Harm | UserError):
            why, code = f"stopped: {printable(str(exc), 400)}", 1
        else:
            why, code = f"stopped: {type(exc).__name__}: {printable(str(exc), 400)}", 1
        undone = ""
        if self.applied:
            try:
                self._undo()
                undone = "; the change was undone (see stormdeck journal)"
            except BaseException as again:
                left = " and ".join(f"stormdeck undo {e}" for e in reversed(self.applied))
                undone = (f"; undoing it failed ({printable(str(again), 300)}): {left} puts "
                          "it back")
        elif self.entries:
            undone = "; the change is not on (see stormdeck journal)"
        else:
            undone = "; nothing was changed"
        if self.log is not None:
            with contextlib.suppress(UserError):
                self.log.end(self.id, "cut", why + undone)
        return Cut(f"experiment {self.id} {why}{undone}", exit_code=code)

    # -- the verdict --

    def _judge(self, windows: list[tuple[str, list[Sample]]], runs: list[WindowRun]
               ) -> Result:
        per_window = [(arm, seconds_of(samples, (*FIGURES, LOAD, *MIX)))
                      for arm, samples in windows]
        compare = stats.compare_before_after if self.before_after else stats.compare

        def series(f: Figure) -> list[stats.Window] | str:
            assert self.reader is not None
            if f is CPU_PER_OP and set(self.reader.pids) != set(self.reader.osds):
                return (f"{f.name}: {len(self.reader.osds) - len(self.reader.pids)} of the "
                        f"{len(self.reader.osds)} OSDs read do not run on this host")
            out = []
            for k, (arm, secs) in enumerate(per_window):
                xs = secs[f.name]
                if len(xs) < 3:
                    return f"{f.name}: window {k + 1} had {len(xs)} seconds with a value"
                if sum(xs) <= 0:
                    return f"{f.name}: zero in every second of window {k + 1}"
                out.append(stats.Window(arm, tuple(xs)))
            return out

        load = series(LOAD)
        moved = stats.load_moved(load) if not isinstance(load, str) else \
            f"the load itself could not be measured ({load}): not separable"
        for f in MIX:
            if moved is None:
                mix = [stats.Window(arm, tuple(secs[f.name])) for arm, secs in per_window]
                moved = stats.mix_moved(f.name, mix)
        effects, skipped = [], []
        for f in FIGURES:
            w = series(f)
            if isinstance(w, str):
                skipped.append(w)
                continue
            try:
                effect = compare(f.name, w, f.higher_is_better)
            except ValueError as exc:  # a figure zero in most seconds: no ratio to give
                skipped.append(f"{f.name}: {exc}")
                continue
            if moved is not None:
                effect = replace(effect, verdict="not separable")
            effects.append(effect)
        load_effect = None
        if not isinstance(load, str):
            with contextlib.suppress(ValueError):
                load_effect = compare(LOAD.name, load, True)
        assert self.reader is not None
        return Result(self.id, self.plan, self.settings, self.reader.osds, tuple(runs),
                      tuple(effects), load_effect, moved, tuple(skipped), tuple(self.entries),
                      False, {f.name: f for f in (*FIGURES, LOAD)}, self.before_after,
                      self.settled_seconds)


def measure_of(r: Result) -> dict[str, Any]:
    """What the journal keeps of a run beside the change it left made."""
    return {"experiment": r.id, "load_moved": r.load_moved,
            "figures": [{"figure": e.figure, "ratio": e.ratio, "ci_low": e.ci_low,
                         "ci_high": e.ci_high, "verdict": e.verdict} for e in r.effects]}


def _helped(r: Result) -> bool:
    verdicts = {e.verdict for e in r.effects}
    return r.load_moved is None and "better" in verdicts and "worse" not in verdicts
