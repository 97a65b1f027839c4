"""A Ceph option as the rules see it: the database's values, what daemons run, its changes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class RunningValue:
    """What one daemon runs an option with, as it reported to the mgr (`config show`)."""

    value: str | None
    source: str | None  # "default", "mon", "file", "env", "cmdline", "override"
    overrides: tuple[tuple[str, str], ...] = ()  # (source, value) it wins over
    read_at: float | None = None  # the console's clock when read


@dataclass(frozen=True, slots=True)
class ConfigOption:
    """One option the rules need: does it exist here, can it change live, what is it set to."""

    name: str
    exists: bool
    runtime: bool | None = None  # can_update_at_runtime
    default: str | None = None
    type: str | None = None
    values: Mapping[str, str] = field(default_factory=dict)  # who ("osd", "osd.3") -> value
    # What the OSDs read so far (`config show`) run with from a layer above the database
    # ("osd.3" -> RunningValue: ceph.conf, command line, runtime). An OSD in the
    # cluster's `running_read` but not here runs the database's value; one in neither is
    # not read yet (a sample at scale).
    running: Mapping[str, RunningValue] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfigChange:
    """One option changed in the monitors' config database (`ceph config log`)."""

    version: int
    stamp: float | None
    name: str  # "osd/osd_max_backfills": who, then the option
    old: str | None  # None: it was not set
    new: str | None  # None: it was removed


def osd_number(osd: str) -> int:
    """osd.12 -> 12, for ordering OSD ids as numbers (0 for a name without one)."""
    try:
        return int(osd.split(".", 1)[1])
    except (IndexError, ValueError):
        return 0
