"""What validation measured, kept per cluster and per disk for the rules to act on: the
response curve's capacity (K5.5) and the fio write-cache verdicts (K2.5, K6.4).

"Evidence" is one thing elsewhere: the figures a finding rests on (findings.Evidence);
what validate measured is "validated" (the Engine's `validated`, a rule's ctx.validated)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stormdeck.base.secrets import write_private

FILE = "evidence.json"


@dataclass(frozen=True, slots=True)
class Capacity:
    """The most IOPS a response curve reached, and its 70% point (K5.5)."""

    kind: str  # "write" | "read"
    max_iops: float
    headroom_iops: float | None  # the curve's 70% point; None if it never got there
    time: float
    quick: bool = False  # a `validate --quick` run: 2-second points, a rough figure


@dataclass(frozen=True, slots=True)
class CacheVerdict:
    """fio's fdatasync writes against what the device saw, for one disk (K2.5)."""

    disk: str  # "host:/dev/vda"
    verdict: str  # judge.PASS | judge.FAIL
    ratio: float  # fio IOPS / the device's writes and flushes per second
    flushes_per_write: float | None  # None: a kernel before 5.5 counts no flushes
    time: float


@dataclass(frozen=True, slots=True)
class Validated:
    capacity: Mapping[str, Mapping[str, Capacity]] = field(default_factory=dict)  # fsid ->
    caches: Mapping[str, CacheVerdict] = field(default_factory=dict)  # disk key ->

    def capacity_of(self, fsid: str | None) -> Mapping[str, Capacity]:
        return self.capacity.get(fsid or "", {})

    def cache_of(self, disk: str) -> CacheVerdict | None:
        return self.caches.get(disk)


def load(path: Path) -> Validated:
    """The evidence file; an absent or damaged one is no evidence, never an error."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return Validated()
    if not isinstance(raw, dict):
        return Validated()
    capacity: dict[str, dict[str, Capacity]] = {}
    caches: dict[str, CacheVerdict] = {}
    try:
        for fsid, kinds in (raw.get("capacity") or {}).items():
            capacity[fsid] = {k: Capacity(**v) for k, v in kinds.items()}
        for disk, ev in (raw.get("caches") or {}).items():
            caches[disk] = CacheVerdict(**ev)
    except (TypeError, AttributeError):
        return Validated()
    return Validated(capacity, caches)


def record(path: Path, fsid: str | None, host: str, steps: Iterable[Any], quick: bool,
           when: float | None = None) -> Validated:
    """Keep what a finished run measured, over what earlier runs did (the newest per
    cluster and kind, per disk); steps a run skipped leave their evidence as it was."""
    when = time.time() if when is None else when
    old = load(path)
    capacity = {f: dict(k) for f, k in old.capacity.items()}
    caches = dict(old.caches)
    for step in steps:
        for v in step.verdicts:
            data = v.data or {}
            if step.id == "curve" and fsid and data.get("max_iops"):
                kind = v.check.split()[0]
                head = data.get("headroom") or {}
                capacity.setdefault(fsid, {})[kind] = Capacity(
                    kind, float(data["max_iops"]),
                    float(head["iops"]) if head.get("iops") else None, when, quick)
            elif step.id == "hosts" and data.get("device") and data.get("ratio") is not None:
                disk = f"{host}:/dev/{data['device']}"
                caches[disk] = CacheVerdict(disk, v.verdict, float(data["ratio"]),
                                             data.get("flushes_per_write"), when)
    out = Validated(capacity, caches)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    write_private(tmp, json.dumps({
        "format": 1,
        "capacity": {f: {k: asdict(c) for k, c in kinds.items()}
                     for f, kinds in capacity.items()},
        "caches": {d: asdict(e) for d, e in caches.items()}}, indent=1))
    os.replace(tmp, path)
    return out


def store_in(state: Path) -> ValidatedStore:
    """The store `stormdeck validate` writes under the state directory (validate/)."""
    return ValidatedStore(state / "validate" / FILE)


class ValidatedStore:
    """The evidence file as the engine reads it: again only when a validation rewrote it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._value = Validated()

    def get(self) -> Validated:
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            return Validated()
        if stamp != self._stamp:
            self._stamp, self._value = stamp, load(self.path)
        return self._value
