"""The Ceph source: mon and mgr commands through one persistent librados connection.

Parsers are plain functions over the commands' JSON (or bytes, where the
output is too large to load as JSON every poll), tested on outputs captured
from the lab; they accept Pacific's shapes and newer ones. `CephSource`
runs the commands on a cadence: cheap ones every poll, heavy ones (the PG
dump, OSD metadata) less often, and keeps the last good result of each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, ClassVar

from stormdeck.base.secrets import redact_value
from stormdeck.collectors.model import (
    Cluster,
    ConfigChange,
    ConfigOption,
    Daemon,
    HealthCheck,
    LogEntry,
    Partial,
    Pool,
    pg_flags_from_states,
)

# Options the advisors read (KNOWLEDGE.md K1.6, K3.1-K3.6, K1.9). Their
# existence is asked of the running release: several are gone in new ones.
WATCHED_OPTIONS = (
    "osd_scrub_sleep", "osd_scrub_load_threshold", "osd_scrub_min_interval",
    "osd_scrub_max_interval", "osd_deep_scrub_interval",
    "osd_op_num_shards", "osd_op_num_shards_hdd", "osd_op_num_shards_ssd",
    "osd_op_num_threads_per_shard", "osd_op_num_threads_per_shard_hdd",
    "osd_op_num_threads_per_shard_ssd",
    "mon_osd_cache_size", "osd_map_cache_size", "osd_map_max_advance",
    "osd_map_share_max_epochs", "osd_pg_epoch_persisted_max_stale", "osd_map_message_max",
    "osd_peering_wq_threads", "osd_peering_wq_batch_size", "filestore_op_threads",
    "ms_cluster_mode", "ms_service_mode", "ms_client_mode", "osd_memory_target",
    # The scheduler and what it overrides (advisors/overrides.py): under mClock the
    # sleeps are forced to 0 and the recovery limits need the override option.
    "osd_op_queue", "osd_mclock_profile", "osd_mclock_override_recovery_settings",
    "osd_scrub_begin_hour", "osd_scrub_end_hour",
    "osd_recovery_sleep", "osd_recovery_sleep_hdd", "osd_recovery_sleep_ssd",
    "osd_recovery_sleep_hybrid", "osd_snap_trim_sleep", "osd_snap_trim_sleep_hdd",
    "osd_snap_trim_sleep_ssd", "osd_snap_trim_sleep_hybrid", "osd_delete_sleep",
    "osd_delete_sleep_hdd", "osd_delete_sleep_ssd", "osd_delete_sleep_hybrid",
    "osd_max_backfills", "osd_recovery_max_active", "osd_recovery_max_active_hdd",
    "osd_recovery_max_active_ssd",
    # Fast EC for new pools and their stripe unit (K5.2, K8.6; Tentacle's osd pool create).
    "osd_pool_default_flag_ec_optimizations", "osd_pool_erasure_code_stripe_unit",
    # PGs per OSD before the mon refuses a split, and when a down OSD is marked out.
    "mon_max_pg_per_osd", "mon_osd_down_out_interval",
)

ENOENT = 2
EPERM, EACCES, ETIMEDOUT = 1, 13, 110  # Linux errno values librados passes through


class CommandError(Exception):
    """A command the cluster refused or did not answer; the text says which and why."""


class NoAnswer(CommandError):
    """The cluster did not answer (no connection, a timeout): a command sent may or may not
    have been carried out, unlike one the cluster refused."""


# What a parser raises on output of an unexpected shape (a list where a map was, a
# string where a number was, inf where an int was): a fault of that command's output.
BAD_OUTPUT = (ValueError, KeyError, TypeError, AttributeError, IndexError, ArithmeticError)


# ---- parsers -------------------------------------------------------------------


def _float(value: Any) -> float | None:
    """A number from JSON that may be a string, "inf", "nan" or missing."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int | None:
    f = _float(value)
    return int(f) if f is not None and math.isfinite(f) else None


def parse_status(d: Mapping[str, Any]) -> dict[str, Any]:
    """`status`: fsid, health, PG states, OSD counts, client IO (as Cluster fields)."""
    pgmap = d.get("pgmap", {})
    osdmap = d.get("osdmap", {})
    osdmap = osdmap.get("osdmap", osdmap)  # Nautilus and older nest it once more
    states = {s["state_name"]: int(s["count"]) for s in pgmap.get("pgs_by_state", [])}
    return {
        "fsid": d.get("fsid"),
        "health": d.get("health", {}).get("status"),
        "num_pgs": _int(pgmap.get("num_pgs")),
        "pg_states": states,
        "pg_flags": pg_flags_from_states(states),
        "osdmap_epoch": _int(osdmap.get("epoch")),
        "num_osds": _int(osdmap.get("num_osds")),
        "num_up_osds": _int(osdmap.get("num_up_osds")),
        "num_in_osds": _int(osdmap.get("num_in_osds")),
        # Absent keys mean "no IO", not "unknown": Ceph omits zero rates.
        "client_read_iops": float(pgmap.get("read_op_per_sec", 0)),
        "client_write_iops": float(pgmap.get("write_op_per_sec", 0)),
        "client_read_bps": float(pgmap.get("read_bytes_sec", 0)),
        "client_write_bps": float(pgmap.get("write_bytes_sec", 0)),
        "recovering_bps": float(pgmap.get("recovering_bytes_per_sec", 0)),
        "recovering_objects_per_sec": float(pgmap.get("recovering_objects_per_sec", 0)),
        "degraded_objects": int(pgmap.get("degraded_objects", 0)),
        "misplaced_objects": int(pgmap.get("misplaced_objects", 0)),
    }


def parse_stamp(text: Any) -> float | None:
    """Ceph's "2026-11-22T05:36:52.009888+0000" as epoch seconds; None for "0.000000"."""
    try:
        return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()
    except ValueError:
        return None


def parse_log_last(rows: Iterable[Mapping[str, Any]]) -> tuple[LogEntry, ...]:
    """`log last`: the cluster log's newest entries, oldest first."""
    out = [LogEntry(stamp=parse_stamp(r.get("stamp")) or 0.0, seq=int(r.get("seq", 0)),
                    who=str(r.get("name", "")), priority=str(r.get("priority", "")),
                    message=str(r.get("message", "")), channel=str(r.get("channel", "")))
           for r in rows]
    return tuple(sorted(out, key=lambda e: (e.stamp, e.seq)))


def parse_config_log(rows: Iterable[Mapping[str, Any]]) -> tuple[ConfigChange, ...]:
    """`config log`: one ConfigChange per option changed, oldest first; a secret's values
    redacted here, so that no snapshot, recording or report ever holds them."""
    out = []
    for r in rows:
        for ch in r.get("changes", ()):
            name = str(ch.get("name", ""))
            out.append(ConfigChange(version=int(r.get("version", 0)),
                                    stamp=parse_stamp(r.get("timestamp")), name=name,
                                    old=redact_value(name, _opt_str(ch.get("previous_value"))),
                                    new=redact_value(name, _opt_str(ch.get("new_value")))))
    return tuple(sorted(out, key=lambda c: (c.version, c.name)))


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


_SLOW_COUNT = re.compile(r"(\d+) slow ops")
_SLOW_DAEMONS = re.compile(r"daemons \[([^\]]*)\]")
_SLOW_ONE = re.compile(r"\b(osd\.\d+|mon\.\S+) has slow ops")
_SLOW_OLDEST = re.compile(r"oldest one blocked for (\d+(?:\.\d+)?) sec")


def parse_health(d: Mapping[str, Any]) -> tuple[tuple[HealthCheck, ...], int, tuple[str, ...]]:
    """`health detail`: the checks, the slow-op count and the daemons that have them."""
    checks, slow, slow_daemons, _ = parse_health_slow(d)
    return checks, slow, slow_daemons


def parse_health_slow(d: Mapping[str, Any]) -> tuple[tuple[HealthCheck, ...], int,
                                                      tuple[str, ...], float | None]:
    """`health detail` as parse_health reads it, and how long the oldest slow op has
    been blocked ("N slow ops, oldest one blocked for 35 sec, daemons [...] have slow
    ops."); Ceph names the daemons but not the PGs of their slow ops."""
    checks = []
    slow, slow_daemons, oldest = 0, [], None
    for code, c in sorted(d.get("checks", {}).items()):
        summary = c.get("summary", {})
        message = summary.get("message", "") if isinstance(summary, dict) else str(summary)
        detail = tuple(str(x.get("message", "")) for x in c.get("detail", []) or [])
        checks.append(HealthCheck(code=code, severity=c.get("severity", ""), summary=message,
                                  count=_int(summary.get("count")) if isinstance(summary, dict)
                                  else None, detail=detail, muted=bool(c.get("muted"))))
        if code == "SLOW_OPS":
            m = _SLOW_COUNT.search(message)
            slow = int(m.group(1)) if m else (checks[-1].count or 0)
            m = _SLOW_DAEMONS.search(message)
            if m:
                slow_daemons += [x.strip() for x in m.group(1).split(",") if x.strip()]
            for line in (message, *detail):
                slow_daemons += _SLOW_ONE.findall(line)
            m = _SLOW_OLDEST.search(message)
            oldest = float(m.group(1)) if m else None
    return tuple(checks), slow, tuple(dict.fromkeys(slow_daemons)), oldest


def parse_osd_perf(d: Mapping[str, Any]) -> dict[int, tuple[float | None, float | None]]:
    """`osd perf`: osd id -> (commit latency, apply latency) in seconds.

    Pacific to Tentacle give commit/apply_latency_ns and _ms (the same number on
    BlueStore). ceph/ceph#68492 (open) drops them for the mgr's op latencies
    (op_latency_ms, op_r_latency_ms, op_w_latency_ms): then the write op latency
    stands for commit and the op latency for apply, whichever is present.
    """
    infos = d.get("osdstats", d).get("osd_perf_infos", [])
    out = {}
    for info in infos:
        p = info.get("perf_stats") or info
        commit = _float(p.get("commit_latency_ns"))
        apply = _float(p.get("apply_latency_ns"))
        commit = commit / 1e9 if commit is not None else _ms(p.get("commit_latency_ms"))
        apply = apply / 1e9 if apply is not None else _ms(p.get("apply_latency_ms"))
        op, op_w = _ms(p.get("op_latency_ms")), _ms(p.get("op_w_latency_ms"))
        if commit is None:
            commit = op_w if op_w is not None else op
        if apply is None:
            apply = op if op is not None else op_w
        out[int(info["id"] if "id" in info else info["osd"])] = (commit, apply)
    return out


def _ms(value: Any) -> float | None:
    f = _float(value)
    return f / 1000 if f is not None else None


@dataclass(frozen=True, slots=True)
class OsdIO:
    host: str | None
    read_iops: float
    write_iops: float
    read_bps: float
    write_bps: float
    state: str


_UNITS = {"": 1, "k": 1e3, "K": 1024, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_BYTE_UNITS = {"": 1, "k": 1024, "K": 1024, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40,
               "P": 1 << 50}


_HUMAN = re.compile(r"([0-9.]+)([kKMGTP]?)(?:i?B)?")
# Cells already read, per unit table: the mgr prints three significant digits and a
# unit, so a 10,000-row table holds few distinct cells, and most recur every period.
_HUMAN_SEEN: dict[int, dict[str, float]] = {}
_HUMAN_KEEP = 50_000


def _human(text: str, units: Mapping[str, float]) -> float:
    """'1619k', '3.5M', '0' from the mgr status module's tables."""
    seen = _HUMAN_SEEN.get(id(units))
    if seen is not None:
        hit = seen.get(text)
        if hit is not None:
            return hit
    if text.isdigit():  # most cells; a 10,000-row table is 40,000 of them
        return float(text)
    m = _HUMAN.fullmatch(text)
    if not m:
        raise ValueError(f"not a number: {text!r}")
    value = float(m.group(1)) * units[m.group(2)]
    if units is _UNITS or units is _BYTE_UNITS:
        if seen is None or len(seen) > _HUMAN_KEEP:
            seen = _HUMAN_SEEN[id(units)] = {}
        seen[text] = value
    return value


def parse_osd_status(raw: bytes) -> dict[int, OsdIO]:
    """`osd status`: per-OSD client IO rates.

    Quincy and later answer JSON ({"OSDs": [{"id", "host name", "write ops
    rate", ...}]}, keys with spaces, as the status module writes them);
    Pacific answers only its table whatever format is asked (ID HOST USED
    AVAIL WR-OPS WR-DATA RD-OPS RD-DATA STATE), ops in powers of 1000 and
    data in powers of 1024 (mgr_util.format_dimless / format_bytes).
    """
    text = raw.decode(errors="replace").strip()
    if text.startswith(("[", "{")):
        data = json.loads(text)
        rows = data["OSDs"] if isinstance(data, dict) else data
        out_json = {}
        for r in rows:
            state = r.get("state", "")
            out_json[int(r["id"])] = OsdIO(
                r.get("host name") or None, float(r.get("read ops rate", 0)),
                float(r.get("write ops rate", 0)), float(r.get("read byte rate", 0)),
                float(r.get("write byte rate", 0)),
                ",".join(state) if isinstance(state, list) else str(state))
        return out_json
    lines = text.splitlines()
    if not lines or not lines[0].split() or lines[0].split()[0] != "ID":
        raise ValueError("osd status: neither JSON nor the status table")
    out = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) < 9 or not parts[0].isdigit():
            continue
        osd, host, _used, _avail, wr_ops, wr_data, rd_ops, rd_data, state = parts[:9]
        out[int(osd)] = OsdIO(host, _human(rd_ops, _UNITS), _human(wr_ops, _UNITS),
                              _human(rd_data, _BYTE_UNITS), _human(wr_data, _BYTE_UNITS), state)
    return out


@dataclass(frozen=True, slots=True)
class OsdUsage:
    pgs: int | None
    utilization: float | None  # 0..1
    device_class: str | None
    up: bool | None
    in_: bool | None


def parse_osd_df(d: Mapping[str, Any]) -> dict[int, OsdUsage]:
    """`osd df`: PGs (all, not primaries), fullness, class, up, in (reweight > 0)."""
    out = {}
    for n in d.get("nodes", []):
        if n.get("type", "osd") != "osd":
            continue
        util = _float(n.get("utilization"))
        status = n.get("status")
        reweight = _float(n.get("reweight"))
        out[int(n["id"])] = OsdUsage(
            _int(n.get("pgs")), util / 100 if util is not None else None, n.get("device_class"),
            status == "up" if status else None, reweight > 0 if reweight is not None else None)
    return out


@dataclass(frozen=True, slots=True)
class OsdMeta:
    host: str | None
    devices: tuple[str, ...]
    objectstore: str | None
    rotational: bool | None
    release: str | None
    version: str | None


def parse_osd_metadata(rows: Iterable[Mapping[str, Any]]) -> dict[int, OsdMeta]:
    """`osd metadata`: host, devices (kernel names), object store, rotational."""
    out = {}
    for r in rows:
        if "id" not in r:
            continue
        devices = tuple(x for x in str(r.get("devices", "")).split(",") if x)
        rot = r.get("rotational", r.get("bluestore_bdev_rotational"))
        out[int(r["id"])] = OsdMeta(r.get("hostname"), devices, r.get("osd_objectstore"),
                                    None if rot in (None, "") else rot == "1",
                                    r.get("ceph_release"), r.get("ceph_version_short"))
    return out


_PRIMARY = re.compile(rb'"acting_primary":\s*(-?\d+)')
_POOL_OF_PG = re.compile(rb'"pgid":\s*"(\d+)\.')


_ACTING = re.compile(rb'"acting":\s*\[([^\]]*)\]')


@dataclass(frozen=True, slots=True)
class Primaries:
    by_osd: dict[int, int]
    by_pool: dict[int, dict[int, int]]  # pool id -> osd id -> primaries
    total: int
    # pool id -> osd id -> the pool's PGs in whose acting set the OSD is (per-pool mode only)
    pgs_by_pool: dict[int, dict[int, int]] | None = None


# Above this many PGs the per-pool split is left out: at a million PGs it costs
# ~120 MB and a second scan, for a view that shows the spread per OSD anyway.
PER_POOL_MAX_PGS = 200_000


def count_primaries(raw: bytes, per_pool: bool = True) -> Primaries:
    """`pg dump pgs_brief`: acting primaries per OSD, overall and per pool, and the PG count.

    A million-PG dump is ~100 MB of JSON; loading it every poll would cost
    seconds and a gigabyte, so the two fields are read straight from the
    bytes. Both shapes (a bare list; {"pg_stats": [...]}) carry them alike.
    """
    body = raw.strip()
    if not body or body[:1] not in b"[{" or body[-1:] not in b"]}":
        raise ValueError("pg dump pgs_brief: not JSON")
    if _PRIMARY.search(body) is None and b'"pgid"' in body:
        raise ValueError("pg dump pgs_brief: PGs without acting_primary")
    if not per_pool:
        # One match at a time: a million PGs' primaries as a list would be 40 MB more
        # at the peak, and fragment the heap that the History then lives in.
        counts = Counter(m.group(1) for m in _PRIMARY.finditer(body))
        return Primaries({int(k): v for k, v in counts.items() if k != b"-1"}, {},
                         sum(counts.values()))
    primaries = _PRIMARY.findall(body)
    pools = _POOL_OF_PG.findall(body)
    if len(pools) != len(primaries):
        raise ValueError(f"pg dump pgs_brief: {len(pools)} PGs but {len(primaries)} primaries")
    by_pool: dict[int, dict[int, int]] = {}
    for (pool, osd), n in Counter(zip(pools, primaries, strict=True)).items():
        if osd != b"-1":
            by_pool.setdefault(int(pool), {})[int(osd)] = n
    by_osd: dict[int, int] = {}
    for counts in by_pool.values():
        for osd, n in counts.items():
            by_osd[osd] = by_osd.get(osd, 0) + n
    # What Ceph's read balancer weighs each OSD's fair share of primaries by
    # (OSDMap::calc_desired_primary_distribution: its PGs in the pool / size x affinity).
    acting = _ACTING.findall(body)
    pgs_by_pool: dict[int, dict[int, int]] | None = None
    if len(acting) == len(pools):
        pgs_by_pool = {}
        for (pool, members), n in Counter(zip(pools, acting, strict=True)).items():
            counts = pgs_by_pool.setdefault(int(pool), {})
            for osd in members.split(b","):
                osd = osd.strip()
                if osd and osd != b"-1" and osd != b"2147483647":  # CRUSH_ITEM_NONE
                    counts[int(osd)] = counts.get(int(osd), 0) + n
    return Primaries(by_osd, by_pool, len(primaries), pgs_by_pool)


def parse_osd_dump(d: Mapping[str, Any]) -> dict[str, Any]:
    """`osd dump`: epoch, cluster flags, per-OSD up/in, erasure-code profiles."""
    flags = d.get("flags", "")
    flag_list = [f for f in (flags.split(",") if isinstance(flags, str) else flags) if f]
    osds = {int(o["osd"]): (bool(o.get("up")), bool(o.get("in"))) for o in d.get("osds", [])}
    # When each OSD now down was marked down (a stamp stays after it comes back up).
    down_since = {int(x["osd"]): stamp for x in d.get("osd_xinfo", []) or []
                  if "osd" in x and not osds.get(int(x["osd"]), (True,))[0]
                  and (stamp := parse_stamp(x.get("down_stamp"))) is not None}
    # Only affinities other than 1 (the default): the read balancer weighs primaries by them.
    affinity = {f"osd.{o['osd']}": a for o in d.get("osds", [])
                if (a := _float(o.get("primary_affinity"))) is not None and a != 1.0}
    return {"epoch": _int(d.get("epoch")), "flags": tuple(flag_list), "osds": osds,
            "ec_profiles": d.get("erasure_code_profiles", {}),
            "require_min_compat_client": d.get("require_min_compat_client") or None,
            "primary_affinity": affinity, "down_since": down_since}


# Flags every modern cluster has set; the ones an operator sets (noout,
# noscrub, ...) are what matters, so these are not shown as "set".
ROUTINE_FLAGS = frozenset({"sortbitwise", "recovery_deletes", "purged_snapdirs",
                           "pglog_hardlimit", "require_jewel_osds", "require_kraken_osds"})


def parse_pools(rows: Iterable[Mapping[str, Any]],
                ec_profiles: Mapping[str, Mapping[str, Any]]) -> tuple[Pool, ...]:
    """`osd pool ls detail` joined with the erasure-code profiles of `osd dump`."""
    pools = []
    for r in rows:
        erasure = r.get("type") == 3 or r.get("type") == "erasure"
        profile_name = r.get("erasure_code_profile") or None
        k = m = stripe_unit = None
        prof: Mapping[str, Any] = {}
        if erasure and profile_name:
            prof = ec_profiles.get(profile_name, {})
            k, m = _int(prof.get("k")), _int(prof.get("m"))
            stripe_unit = _size(prof.get("stripe_unit"))
            width = _int(r.get("stripe_width"))
            if stripe_unit is None and k and width:
                stripe_unit = width // k
        flags = r.get("flags_names", "")
        rb = r.get("read_balance")
        score = _float(rb.get("score_acting")) if isinstance(rb, dict) else \
            _float(r.get("read_balance_score"))
        pools.append(Pool(
            id=int(r["pool_id"]), name=str(r["pool_name"]),
            type="erasure" if erasure else "replicated",
            size=int(r.get("size", 0)), min_size=int(r.get("min_size", 0)),
            pg_num=int(r.get("pg_num", 0)), pgp_num=_int(r.get("pg_placement_num")),
            crush_rule=_int(r.get("crush_rule")), ec_profile=profile_name if erasure else None,
            ec_k=k, ec_m=m, stripe_unit=stripe_unit,
            flags=tuple(f for f in (flags.split(",") if isinstance(flags, str) else flags) if f),
            applications=tuple(sorted(r.get("application_metadata", {}) or {})),
            read_balance_score=score, pg_num_target=_int(r.get("pg_num_target")),
            autoscale_mode=r.get("pg_autoscale_mode") or None,
            ec_plugin=prof.get("plugin") or None, ec_technique=prof.get("technique") or None,
            ec_failure_domain=prof.get("crush-failure-domain") or None,
            ec_device_class=prof.get("crush-device-class") or None,
            ec_profile_settings={str(k): str(v) for k, v in prof.items()}))
    return tuple(pools)


def _size(value: Any) -> int | None:
    """'4K', '16384', '64KiB' in erasure-code profiles, in bytes."""
    if value in (None, ""):
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([kKmM]?)(?:i?[bB])?\s*", str(value))
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "k": 1024, "K": 1024, "m": 1 << 20, "M": 1 << 20}[m.group(2)]


_VERSION = re.compile(r"ceph version (\d+\.\d+\.\d+)\S* \([0-9a-f]+\) (\w+)")


def parse_versions(d: Mapping[str, Any]) -> tuple[str | None, str | None, bool]:
    """`versions`: (release, oldest running version, whether versions are mixed)."""
    found = set()
    for text in d.get("overall", {}):
        m = _VERSION.search(text)
        if m:
            found.add((tuple(int(x) for x in m.group(1).split(".")), m.group(2)))
    if not found:
        return None, None, False
    oldest = min(found)
    return oldest[1], ".".join(map(str, oldest[0])), len(found) > 1


def parse_mgr_modules(d: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """`mgr dump`: (module, reason) for each module the cluster runs that the active mgr
    cannot load: enabled or always-on modules listed in `available_modules` with can_run
    false. A mgr whose Python cannot load them (Reef on Debian 13 / Ubuntu 24.04 with a
    PyO3 bcrypt) keeps HEALTH_OK while prometheus, status, balancer ... are all missing.
    Modules nobody enabled that lack a library (influx) are no news."""
    wanted = {str(m) for m in d.get("modules") or []}
    always = d.get("always_on_modules") or {}
    for names in (always.values() if isinstance(always, Mapping) else [always]):
        wanted.update(str(n) for n in names or [])
    out = []
    for m in d.get("available_modules") or []:
        if isinstance(m, Mapping) and m.get("can_run") is False and m.get("name") in wanted:
            lines = str(m.get("error_string") or "").strip().splitlines()
            out.append((str(m["name"]), lines[-1] if lines else "no reason given"))
    return tuple(sorted(out))


def mgr_modules_problem(failed: Iterable[tuple[str, str]]) -> str | None:
    """One sentence naming the modules the mgr cannot run, with the (first) reason."""
    failed = list(failed)
    if not failed:
        return None
    reasons = sorted({r for _, r in failed})
    names = ", ".join(n for n, _ in failed)
    why = reasons[0] + (f" (and {len(reasons) - 1} other reasons)" if len(reasons) > 1 else "")
    return f"mgr modules cannot run: {names}: {why}"


def parse_config_dump(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """`config dump`: option -> {who: value}, who being a section or section/mask; a
    secret's value redacted here, before anything keeps it."""
    out: dict[str, dict[str, str]] = {}
    for r in rows:
        who = r.get("section", "global")
        if r.get("mask"):
            who = f"{who}/{r['mask']}"
        name = str(r["name"])
        out.setdefault(name, {})[who] = redact_value(name, str(r.get("value", ""))) or ""
    return out


def parse_config_help(name: str, d: Mapping[str, Any] | None) -> ConfigOption:
    """`config help NAME`; None (ENOENT) means the running release has no such option."""
    if d is None:
        return ConfigOption(name=name, exists=False)
    runtime = d.get("can_update_at_runtime")
    default = d.get("default")
    return ConfigOption(name=name, exists=True,
                        runtime=bool(runtime) if runtime is not None else None,
                        default=None if default is None else str(default), type=d.get("type"))


# ---- the source ------------------------------------------------------------------

Send = Callable[[str, dict[str, Any], float], bytes]


@dataclass
class _Cached:
    value: Any = None
    at: float | None = None  # monotonic time of the last success; None: never
    error: str | None = None
    epoch: int | None = None  # the osdmap epoch it was fetched at
    digest: bytes | None = None  # of the raw output last parsed


def _digest(raw: bytes) -> bytes:
    return hashlib.blake2b(raw, digest_size=16).digest()


class ConnectError(NoAnswer):
    """No connection was made: nothing was sent to the cluster."""


def _keyrings(setting: str) -> list[str]:
    # Ceph splits the keyring search list on commas, semicolons and spaces.
    return [p for p in re.split(r"[,;\s]+", setting or "") if p]


def connect_failure(cluster: Any, errno: int | None, client_name: str | None,
                    timeout: float) -> str | None:
    """What librados' bare errno on connect meant, in Ceph's own terms; None: unknown.

    librados answers ENOENT ("object not found") both for a client that must use
    cephx but has no keyring (it logs "no keyring found at ..., disabling cephx",
    then has no way to authenticate) and for a conf that names no monitor.
    """
    def get(key: str) -> str:
        try:
            return str(cluster.conf_get(key) or "")
        except Exception:  # an option this release does not know
            return ""

    who = client_name or "client.admin"
    mons = get("mon_host")
    if errno == ENOENT:
        # In librados' order: the monitor map is built before any authentication.
        if not mons.strip():
            return ("the ceph.conf names no monitor (mon_host), and DNS SRV "
                    f"({get('mon_dns_srv_name') or 'ceph-mon'}) found none")
        auth = get("auth_client_required")
        if "cephx" in auth and not get("key") and not get("keyfile"):
            paths = _keyrings(get("keyring"))
            if not any(os.path.isfile(p) for p in paths):
                return (f"no keyring at {', '.join(paths) or '(none set)'}, and {who} must "
                        f"authenticate with cephx (auth_client_required = {auth}): give -k "
                        "KEYRING or set keyring in ceph.conf")
        return None
    if errno in (EACCES, EPERM):
        paths = [p for p in _keyrings(get("keyring")) if os.path.isfile(p)]
        return (f"access denied: the monitors at {mons} did not accept {who}'s key"
                + (f" from {paths[0]}" if paths else "")
                + " (is it the key `ceph auth get` shows for it?)")
    if errno == ETIMEDOUT:
        return f"no monitor answered at {mons or '(no mon_host)'} within {timeout:g} s"
    return None


class CephConnection:
    """One librados connection to a cluster: opened at the first command, closed on
    failure (the next command opens it again) and by close(). The source that reads
    and the admin that changes each hold one, built from the same client options."""

    def __init__(self, conffile: str | None = None, client_name: str | None = None,
                 keyring: str | None = None, cluster: str = "ceph",
                 timeout: float = 10.0) -> None:
        self.conffile = conffile
        self.client_name = client_name
        self.keyring = keyring
        self.cluster_name = cluster
        self.timeout = timeout
        self._rados: Any = None

    @property
    def connected(self) -> bool:
        return self._rados is not None

    def _connect(self) -> Any:
        try:
            import rados
        except ImportError:
            raise CommandError("librados for Python is missing (Debian: apt-get install "
                               "python3-rados; run ./dev setup)") from None
        conf = {"rados_mon_op_timeout": str(int(self.timeout)),
                "rados_osd_op_timeout": str(int(self.timeout)),
                "client_mount_timeout": str(int(self.timeout))}
        if self.keyring:
            conf["keyring"] = self.keyring
        try:
            cluster = rados.Rados(conffile=self.conffile or "", name=self.client_name,
                                  clustername=self.cluster_name, conf=conf)
            # CEPH_ARGS over the conf file, as `ceph` and librados' own tools read it
            # (--mon-host, --keyring, ...); the client options in it were taken earlier.
            cluster.conf_parse_env()
        except rados.Error as exc:
            raise ConnectError(f"cannot connect to the Ceph cluster: {exc}") from None
        try:
            cluster.connect(timeout=int(self.timeout))
        except rados.Error as exc:
            why = connect_failure(cluster, getattr(exc, "errno", None), self.client_name,
                                  self.timeout)
            with contextlib.suppress(Exception):
                cluster.shutdown()
            raise ConnectError(f"cannot connect to the Ceph cluster: {why or exc}") from None
        return cluster

    def close(self) -> None:
        if self._rados is not None:
            try:
                self._rados.shutdown()
            finally:
                self._rados = None

    def command(self, target: str, cmd: dict[str, Any], timeout: float | None = None
                ) -> bytes:
        """One mon ("mon") or mgr ("mgr") command, its JSON output as bytes; CommandError
        when Ceph refuses it or cannot be reached."""
        if self._rados is None:
            self._rados = self._connect()
        body = json.dumps({**cmd, "format": "json"})
        call = self._rados.mgr_command if target == "mgr" else self._rados.mon_command
        try:
            ret, out, err = call(body, b"", timeout=int(max(1, timeout or self.timeout)))
        except Exception as exc:  # rados.Error and its kin: the connection is suspect
            self.close()
            raise NoAnswer(f"{cmd['prefix']}: {exc}") from None
        if ret == -ENOENT and cmd["prefix"] == "config help":
            return b""
        if ret != 0:
            raise CommandError(f"{cmd['prefix']}: {err or f'error {ret}'}")
        return out


class CephSource:
    """Polls a Ceph cluster through librados. One connection, kept and re-made on failure."""

    name = "ceph"

    # Seconds between runs of each command group; 0 = every poll.
    FAST, SLOW, RARE = 0.0, 10.0, 300.0
    # The mgr recomputes `osd perf` and `osd status` once per mgr_stats_period (5 s
    # by default; the config database's value is used when set): asking more often
    # returns the same figures, and parsing 10,000 rows of them again costs ~40 ms.
    MGR_STATS_PERIOD = 5.0
    LOG_LINES = 30  # of the cluster log, as `ceph -w` would have shown them
    # The monitors keep only the newest 50 entries per channel, whatever their level,
    # before `log last` filters by level; the mgr's pgmap [DBG] lines (every 2 s) push
    # the rest out within 100 s. So all levels are fetched every poll and the tail of
    # the others is kept here.
    LOG_FETCH = 50
    CONFIG_LOG = 20  # newest config changes: "what changed" in an incident
    # What derives from the osdmap (up/in, flags, pools, primaries) is fetched
    # again when its epoch moves, at most this often: a steady cluster pays
    # nothing for it, a storm pays once per these seconds.
    ON_EPOCH_MIN: ClassVar[Mapping[str, float]] = {"osd dump": 1.0, "pools": 1.0,
                                                  "pgs_brief": 10.0}

    def __init__(self, conffile: str | None = None, client_name: str | None = None,
                 keyring: str | None = None, cluster: str = "ceph", timeout: float = 10.0,
                 options: Iterable[str] = WATCHED_OPTIONS) -> None:
        self.conffile = conffile
        self.client_name = client_name
        self.keyring = keyring
        self.cluster_name = cluster
        self.timeout = timeout
        self.options = tuple(options)
        self._conn = CephConnection(conffile, client_name, keyring, cluster, timeout)
        self._cache: dict[str, _Cached] = {}
        self._log: tuple[LogEntry, ...] = ()
        # Clocks, replaceable so a benchmark can fast-forward a session.
        self.clock: Callable[[], float] = time.monotonic
        self.wall: Callable[[], float] = time.time
        # What the last poll assembled, reused by identity while its inputs are unchanged:
        # a History of ten minutes then holds one copy of what did not move.
        self._daemons: dict[int, tuple[tuple[Any, ...], Daemon]] = {}
        self._daemon_map: dict[str, Daemon] = {}
        self._names: dict[int, str] = {}
        self._inputs: tuple[Any, ...] = ()
        self._pools: tuple[tuple[Any, ...], tuple[Pool, ...]] | None = None
        self._options: tuple[tuple[Any, ...], dict[str, ConfigOption]] | None = None

    # -- connection --

    @property
    def connection(self) -> CephConnection:
        return self._conn

    def close(self) -> None:
        self._conn.close()

    def _send(self, target: str, cmd: dict[str, Any], timeout: float) -> bytes:
        """Every command of a poll goes through here (a canned source answers here)."""
        return self._conn.command(target, cmd, timeout)

    # -- polling --

    def _due(self, key: str, every: float, now: float, epoch: int | None) -> bool:
        c = self._cache.get(key)
        if c is None or c.at is None or c.error is not None or now - c.at >= every:
            return True
        floor = self.ON_EPOCH_MIN.get(key)
        return floor is not None and epoch != c.epoch and now - c.at >= floor

    def _run(self, key: str, every: float, now: float, fetch: Callable[[], Any],
             errors: list[str], epoch: int | None = None,
             parse: Callable[[bytes], Any] | None = None) -> Any:
        """The command's parsed value: fetched when due, else the last good one.

        With `parse`, `fetch` gives the raw output, and output identical to the last
        one parsed is not parsed again: its value (and every object in it) stays.
        """
        c = self._cache.setdefault(key, _Cached())
        if self._due(key, every, now, epoch):
            try:
                if parse is None:
                    c.value = fetch()
                else:
                    raw = fetch()
                    digest = _digest(raw)
                    if digest != c.digest or c.error is not None or c.at is None:
                        c.value, c.digest = parse(raw), digest
                c.at, c.error, c.epoch = now, None, epoch
            except (CommandError, *BAD_OUTPUT) as exc:
                c.error = str(exc) if isinstance(exc, CommandError) else \
                    f"{key}: unexpected output ({type(exc).__name__}: {exc})"
                c.digest = None
                errors.append(c.error)
        return c.value

    def _stats_period(self) -> float:
        """mgr_stats_period as the config database sets it, else Ceph's default."""
        config = self._cache.get("config dump")
        values = (config.value or {}).get("mgr_stats_period", {}) if config else {}
        for who in ("mgr", "global"):
            try:
                period = float(values[who])
            except (KeyError, ValueError):
                continue
            if 0 < period <= 60:
                return period
        return self.MGR_STATS_PERIOD

    def poll(self) -> Partial:
        """One poll. Raises CommandError if the cluster cannot be reached at all."""
        now = self.clock()
        errors: list[str] = []
        t = self.timeout

        def mon(prefix: str, **kw: Any) -> bytes:
            return self._send("mon", {"prefix": prefix, **kw}, t)

        def mgr(prefix: str, **kw: Any) -> bytes:
            return self._send("mgr", {"prefix": prefix, **kw}, t)

        # Status first and unguarded: if it fails, the cluster is unreachable.
        try:
            status = parse_status(json.loads(mon("status")))
        except BAD_OUTPUT as exc:
            raise CommandError(f"status: unexpected output ({exc})") from None
        self._cache["status"] = _Cached(status, now)
        r = self._run
        health = r("health", self.FAST, now, lambda: mon("health", detail="detail"), errors,
                   parse=lambda raw: parse_health_slow(json.loads(raw)))
        stats = self._stats_period()
        perf = r("osd perf", stats, now, lambda: mgr("osd perf"), errors,
                 parse=lambda raw: parse_osd_perf(json.loads(raw)))
        io = r("osd status", stats, now, lambda: mgr("osd status"), errors,
               parse=parse_osd_status)
        epoch = status["osdmap_epoch"]
        df = r("osd df", self.SLOW, now, lambda: mgr("osd df"), errors,
               parse=lambda raw: parse_osd_df(json.loads(raw)))
        dump = r("osd dump", self.RARE, now, lambda: mon("osd dump"), errors, epoch,
                 parse=lambda raw: parse_osd_dump(json.loads(raw)))
        per_pool = (status["num_pgs"] or 0) <= PER_POOL_MAX_PGS
        primaries = r("pgs_brief", self.RARE, now, lambda: self._send(
            "mgr", {"prefix": "pg dump", "dumpcontents": ["pgs_brief"]}, t * 3), errors, epoch,
            parse=lambda raw: count_primaries(raw, per_pool))
        pools_raw = r("pools", self.RARE, now, lambda: mon("osd pool ls", detail="detail"),
                      errors, epoch, parse=json.loads)
        config = r("config dump", self.SLOW, now, lambda: mon("config dump"), errors,
                   parse=lambda raw: parse_config_dump(json.loads(raw)))
        meta = r("osd metadata", self.RARE, now, lambda: mon("osd metadata"), errors,
                 parse=lambda raw: parse_osd_metadata(json.loads(raw)))
        versions = r("versions", self.RARE, now, lambda: mon("versions"), errors,
                     parse=lambda raw: parse_versions(json.loads(raw)))
        # A mgr that cannot load its modules leaves health OK: say so as the source's warning.
        mgr_failed = r("mgr dump", self.SLOW, now, lambda: mon("mgr dump"), errors,
                       parse=lambda raw: parse_mgr_modules(json.loads(raw)))
        if problem := mgr_modules_problem(mgr_failed or ()):
            errors.append(problem)
        helps = r("config help", self.RARE, now, self._config_help, errors)
        fresh = r("log last", self.FAST, now, lambda: mon(
            "log last", num=self.LOG_FETCH, level="debug", channel="cluster"), errors,
            parse=lambda raw: parse_log_last(json.loads(raw)))
        log = self._log_tail(fresh or ())
        config_log = r("config log", 2.0, now, lambda: mon("config log", num=self.CONFIG_LOG),
                       errors, parse=lambda raw: parse_config_log(json.loads(raw)))
        status = {**status, "log": log, "config_log": config_log or ()}
        return self._assemble(status, health, perf, io, df, dump, primaries, pools_raw,
                              config, meta, versions, helps, errors)

    def _log_tail(self, fresh: tuple[LogEntry, ...]) -> tuple[LogEntry, ...]:
        if fresh is getattr(self, "_log_fresh", None):
            return self._log  # the same answer as last poll: nothing new to keep
        self._log_fresh = fresh
        kept = {(e.who, e.seq, e.stamp): e for e in self._log}
        for e in fresh:
            if e.priority != "[DBG]":
                kept[(e.who, e.seq, e.stamp)] = e
        log = tuple(sorted(kept.values(), key=lambda e: (e.stamp, e.seq))[-self.LOG_LINES:])
        if log != self._log:
            self._log = log
        return self._log

    def _config_help(self) -> dict[str, ConfigOption]:
        out = {}
        for name in self.options:
            raw = self._send("mon", {"prefix": "config help", "key": name}, self.timeout)
            out[name] = parse_config_help(name, json.loads(raw) if raw.strip() else None)
        return out

    def _assemble(self, status: dict[str, Any], health: Any, perf: Any, io: Any, df: Any,
                  dump: Any, primaries: Any, pools_raw: Any, config: Any, meta: Any,
                  versions: Any, helps: Any, errors: list[str]) -> Partial:
        checks, slow, slow_daemons, slow_oldest = health or ((), None, (), None)
        release, version, mixed = versions or (None, None, False)
        dump = dump or {"epoch": None, "flags": (), "osds": {}, "ec_profiles": {},
                        "down_since": {}}
        # Pools and options are rebuilt only when what they come from was fetched anew.
        pools_key = (pools_raw, dump["ec_profiles"], primaries)
        if self._pools is not None and _same_objects(self._pools[0], pools_key):
            pools = self._pools[1]
        else:
            pools = ()
            if pools_raw is not None:
                try:
                    pools = parse_pools(pools_raw, dump["ec_profiles"])
                except BAD_OUTPUT as exc:
                    errors.append(f"osd pool ls: unexpected output ({type(exc).__name__}: "
                                  f"{exc})")
            if primaries:
                spread = primaries.pgs_by_pool or {}
                pools = tuple(
                    replace(p, primaries={f"osd.{o}": n for o, n in
                                          sorted(primaries.by_pool.get(p.id, {}).items())},
                            pgs_by_osd={f"osd.{o}": n for o, n in
                                        sorted(spread.get(p.id, {}).items())})
                    for p in pools)
            # A new osdmap epoch refetches both, and mostly nothing in them moved: the
            # previous tuple, when equal, is kept, so ten minutes of History hold one copy
            # of each pool's per-OSD counts, not one per epoch (+50 MiB at 1,000 OSDs).
            if self._pools is not None and pools == self._pools[1]:
                pools = self._pools[1]
            if not errors or not errors[-1].startswith("osd pool ls"):
                self._pools = (pools_key, pools)
        options_key = (helps, config)
        if self._options is not None and _same_objects(self._options[0], options_key):
            options = self._options[1]
        else:
            options = {}
            for name, opt in (helps or {}).items():
                options[name] = replace(opt, values=dict((config or {}).get(name, {})))
            self._options = (options_key, options)
        cluster = Cluster(
            **status, checks=checks, slow_ops=slow, slow_ops_daemons=slow_daemons,
            slow_ops_oldest=slow_oldest,
            osd_flags=tuple(f for f in dump["flags"] if f not in ROUTINE_FLAGS),
            require_min_compat_client=dump.get("require_min_compat_client"),
            primary_affinity=dump.get("primary_affinity") or {}, pools=pools,
            config=options, release=release, version=version, versions_mixed=mixed)
        prim_counts = primaries.by_osd if primaries else None
        inputs = (meta, df, perf, io, dump["osds"], prim_counts, health)
        if self._daemon_map and _same_objects(self._inputs, inputs):
            # Not one input was parsed anew: every OSD is as it was (most polls do this).
            return Partial(source=self.name, time=self.wall(), cluster=cluster,
                           daemons=self._daemon_map, errors=tuple(errors))
        self._inputs = inputs
        ids: set[int] = set(dump["osds"]) | set(df or {}) | set(perf or {}) | set(meta or {})
        slow_set = set(slow_daemons)
        daemons: dict[str, Daemon] = {}
        built: dict[int, tuple[tuple[Any, ...], Daemon]] = {}
        same = len(ids) == len(self._daemons)
        last = self._daemons
        meta, df, perf, io = meta or {}, df or {}, perf or {}, io or {}
        osds = dump["osds"]
        down_since = dump.get("down_since") or {}
        names = self._names
        no_perf = (None, None)
        # A rebuild runs once per mgr stats period over every OSD (10,000 at scale), so
        # the loop stays lean: names made once, keys compared as tuples in C (every
        # element is a plain value or a frozen record, so == is _same_objects' test).
        for i in sorted(ids):
            name = names.get(i)
            if name is None:
                name = names[i] = f"osd.{i}"
            m, u, o = meta.get(i), df.get(i), io.get(i)
            updown = osds.get(i)
            key = (m, u, perf.get(i, no_perf), o, updown,
                   prim_counts.get(i, 0) if prim_counts is not None else None,
                   None if health is None else name in slow_set, down_since.get(i))
            old = last.get(i)
            if old is not None and old[0] == key:
                d = old[1]
            else:
                same = False
                p = key[2]
                up, in_ = updown if updown is not None else \
                    (u.up if u else None, u.in_ if u else None)
                d = _make_osd(
                    id=name, host=(m.host if m else None) or (o.host if o else None),
                    devices=m.devices if m else None, up=up, in_=in_,
                    objectstore=m.objectstore if m else None,
                    device_class=u.device_class if u else None,
                    read_iops=o.read_iops if o else None, write_iops=o.write_iops if o else None,
                    read_bps=o.read_bps if o else None, write_bps=o.write_bps if o else None,
                    commit_latency=p[0], apply_latency=p[1],
                    pgs=u.pgs if u else None, primary_pgs=key[5],
                    utilization=u.utilization if u else None, has_slow_ops=key[6],
                    down_since=key[7] if up is False else None)
            built[i] = (key, d)
            daemons[name] = d
        self._daemons = built
        if same:
            daemons = self._daemon_map  # every OSD as it was: the same mapping, shared
        else:
            self._daemon_map = daemons
        return Partial(source=self.name, time=self.wall(), cluster=cluster, daemons=daemons,
                       errors=tuple(errors))


def _osd_builder() -> Callable[..., Daemon]:
    """A maker of OSD Daemons that sets the fields as Daemon's own __init__ does, minus
    its per-field lookups: a rebuild makes 10,000 of them once per stats period. Made
    from the dataclass's fields, so a new field keeps its default."""
    fields = dataclasses.fields(Daemon)
    if any(f.default is dataclasses.MISSING and f.name not in ("id", "kind") for f in fields) \
            or any(f.default_factory is not dataclasses.MISSING for f in fields) \
            or hasattr(Daemon, "__post_init__"):
        return lambda **kw: Daemon(kind="osd", **kw)  # not a plain record: its own __init__
    names = [f.name for f in fields]
    given = ("id", "host", "devices", "up", "in_", "objectstore", "device_class",
             "read_iops", "write_iops", "read_bps", "write_bps", "commit_latency",
             "apply_latency", "pgs", "primary_pgs", "utilization", "has_slow_ops",
             "down_since")
    env: dict[str, Any] = {"_new": object.__new__, "_Daemon": Daemon,
                           "_KIND": "osd"}
    lines = [f"def make({', '.join(given)}):", "    self = _new(_Daemon)"]
    for f in fields:
        env[f"_set_{f.name}"] = Daemon.__dict__[f.name].__set__
        value = f.name if f.name in given else "_KIND" if f.name == "kind" else \
            f"_default_{f.name}"
        if value.startswith("_default_"):
            env[value] = f.default
        lines.append(f"    _set_{f.name}(self, {value})")
    lines.append("    return self")
    if set(given) - set(names):
        return lambda **kw: Daemon(kind="osd", **kw)
    exec("\n".join(lines), env)  # code made above from the dataclass fields only
    return env["make"]


_make_osd = _osd_builder()


def _same_objects(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal element by element, each the very same object or an equal plain value.

    The inputs are values parsed from one command output: unchanged output keeps them
    the same objects, so identity says "unchanged" without comparing their insides.
    """
    return all(x is y or (type(x) in _BY_VALUE and x == y) for x, y in zip(a, b, strict=True))


# Small values compared by value: an OSD's row parsed anew from output where other
# rows moved is equal to the last one, and the Daemon made from it is kept.
_BY_VALUE = frozenset({int, float, bool, str, tuple, type(None), OsdIO, OsdUsage, OsdMeta})
