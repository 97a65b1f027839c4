"""The CLI's and the console's entry points: which of a plan's changes move data, and what.

What they move is predicted from the cluster read now (plan_prediction, predict_down_now).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stormdeck.advisors.actuators.base import DataMovement
from stormdeck.advisors.actuators.table import known_actuator
from stormdeck.advisors.blast.prediction import Prediction
from stormdeck.advisors.blast.questions import predict_down, predict_pg_num
from stormdeck.advisors.blast.tools import Tools, find_tools
from stormdeck.base.errors import UserError
from stormdeck.collectors.placement import ClusterState

# ---- the changes that move data -------------------------------------------------------
# Which changes move data, and what each does to placement, is their actuator's word
# (advisors/actuators: moves_data, data_movement, follows_to_clean); asked here, never by
# a kind's name. A kind this version does not know (a journal's) moves nothing.


def moves_data(change: Any) -> bool:
    """Whether carrying the change out moves data: its actuator says."""
    act = known_actuator(change.kind)
    return act is not None and act.moves_data(change)


def movement(change: Any) -> DataMovement | None:
    """What the change does to placement, as its actuator says; None: it moves no data."""
    act = known_actuator(change.kind)
    return act.data_movement(change) if act is not None and act.moves_data(change) else None


def splits_pool(change: Any) -> bool:
    """A pool's pg_num or pgp_num: data moves as the mgr steps pgp_num, for hours."""
    m = movement(change)
    return m is not None and m.pool is not None


def predict_changes(state: ClusterState, tools: Tools, changes: Sequence[Any],
                    verdict_of: Any = None) -> Prediction | None:
    """The prediction for a plan's data-moving changes, together: every OSD held down by
    noup at once (two of them may share a PG), each pool's pg_num. None: nothing moves."""
    moving = [m for m in map(movement, changes) if m is not None]
    parts: list[Prediction] = []
    held = sorted(i for m in moving for i in m.held_down)
    if held:
        verdict = verdict_of(held) if verdict_of is not None else None
        parts.append(predict_down(state, tools, held, verdict,
                                  what=f"noup holds {' '.join(f'osd.{i}' for i in held)} "
                                       "down (the next time each goes down)"))
    for m in moving:
        if m.pool is not None:
            try:
                target = int(m.count)
            except ValueError:
                raise UserError(f"{m.key} {m.count!r} is not a number") from None
            parts.append(predict_pg_num(state, tools, m.pool, target, m.key))
    if not parts:
        return None
    first = parts[0]
    tail = first
    for nxt in parts[1:]:
        while tail.then is not None:
            tail = tail.then
        tail.then = nxt
    return first


def changes_key(changes: Sequence[Any]) -> tuple[Any, ...]:
    """What a prediction of `changes` depends on besides the cluster."""
    return tuple((c.kind, c.key, c.target, c.proposed) for c in changes if moves_data(c))


def reusable(previous: Prediction | None, epoch_now: int | None) -> bool:
    """A prediction made on the osdmap epoch the cluster is still at can be used again
    (apply predicts for its guard, then journals the same; at a million PGs each costs
    seconds). An unknown epoch, or a prediction that recorded none, is made again."""
    return previous is not None and bool(epoch_now) and previous.epoch == epoch_now


def state_of(conn: Any) -> ClusterState:
    from stormdeck.collectors.placement import fetch

    return fetch(conn)


def verdicts(conn: Any) -> Any:
    from stormdeck.collectors.placement import ok_to_stop

    return lambda ids: ok_to_stop(conn, ids)


def predict_down_now(conn: Any, osd_ids: Sequence[int]) -> Prediction:
    """For other rules (the flapping rule, issue 31): what holding `osd_ids` down does,
    read from the cluster now through a CephConnection. `.pgs_inactive` lists the PGs
    that stop serving IO; `.refusal()` the reason a change causing it is refused."""
    state = state_of(conn)
    tools = find_tools(state.version, state.release)
    return predict_down(state, tools, osd_ids, verdicts(conn)(list(osd_ids)))


def plan_prediction(conn: Any, changes: Sequence[Any]) -> Prediction | None:
    """What a plan's changes move, read from the cluster now; None when none moves data."""
    if not any(moves_data(c) for c in changes):
        return None
    state = state_of(conn)
    tools = find_tools(state.version, state.release)
    return predict_changes(state, tools, changes, verdicts(conn))
