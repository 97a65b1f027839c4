"""Curve's one change: a logical pool's leader schedule, by curve_ops_tool or the Go CLI."""

# The only Curve write stormdeck makes lives here, not among the collectors, which only read.

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from typing import ClassVar

from stormdeck.advisors.actuators.base import Actuator, Backends, Verified
from stormdeck.advisors.ceph_admin import Refused
from stormdeck.advisors.findings import Change
from stormdeck.base.errors import UserError
from stormdeck.collectors.curve.parse import CurveError, parse_cli_json

ALL_POOLS = "all-pools"  # a change's target when the pools' ids could not be read
POOL_ID = re.compile(r"^\d{1,9}$")  # what a change's pool_id argument may hold


def is_go_cli(tool: Sequence[str]) -> bool:
    """Whether this tool is tools-v2's `curve` rather than curve_ops_tool."""
    return bool(tool) and tool[0].rstrip("/").rpartition("/")[2] == "curve"


def schedule_argv(tool: Sequence[str], pool_id: int | None) -> list[str]:
    """The leader schedule for one logical pool, or for every pool when pool_id is None.

    curve_ops_tool: `rapid-leader-schedule -logical_pool_id=N -scheduleAll=false`
    (its -scheduleAll defaults to true, every pool: src/tools/schedule_tool.cpp);
    tools-v2: `curve bs update leader-schedule --logicalpoolid N` or `--all`
    (tools-v2/pkg/cli/command/curvebs/update/leader_schedule/leader_schedule.go),
    with `--format json` so that a refusal is read from its result.
    """
    if pool_id is not None and pool_id <= 0:
        raise CurveError(f"logical pool id {pool_id} is not one Curve gives")
    if is_go_cli(tool):
        which = ["--all"] if pool_id is None else ["--logicalpoolid", str(pool_id)]
        return [tool[0], "bs", "update", "leader-schedule", *which, "--format", "json",
                *tool[1:]]
    which = ["-scheduleAll=true"] if pool_id is None else \
        [f"-logical_pool_id={pool_id}", "-scheduleAll=false"]
    return [tool[0], "rapid-leader-schedule", *which, *tool[1:]]


_FAIL = re.compile(r"\bfail(?:s|ed|ure)?\b", re.IGNORECASE)


def schedule_refusal(tool: Sequence[str], rc: int, out: str, err: str) -> str | None:
    """None when the MDS took the schedule; else why not, in the tool's own words.

    curve_ops_tool prints nothing on success and `RapidLeaderSchedule pool N fail` on
    failure; the Go CLI writes {"result": {"result": "failed", "reason": ...}} with a
    non-zero error code, and exits 0 in JSON mode, so the exit status alone says little.
    """
    if is_go_cli(tool):
        try:
            result = parse_cli_json(out, "curve bs update leader-schedule")
        except CurveError as exc:
            lines = err.strip().splitlines()
            return lines[-1] if rc != 0 and lines else str(exc)
        if isinstance(result, dict) and result.get("result") == "failed":
            return f"curve bs update leader-schedule: {result.get('reason', 'failed')}"
        return None if rc == 0 else f"curve bs update leader-schedule: exit status {rc}"
    lines = (out + "\n" + err).strip().splitlines()
    # The word, not the letters: a log line of a leader's failover is no refusal.
    fails = [line for line in lines if _FAIL.search(line)]
    if rc != 0 or fails:
        return (fails or lines or [f"rapid-leader-schedule: exit status {rc}"])[-1].strip()
    return None


class ScheduleRefused(CurveError):
    """The schedule did not happen: the tool is missing, or the MDS said no."""


def run_schedule(tool: Sequence[str], pool_id: int | None, timeout: float = 120.0) -> str:
    """Run the leader schedule; the command as run. ScheduleRefused with the reason if
    refused; CurveError when its outcome is unknown (the tool did not finish)."""
    argv = schedule_argv(tool, pool_id)
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise ScheduleRefused(f"{argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise CurveError(f"{' '.join(argv)} did not finish in {timeout:g} s") from None
    why = schedule_refusal(tool, res.returncode, res.stdout, res.stderr)
    if why is not None:
        raise ScheduleRefused(why)
    return " ".join(argv)


def pool_id_of(change: Change) -> int | None:
    """The logical pool a schedule change is for; None: every pool (the all-pools form)."""
    if change.target == ALL_POOLS:
        return None
    # From the change's own argument, never its command text: that is for people to read.
    pool_id = change.arg("pool_id")
    if pool_id is None or not POOL_ID.match(pool_id):
        raise UserError(f"the leader schedule for {change.target} names no logical pool id: "
                        "make a new plan")
    return int(pool_id)


def schedule_tool(configured: Sequence[str] = ("curve_ops_tool",)) -> list[str]:
    """The tool that runs the schedule: the one configured where it is installed, else the
    Go CLI `curve` (newer deployments ship only that)."""
    tool = list(configured) or ["curve_ops_tool"]
    if shutil.which(tool[0]) or is_go_cli(tool):
        return tool
    if shutil.which("curve"):
        return ["curve"]
    raise UserError(f"neither {tool[0]} nor the Go CLI `curve` is installed here: "
                    "the leader schedule needs one of them")


def command_for(change: Change, configured: Sequence[str] = ("curve_ops_tool",)) -> list[str]:
    """The exact argv that runs this change's schedule (for review and tests)."""
    return schedule_argv(schedule_tool(configured), pool_id_of(change))


def run_leader_schedule(change: Change, configured: Sequence[str] = ("curve_ops_tool",),
                        timeout: float = 120.0) -> str:
    """Run the schedule for the change's pool alone (all pools for ALL_POOLS); the command
    as run. UserError, in the tool's words, when the MDS refuses it."""
    tool = schedule_tool(configured)
    try:
        return run_schedule(tool, pool_id_of(change), timeout=timeout)
    except ScheduleRefused as exc:
        # Journaled "refused, nothing changed", not "sent, outcome unknown".
        raise Refused(str(exc)) from None
    except CurveError as exc:
        raise UserError(str(exc)) from None


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
