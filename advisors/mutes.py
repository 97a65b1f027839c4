"""Mutes: a finding silenced for a while, kept across runs, dropped when it grows worse."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from stormdeck.advisors.model import Finding, Severity
from stormdeck.base.errors import UserError

MAX_TTL = 30 * 86400.0
WORSEN = 1.25  # badness this many times the muted value counts as worse


@dataclass(frozen=True, slots=True)
class Mute:
    rule: str
    target: str  # "*" mutes the rule for every target
    until: float
    created: float
    severity: int
    badness: float
    reason: str = ""


class MuteStore:
    """Mutes in a JSON file, rewritten atomically; a TTL is required, as Ceph's mutes allow."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._mutes = self._load()

    def _load(self) -> dict[tuple[str, str], Mute]:
        try:
            raw = json.loads(self.path.read_text())
            return {(m["rule"], m["target"]): Mute(**m) for m in raw["mutes"]}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{self.path} is not a mutes file stormdeck can read ({exc}); "
                            "move it away to start afresh") from None

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"version": 1, "mutes": [asdict(m) for m in self._mutes.values()]}, f,
                      indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def list(self, now: float | None = None) -> list[Mute]:
        now = time.time() if now is None else now
        return [m for m in self._mutes.values() if m.until > now]

    def add(self, finding: Finding, ttl: float, badness: float = 0.0, all_targets: bool = False,
            reason: str = "", now: float | None = None) -> Mute:
        if not 0 < ttl <= MAX_TTL:
            raise UserError(f"a mute needs a time to live between 1 s and {MAX_TTL / 86400:g} "
                            f"days, not {ttl:g} s")
        now = time.time() if now is None else now
        mute = Mute(finding.rule, "*" if all_targets else finding.target, now + ttl, now,
                    int(finding.severity), badness, reason)
        self._mutes = {k: m for k, m in self._mutes.items() if m.until > now}
        self._mutes[(mute.rule, mute.target)] = mute
        self._save()
        return mute

    def remove(self, rule: str, target: str) -> bool:
        gone = self._mutes.pop((rule, target), None)
        if gone is not None:
            self._save()
        return gone is not None

    def judge(self, finding: Finding, badness: float,
              now: float) -> tuple[Mute | None, str | None]:
        """The mute that holds for this finding, or None, and a note if one was dropped."""
        mute = self._mutes.get(finding.key) or self._mutes.get((finding.rule, "*"))
        if mute is None or mute.until <= now:
            return None, None
        worse_sev = int(finding.severity) > mute.severity
        worse = badness > mute.badness * WORSEN if mute.badness > 0 else badness > mute.badness
        if worse_sev or worse:
            self._mutes.pop((mute.rule, mute.target), None)
            self._save()
            what = (f"severity rose to {Severity(int(finding.severity))}" if worse_sev
                    else f"it grew worse ({badness:g} against {mute.badness:g} when muted)")
            return None, f"unmuted: {what}"
        return mute, None
