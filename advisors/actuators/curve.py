"""Curve's changes: a leader schedule through curve_ops_tool or the Go CLI."""

from __future__ import annotations

import re
from typing import ClassVar

from stormdeck.advisors.actuators.base import Actuator, Backends, Verified
from stormdeck.advisors.curve_schedule import ALL_POOLS, POOL_ID
from stormdeck.advisors.findings import Change
from stormdeck.base.errors import UserError


class CurveLeaderSchedule(Actuator):
    """A logical pool's rapid leader schedule: leaders moved, followed over heartbeats (K2.2)."""

    kind = "curve_leader_schedule"
    plain = ("target",)
    has_value = False
    arg_values: ClassVar[dict[str, re.Pattern[str] | tuple[str, ...]]] = {"pool_id": POOL_ID}
    reversible = False
    moves_leaders = True

    def command(self, c: Change) -> str:
        if c.target == ALL_POOLS:
            return "curve_ops_tool rapid-leader-schedule -scheduleAll=true"
        pool_id = c.arg("pool_id")
        if pool_id is None or not POOL_ID.match(pool_id):
            raise UserError(f"the leader schedule for {c.target} names no logical pool id: "
                            "make a new plan")
        return f"curve_ops_tool rapid-leader-schedule -logical_pool_id={pool_id} " \
               "-scheduleAll=false"

    def width(self, c: Change) -> str:
        return "cluster" if c.target == ALL_POOLS else "pool"

    def read(self, b: Backends, c: Change) -> str | None:
        return c.current  # a schedule has no value to go stale

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        from stormdeck.advisors.curve_schedule import run_leader_schedule

        # That pool alone (curve_ops_tool, or the Go CLI where it is missing); the tool's
        # own words when the MDS refuses.
        run_leader_schedule(c, b.curve_tool)

    def verify(self, b: Backends, c: Change, want: str | None) -> Verified:
        if b.curve_follow is None:
            return Verified("applied", None,
                            "leader transfers ride on heartbeats; follow the range")
        converged, detail = b.curve_follow(c.target, self.planned_range(c))
        return Verified("applied" if converged else "pending", None, detail)

    @staticmethod
    def planned_range(c: Change) -> str | None:
        """The leadernum range the plan saw (its `current`, "range N", as the rule wrote
        it): the transfers may all land before the first look after the schedule."""
        return c.current.removeprefix("range ") if c.current else None

    def cannot_undo(self, c: Change) -> str | None:
        return "a leader schedule moved leaders; there is nothing to undo"

    def inverse_command(self, c: Change, before: str | None) -> str:
        return "(none: a leader schedule has nothing to undo)"
