"""What advisors produce: findings with their evidence, and the changes they propose."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum


class Severity(IntEnum):
    INFO = 1
    WARNING = 2
    CRITICAL = 3

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Evidence:
    """The numbers behind a finding: a metric over a window, and its value now."""

    metric: str
    window: float  # seconds covered
    now: float | str | None
    min: float | None = None
    avg: float | None = None
    max: float | None = None
    unit: str = ""  # "s", "cores", "ratio", "IOPS", ... (SI inside, display converts)
    samples: int = 1
    # Set when the finding's daemon is down (an OSD) or offline (a chunkserver) at the
    # newest tick and this is one of its own figures: when it went down, so `now` is its
    # last figure from before then, not a current one. down_bound: the History begins
    # with it down, so it went down at or before down_since.
    down_since: float | None = None
    down_bound: bool = False

    def down_note(self) -> str:
        """What a reader is told of a figure from before its daemon went down."""
        if self.down_since is None:
            return ""
        at = time.strftime("%H:%M:%S", time.localtime(self.down_since))
        return f" (before it went down{', before' if self.down_bound else ' at'} {at})"


@dataclass(frozen=True, slots=True)
class Change:
    """One concrete change a finding proposes. Issue "Acting on advice" executes these."""

    kind: str  # a key of advisors.actuators.ACTUATORS: "ceph_config", "osd_flag",
    #            "pool_set", "fast_ec", "device_cache", "tuned_profile", "curve_leader_schedule"
    target: str  # "osd", "osd.3", "class:ssd", pool name, "host:/dev/sdb", logical pool
    key: str  # option, flag, pool property, ...
    current: str | None  # None: unset / unknown
    proposed: str
    command: str  # what an operator would type
    runtime: bool | None = None  # applies without a restart (config help)
    reversible: bool = True
    note: str = ""
    # What the command needs beyond target/key/proposed, as (name, value) pairs: a disk's
    # transport ("transport"), a Curve logical pool's id ("pool_id"). The actuator builds
    # the command from these, never from the command text.
    args: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        # Read back from JSON (a journal, a plan), the pairs are lists: keep them tuples,
        # so a change stays hashable and compares equal to the one that was written.
        if any(not isinstance(pair, tuple) for pair in self.args) or \
                not isinstance(self.args, tuple):
            object.__setattr__(self, "args", tuple(tuple(pair) for pair in self.args))

    def arg(self, name: str) -> str | None:
        # A journal or plan file read back gives lists, not tuples: both are pairs.
        for pair in self.args:
            if len(pair) == 2 and pair[0] == name:
                return pair[1]
        return None


@dataclass(frozen=True, slots=True)
class Check:
    """What a rule says about one target on one evaluation.

    `fire` is the condition that starts the finding; `clear` the one that
    ends it (hysteresis: between the two, a firing finding stays firing).
    `badness` orders how bad it is, so a muted finding can be unmuted when
    it grows worse.
    """

    target: str
    fire: bool
    clear: bool
    severity: Severity
    summary: str
    evidence: tuple[Evidence, ...] = ()
    changes: tuple[Change, ...] = ()
    procedure: tuple[str, ...] = ()  # steps no executor takes for the operator
    badness: float = 0.0
    detail: tuple[str, ...] = ()  # the cluster's own lines (Ceph's health detail), as data
    ceph_muted: bool = False  # Ceph itself mutes it (`ceph health mute`): shown as muted


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    title: str
    severity: Severity
    target: str
    summary: str
    explanation: str
    source: str  # docs/knowledge.md section ids, e.g. "osd-cpu-cluster-knee, osd-op-threads"
    state: str  # "pending" | "firing"
    first_seen: float
    last_seen: float
    evidence: tuple[Evidence, ...] = ()
    changes: tuple[Change, ...] = ()
    procedure: tuple[str, ...] = ()
    muted: bool = False
    muted_until: float | None = None
    notes: tuple[str, ...] = ()  # e.g. a change dropped because it contradicted another
    detail: tuple[str, ...] = ()  # the cluster's own lines (Ceph's health detail)

    @property
    def key(self) -> tuple[str, str]:
        return (self.rule, self.target)


Thresholds = Mapping[str, float | int | str | bool | list[str]]


@dataclass(frozen=True, slots=True)
class RuleSettings:
    enabled: bool = True
    for_seconds: float = 0.0
    warmup_samples: int = 1
    params: Thresholds = field(default_factory=dict)
