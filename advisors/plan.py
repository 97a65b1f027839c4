"""Plans: a finding's proposed changes, frozen with what they were read against, saved as JSON.

A plan file is data from disk, and may have been edited: nothing in it is trusted
for what it claims. The command shown, printed and journaled is rendered from the
structured change by its actuator; a file whose command says otherwise is refused.
A change is accepted only if the plan's rule declares it (Rule.proposes), and
how it is confirmed (y/N or a typed phrase) is computed from the change and the
cluster, never read from the file.
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from stormdeck.advisors.actuators.table import ACTUATORS
from stormdeck.advisors.blast import Prediction, moves_data
from stormdeck.advisors.findings import Change, Finding
from stormdeck.base.errors import UserError
from stormdeck.base.files import read_bytes
from stormdeck.base.text import printable

PLAN_VERSION = 1
# What may appear in a command sent to a cluster or a tool: no shell, no spaces.
SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_.:/=@,+-]{1,200}$")
PLAN_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
FSID = re.compile(r"^[A-Za-z0-9-]{1,64}$")
# A plan stormdeck writes is a few KiB with a handful of changes: far more is no plan.
MAX_BYTES = 256 * 1024
MAX_CHANGES = 32
MAX_TEXT = 2000  # summary, note, target, source: what a review line can hold

# Whether a ceph_config change applies without a restart, as the cluster says it
# (None: unknown, confirmed as if it needed one).
Runtime = Callable[[Change], "bool | None"]


@dataclass(frozen=True, slots=True)
class Plan:
    id: str
    created: float
    rule: str
    target: str
    summary: str
    source: str
    fsid: str | None  # the cluster it was made for; applying elsewhere is refused
    changes: tuple[Change, ...]
    version: int = PLAN_VERSION
    # What the changes move (blast/prediction.py Prediction.to_dict), computed from the cluster
    # when the plan was made or reviewed; from a file it is shown, never trusted: apply
    # predicts again under its lock.
    prediction: dict[str, Any] | None = None

    def phrase_reasons(self, runtime: Runtime | None = None) -> list[str]:
        """Why this plan needs a typed phrase rather than y/N: each change's reach and
        reversibility as its actuator computes them, and whether the cluster applies it at
        runtime (`runtime` asks it; without it, unknown). Empty: y/N is enough."""
        reasons = []
        for c in self.changes:
            act = ACTUATORS[c.kind]
            what = f"{printable(c.key)} on {printable(c.target)}"
            width = act.width(c)
            if width != "daemon":
                reasons.append(f"{what} affects {width}")
            if not act.reversible:
                reasons.append(f"{what} cannot be undone")
            live = act.fixed_runtime
            if live is None:
                live = runtime(c) if runtime is not None else None
            if live is False:
                reasons.append(f"{what} needs a restart")
            elif live is None:
                reasons.append(f"whether {what} applies at runtime is unknown")
        if self.prediction is not None:
            nearfull = Prediction.from_dict(self.prediction).phrase_reason()
            if nearfull:
                reasons.append(nearfull)
        return reasons

    def needs_phrase(self, runtime: Runtime | None = None) -> bool:
        return bool(self.phrase_reasons(runtime))

    @property
    def phrase(self) -> str:
        """What the operator types: the pool's name for an irreversible pool change."""
        for c in self.changes:
            act = ACTUATORS.get(c.kind)
            phrase = act.phrase(c) if act else None
            if phrase:
                return phrase
        if self.id.startswith("undo-"):  # the console's review of an undo
            return f"undo {self.id.removeprefix('undo-')}"
        return f"apply {self.rule}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def save(self, path: Path) -> None:
        """Written 0600: a plan may name values that are nobody else's business."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            raise UserError(f"cannot write the plan to {path}: {exc.strerror}") from None
        with os.fdopen(fd, "w") as f:
            # An existing file keeps its mode through O_CREAT: make it ours alone too.
            os.fchmod(f.fileno(), 0o600)
            f.write(self.to_json() + "\n")

    @classmethod
    def load(cls, path: Path) -> Plan:
        if not os.path.lexists(path):
            raise UserError(f"no such plan file: {printable(str(path))}")
        # A regular file only (a FIFO would hang the open, /dev/zero never end), read to at
        # most one byte past the limit: a huge file is refused without reading it whole.
        data = read_bytes(path, MAX_BYTES)
        try:
            raw = json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise UserError(f"{path} is not a plan file ({printable(exc, 120)})") from None
        return cls.from_dict(raw, str(path))

    @classmethod
    def from_dict(cls, raw: Any, where: str = "plan") -> Plan:
        where = printable(where)
        if not isinstance(raw, dict) or raw.get("version") != PLAN_VERSION:
            raise UserError(f"{where} is not a version-{PLAN_VERSION} stormdeck plan")
        try:
            items = raw["changes"]
            if not isinstance(items, list):
                raise TypeError("changes is not a list")
            if len(items) > MAX_CHANGES:
                raise UserError(f"{where} holds {len(items)} changes, more than the "
                                f"{MAX_CHANGES} a plan may: refused")
            changes = tuple(_change_of(c) for c in items)
            created = raw["created"]
            if isinstance(created, bool) or not isinstance(created, int | float):
                raise TypeError("created is not a time")
            fsid = raw.get("fsid")
            prediction = _prediction_of(raw.get("prediction"))
            plan = cls(id=_text(raw, "id", 64), created=float(created),
                       rule=_text(raw, "rule", 200), target=_text(raw, "target"),
                       summary=_text(raw, "summary"), source=_text(raw, "source"),
                       fsid=None if fsid is None else _text(raw, "fsid", 64),
                       changes=changes, prediction=prediction)
        except KeyError as exc:
            raise UserError(f"{where} is not a plan file stormdeck can read "
                            f"({printable(exc.args[0], 60)} is missing)") from None
        except (TypeError, ValueError) as exc:
            raise UserError(f"{where} is not a plan file stormdeck can read "
                            f"({printable(exc, 200)})") from None
        check_plan(plan, where)
        # What is shown, printed and journaled from here on is the rendering, never the file.
        return replace(plan, changes=tuple(
            replace(c, command=ACTUATORS[c.kind].command(c)) for c in plan.changes))


def _prediction_of(raw: Any) -> dict[str, Any] | None:
    """A plan file's prediction, read back field by field (anything else in it dropped)."""
    if not isinstance(raw, dict):
        return None
    try:
        return Prediction.from_dict(raw).to_dict()
    except RecursionError:  # a chain of `then` nested past reason
        raise ValueError("the prediction is nested too deep") from None


def _text(raw: Mapping[str, Any], name: str, limit: int = MAX_TEXT) -> str:
    value = raw[name]
    if not isinstance(value, str):
        raise TypeError(f"{name} is not text")
    if len(value) > limit:
        raise ValueError(f"{name} is longer than {limit} characters")
    return value


def _change_of(raw: Any) -> Change:
    """One change of a plan file, each field of the type it must have."""
    if not isinstance(raw, dict):
        raise TypeError("a change is not an object")
    # "blast_radius": the hand-written reach label plan files of stormdeck before issue 30
    # carry. Read and dropped: what a change reaches and moves is computed, never taken
    # from the file, so an old plan loads and says no more than a new one.
    fields = set(Change.__dataclass_fields__) | {"blast_radius"}
    unknown = set(raw) - fields
    if unknown:
        raise ValueError(f"a change has unknown fields {sorted(map(str, unknown))[:5]}")
    current = raw.get("current")
    if current is not None and not isinstance(current, str):
        raise TypeError("current is not text")
    if isinstance(current, str) and len(current) > 500:
        raise ValueError("current is longer than 500 characters")
    for flag in ("runtime", "reversible"):
        if flag in raw and not (isinstance(raw[flag], bool)
                                or (flag == "runtime" and raw[flag] is None)):
            raise TypeError(f"{flag} is not true or false")
    args = raw.get("args", [])
    if not isinstance(args, list) or len(args) > 8 or not all(
            isinstance(a, list) and len(a) == 2 and all(isinstance(x, str) for x in a)
            for a in args):
        raise TypeError("args is not a list of [name, value] pairs")
    return Change(kind=_text(raw, "kind", 64), target=_text(raw, "target", 500),
                  key=_text(raw, "key", 200), current=current,
                  proposed=_text(raw, "proposed", 500), command=_text(raw, "command", 1000),
                  runtime=raw.get("runtime"), reversible=raw.get("reversible", True),
                  note=_text(raw, "note") if "note" in raw else "",
                  args=tuple((a[0], a[1]) for a in args))


def validate_change(c: Change, where: str = "plan") -> None:
    """Refuse anything that is not a plain token where a command will be built from it."""
    act = ACTUATORS.get(c.kind) if isinstance(c.kind, str) else None
    if act is None:
        raise UserError(f"{where}: unknown kind of change {printable(c.kind)!r}")
    for name in act.plain:
        value = getattr(c, name)
        # Plan files are read from disk: a field may be anything JSON holds, not only text.
        if not isinstance(value, str) or not SAFE_TOKEN.match(value):
            raise UserError(f"{where}: {name} {printable(value)!r} of a {c.kind} change is "
                            "not a plain value (letters, digits and . _ : / = @ , + - only)")
    seen = set()
    for pair in c.args:
        name, value = pair if len(pair) == 2 else (None, None)
        allowed = act.arg_values.get(name) if isinstance(name, str) else None
        ok = allowed is not None and isinstance(value, str) and SAFE_TOKEN.match(value) and (
            value in allowed if isinstance(allowed, tuple) else allowed.match(value))
        if not ok or name in seen:
            raise UserError(f"{where}: argument {printable(pair)!r} of a {c.kind} change is "
                            "not one it takes, or not a plain value")
        seen.add(name)


def check_plan(plan: Plan, where: str = "plan") -> None:
    """Refuse a plan that says one thing and does another: its id not a plain token, a
    change its rule never proposes, a duplicate, a command that is not the change's own
    rendering, a reach or reversibility stated smaller than it is, no cluster named for
    changes to Ceph."""
    from stormdeck.advisors.rules import BY_ID

    where = printable(where)
    if not PLAN_ID.match(plan.id):
        raise UserError(f"{where}: plan id {printable(plan.id)!r} is not a plain token")
    rule = BY_ID.get(plan.rule)
    if rule is None:
        raise UserError(f"{where} names no rule of this stormdeck ({printable(plan.rule)!r}): "
                        "refused")
    if not plan.changes:
        raise UserError(f"{where} holds no change")
    if len(plan.changes) > MAX_CHANGES:
        raise UserError(f"{where} holds {len(plan.changes)} changes, more than the "
                        f"{MAX_CHANGES} a plan may: refused")
    seen: set[tuple[str, str, str]] = set()
    for c in plan.changes:
        validate_change(c, where)
        what = f"{printable(c.kind)} {printable(c.key)!r} on {printable(c.target)!r}"
        if (c.kind, c.target, c.key) in seen:
            raise UserError(f"{where} changes {what} twice: refused")
        seen.add((c.kind, c.target, c.key))
        if not rule.may_propose(c):
            raise UserError(f"{where}: rule {plan.rule} never proposes {what} -> "
                            f"{printable(c.proposed)!r}: refused")
        act = ACTUATORS[c.kind]
        rendered = act.command(c)
        if c.command != rendered:
            raise UserError(f"{where}: the command {printable(c.command, 120)!r} is not what "
                            f"the change runs ({rendered}); the plan was edited or made by "
                            "another version of stormdeck: refused")
        if c.reversible and not act.reversible:
            raise UserError(f"{where} states {what} is reversible, but it cannot be undone: "
                            "refused")
    if plan.fsid is not None and not FSID.match(plan.fsid):
        raise UserError(f"{where}: fsid {printable(plan.fsid)!r} is not a cluster's fsid")
    if plan.fsid is None and any(ACTUATORS[c.kind].needs_ceph for c in plan.changes):
        raise UserError(f"{where} names no cluster (fsid), so it could apply to any: refused")


def plan_from_finding(finding: Finding, fsid: str | None,
                      predict: Callable[[tuple[Change, ...]], Any] | None = None) -> Plan:
    """The finding's changes as a plan. `predict` (blast.plan_prediction on a connection)
    computes what they move; a plan whose prediction is refused (inactive PGs, an OSD past
    backfillfull) raises Refused, which carries the plan, so its exact command can still
    be shown to an operator who decides otherwise by hand."""
    if not finding.changes:
        raise UserError(f"{finding.rule} on {finding.target} proposes no change stormdeck "
                        "can make" + (f": {finding.procedure[0]}" if finding.procedure else ""))
    plan = Plan(id=uuid.uuid4().hex[:12], created=time.time(), rule=finding.rule,
                target=finding.target, summary=finding.summary, source=finding.source,
                fsid=fsid, changes=finding.changes)
    # The same checks a plan file gets: what the console applies is what it would accept.
    check_plan(plan, finding.rule)
    if predict is not None:
        prediction = predict(plan.changes)
        if prediction is not None:
            plan = replace(plan, prediction=prediction.to_dict())
            reason = prediction.refusal()
            if reason:
                raise Refused(plan, reason)
    return plan


class Refused(UserError):
    """A plan whose predicted outcome is refused: `plan` (with its prediction) to show."""

    def __init__(self, plan: Plan, reason: str) -> None:
        super().__init__(f"refused: {reason}; nothing was saved or changed (the command "
                         "above is what the plan would run, for an operator who decides "
                         "otherwise by hand)")
        self.plan = plan
        self.reason = reason


def runtime_from_options(options: Mapping[str, Any] | None) -> Runtime:
    """Whether a config change applies at runtime, from the options' `config help` the
    collector read (Snapshot.cluster.config): the console's answer without a round trip."""
    def runtime(c: Change) -> bool | None:
        opt = (options or {}).get(c.key)
        return opt.runtime if opt is not None and getattr(opt, "exists", True) else None

    return runtime


def reach_of(c: Change) -> str:
    """What a change reaches and whether it moves data, computed from its kind, target and
    key (the actuator's width, advisors/blast moves_data): shown wherever a change is."""
    width = ACTUATORS[c.kind].width(c)
    return f"{'moves data' if moves_data(c) else 'moves no data'}, affects {width}"


def review(plan: Plan) -> str:
    """The exact change, as the operator reviews it before confirming: every text from the
    plan escaped (control characters shown, never sent), reach and reversibility computed."""
    p = printable
    lines = [f"plan {p(plan.id)}: {p(plan.rule)} on {p(plan.target)}  [{p(plan.source)}]",
             f"  {p(plan.summary, 300)}"]
    for c in plan.changes:
        act = ACTUATORS[c.kind]
        how = "at runtime" if c.runtime else "needs a restart" if c.runtime is False else \
            "runtime unknown"
        # A plan's command is its rendering (check_plan); an undo's, the actuator's inverse.
        lines.append(f"  {p(c.command, 300)}")
        reach = reach_of(c)
        if moves_data(c):
            # What it moves is computed, below.
            reach += ": see the prediction" if plan.prediction is not None else \
                ": not predicted here (stormdeck whatif plan FILE predicts it)"
        lines.append(f"      {p(c.key)} on {p(c.target)}: {p(c.current)} -> {p(c.proposed)}; "
                     f"{how}; {'reversible' if act.reversible else 'IRREVERSIBLE'}; {reach}")
        if c.note:
            lines.append(f"      {p(c.note, 300)}")
    if plan.prediction is not None:
        predicted = Prediction.from_dict(plan.prediction)
        lines.extend(f"  {p(line, 400)}" for line in predicted.lines())
    return "\n".join(lines)
