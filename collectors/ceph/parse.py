"""Parsers of the mon and mgr commands' JSON (or bytes, where JSON would cost too much).

Plain functions, tested on outputs captured from the lab; they accept Pacific's
shapes and newer ones. Over 500 lines on purpose: one short parser per command (about
twenty), which share the unit and number handling at the top; split by command, each
file would be a screen and the shared helpers would move to a third.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from stormdeck.base.secrets import redact_value
from stormdeck.collectors.ceph.usage import parse_dump_usage
from stormdeck.collectors.model import (
    ConfigChange,
    ConfigOption,
    HealthCheck,
    LogEntry,
    Pool,
    pg_flags_from_states,
)

# What a parser raises on output of an unexpected shape (a list where a map was, a
# string where a number was, inf where an int was): a fault of that command's output.
BAD_OUTPUT = (ValueError, KeyError, TypeError, AttributeError, IndexError, ArithmeticError)


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
        "num_objects": _int(pgmap.get("num_objects")),
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


def flag_names(flags: Any) -> list[str]:
    """Flags as Ceph gives them: "noout,noscrub" (older) or a list of names; anything
    else in the list is not a flag."""
    items = flags.split(",") if isinstance(flags, str) else flags if isinstance(flags, list) else []
    return [f for f in items if isinstance(f, str) and f]


def parse_osd_dump(d: Mapping[str, Any]) -> dict[str, Any]:
    """`osd dump`: epoch, cluster flags, per-OSD up/in, erasure-code profiles."""
    flags = d.get("flags", "")
    flag_list = flag_names(flags)
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
            "primary_affinity": affinity, "down_since": down_since,
            **parse_dump_usage(d)}  # the fullness ratios, per-OSD/node/class flags


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
            flags=tuple(flag_names(flags)),
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


Send = Callable[[str, dict[str, Any], float], bytes]


def _keep_repeated(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose repeated keys keep every value (as a list), not the last."""
    out: dict[str, Any] = {}
    counts = Counter(k for k, _ in pairs)
    for k, v in pairs:
        if counts[k] > 1:
            out.setdefault(k, []).append(v)
        else:
            out[k] = v
    return out


def parse_features(raw: bytes | str) -> dict[str, int]:
    """`features`: the connected clients by the release their feature bits say,
    {"luminous": 4, "reef": 2}. Each daemon type is a list of groups (FeatureMap::dump);
    Luminous printed an object with one "group" key per group, repeated, which a plain
    JSON load would cut to the last (hiding, say, 422 jewel clients behind 18 luminous)."""
    d = json.loads(raw, object_pairs_hook=_keep_repeated)
    groups = d.get("client") or []
    if isinstance(groups, Mapping):
        groups = [g for v in groups.values() for g in (v if isinstance(v, list) else [v])]
    out: dict[str, int] = {}
    for g in groups:
        release, num = g.get("release"), _int(g.get("num"))
        if release and num:
            out[str(release)] = out.get(str(release), 0) + num
    return dict(sorted(out.items()))


def parse_autoscale_status(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """`osd pool autoscale-status`: pool name -> the pg_num the autoscaler would give it
    (pg_num_final), whatever the pool's mode: in warn or off mode it is the advice."""
    out = {}
    for r in rows:
        final = _int(r.get("pg_num_final"))
        if r.get("pool_name") is not None and final is not None:
            out[str(r["pool_name"])] = final
    return out
