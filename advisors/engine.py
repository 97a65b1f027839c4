"""The engine: rules over History, with warm-up, for-durations, hysteresis, mutes and
checks that every proposed change is one this cluster can take."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from stormdeck.advisors.actuators.base import same
from stormdeck.advisors.actuators.table import actuator
from stormdeck.advisors.columns import Columns
from stormdeck.advisors.findings import Change, Check, Finding, RuleSettings
from stormdeck.advisors.knowledge import cited, readable
from stormdeck.advisors.mutes import MuteStore
from stormdeck.advisors.rules import ALL, Context, Rule, health
from stormdeck.advisors.settings import load_settings
from stormdeck.advisors.timeline import DOWN_ATTR, off_since
from stormdeck.advisors.validated import ValidatedStore
from stormdeck.collectors.model import Records, Snapshot

# A firing finding whose rule stops judging its target (no data) is kept this long.
STALE_AFTER = 120.0


@dataclass
class _Track:
    state: str  # "pending" | "firing"
    since: float
    last_seen: float
    check: Check
    # What a finding of `check` reads (its texts with their citations made readable),
    # made once per check: a track carried over many ticks holds the same check, and
    # its finding is made again every tick (hundreds at 10,000 OSDs).
    texts: tuple[Any, ...] | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Resolved:
    rule: str
    target: str
    first_seen: float
    resolved_at: float


class Engine:
    """Evaluate every enabled rule on each new snapshot; keeps the state between calls."""

    def __init__(self, settings: dict[str, RuleSettings] | None = None,
                 mutes: MuteStore | None = None, rules: Iterable[type[Rule]] = ALL,
                 incremental: bool = True, validated: ValidatedStore | None = None) -> None:
        self.validated = validated  # what validate measured, for the rules that act on it
        self.settings = settings if settings is not None else load_settings()
        self.rules = [r() for r in rules if self.settings[r.id].enabled]
        self.mutes = mutes
        self.errors: dict[str, str] = {}  # rule id -> why it could not judge
        self.resolved: deque[Resolved] = deque(maxlen=500)
        self._tracks: dict[tuple[str, str], _Track] = {}
        self._spans = {r.id: self._span(r.id) for r in self.rules}
        # The snapshots of the longest window, numbered, with the columns rules read.
        self.columns = Columns()
        # False: every rule walks its whole window each tick (the reference the
        # columns are tested against), and judges every tick, new data or not.
        self.incremental = incremental
        # Per rule: the data it was last judged on (_inputs) and the targets of that
        # judgement that kept a track; a tick with the same data carries them over.
        self._judged_on: dict[str, tuple[Any, ...]] = {}
        self._carried: dict[str, tuple[str, ...]] = {}
        self.judged = 0  # rules judged in the last evaluate() (the rest carried over)
        self._validated: Any = None

    def checkpoint(self) -> Any:
        """The judging state (tracks, what resolved, errors), to resume from later."""
        return ({k: replace(t) for k, t in self._tracks.items()}, tuple(self.resolved),
                dict(self.errors))

    def restore(self, state: Any) -> None:
        """Resume from a checkpoint(); the columns refill from the history given next."""
        tracks, resolved, errors = state
        self._tracks = {k: replace(t) for k, t in tracks.items()}
        self.resolved = deque(resolved, maxlen=self.resolved.maxlen)
        self.errors = dict(errors)
        self.columns = Columns()
        self._judged_on, self._carried = {}, {}

    def _span(self, rule_id: str) -> float:
        s = self.settings[rule_id]
        return float(s.params.get("window_seconds", max(s.for_seconds, 60.0)))

    def evaluate(self, history: Sequence[Snapshot] | Iterable[Snapshot]) -> list[Finding]:
        snaps = history if isinstance(history, list | tuple) else list(history)
        if not snaps:
            return []
        latest = snaps[-1]
        now = latest.time
        cols = self.columns
        cols.sync(snaps, max(self._spans.values(), default=60.0))
        judged: set[tuple[str, str]] = set()
        by_rule = {r.id: r for r in self.rules}
        validated = self.validated.get() if self.validated is not None else None
        tracked: dict[str, set[str]] = {}
        for rid, target in self._tracks:
            tracked.setdefault(rid, set()).add(target)
        # With no evidence file the store makes an empty Validated each call: an equal
        # one is the same input (else no tick would ever carry over).
        if validated is not None and validated == self._validated:
            validated = self._validated
        self._validated = validated
        parts = _inputs(latest, validated)
        fresh: set[str] = set()
        self.judged = 0
        for rule in self.rules:
            s = self.settings[rule.id]
            if len(snaps) < s.warmup_samples:
                continue
            inputs = tuple(parts[p] for p in rule.reads)
            if self.incremental and not rule.clock and _same(self._judged_on.get(rule.id),
                                                              inputs):
                # Nothing new since this rule last judged (a fleet source hands the
                # same scrape for its whole interval): its checks would be the same, so
                # its tracks step on with the checks they hold, and a pending one fires
                # once its for-duration has passed, as if judged again.
                for target in self._carried.get(rule.id, ()):
                    key = (rule.id, target)
                    t = self._tracks.get(key)
                    if t is not None:
                        judged.add(key)
                        self._step(key, t.check, s, now)
                continue
            self.judged += 1
            fresh.add(rule.id)
            self._judged_on[rule.id] = inputs
            first = cols.first_seq(now, self._spans[rule.id])
            window = cols.snaps[first - cols.base:]
            try:
                ctx = Context(latest, window, s.params, cols, first,
                              frozenset(tracked.get(rule.id, ())), validated) \
                    if self.incremental else Context(latest, window, s.params,
                                                     validated=validated)
                checks = list(rule.check(ctx))
            except Exception as exc:  # one broken rule must not silence the others
                self.errors[rule.id] = f"{type(exc).__name__}: {exc}"
                continue
            self.errors.pop(rule.id, None)
            for c in checks:
                key = (rule.id, c.target)
                judged.add(key)
                self._step(key, c, s, now)
        for key, t in list(self._tracks.items()):
            if key not in judged and (t.state == "pending" or now - t.last_seen > STALE_AFTER):
                del self._tracks[key]
        if fresh:
            carried: dict[str, list[str]] = {rid: [] for rid in fresh}
            for rid, target in judged:
                if rid in carried and (rid, target) in self._tracks:
                    carried[rid].append(target)
            self._carried.update((rid, tuple(ts)) for rid, ts in carried.items())
        findings = [self._finding(by_rule[k[0]], t) for k, t in self._tracks.items()
                    if k[0] in by_rule]
        findings = _mark_down(findings, snaps)
        findings = self._vet_changes(findings, latest)
        findings = self._apply_mutes(findings, now, snaps)
        findings = health.link(findings)  # Ceph's own checks: folded where a rule says more
        findings.sort(key=lambda f: (f.state != "firing", -f.severity, f.rule, f.target))
        return findings

    def _step(self, key: tuple[str, str], c: Check, s: RuleSettings, now: float) -> None:
        t = self._tracks.get(key)
        if t is None:
            if not c.fire:
                return
            t = self._tracks[key] = _Track("pending", now, now, c)
        if t.state == "pending":
            if not c.fire:
                del self._tracks[key]
                return
            if now - t.since >= s.for_seconds:
                t.state = "firing"
        elif c.clear:
            del self._tracks[key]
            self.resolved.append(Resolved(key[0], key[1], t.since, now))
            return
        t.last_seen, t.check = now, c

    @staticmethod
    def _finding(rule: Rule, t: _Track) -> Finding:
        c = t.check
        texts = t.texts
        if texts is None or texts[0] is not c or texts[1] is not rule:
            # Older rule texts cite working-notes numbers ("K1.4"): what a user reads names
            # the docs/knowledge.md section instead, which ships with stormdeck.
            own = cited(rule.source)
            texts = t.texts = (c, rule, readable(c.summary, prefer=own),
                               readable(rule.explanation, prefer=own),
                               tuple(readable(p, prefer=own) for p in c.procedure))
        _, _, summary, explanation, procedure = texts
        return Finding(rule=rule.id, title=rule.title, severity=c.severity, target=c.target,
                       summary=summary, explanation=explanation,
                       source=rule.source, state=t.state, first_seen=t.since,
                       last_seen=t.last_seen, evidence=c.evidence, changes=c.changes,
                       procedure=procedure, detail=c.detail, muted=c.ceph_muted,
                       notes=(health.CEPH_MUTED,) if c.ceph_muted else ())

    @staticmethod
    def _vet_changes(findings: list[Finding], latest: Snapshot) -> list[Finding]:
        """Drop changes this cluster cannot take (each kind's actuator says why: for Ceph's
        options, one its release lacks or its scheduler overrides), values already set,
        and a second change of the same thing to something else."""
        claimed: dict[tuple[str, str, str], tuple[str, str]] = {}
        out = []
        for f in sorted(findings, key=lambda f: (-f.severity, f.state != "firing", f.rule)):
            keep: list[Change] = []
            notes = list(f.notes)
            for ch in f.changes:
                why = actuator(ch.kind).vet(latest.cluster, ch)
                if why is not None:
                    notes.append(why)
                    continue
                if ch.current is not None and same(ch.current, ch.proposed):
                    notes.append(f"{ch.key} on {ch.target} is already {ch.proposed}")
                    continue
                slot = (ch.kind, ch.target, ch.key)
                if slot in claimed and claimed[slot][0] != ch.proposed:
                    notes.append(f"{ch.key} on {ch.target}: {claimed[slot][1]} proposes "
                                 f"{claimed[slot][0]}; not proposing {ch.proposed} as well")
                    continue
                claimed[slot] = (ch.proposed, f.rule)
                keep.append(ch)
            # Most findings keep every change and gain no note: those stand as they are.
            out.append(f if len(keep) == len(f.changes) and len(notes) == len(f.notes)
                       else replace(f, changes=tuple(keep), notes=tuple(notes)))
        return out

    def _apply_mutes(self, findings: list[Finding], now: float,
                     snaps: Sequence[Snapshot] = ()) -> list[Finding]:
        """Mutes of this cluster only: its fsid from the newest snapshot that knows it (a
        poll the mon missed keeps its mutes); None, no Ceph identity at all (Curve only),
        leaves only the mutes made with no cluster known."""
        if self.mutes is None:
            return findings
        # The last minute or so at most: a Curve-only history is not walked whole each tick.
        fsid = next((s.cluster.fsid for s in islice(reversed(snaps), 30)
                     if s.cluster is not None and s.cluster.fsid), None)
        out = []
        for f in findings:
            badness = self._tracks[(f.rule, f.target)].check.badness
            mute, note = self.mutes.judge(f, badness, now, fsid)
            if mute is not None:
                f = replace(f, muted=True, muted_until=mute.until)
            elif note:
                f = replace(f, notes=(*f.notes, note))
            out.append(f)
        return out

    def badness(self, finding: Finding) -> float:
        t = self._tracks.get(finding.key)
        return t.check.badness if t else 0.0


# The units of what a daemon measures of itself while it runs (CPU, IOPS, latency,
# memory, shares of its time or capacity): a down daemon's are from before it went down.
# Counts (PGs, OSDs, times marked down), its up flag and settings are current still.
DAEMON_UNITS = frozenset({"cores", "IOPS", "s", "s/s", "B", "ratio"})


def _mark_down(findings: list[Finding], snaps: Sequence[Snapshot]) -> list[Finding]:
    """Mark, in every rule's findings at once, the figures of a daemon that is down at the
    newest tick as from before it went down: a rule judged while it ran (or judging the
    cluster's last figures for it) would quote them as its figures now."""
    daemons = snaps[-1].daemons
    out = []
    for f in findings:
        d = daemons.get(f.target) if f.evidence else None
        if d is None or not d.down:
            out.append(f)
            continue
        run = off_since(snaps, d.id, DOWN_ATTR.get(d.kind, "up"))
        if run is None:  # down by one flag, not the one its kind turns (an OSD offline?)
            out.append(f)
            continue
        at, exact = run
        # A setting quoted by its option's name (osd_memory_target) is not its figure.
        out.append(replace(f, evidence=tuple(
            replace(e, down_since=at, down_bound=not exact)
            if e.unit in DAEMON_UNITS and isinstance(e.now, int | float)
            and not ("_" in e.metric and " " not in e.metric) else e
            for e in f.evidence)))
    return out


def _inputs(snap: Snapshot, validated: Any) -> dict[str, Any]:
    """What a rule's verdict rests on besides the clock: the snapshot's parts as the
    sources made them (a Snapshot wraps its daemons and disks anew each tick; what they
    hold is the merge's own mapping, the same object while no source brought news)."""
    def inner(m: Any) -> Any:
        return m.inner if isinstance(m, Records) else m
    return {"cluster": snap.cluster, "daemons": inner(snap.daemons),
            "disks": inner(snap.disks), "hosts": snap.hosts, "curve": snap.curve,
            "validated": validated}


def _same(a: tuple[Any, ...] | None, b: tuple[Any, ...]) -> bool:
    return a is not None and len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def worst(findings: Iterable[Finding]) -> int:
    """The exit code `stormdeck check` gives: 0 clean, 1 warnings, 2 critical (firing, unmuted)."""
    live = [int(f.severity) for f in findings if f.state == "firing" and not f.muted]
    top = max(live, default=0)
    return 2 if top >= 3 else 1 if top == 2 else 0


