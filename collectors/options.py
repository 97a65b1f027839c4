"""A Ceph option as the rules see it: the database's values, what daemons run, its changes."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

# Layers of a value above the config database, in Ceph's order of precedence (lowest
# first): what `config show` names as a value's source.
ABOVE_DATABASE = ("file", "env", "cmdline", "override")
# Each layer as a sentence names where the value came from.
LAYER_FROM = {"override": "set at runtime (`ceph tell` or the admin socket)",
              "file": "from ceph.conf", "cmdline": "from the command line",
              "env": "from the daemon's environment (where it is deployed: its container)",
              "mon": "as the config database gives them",
              "default": "as Ceph's default"}

_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*")
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


@functools.lru_cache(maxsize=256)
def size(text: str | None) -> float | None:
    """A size option's value as Ceph takes it: bytes, or with a K/M/G/T suffix (binary)."""
    # Cached: the same few values are read for every OSD, every tick (10,000 at scale).
    if text is None:
        return None
    m = _SIZE.fullmatch(text)
    if not m:
        return None
    return float(m.group(1)) * _UNIT[m.group(2).lower()]


def same_value(a: str | None, b: str | None) -> bool:
    """Two spellings of one value: "10G" and "10737418240", "0.1" and "0.100000", "true"
    and "1"."""
    if a == b:
        return True
    if a is None or b is None:
        return False
    na, nb = size(a), size(b)
    if na is not None and nb is not None:
        return na == nb
    truth = {"true": "1", "false": "0"}
    return truth.get(a.strip().lower(), a.strip()) == truth.get(b.strip().lower(), b.strip())


@dataclass(frozen=True, slots=True)
class RunningValue:
    """What one daemon runs an option with, as it reported to the mgr (`config show`)."""

    value: str | None
    source: str | None  # "default", "mon", "file", "env", "cmdline", "override"
    overrides: tuple[tuple[str, str], ...] = ()  # (source, value) it wins over
    read_at: float | None = None  # the console's clock when read
    # Layers whose value the daemon does not run ("mon": the database holds a value of an
    # option it reads only at start, taken at its next restart).
    ignores: tuple[str, ...] = ()

    @property
    def wins_over_database(self) -> bool:
        """The daemon runs this, not what the config database gives it: a layer above
        the database set it, or the database's value waits for a restart."""
        return self.source in ABOVE_DATABASE or "mon" in self.ignores


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
