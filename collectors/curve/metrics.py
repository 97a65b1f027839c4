"""The model's fields from Curve's bvars: the leader MDS's series and a chunkserver's own."""

# Curve reports microseconds; these are converted to seconds.

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from stormdeck.base.secrets import redact_value
from stormdeck.collectors.curve.parse import US, Value, chunkserver_prefix, conf_value
from stormdeck.collectors.model import CurvePool, Daemon


def _num(v: Value | None) -> float | None:
    return v if isinstance(v, float) else None


def _us(v: Value | None) -> float | None:
    n = _num(v)
    return n * US if n is not None else None


def int_value(v: Value | None) -> int | None:
    n = _num(v)
    return int(n) if n is not None else None


_POOL_METRIC = re.compile(
    r"topology_metric_logical_pool_(.+)_(leadernum_range|leadernum_min|leadernum_max|"
    r"leadernum_avg|leadernum_standard_deviation|copyset_num|chunkserver_num|copysetnum_range)$")
# The leader MDS's series per chunkserver id (src/mds/topology/topology_metric.h,
# ChunkServerMetric: prefix `topology_metric_chunkserver_Id_`, `<id>_leaderCount_from_heartbeat`,
# `<id>_writeIOPS`, ... as bvar mangles them). leadernum and copysetnum are the topology's
# (every 10 s); the rest is what the chunkserver's last heartbeat reported.
_CS_METRIC = re.compile(r"topology_metric_chunkserver_id_(\d+)_(leadernum|copysetnum|"
                        r"leader_count_from_heartbeat|copyset_count_from_heartbeat|"
                        r"read_iops|write_iops|read_rate|write_rate|disk_capacity|disk_used)$")


def mds_pools(v: Mapping[str, Value]) -> tuple[CurvePool, ...]:
    found: dict[str, dict[str, float]] = {}
    for name, value in v.items():
        m = _POOL_METRIC.match(name)
        if m and isinstance(value, float):
            found.setdefault(m.group(1), {})[m.group(2)] = value
    pools = []
    for pool, f in sorted(found.items()):
        pools.append(CurvePool(
            name=pool, leader_range=f.get("leadernum_range"), leader_min=f.get("leadernum_min"),
            leader_max=f.get("leadernum_max"), leader_avg=f.get("leadernum_avg"),
            leader_stddev=f.get("leadernum_standard_deviation"),
            copysets=int(f["copyset_num"]) if "copyset_num" in f else None,
            chunkservers=int(f["chunkserver_num"]) if "chunkserver_num" in f else None,
            copyset_range=f.get("copysetnum_range")))
    return tuple(pools)


def mds_chunkservers(v: Mapping[str, Value]) -> dict[int, dict[str, int]]:
    """Chunkserver id -> its per-id series from the leader MDS, by their short names."""
    out: dict[int, dict[str, int]] = {}
    for name, value in v.items():
        m = _CS_METRIC.match(name)
        if m and isinstance(value, float):
            out.setdefault(int(m.group(1)), {})[m.group(2)] = int(value)
    return out


def mds_chunkserver_daemon(curve_id: int, f: Mapping[str, int]) -> Daemon:
    """A chunkserver the leader MDS names but no one has given the address of: what the
    MDS knows of it, keyed by its id until an address joins it."""
    return Daemon(
        id=chunkserver_key(curve_id), kind="chunkserver", curve_id=curve_id,
        leaders=f.get("leadernum", f.get("leader_count_from_heartbeat")), leaders_from="mds",
        leaders_mds=f.get("leadernum"), leaders_heartbeat=f.get("leader_count_from_heartbeat"),
        copysets=f.get("copysetnum", f.get("copyset_count_from_heartbeat")),
        read_iops=_float(f.get("read_iops")), write_iops=_float(f.get("write_iops")),
        read_bps=_float(f.get("read_rate")), write_bps=_float(f.get("write_rate")),
        utilization=f["disk_used"] / f["disk_capacity"] if f.get("disk_capacity") and
        "disk_used" in f else None)


def chunkserver_key(curve_id: int) -> str:
    """The daemon key of a chunkserver known only by its id (as osd.N is an OSD's)."""
    return f"chunkserver.{curve_id}"


def _float(n: int | None) -> float | None:
    return float(n) if n is not None else None


def mds_listen_addr(v: Mapping[str, Value]) -> str | None:
    """The leader MDS's main address (its `mds.listen.addr`, exposed as the config bvar
    `mds_config_mds_listen_addr`): where its topology service answers."""
    addr = conf_value(v.get("mds_config_mds_listen_addr"))
    if addr is None or not re.fullmatch(r"[\w.\-]+:\d{1,5}|\[[0-9a-fA-F:.]+\]:\d{1,5}", addr):
        return None
    return addr


_OP_BVAR = re.compile(r"mds_scheduler_metric_copyset_(\d+)_(\d+)$")


def mds_operator_pools(v: Mapping[str, Value]) -> set[int]:
    """Logical pool ids the MDS scheduler's operators in flight name, of any type: each
    operator's bvar is `mds_scheduler_metric_copyset_<pool id>_<copyset id>`."""
    return {int(m.group(1)) for name in v if (m := _OP_BVAR.match(name))}


def raft_group(pool_id: int, copyset_id: int) -> str:
    """A copyset's raft group id as braft names it: Curve's ToGroupId, pool << 32 | copyset."""
    return str((pool_id << 32) | copyset_id)


def mds_transfers(v: Mapping[str, Value]) -> set[str]:
    """Raft groups with a TransferLeader operator in flight: the scheduler exposes each
    operator as a JSON string bvar `mds_scheduler_metric_copyset_<pool>_<copyset>`
    (src/mds/schedule/scheduleMetricsTemplate.h) until the operator ends."""
    out = set()
    for name, value in v.items():
        m = _OP_BVAR.match(name)
        if not m or not isinstance(value, str):
            continue
        try:
            op = json.loads(value)
        except ValueError:
            continue
        if isinstance(op, dict) and op.get("opType") == "TransferLeader":
            out.add(raft_group(int(m.group(1)), int(m.group(2))))
    return out


def chunkserver_daemon(addr: str, v: Mapping[str, Value], curve_id: int | None = None) -> Daemon:
    """A chunkserver's Daemon from its own bvars."""
    p = chunkserver_prefix(addr)
    config = {}
    for name, value in v.items():
        if name.startswith(p + "_config_"):
            cv = conf_value(value)
            key = value.get("conf_name") if isinstance(value, dict) else None
            if key is None and isinstance(value, str):
                try:
                    key = json.loads(value).get("conf_name")
                except (ValueError, AttributeError):
                    key = None
            if cv is not None:
                key = key or name.removeprefix(p + "_config_")
                config[key] = redact_value(key, cv)
    return Daemon(
        id=addr, kind="chunkserver", host=addr.rpartition(":")[0], curve_id=curve_id,
        leaders=int_value(v.get(f"{p}_leader_count")),
        read_iops=_num(v.get(f"{p}_read_iops")), write_iops=_num(v.get(f"{p}_write_iops")),
        read_bps=_num(v.get(f"{p}_read_bps")), write_bps=_num(v.get(f"{p}_write_bps")),
        write_latency=_us(v.get(f"{p}_write_lat_latency")),
        write_latency_p99=_us(v.get(f"{p}_write_lat_latency_99")),
        raft_append_latency=_us(v.get("raft_storage_append_entries_latency")),
        raft_append_latency_p99=_us(v.get("raft_storage_append_entries_latency_99")),
        raft_append_latency_max=_us(v.get("raft_storage_append_entries_max_latency")),
        raft_send_latency=_us(v.get("raft_send_entries_latency")),
        cores_used=_num(v.get("process_cpu_usage")),
        rss_bytes=int_value(v.get("process_memory_resident")),
        threads=int_value(v.get("process_thread_count")),
        bthread_usage=_num(v.get("bthread_worker_usage")),
        bthread_workers=int_value(v.get("bthread_worker_count")),
        config=config or None)
