"""The values OSDs run with (`ceph config show osd.N`), read a few OSDs a poll."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from stormdeck.base.secrets import redact_value
from stormdeck.collectors.ceph.connection import CommandError, MgrBusy, NoAnswer
from stormdeck.collectors.model import RunningValue
from stormdeck.collectors.options import osd_number


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
        # "ignores": "mon" where the database holds a value of an option the daemon
        # reads only at start (DaemonServer's config show): it runs another until restarted.
        ignores = row.get("ignores")
        out[row["name"]] = RunningValue(
            value=redact_value(row["name"], None if row.get("value") is None
                               else str(row["value"])),
            source=str(row.get("source") or "") or None, overrides=overrides, read_at=now,
            ignores=tuple(str(i) for i in (ignores if isinstance(ignores, list) else
                                           [ignores] if ignores else ())))
    for name in want - out.keys():
        out[name] = RunningValue(value=None, source="default", read_at=now)
    return out


@dataclass
class RunningSampler:
    """Which OSDs' running values to read this poll, and what the reads found.

    `config show` is one round trip to the mgr per daemon, with no bulk form: at 10,000
    OSDs they cannot all be read each poll. Each round reads `per_poll` OSDs: first one
    OSD per host (what a host's ceph.conf sets shows on any of its OSDs), then the
    others, oldest read first; an OSD is read again after `every` seconds. A value set by
    `ceph tell osd.*` shows on the first OSD read. A change of the database does not make
    them due: what is kept here does not come from it. An OSD that goes down, or whose
    daemon the mgr has no report of (restarted), is unread again until read anew.

    Only values from a layer above the database (ceph.conf, the environment, the command
    line, runtime), or that the daemon runs while the database's waits for a restart,
    are kept: an OSD read whose option is not among them runs what the database gives
    it. So 10,000 OSDs cost a few entries each, and what the rules see is
    new only when such a value, or the set of OSDs read, changes."""

    names: tuple[str, ...]
    per_poll: int = 4
    every: float = 60.0
    # Seconds between two rounds of reads, whatever the poll's pace: choosing among
    # 10,000 OSDs costs ~9 ms, worth paying every few seconds, not every second.
    pace: float = 5.0
    _last_round: float = float("-inf")
    read: dict[str, float] = field(default_factory=dict)  # osd -> when last read
    above: dict[str, dict[str, RunningValue]] = field(default_factory=dict)
    failed: dict[str, tuple[float, str]] = field(default_factory=dict)
    version: int = 0  # moves when what by_option() gives moves
    # OSDs newly read with nothing above the database move only the set of OSDs read:
    # that is published at most once a `publish` seconds, so a sweep of 10,000 OSDs
    # (3.5 h) does not make, judge and record a new set of 10,000 ids every round.
    publish: float = 60.0
    _unpublished: bool = False
    _published_at: float = float("-inf")

    def due(self, osds: Mapping[str, str | None], now: float) -> list[str]:
        """Up to per_poll OSDs (id -> host) to read now, hosts not yet seen first. An OSD
        not among `osds` (down, or gone) forgets what it ran: it restarts with new values."""
        self._last_round = now
        for gone in [o for o in self.read if o not in osds]:
            self._forget(gone)
        for gone in [o for o in self.failed if o not in osds]:
            del self.failed[gone]
            self.version += 1
        seen_hosts = {osds.get(o) for o in self.read if osds.get(o)}

        def age(osd: str) -> float:
            tried = self.failed.get(osd)
            return max(self.read.get(osd, float("-inf")),
                       tried[0] if tried else float("-inf"))

        stale = [o for o in osds if now - age(o) >= self.every]
        # A host not yet read first, then the longest unread; ids keep the order stable.
        stale.sort(key=lambda o: (osds[o] in seen_hosts, age(o), osd_number(o)))
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

    def ready(self, now: float) -> bool:
        """A round is due: `pace` seconds since the last."""
        return now - self._last_round >= self.pace

    def _forget(self, osd: str) -> None:
        if self.read.pop(osd, None) is not None:
            self.above.pop(osd, None)
            self.version += 1

    def take(self, osd: str, answer: Mapping[str, RunningValue], now: float) -> None:
        kept = {n: v for n, v in answer.items() if v.wins_over_database}
        old = self.above.get(osd, {})
        if _changed(old, kept):
            self.above[osd] = kept
            self.version += 1
        elif osd not in self.read:
            self.above[osd] = kept
            self._unpublished = True
        self.read[osd] = now
        if self.failed.pop(osd, None) is not None:
            self.version += 1

    def fail(self, osd: str, why: str, now: float, forget: bool = False) -> None:
        """A read that failed: the OSD's earlier values stand, unless `forget` (the mgr has
        no report of its daemon: a restart, whose values are new)."""
        if forget:
            self._forget(osd)
        before = self.failed.get(osd)
        self.failed[osd] = (now, why)
        if before is None or before[1] != why:
            self.version += 1

    def settle(self, now: float) -> None:
        """The end of a round: publish the OSDs newly read, if it is time (at once while
        few are read: a small cluster's first rounds are not held back)."""
        if self._unpublished and (now - self._published_at >= self.publish
                                  or len(self.read) <= 3 * self.per_poll):
            self.version += 1
            self._unpublished, self._published_at = False, now

    def by_option(self) -> tuple[dict[str, dict[str, RunningValue]], frozenset[str],
                                 str | None]:
        """option -> osd -> the value it runs from a layer above the database; the OSDs
        read; why the newest failed read failed (None: none did)."""
        out: dict[str, dict[str, RunningValue]] = {n: {} for n in self.names}
        for osd, values in self.above.items():
            for name, v in values.items():
                out.setdefault(name, {})[osd] = v
        newest = max(self.failed.values(), key=lambda f: f[0], default=None)
        return out, frozenset(self.read), newest[1] if newest else None


def _changed(old: Mapping[str, RunningValue], new: Mapping[str, RunningValue]) -> bool:
    """Other values or layers (when each was read does not count)."""
    if old.keys() != new.keys():
        return True
    return any((o.value, o.source, o.overrides) != (n.value, n.source, n.overrides)
               for o, n in ((old[k], new[k]) for k in new))


def read_running(sampler: RunningSampler, osds: Mapping[str, str | None], now: float,
                 send: Callable[[str], bytes], errors: Callable[[str], None]) -> None:
    """One poll's reads. `send(who)` asks the mgr; it raises what the connection raises
    (a busy or dead mgr stops the poll's reads, to be tried at the next)."""
    try:
        _round(sampler, osds, now, send, errors)
    finally:
        sampler.settle(now)


def _round(sampler: RunningSampler, osds: Mapping[str, str | None], now: float,
           send: Callable[[str], bytes], errors: Callable[[str], None]) -> None:
    for osd in sampler.due(osds, now):
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
            if "no config state" in text:
                sampler.fail(osd, "its daemon has reported no config to the mgr yet", now,
                             forget=True)
            else:
                sampler.fail(osd, f"config show refused: {text}", now)
        except (ValueError, TypeError, KeyError) as exc:
            sampler.fail(osd, f"config show: unexpected output ({exc})", now)
