"""The values OSDs run with (`ceph config show osd.N`), read a few OSDs a poll."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stormdeck.base.secrets import redact_value
from stormdeck.collectors.ceph.connection import CommandError, MgrBusy, NoAnswer
from stormdeck.collectors.model import RunningValue

# Ceph's names for where a running value came from (md_config_t's levels, lowest first),
# as an operator would say them.
SOURCE_WORDS: Mapping[str, str] = {
    "default": "Ceph's default",
    "mon": "the config database",
    "file": "ceph.conf",
    "env": "the environment",
    "cmdline": "the command line",
    "override": "set at runtime (`ceph tell` or the admin socket)",
    "final": "forced by the daemon",
}


def parse_config_show(rows: Any, names: Iterable[str], now: float
                      ) -> dict[str, RunningValue]:
    """`config show WHO -f json` (the mgr's copy of what the daemon reported): the named
    options' running values. The mgr lists only options whose value is not the default;
    an option absent from the answer runs with Ceph's default."""
    if not isinstance(rows, list):
        raise ValueError(f"expected a list of options, got {type(rows).__name__}")
    want = set(names)
    out: dict[str, RunningValue] = {}
    for row in rows:
        if not isinstance(row, Mapping) or row.get("name") not in want:
            continue
        overrides = tuple(
            (str(o.get("source")), redact_value(row["name"], str(o.get("value"))) or "")
            for o in row.get("overrides") or () if isinstance(o, Mapping))
        out[row["name"]] = RunningValue(
            value=redact_value(row["name"], None if row.get("value") is None
                               else str(row["value"])),
            source=str(row.get("source") or "") or None, overrides=overrides, read_at=now)
    for name in want - out.keys():
        out[name] = RunningValue(value=None, source="default", read_at=now)
    return out


@dataclass
class RunningSampler:
    """Which OSDs' running values to read this poll, and what the last reads said.

    `config show` is one round trip to the mgr per daemon, with no bulk form: at 10,000
    OSDs they cannot all be read each poll. Each poll reads `per_poll` OSDs: first one
    OSD per host (what a host's ceph.conf sets shows on any of its OSDs), then the
    others, oldest read first; an OSD is read again after `every` seconds, and at once
    when the config database changed (a new `config dump`). A value set by `ceph tell
    osd.*` shows on the first OSD read."""

    names: tuple[str, ...]
    per_poll: int = 4
    every: float = 60.0
    # Seconds between two rounds of reads, whatever the poll's pace: choosing among
    # 10,000 OSDs costs ~9 ms, worth paying every few seconds, not every second.
    pace: float = 5.0
    _last_round: float = float("-inf")
    read: dict[str, tuple[float, dict[str, RunningValue]]] = field(default_factory=dict)
    failed: dict[str, tuple[float, str]] = field(default_factory=dict)
    _config: object | None = None

    def due(self, osds: Mapping[str, str | None], now: float, config: object) -> list[str]:
        """Up to per_poll OSDs (id -> host) to read now, hosts not yet seen first."""
        self._last_round = now
        if config is not self._config:
            # The database moved: every OSD's running value may have moved with it.
            self._config = config
            self.read = {k: (float("-inf"), v) for k, (_, v) in self.read.items()}
        for gone in set(self.read) - osds.keys():
            del self.read[gone]
        for gone in set(self.failed) - osds.keys():
            del self.failed[gone]
        seen_hosts = {osds.get(o) for o in self.read if osds.get(o)}

        def age(osd: str) -> float:
            at = self.read.get(osd, (float("-inf"), None))[0]
            tried = self.failed.get(osd, (float("-inf"), ""))[0]
            return max(at, tried)

        stale = [o for o in osds if now - age(o) >= self.every]
        # A host not yet read first, then the longest unread; ids keep the order stable.
        stale.sort(key=lambda o: (osds[o] in seen_hosts, age(o), _osd_number(o)))
        # One OSD of each host not yet read, then the rest in that order.
        first: list[str] = []
        hosts: set[str | None] = set()
        for osd in stale:
            host = osds[osd]
            if host not in seen_hosts and host not in hosts:
                first.append(osd)
                hosts.add(host)
        chosen = set(first)
        rest = [o for o in stale if o not in chosen]
        return (first + rest)[:self.per_poll]

    def ready(self, now: float, config: object) -> bool:
        """A round is due: `pace` seconds since the last, or the database changed."""
        return now - self._last_round >= self.pace or config is not self._config

    def take(self, osd: str, answer: dict[str, RunningValue], now: float) -> None:
        self.read[osd] = (now, answer)
        self.failed.pop(osd, None)

    def fail(self, osd: str, why: str, now: float) -> None:
        """A read that failed: the OSD's earlier values stand, with the reason beside."""
        self.failed[osd] = (now, why)

    def by_option(self) -> dict[str, dict[str, RunningValue]]:
        """option -> osd -> its running value; an OSD whose last read failed has the
        reason in place of a value it never had."""
        out: dict[str, dict[str, RunningValue]] = {n: {} for n in self.names}
        for osd, (_, values) in self.read.items():
            for name, v in values.items():
                out.setdefault(name, {})[osd] = v
        for osd, (at, why) in self.failed.items():
            for name in self.names:
                known = out[name].get(osd)
                out[name][osd] = RunningValue(
                    value=known.value if known else None,
                    source=known.source if known else None,
                    overrides=known.overrides if known else (),
                    read_at=known.read_at if known else at, error=why)
        return out


def read_running(sampler: RunningSampler, osds: Mapping[str, str | None], now: float,
                 config: object, send: Callable[[str], bytes],
                 errors: Callable[[str], None]) -> None:
    """One poll's reads. `send(who)` asks the mgr; it raises what the connection raises
    (a busy or dead mgr stops the poll's reads, to be tried at the next)."""
    for osd in sampler.due(osds, now, config):
        try:
            raw = send(osd)
            sampler.take(osd, parse_config_show(json.loads(raw), sampler.names, now), now)
        except MgrBusy:
            return
        except NoAnswer as exc:
            # Unanswered: the mgr is slow or gone; the next poll tries again.
            sampler.fail(osd, f"config show did not answer ({exc})", now)
            errors(f"running values not read: config show did not answer ({exc})")
            return
        except CommandError as exc:
            # ENOENT "no config state for daemon": a daemon not yet reporting (just
            # started, or down since the mgr started).
            text = str(exc)
            sampler.fail(osd, "its daemon has reported no config to the mgr yet"
                         if "no config state" in text else f"config show refused: {text}", now)
        except (ValueError, TypeError, KeyError) as exc:
            sampler.fail(osd, f"config show: unexpected output ({exc})", now)


def _osd_number(osd: str) -> int:
    try:
        return int(osd.split(".", 1)[1])
    except (IndexError, ValueError):
        return 0
