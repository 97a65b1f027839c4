"""What a source says of itself once: its name, the parts it fills, what names it, its reach."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from stormdeck.collectors.hub import Source


@dataclass(frozen=True)
class Option:
    """One command-line option a source brings: `add_argument`'s arguments, as written.

    The config file's key is its first long flag with `_` for `-` (stormdeck/config.py
    reads the same parser), so a source's file key and flag cannot drift apart.
    """

    flags: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceDeclaration:
    """One source, as every surface that lists sources reads it (collectors/registry.py).

    `name` is the source's own `Source.name`: the hub keys its health by it, so the
    console's stale marks and `check`'s verdict meet the same name.
    """

    name: str
    # The parts of a Snapshot it may fill, as the console names them: a late source marks
    # them stale. "cluster" (health, PGs, pools), "osd" (up/in, latency, IOPS, PGs), "cores"
    # (daemons' CPU), "chunkserver", "curve" (Curve's cluster), "disks", "hosts".
    parts: tuple[str, ...]
    # "cluster": it reads the cluster, so `check` and `snapshot` judge whether the cluster
    # was read by it; "host": it reads one machine, which says nothing of the cluster.
    scope: Literal["cluster", "host"]
    # The options (argparse dests, the config file's keys) that name this source: given
    # on the command line, they keep the config file's clusters out.
    enabled_by: tuple[str, ...] = ()
    # Options it brings that stormdeck/sources.py does not already define.
    options: tuple[Option, ...] = ()
    # The group its options are listed under in --help.
    title: str = ""
    # validate reads it before it measures; a cluster one must answer or validate stops.
    validate: bool = False
    # Builds it from the parsed options, or None when they do not name it. The built-in
    # four have none: stormdeck/sources.py makes them, as they share the ceph CLI's
    # client identity (CEPH_ARGS) and the Curve schedules advisors keep.
    make: Callable[[argparse.Namespace], Source | None] | None = None

    def __post_init__(self) -> None:
        if self.scope not in ("cluster", "host"):
            raise ValueError(f"source {self.name!r}: scope is 'cluster' or 'host', "
                             f"not {self.scope!r}")
