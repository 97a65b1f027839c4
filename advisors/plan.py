"""Plans: a finding's proposed changes, frozen with what they were read against, saved as JSON."""

from __future__ import annotations

import json
import re
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from stormdeck.advisors.actuators import ACTUATORS
from stormdeck.advisors.model import Change, Finding
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable

PLAN_VERSION = 1
WIDE = ("device class", "all OSDs", "all monitors", "pool", "host", "cluster")
# What may appear in a command sent to a cluster or a tool: no shell, no spaces.
SAFE_TOKEN = re.compile(r"^[A-Za-z0-9_.:/=@,+-]{1,200}$")


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

    @property
    def needs_phrase(self) -> bool:
        """A typed phrase, not y/n, for wide, restart-needing or irreversible changes."""
        return any(c.blast_radius in WIDE or c.runtime is False or not c.reversible
                   for c in self.changes)

    @property
    def phrase(self) -> str:
        """What the operator types: the pool's name for an irreversible pool change."""
        for c in self.changes:
            act = ACTUATORS.get(c.kind)
            phrase = act.phrase(c) if act else None
            if phrase:
                return phrase
        return f"apply {self.rule}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    def save(self, path: Path) -> None:
        path.write_text(self.to_json() + "\n")

    @classmethod
    def load(cls, path: Path) -> Plan:
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(f"no such plan file: {path}") from None
        except (OSError, ValueError) as exc:
            raise UserError(f"{path} is not a plan file ({exc})") from None
        return cls.from_dict(raw, str(path))

    @classmethod
    def from_dict(cls, raw: Any, where: str = "plan") -> Plan:
        if not isinstance(raw, dict) or raw.get("version") != PLAN_VERSION:
            raise UserError(f"{where} is not a version-{PLAN_VERSION} stormdeck plan")
        try:
            changes = tuple(Change(**c) for c in raw["changes"])
            plan = cls(id=str(raw["id"]), created=float(raw["created"]), rule=str(raw["rule"]),
                       target=str(raw["target"]), summary=str(raw["summary"]),
                       source=str(raw["source"]), fsid=raw.get("fsid"), changes=changes)
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{where} is not a plan file stormdeck can read ({exc})") from None
        for c in plan.changes:
            validate_change(c, where)
        return plan


def validate_change(c: Change, where: str = "plan") -> None:
    """Refuse anything that is not a plain token where a command will be built from it."""
    act = ACTUATORS.get(c.kind) if isinstance(c.kind, str) else None
    if act is None:
        raise UserError(f"{where}: unknown kind of change {c.kind!r}")
    for name in act.plain:
        value = getattr(c, name)
        # Plan files are read from disk: a field may be anything JSON holds, not only text.
        if not isinstance(value, str) or not SAFE_TOKEN.match(value):
            raise UserError(f"{where}: {name} {value!r} of a {c.kind} change is not a plain "
                            "value (letters, digits and . _ : / = @ , + - only)")


def plan_from_finding(finding: Finding, fsid: str | None) -> Plan:
    if not finding.changes:
        raise UserError(f"{finding.rule} on {finding.target} proposes no change stormdeck "
                        "can make" + (f": {finding.procedure[0]}" if finding.procedure else ""))
    for c in finding.changes:
        validate_change(c, finding.rule)
    return Plan(id=uuid.uuid4().hex[:12], created=time.time(), rule=finding.rule,
                target=finding.target, summary=finding.summary, source=finding.source,
                fsid=fsid, changes=finding.changes)


def review(plan: Plan) -> str:
    """The exact change, as the operator reviews it before confirming."""
    p = printable
    lines = [f"plan {plan.id}: {plan.rule} on {p(plan.target)}  [{plan.source}]",
             f"  {p(plan.summary, 300)}"]
    for c in plan.changes:
        how = "at runtime" if c.runtime else "needs a restart" if c.runtime is False else \
            "runtime unknown"
        lines.append(f"  {p(c.command, 300)}")
        lines.append(f"      {p(c.key)} on {p(c.target)}: {p(c.current)} -> {p(c.proposed)}; "
                     f"{how}; {'reversible' if c.reversible else 'IRREVERSIBLE'}; "
                     f"affects {c.blast_radius}")
        if c.note:
            lines.append(f"      {p(c.note, 300)}")
    return "\n".join(lines)
