"""The table of actuators, one per kind of change, and the factory rules propose changes with."""

from __future__ import annotations

from dataclasses import replace

from stormdeck.advisors.actuators.base import Actuator
from stormdeck.advisors.actuators.ceph import CephConfig, FastEC, OsdFlag, PoolSet
from stormdeck.advisors.actuators.curve import CurveLeaderSchedule
from stormdeck.advisors.actuators.host import DeviceCache, TunedProfile
from stormdeck.advisors.findings import Change
from stormdeck.base.errors import UserError

ACTUATORS: dict[str, Actuator] = {a.kind: a for a in (
    CephConfig(), OsdFlag(), PoolSet(), FastEC(), DeviceCache(), TunedProfile(),
    CurveLeaderSchedule(),
)}


def actuator(kind: str) -> Actuator:
    try:
        return ACTUATORS[kind]
    except KeyError:
        raise UserError(f"unknown kind of change {kind!r}") from None


def known_actuator(kind: str) -> Actuator | None:
    """The actuator of a kind, or None for a kind this version lacks (a journal may name
    one): what a kind that is not known does is asked of no one."""
    return ACTUATORS.get(kind)


def moves_leaders(kind: str) -> bool:
    """Whether a change of this kind (a journal's: it may name a kind this version lacks)
    moves Curve's leaders."""
    act = known_actuator(kind)
    return act is not None and act.moves_leaders


def change(kind: str, target: str, key: str, current: str | None, proposed: str, *,
           args: dict[str, str] | None = None, runtime: bool | None = None,
           note: str = "") -> Change:
    """A change as rules propose it: its command rendered by its actuator, and its reach and
    reversibility the actuator's, so what a plan shows is what runs."""
    act = actuator(kind)
    c = Change(kind=kind, target=target, key=key, current=current, proposed=proposed,
               command="", note=note, args=tuple((args or {}).items()))
    return replace(c, command=act.command(c), reversible=act.reversible,
                   runtime=act.fixed_runtime if runtime is None else runtime)
