"""The Actuator contract (read, before, apply, verify, inverse) that every kind of change fulfils.

The executor is generic over it: adding a kind of change is one module and one
line in actuators/table.py, and the plan validation, the stale check, the
journal, the read-back and undo follow from it. Nothing goes through a shell:
Ceph changes through librados, tools as argument lists.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from stormdeck.advisors.ceph_admin import CephAdmin
from stormdeck.advisors.devices import (
    UDEV_RULES,
)
from stormdeck.advisors.findings import Change
from stormdeck.base.errors import UserError
from stormdeck.collectors.model import Cluster


def same(a: str | None, b: str | None) -> bool:
    """Values equal as Ceph compares them: 0.1 == 0.100000, True == true."""
    if a is None or b is None:
        return a == b
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip().lower() == b.strip().lower()


@dataclass
class Backends:
    """What actuators act through: the cluster, the tools, and how long to wait for them."""

    ceph: CephAdmin | None = None
    curve_tool: tuple[str, ...] = ("curve_ops_tool",)
    # Follows a pool's leader range after a schedule: (pool, the range the plan saw) ->
    # (converged, what was seen); the assembly makes it from the Curve sources' options.
    curve_follow: Callable[[str, str | None], tuple[bool, str]] | None = None
    verify_seconds: float = 15.0
    # How long apply follows a change that converges (pg_num steps toward its target)
    # before it journals "pending"; a later undo or `journal --refresh` follows it on.
    converge_seconds: float = 120.0
    # Where a device cache change is kept across reboots (read at construction, so a
    # test can point it elsewhere).
    udev_rules: Path = field(default_factory=lambda: UDEV_RULES)

    def need_ceph(self) -> CephAdmin:
        if self.ceph is None:
            raise UserError("this change needs the Ceph cluster: give -c CONF")
        return self.ceph


# How far a change reaches, narrowest first: what an actuator computes from kind, target and
# key (Actuator.width). Anything wider than one daemon is confirmed by a typed phrase.
WIDTHS = ("daemon", "device class", "pool", "host", "all OSDs", "all monitors", "cluster")


RANK = {"daemon": 0, "device class": 1, "pool": 1, "host": 1, "all OSDs": 2,
        "all monitors": 2, "cluster": 3}


DEVICE = re.compile(r"^(?:[A-Za-z0-9_.-]+:)?/dev/([a-z0-9]+)$")


@dataclass(frozen=True, slots=True)
class DataMovement:
    """What a data-moving change does to placement, as data the blast radius predicts from
    (advisors/blast/changes.py): the OSDs it holds down, or the PG count it gives a pool."""

    held_down: tuple[int, ...] = ()  # OSDs kept down the next time each goes down (noup)
    pool: str | None = None  # the pool whose pg_num or pgp_num it sets
    key: str = ""  # "pg_num" or "pgp_num"
    count: str = ""  # the value proposed (the prediction says when it is not a number)


@dataclass(frozen=True, slots=True)
class Verified:
    outcome: str  # "applied" | "pending" | "pending restart" | "overridden by <reason>"
    after: str | None
    detail: str = ""


class Actuator:
    """A kind of change. Subclasses say how to read, set, check and invert it."""

    kind: ClassVar[str]
    needs_ceph: ClassVar[bool] = False
    # The fields a command is built from: each must be a plain token (plan.SAFE_TOKEN).
    plain: ClassVar[tuple[str, ...]] = ("target", "key", "proposed")
    # A value that can move between planning and applying (a schedule has none).
    has_value: ClassVar[bool] = True
    # The extra arguments (Change.args) its command is built from, and what each may hold.
    arg_values: ClassVar[dict[str, re.Pattern[str] | tuple[str, ...]]] = {}
    # Whether a change of this kind can be put back; decided here, never by a plan file.
    reversible: ClassVar[bool] = True
    # Whether it takes effect without a restart: True for every kind but Ceph's options,
    # which the cluster's own `config help` answers (None here: ask it).
    fixed_runtime: ClassVar[bool | None] = True
    # Whether it moves Curve's copyset leaders: the leader rules tell the term rises it
    # causes (transfers) from elections.
    moves_leaders: ClassVar[bool] = False
    # Whether "unset" proposed means the setting removed (apply(None), `config rm`), not a
    # value of that name: a version-1 journal, which kept no value, is read by it.
    unset_removes: ClassVar[bool] = False

    def command(self, c: Change) -> str:
        """The exact command this change runs, rendered from its fields and args: what the
        review shows, `apply` prints and the journal keeps."""
        raise NotImplementedError

    def width(self, c: Change) -> str:
        """How far the change reaches (one of WIDTHS), from its kind, target and key."""
        raise NotImplementedError

    def vet(self, cluster: Cluster | None, c: Change) -> str | None:
        """Why this cluster cannot take the change as proposed (the engine drops it with
        this note), or None. What a kind's cluster lacks is the kind's own knowledge."""
        return None

    def moves_data(self, c: Change) -> bool:
        """Whether carrying it out moves data between OSDs: the blast radius predicts what
        (data_movement) and guards it before it is confirmed."""
        return False

    def data_movement(self, c: Change) -> DataMovement:
        """What a change that moves data (moves_data) does to placement."""
        return DataMovement()

    def follows_to_clean(self, c: Change) -> bool:
        """Whether the data it moves starts moving as it is made, so that apply follows it
        until the cluster is active+clean again."""
        return self.moves_data(c)

    def runtime(self, ceph: CephAdmin | None, c: Change) -> bool | None:
        """Whether it applies without a restart; None: unknown (confirmed as if not)."""
        return self.fixed_runtime

    def read(self, b: Backends, c: Change) -> str | None:
        """The value now, in the same terms as the plan's `current`."""
        raise NotImplementedError

    def before(self, b: Backends, c: Change) -> str | None:
        """What undo must restore."""
        return self.read(b, c)

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        """Set what `c` names to `value` (None: back to unset, where that exists)."""
        raise NotImplementedError

    def verify(self, b: Backends, c: Change, want: str | None) -> Verified:
        now = self.read(b, c)
        if want is not None and not same(now, want):
            raise UserError(f"{c.key} on {c.target} reads {now} after the change, not {want}")
        return Verified("applied", now)

    def arrived(self, b: Backends, c: Change, want: str | None) -> str | None:
        """The value now if the change has reached `want` (stored and running), else None."""
        now = self.before(b, c)
        return (now if now is not None else "unset") if same(now, want) else None

    def cannot_undo(self, c: Change) -> str | None:
        """Why this change has no way back, or None."""
        if not c.reversible or not self.reversible:
            return f"{c.command} cannot be undone: {c.note or 'the change is irreversible'}"
        return None

    def inverse_command(self, c: Change, before: str | None) -> str:
        """The exact command undo runs, as the operator reviews it."""
        raise NotImplementedError

    def inverse(self, c: Change, before: str | None) -> Change:
        """The change that puts `before` back, with its exact command. The forward change's
        note spoke of the way there (e.g. "PGs split"), not of the way back."""
        return replace(c, current=c.proposed, proposed=before or "unset",
                       command=self.inverse_command(c, before),
                       note=self.inverse_note(c, before))

    def inverse_note(self, c: Change, before: str | None) -> str:
        return f"undo: puts back {before if before is not None else 'unset'}"

    def phrase(self, c: Change) -> str | None:
        """What the operator must type for this change, when a generic phrase is too weak."""
        return None
