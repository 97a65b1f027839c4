"""What the Curve source sees: its pools' leader spread, its MDS and chunkservers, as data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class CurvePool:
    """One logical pool as the leader MDS's topology metrics describe it."""

    name: str  # the bvar-mangled name, as in the metric names
    leader_range: float | None = None  # max - min leaders per chunkserver
    leader_min: float | None = None
    leader_max: float | None = None
    leader_avg: float | None = None
    leader_stddev: float | None = None
    copysets: int | None = None
    chunkservers: int | None = None
    copyset_range: float | None = None
    pool_id: int | None = None


@dataclass(frozen=True, slots=True)
class MdsStatus:
    addr: str  # dummy address
    role: str | None  # "leader" | "follower" | None when unreachable
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CurveCluster:
    mds: tuple[MdsStatus, ...] = ()
    leader_mds: str | None = None
    pools: tuple[CurvePool, ...] = ()
    version: str | None = None
    operators: int | None = None  # scheduler operators in flight
    transfer_leader_ops: int | None = None
    chunkservers_online: int | None = None
    chunkservers_offline: int | None = None
    copysets_total: int | None = None
    copysets_unhealthy: int | None = None
    endpoint_errors: Mapping[str, str] = field(default_factory=dict)  # addr -> error
    # Copysets ("pool:copyset") with a TransferLeader operator the MDS showed lately.
    transfer_copysets: tuple[str, ...] = ()
    # Tool calls that failed this time: their values are None, not the last good ones.
    tool_errors: Mapping[str, str] = field(default_factory=dict)  # call -> error
    # stormdeck's own leader schedules (start, end or None while running), epoch seconds,
    # as its journal said when this was collected: a replay judges what was known then.
    own_schedules: tuple[tuple[float, float | None], ...] = ()
    # Where each pool's id came from (pool name -> "curve bs list logical-pool", "the MDS's
    # topology service", ...), or why no id: said where a schedule must target every pool.
    pool_ids_from: Mapping[str, str] = field(default_factory=dict)
