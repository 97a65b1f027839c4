"""The Curve leader schedule as the executor runs it: one logical pool's, by curve_ops_tool or,
where that is missing, by the Go `curve` CLI (tools-v2)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

from stormdeck.advisors.findings import Change
from stormdeck.base.errors import UserError
from stormdeck.collectors.curve import CurveError, is_go_cli, run_schedule, schedule_argv

ALL_POOLS = "all-pools"  # a change's target when the pools' ids could not be read
POOL_ID = re.compile(r"^\d{1,9}$")  # what a change's pool_id argument may hold


def journal_file() -> Path:
    """The change journal, where apply.journal_path() puts it (settings.state_dir): the
    rules read which schedules stormdeck ran, and settings imports the rules, so the
    path is spelled out here; a test keeps the two the same."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "stormdeck" / "journal.jsonl"


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
    except CurveError as exc:
        raise UserError(str(exc)) from None
