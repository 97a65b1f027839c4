"""The Curve source: leader spread, raft latency and chunkserver load from Curve's own endpoints.

Every Curve daemon is a brpc server: `/vars` gives its bvars as text, the
Prometheus endpoint (`/metrics`, `/brpc_metrics` in newer brpc) the numeric
ones, and braft's `/raft_stat` each copyset's role and term. The leader MDS
(found through `/vars/mds_status` on the dummy ports) holds the topology
metrics: leaders per chunkserver and the per-pool leadernum range that
KNOWLEDGE.md K2.1 judges. curve_ops_tool or the `curve` CLI, where given,
lists the chunkservers and the copysets' health. Curve reports microseconds;
this module converts to seconds.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import urllib3
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
)

from stormdeck.base.secrets import redact_value
from stormdeck.collectors.model import CurveCluster, CurvePool, Daemon, MdsStatus, Partial

US = 1e-6
Value = float | str | dict[str, str]

# What a chunkserver poll asks /vars for (brpc matches these wildcards).
CHUNKSERVER_VARS = ("chunkserver_*", "raft_storage_append_entries*", "raft_send_entries*",
                    "process_cpu_usage", "process_memory_resident", "process_thread_count",
                    "bthread_worker_usage", "bthread_worker_count")
MDS_VARS = ("topology_metric_*", "mds_scheduler_metric_*", "curve_version", "mds_status")


class CurveError(Exception):
    """One endpoint or tool did not answer as Curve does; the text says which and why."""


# ---- names ------------------------------------------------------------------------


def bvar_name(text: str) -> str:
    """bvar's to_underscored_name: 'logicalPool' -> 'logical_pool', '1.2.3.4:82' -> '1_2_3_4_82'."""
    out: list[str] = []
    for i, ch in enumerate(text):
        if ch.isascii() and ch.isalpha():
            if ch.isupper():
                if i > 0 and not text[i - 1].isupper() and out and out[-1] != "_":
                    out.append("_")
                out.append(ch.lower())
            else:
                out.append(ch)
        elif ch.isascii() and ch.isdigit():
            out.append(ch)
        elif not out or out[-1] != "_":
            out.append("_")
    return "".join(out)


def chunkserver_prefix(addr: str) -> str:
    ip, _, port = addr.rpartition(":")
    return "chunkserver_" + bvar_name(f"{ip}_{port}")


# ---- parsers ------------------------------------------------------------------------

_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_vars(text: str) -> dict[str, Value]:
    """brpc /vars text: `name : value` a line; strings are quoted with nothing escaped inside."""
    out: dict[str, Value] = {}
    seen_lines = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        seen_lines += 1
        name, sep, value = line.partition(" : ")
        if not sep or not _VAR_NAME.fullmatch(name):
            continue
        if len(value) >= 2 and value[0] == '"' and value[-1] == '"':
            out[name] = value[1:-1]  # only the outer quotes: brpc escapes nothing
            continue
        try:
            out[name] = float(value)
        except ValueError:
            out[name] = value
    if seen_lines and not out:
        raise CurveError("not brpc /vars text")
    return out


def _samples(text: str) -> Iterator[Sample]:
    """prometheus_client's reading of exposition text; where one line does not read (brpc
    writes any bvar it cannot tell is a string as `name <its text>`, e.g. `[1,2]`), the
    lines are read one by one, so that such a line loses only itself."""
    try:
        # The parser is a generator: the whole page must read before any sample is used.
        families = list(text_string_to_metric_families(text))
    except ValueError:
        families = None
    if families is not None:
        for family in families:
            yield from family.samples
        return
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            for family in text_string_to_metric_families(line):
                yield from family.samples
        except ValueError:
            continue


def parse_prometheus_text(text: str) -> dict[str, Value]:
    """Prometheus exposition text as brpc writes it, flattened to bvar-like names.

    Unlabelled samples keep their name; Curve's JSON-string config bvars
    (`..._config_x{conf_name="x",conf_value="v"} 0`) become {"conf_name", "conf_value"};
    summary quantiles become `name{quantile="0.99"}`. brpc writes gauges and summaries
    only (src/brpc/builtin/prometheus_metrics_service.cpp), so the parser's renaming of
    counters to `_total` never applies.
    """
    out: dict[str, Value] = {}
    seen_lines = any(line.strip() and not line.strip().startswith("#")
                     for line in text.splitlines())
    for sample in _samples(text):
        labels = sample.labels
        number = float(sample.value)
        if "conf_value" in labels:
            out[sample.name] = {"conf_name": labels.get("conf_name", ""),
                                "conf_value": labels["conf_value"]}
        elif "quantile" in labels:
            out[f'{sample.name}{{quantile="{labels["quantile"]}"}}'] = number
        elif not labels:
            out[sample.name] = number
    if seen_lines and not out:
        raise CurveError("not Prometheus text")
    return out


def conf_value(value: Value | None) -> str | None:
    """The value of a Curve config bvar, from /vars (a JSON string) or /metrics (labels)."""
    if isinstance(value, dict):
        return value.get("conf_value")
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        if isinstance(parsed, dict) and "conf_value" in parsed:
            return str(parsed["conf_value"])
    return None


@dataclass(frozen=True, slots=True)
class RaftNode:
    group: str
    peer_id: str | None
    state: str | None  # LEADER | FOLLOWER | CANDIDATE | ...
    term: int | None
    leader: str | None


def parse_raft_stat(text: str) -> dict[str, RaftNode]:
    """braft's /raft_stat as text (?console=1): `[group]` then `key: value` lines per node."""
    nodes: dict[str, RaftNode] = {}
    group: str | None = None
    fields: dict[str, str] = {}

    def flush() -> None:
        if group is not None and fields:
            term = fields.get("term", "")
            nodes[group] = RaftNode(group, fields.get("peer_id"), fields.get("state"),
                                    int(term) if term.isdigit() else None, fields.get("leader"))

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            flush()
            group, fields = line[1:-1], {}
        elif ": " in line and group is not None:
            key, _, value = line.partition(": ")
            fields.setdefault(key.strip(), value.strip())
    flush()
    if text.strip() and not nodes:
        raise CurveError("not braft /raft_stat text")
    return nodes


@dataclass(frozen=True, slots=True)
class ChunkserverInfo:
    id: int
    ip: str
    port: int
    online: bool | None
    disk_type: str | None = None
    rw_status: str | None = None
    disk_state: str | None = None
    copysets: int | None = None

    @property
    def addr(self) -> str:
        return f"{self.ip}:{self.port}"


def parse_ops_chunkserver_list(text: str) -> list[ChunkserverInfo]:
    """`curve_ops_tool chunkserver-list -checkHealth=false`: `key = value, ...` a chunkserver."""
    out = []
    for line in text.splitlines():
        if "chunkServerID" not in line:
            continue
        kv = {}
        for part in line.split(", "):
            key, sep, value = part.partition(" = ")
            if sep:
                kv[key.strip()] = value.strip()
        try:
            out.append(ChunkserverInfo(
                id=int(kv["chunkServerID"]), ip=kv["hostIP"], port=int(kv["port"]),
                online=kv["onlineState"] == "ONLINE" if "onlineState" in kv else None,
                disk_type=kv.get("diskType"), rw_status=kv.get("rwStatus"),
                disk_state=kv.get("diskState"),
                copysets=int(kv["copysetNum"]) if kv.get("copysetNum", "").isdigit() else None))
        except (KeyError, ValueError):
            continue
    if text.strip() and not out and "total:" not in text:
        raise CurveError("curve_ops_tool chunkserver-list: no chunkserver lines")
    return out


# `curve bs list chunkserver` columns in the order tools-v2 writes each row
# (tools-v2/pkg/cli/command/curvebs/list/chunkserver/chunkserver.go).
CLI_CHUNKSERVER_HEADER = ("id", "type", "ip", "port", "rwStatus", "diskState", "copysetNum",
                          "mountpoint", "diskCapacity", "diskUsed", "unhealthyCopyset",
                          "extAddr")
# `curve bs list logical-pool` (tools-v2/pkg/cli/command/curvebs/list/logicalPool/).
CLI_LOGICAL_POOL_HEADER = ("id", "name", "phyPool", "type", "alloc", "scan", "total", "used",
                           "left", "recycle")


def parse_cli_json(text: str, what: str) -> object:
    """tools-v2's `-f json`: {"error": {"code", "message"}, "result": ...}; the result,
    or CurveError with Curve's message when the code is not 0."""
    start = text.find("{")
    try:
        doc, _ = json.JSONDecoder().raw_decode(text, start if start >= 0 else 0)
    except ValueError:
        raise CurveError(f"{what}: not JSON") from None
    if not isinstance(doc, dict) or ("result" not in doc and "error" not in doc):
        raise CurveError(f"{what}: not the JSON object tools-v2 prints")
    err = doc.get("error") or {}
    if not isinstance(err, dict):
        err = {"code": -1, "message": str(err)}
    if err.get("code") not in (None, 0):
        raise CurveError(f"{what}: {str(err.get('message', 'error')).strip()}")
    return doc.get("result")


def cli_rows(result: object, header: Sequence[str]) -> list[dict[str, str]]:
    """tools-v2's rows: arrays of strings in header order (ListMap2ListSortByKeys), or,
    where a command keeps its maps as the result, objects."""
    out = []
    for row in result if isinstance(result, list) else []:
        if isinstance(row, list):
            out.append({h: str(v) for h, v in zip(header, row, strict=False)})
        elif isinstance(row, dict):
            out.append({str(k): str(v) for k, v in row.items()})
    return out


def parse_cli_chunkservers(text: str) -> list[ChunkserverInfo]:
    """`curve bs list chunkserver -f json`: rows of strings in CLI_CHUNKSERVER_HEADER order."""
    result = parse_cli_json(text, "curve bs list chunkserver")
    if not isinstance(result, list):
        raise CurveError("curve bs list chunkserver: its result is not a list of rows")
    out = []
    for row in cli_rows(result, CLI_CHUNKSERVER_HEADER):
        try:
            unhealthy = row.get("unhealthyCopyset", "").replace("%", "").strip()
            out.append(ChunkserverInfo(
                id=int(row["id"]), ip=row["ip"], port=int(row["port"]),
                # The table has no online column: tools-v2 counts every copyset of a
                # chunkserver that is not ONLINE (offline or unstable) unhealthy, 100 %.
                online=None if not unhealthy else float(unhealthy) < 100,
                disk_type=row.get("type") or None, rw_status=row.get("rwStatus") or None,
                disk_state=row.get("diskState") or None,
                copysets=int(row["copysetNum"]) if row.get("copysetNum", "").isdigit()
                else None))
        except (KeyError, ValueError, OverflowError):
            continue
    if result and not out:
        raise CurveError("curve bs list chunkserver: no row read as a chunkserver")
    return out


@dataclass(frozen=True, slots=True)
class LogicalPoolInfo:
    id: int
    name: str  # as Curve names it; the metrics use bvar_name(name)


_OPS_POOL = re.compile(r"^id = (\d+), name = (.*?), physicalPoolID = ")


def parse_ops_logical_pools(text: str) -> list[LogicalPoolInfo]:
    """`curve_ops_tool logical-pool-list`: `id = 1, name = pool1, physicalPoolID = 1, ...`."""
    out = [LogicalPoolInfo(int(m.group(1)), m.group(2)) for line in text.splitlines()
           if (m := _OPS_POOL.match(line.strip()))]
    if not out and "curve logical pool list" not in text:
        raise CurveError("curve_ops_tool logical-pool-list: no pool lines")
    return out


def parse_cli_logical_pools(text: str) -> list[LogicalPoolInfo]:
    """`curve bs list logical-pool -f json`: its result is the rows as objects."""
    out = []
    for row in cli_rows(parse_cli_json(text, "curve bs list logical-pool"),
                        CLI_LOGICAL_POOL_HEADER):
        if row.get("id", "").isdigit() and row.get("name"):
            out.append(LogicalPoolInfo(int(row["id"]), row["name"]))
    return out


def parse_cli_copysets_status(text: str) -> tuple[bool, int | None, int | None]:
    """`curve bs status copyset -f json`: [{"total", "healthy", "unhealthy",
    "unhealthyRatio"}] as strings (tools-v2/pkg/cli/command/curvebs/status/copyset/)."""
    result = parse_cli_json(text, "curve bs status copyset")
    rows = cli_rows(result, ())
    if not rows or not rows[0].get("total", "").isdigit():
        raise CurveError("curve bs status copyset: no totals in its result")
    total, bad = rows[0]["total"], rows[0].get("unhealthy", "")
    unhealthy = int(bad) if bad.isdigit() else None
    return unhealthy == 0, int(total), unhealthy


_COPYSETS = re.compile(r"total copysets:\s*(\d+),\s*unhealthy copysets:\s*(\d+)")
_CS_STATUS = re.compile(r"total num\s*=\s*(\d+),\s*online\s*=\s*(\d+),\s*offline\s*=\s*(\d+)")


def parse_copysets_status(text: str) -> tuple[bool, int | None, int | None]:
    """`curve_ops_tool copysets-status`: (healthy, total, unhealthy)."""
    healthy = "Copysets are healthy" in text
    if not healthy and "Copysets not healthy" not in text:
        raise CurveError("curve_ops_tool copysets-status: unexpected output")
    m = _COPYSETS.search(text)
    return healthy, (int(m.group(1)) if m else None), (int(m.group(2)) if m else None)


def parse_chunkserver_status(text: str) -> tuple[int, int, int]:
    """`curve_ops_tool chunkserver-status`: (total, online, offline)."""
    m = _CS_STATUS.search(text)
    if not m:
        raise CurveError("curve_ops_tool chunkserver-status: unexpected output")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


# ---- extracting the model's fields -----------------------------------------------------


def _num(v: Value | None) -> float | None:
    return v if isinstance(v, float) else None


def _us(v: Value | None) -> float | None:
    n = _num(v)
    return n * US if n is not None else None


def _int(v: Value | None) -> int | None:
    n = _num(v)
    return int(n) if n is not None else None


_POOL_METRIC = re.compile(
    r"topology_metric_logical_pool_(.+)_(leadernum_range|leadernum_min|leadernum_max|"
    r"leadernum_avg|leadernum_standard_deviation|copyset_num|chunkserver_num|copysetnum_range)$")
_CS_METRIC = re.compile(r"topology_metric_chunkserver_id_(\d+)_(leadernum|copysetnum|"
                        r"leader_count_from_heartbeat)$")


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
    out: dict[int, dict[str, int]] = {}
    for name, value in v.items():
        m = _CS_METRIC.match(name)
        if m and isinstance(value, float):
            out.setdefault(int(m.group(1)), {})[m.group(2)] = int(value)
    return out


_OP_BVAR = re.compile(r"mds_scheduler_metric_copyset_(\d+)_(\d+)$")


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


# ---- the leader schedule -------------------------------------------------------------


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
    fails = [line for line in lines if "fail" in line.lower()]
    if rc != 0 or fails:
        return (fails or lines or [f"rapid-leader-schedule: exit status {rc}"])[-1].strip()
    return None


def run_schedule(tool: Sequence[str], pool_id: int | None, timeout: float = 120.0) -> str:
    """Run the leader schedule; the command as run. CurveError with the reason if refused."""
    argv = schedule_argv(tool, pool_id)
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise CurveError(f"{argv[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise CurveError(f"{' '.join(argv)} did not finish in {timeout:g} s") from None
    why = schedule_refusal(tool, res.returncode, res.stdout, res.stderr)
    if why is not None:
        raise CurveError(why)
    return " ".join(argv)


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
        leaders=_int(v.get(f"{p}_leader_count")),
        read_iops=_num(v.get(f"{p}_read_iops")), write_iops=_num(v.get(f"{p}_write_iops")),
        read_bps=_num(v.get(f"{p}_read_bps")), write_bps=_num(v.get(f"{p}_write_bps")),
        write_latency=_us(v.get(f"{p}_write_lat_latency")),
        write_latency_p99=_us(v.get(f"{p}_write_lat_latency_99")),
        raft_append_latency=_us(v.get("raft_storage_append_entries_latency")),
        raft_append_latency_p99=_us(v.get("raft_storage_append_entries_latency_99")),
        raft_append_latency_max=_us(v.get("raft_storage_append_entries_max_latency")),
        raft_send_latency=_us(v.get("raft_send_entries_latency")),
        cores_used=_num(v.get("process_cpu_usage")),
        rss_bytes=_int(v.get("process_memory_resident")),
        threads=_int(v.get("process_thread_count")),
        bthread_usage=_num(v.get("bthread_worker_usage")),
        bthread_workers=_int(v.get("bthread_worker_count")),
        config=config or None)


# ---- the source ------------------------------------------------------------------------


# Endpoints kept in the pool manager at once: one pool per address, so a cluster's
# every MDS and chunkserver keeps its connection from poll to poll. Fewer would make
# the least recently used pool go first, which with a poll that walks every address
# in turn is every pool, every poll.
MAX_ENDPOINTS = 1 << 16


def _refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _why(exc: BaseException, timeout: float) -> str:
    if _refused(exc):
        return "connection refused"
    if isinstance(exc, NewConnectionError):  # a subclass of ConnectTimeoutError
        return f"cannot connect: {str(exc).rpartition(': ')[2]}"
    if isinstance(exc, (TimeoutError, ReadTimeoutError, ConnectTimeoutError)):
        return f"no answer in {timeout:g} s"
    if isinstance(exc, CurveError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


@dataclass
class _Call:
    """One tool call's latest answer: its value, or, when it failed, None and why."""

    value: object = None
    at: float | None = None
    error: str | None = None


@dataclass
class _Memory:
    """What the source remembers between polls, to see elections."""

    leaders: dict[str, int] = field(default_factory=dict)
    terms: dict[str, dict[str, int]] = field(default_factory=dict)
    raft_at: dict[str, float] = field(default_factory=dict)
    calls: dict[str, _Call] = field(default_factory=dict)
    # Where the chunkservers are, from the last listing that answered: addresses to
    # poll, not values to show (a failed listing leaves online states unknown).
    located: dict[str, ChunkserverInfo] = field(default_factory=dict)
    transfers: dict[str, float] = field(default_factory=dict)  # raft group -> last seen
    groups_pool: set[int] = field(default_factory=set)  # pool ids of the raft groups seen


class CurveSource:
    """Polls Curve's MDS dummy ports and chunkservers over HTTP, a bounded number at once."""

    name = "curve"
    RAFT_EVERY = 10.0  # /raft_stat is long (every copyset); terms change slowly
    TOOL_EVERY = 60.0
    # A transfer explains a term rise seen up to this long after its operator was last
    # shown: the operator ends when a heartbeat reports the new leader (10 s apart).
    TRANSFER_MEMORY = 30.0

    def __init__(self, mds: Sequence[str] = (), chunkservers: Sequence[str] = (),
                 ops_tool: Sequence[str] | None = None, curve_cli: Sequence[str] | None = None,
                 timeout: float = 2.0, concurrency: int = 32) -> None:
        if not mds and not chunkservers and not ops_tool and not curve_cli:
            raise ValueError("a Curve source needs MDS or chunkserver addresses, or a tool")
        self.mds = list(mds)
        self.chunkservers = list(chunkservers)
        self.ops_tool = list(ops_tool) if ops_tool else None
        self.curve_cli = list(curve_cli) if curve_cli else None
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=max(1, concurrency),
                                        thread_name_prefix="curve-http")
        # Keep-alive: brpc serves HTTP/1.1 and keeps a connection open between requests
        # (its own http channels reuse one per server: policy/http_rpc_protocol.cpp),
        # so each endpoint's connection is opened once, not once a request (a thousand
        # chunkservers polled each second were 1,100 new connections a second).
        # An endpoint's requests in one poll follow each other, so one connection each.
        # No retries: the next poll is the retry, and a retried timeout doubles the wait.
        self._http = urllib3.PoolManager(
            num_pools=MAX_ENDPOINTS, maxsize=1, block=False, retries=False,
            timeout=urllib3.Timeout(connect=timeout, read=timeout),
            headers={"User-Agent": "stormdeck"})
        self._mem = _Memory()
        self._metrics_path: dict[str, str] = {}  # addr -> the Prometheus path that worked

    @property
    def poll_timeout(self) -> float:
        # MDS roles, the leader's vars, then chunkservers and their raft pages,
        # each step bounded by one request timeout; the tools by five each.
        return self.timeout * 4 + (self.timeout * 20 if self.ops_tool or self.curve_cli else 0)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.clear()

    # -- endpoints --

    def http_get(self, addr: str, path: str) -> tuple[int, str]:
        """Status and body, over the endpoint's kept-alive connection; CurveError with
        why (`no answer in 2 s`, `connection refused`) when there is no answer."""
        host, _, port = addr.rpartition(":")
        # The endpoint's own pool, asked by path: a URL through the manager is parsed and
        # percent-checked byte by byte twice more, a third of a poll's CPU at 1,000.
        pool = self._http.connection_from_host(host, int(port), scheme="http")
        try:
            try:
                resp = pool.urlopen("GET", path)
            except ProtocolError as exc:
                if _refused(exc):
                    raise
                # A kept connection the server closed as we sent on it: once more, on a
                # new one; a second failure is the endpoint's, not the pool's.
                resp = pool.urlopen("GET", path)
        except HTTPError as exc:
            raise CurveError(_why(exc, self.timeout)) from None
        return resp.status, resp.data.decode("utf-8", errors="replace")

    def fetch_vars(self, addr: str, patterns: Iterable[str]) -> dict[str, Value]:
        """/vars/<patterns>; where /vars is not served, the Prometheus endpoint instead."""
        status, body = self.http_get(addr, "/vars/" + ",".join(patterns))
        if status == 200:
            return parse_vars(body)
        for path in (self._metrics_path.get(addr), "/metrics", "/brpc_metrics"):
            if path is None:
                continue
            status, body = self.http_get(addr, path)
            if status == 200:
                self._metrics_path[addr] = path
                return parse_prometheus_text(body)
        raise CurveError(f"HTTP {status} from /vars, /metrics and /brpc_metrics")

    def _mds_role(self, addr: str) -> MdsStatus:
        try:
            v = self.fetch_vars(addr, ["mds_status"])
        except (OSError, CurveError) as exc:
            return MdsStatus(addr, None, _why(exc, self.timeout))
        role = v.get("mds_status")
        return MdsStatus(addr, role if isinstance(role, str) else None,
                         None if isinstance(role, str) else "no mds_status bvar")

    # -- tools --

    def _run_tool(self, argv: list[str]) -> tuple[int, str, str]:
        """Exit status, stdout and stderr; CurveError only when nothing ran to the end."""
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout * 5)
        except FileNotFoundError:
            raise CurveError(f"{argv[0]} is not installed") from None
        except PermissionError:
            raise CurveError(f"{argv[0]} cannot be run (permission denied)") from None
        except subprocess.TimeoutExpired:
            raise CurveError(f"{argv[0]} {argv[1]} did not finish in "
                             f"{self.timeout * 5:g} s") from None
        return res.returncode, res.stdout, res.stderr

    def _call(self, name: str, argv: list[str], parse: Callable[[str], object],
              now: float) -> None:
        """One tool call on its own: a non-zero exit whose output reads is data (curve_ops_tool
        exits non-zero exactly when copysets are unhealthy); one that does not read, or does
        not run, leaves its values unknown until it answers again."""
        slot = self._mem.calls.setdefault(name, _Call())
        if slot.at is not None and now - slot.at < self.TOOL_EVERY:
            return
        slot.at = now
        try:
            rc, out, err = self._run_tool(argv)
            try:
                if rc != 0 and not out.strip():
                    raise CurveError("no output")
                slot.value = parse(out)
            except CurveError as exc:
                if rc == 0:
                    raise
                lines = (err.strip() or out.strip()).splitlines()
                raise CurveError(f"{name} failed: "
                                 f"{lines[-1] if lines else f'exit status {rc}'}") from exc
            slot.error = None
        except CurveError as exc:
            slot.value, slot.error = None, str(exc)

    def _value(self, name: str) -> object:
        slot = self._mem.calls.get(name)
        return slot.value if slot is not None else None

    def _tools(self, now: float) -> None:
        if self.curve_cli:
            cli, extra = self.curve_cli[0], self.curve_cli[1:]
            self._call("curve bs list chunkserver",
                       [cli, "bs", "list", "chunkserver", "--format", "json", *extra],
                       parse_cli_chunkservers, now)
            self._call("curve bs list logical-pool",
                       [cli, "bs", "list", "logical-pool", "--format", "json", *extra],
                       parse_cli_logical_pools, now)
            if not self.ops_tool:
                self._call("curve bs status copyset",
                           [cli, "bs", "status", "copyset", "--format", "json", *extra],
                           parse_cli_copysets_status, now)
        if self.ops_tool:
            tool, extra = self.ops_tool[0], self.ops_tool[1:]
            if not self.curve_cli:
                self._call("chunkserver-list", [tool, "chunkserver-list", "-checkHealth=false",
                                                *extra], parse_ops_chunkserver_list, now)
                self._call("logical-pool-list", [tool, "logical-pool-list", *extra],
                           parse_ops_logical_pools, now)
            self._call("copysets-status", [tool, "copysets-status", *extra],
                       parse_copysets_status, now)
            self._call("chunkserver-status", [tool, "chunkserver-status", *extra],
                       parse_chunkserver_status, now)
        listed = self._value("curve bs list chunkserver") or self._value("chunkserver-list")
        if isinstance(listed, list):
            self._mem.located = {c.addr: c for c in listed}

    def _listing(self) -> list[ChunkserverInfo] | None:
        listed = self._value("curve bs list chunkserver")
        if listed is None:
            listed = self._value("chunkserver-list")
        return listed if isinstance(listed, list) else None

    def _pool_ids(self, pools: tuple[CurvePool, ...]) -> dict[str, int]:
        """Mangled pool name -> logical pool id: from the tools' pool listing; else, with
        one pool in the MDS's metrics, from the raft group ids of the copysets the
        chunkservers hold, when they all name one pool (group = pool << 32 | copyset)."""
        listed = self._value("curve bs list logical-pool")
        if listed is None:
            listed = self._value("logical-pool-list")
        if isinstance(listed, list) and listed:
            return {bvar_name(p.name): p.id for p in listed}
        if len(pools) == 1 and len(self._mem.groups_pool) == 1:
            return {pools[0].name: next(iter(self._mem.groups_pool))}
        return {}

    def _raft_due(self, addrs: list[str], now: float) -> set[str]:
        """Whose /raft_stat to read this poll: the most overdue, a tenth of them at most.

        A raft page lists every copyset; reading all of them in one poll would
        make every RAFT_EVERY-th poll many times slower than the rest.
        """
        at = self._mem.raft_at
        due = [a for a in addrs if a not in at or now - at[a] >= self.RAFT_EVERY]
        due.sort(key=lambda a: at.get(a, float("-inf")))
        return set(due[:max(8, -(-len(addrs) // 10))])

    def _chunkserver(self, addr: str, curve_id: int | None, now: float,
                     with_raft: bool) -> tuple[Daemon, dict[str, RaftNode] | None]:
        v = self.fetch_vars(addr, CHUNKSERVER_VARS)
        if not any(k.startswith(chunkserver_prefix(addr)) for k in v):
            raise CurveError("answers, but not as the chunkserver at this address")
        raft = None
        if with_raft:
            try:
                status, body = self.http_get(addr, "/raft_stat?console=1")
                if status == 200:
                    raft = parse_raft_stat(body)
            except (OSError, CurveError):
                raft = None  # the page is optional; leader counts still show elections
        return chunkserver_daemon(addr, v, curve_id), raft

    # -- the poll --

    def poll(self) -> Partial:
        now = time.monotonic()
        errors: list[str] = []
        self._tools(now)
        for name, slot in self._mem.calls.items():
            if slot.error is not None:
                errors.append(f"{slot.error} (its values are unknown until it answers)"
                              if name in slot.error else
                              f"{name}: {slot.error} (its values are unknown until it answers)")
        roles = list(self._pool.map(self._mds_role, self.mds))
        leader = next((r.addr for r in roles if r.role == "leader"), None)
        endpoint_errors = {r.addr: r.error for r in roles if r.error}
        mds_vars: dict[str, Value] = {}
        if leader is not None:
            try:
                mds_vars = self.fetch_vars(leader, MDS_VARS)
            except (OSError, CurveError) as exc:
                endpoint_errors[leader] = _why(exc, self.timeout)
        elif self.mds:
            errors.append("no MDS says it is the leader")
        seen = self._mem.transfers
        for group in mds_transfers(mds_vars):
            seen[group] = now
        for group, at in list(seen.items()):
            if now - at > self.TRANSFER_MEMORY * 4:
                del seen[group]

        known = self._mem.located
        addrs = list(dict.fromkeys([*self.chunkservers, *known]))
        ids = {a: known[a].id if a in known else None for a in addrs}
        raft_due = self._raft_due(addrs, now)
        futures = {a: self._pool.submit(self._chunkserver, a, ids[a], now, a in raft_due)
                   for a in addrs}
        listing = self._listing()
        info_now = {c.addr: c for c in listing} if listing is not None else {}
        per_id = mds_chunkservers(mds_vars)
        daemons: dict[str, Daemon] = {}
        for addr, fut in futures.items():
            mds = per_id.get(ids[addr], {}) if ids[addr] is not None else {}
            try:
                d, raft = fut.result()
            except Exception as exc:  # each endpoint's fault is data, not a failed poll
                endpoint_errors[addr] = _why(exc, self.timeout)
                d, raft = Daemon(id=addr, kind="chunkserver", host=addr.rpartition(":")[0],
                                 curve_id=ids[addr]), None
            daemons[addr] = self._with_history(d, raft, info_now.get(addr), known.get(addr),
                                               mds, now)
        answered = sum(1 for r in roles if r.error is None) + (len(addrs) - sum(
            1 for a in addrs if a in endpoint_errors))
        if answered == 0 and (self.mds or addrs):
            raise CurveError("no Curve endpoint answered: " + "; ".join(
                f"{a}: {e}" for a, e in list(endpoint_errors.items())[:4]))
        silent = sum(1 for a in addrs if a in endpoint_errors)
        if silent:
            errors.append(f"{silent} of {len(addrs)} chunkservers did not answer")
        cluster = self._cluster(roles, leader, mds_vars, endpoint_errors, now)
        return Partial(source=self.name, time=time.time(), daemons=daemons, curve=cluster,
                       errors=tuple(errors))

    def _with_history(self, d: Daemon, raft: dict[str, RaftNode] | None,
                      info: ChunkserverInfo | None, located: ChunkserverInfo | None,
                      mds: Mapping[str, int], now: float) -> Daemon:
        m = self._mem
        delta = None
        if d.leaders is not None:
            prev = m.leaders.get(d.id)
            delta = d.leaders - prev if prev is not None else None
            m.leaders[d.id] = d.leaders
        rises = elections = candidates = None
        if raft is not None:
            before = m.terms.get(d.id)
            last = m.raft_at.get(d.id)
            terms = {g: n.term for g, n in raft.items() if n.term is not None}
            candidates = sum(1 for n in raft.values() if n.state == "CANDIDATE")
            if before is not None:
                risen = [g for g, t in terms.items() if g in before and t > before[g]]
                since = (last if last is not None else now) - self.TRANSFER_MEMORY
                explained = {g for g in risen if m.transfers.get(g, float("-inf")) >= since}
                rises, elections = len(risen), len(risen) - len(explained)
            m.terms[d.id] = terms
            m.raft_at[d.id] = now
            m.groups_pool.update(int(g) >> 32 for g in terms if g.isdigit())
        where = info or located
        return replace(
            d, leader_delta=delta, term_rises=rises, elections=elections,
            candidates=candidates,
            # From this poll's listing only: a listing that failed says nothing now.
            online=info.online if info is not None else d.online,
            device_class=where.disk_type if where is not None else d.device_class,
            leaders_mds=mds.get("leadernum"), leaders_heartbeat=mds.get(
                "leader_count_from_heartbeat"),
            copysets=mds.get("copysetnum", info.copysets if info else None))

    def _cluster(self, roles: list[MdsStatus], leader: str | None, v: Mapping[str, Value],
                 endpoint_errors: dict[str, str], now: float) -> CurveCluster:
        m = self._mem
        version = v.get("curve_version")
        online = offline = None
        status = self._value("chunkserver-status")
        listing = self._listing()
        if isinstance(status, tuple):
            _, online, offline = status
        elif listing is not None:
            online = sum(1 for c in listing if c.online)
            offline = sum(1 for c in listing if c.online is False)
        copysets = self._value("copysets-status")
        if copysets is None:
            copysets = self._value("curve bs status copyset")
        copysets = copysets if isinstance(copysets, tuple) else None
        pools = mds_pools(v)
        ids = self._pool_ids(pools)
        pools = tuple(replace(p, pool_id=ids.get(p.name, p.pool_id)) for p in pools)
        recent = tuple(sorted(g for g, at in m.transfers.items()
                              if now - at <= self.TRANSFER_MEMORY))
        return CurveCluster(
            mds=tuple(roles), leader_mds=leader, pools=pools,
            version=version if isinstance(version, str) else None,
            operators=_int(v.get("mds_scheduler_metric_operator_num")),
            transfer_leader_ops=_int(v.get("mds_scheduler_metric_transfer_leader_num")),
            chunkservers_online=online, chunkservers_offline=offline,
            copysets_total=copysets[1] if copysets else None,
            copysets_unhealthy=copysets[2] if copysets else None,
            endpoint_errors=endpoint_errors, transfer_copysets=recent,
            tool_errors={name: slot.error for name, slot in m.calls.items()
                         if slot.error is not None})
