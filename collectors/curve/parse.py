"""Curve's wire texts: brpc /vars and Prometheus pages, braft /raft_stat, the tools' output."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

US = 1e-6
Value = float | str | dict[str, str]


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


# ---- the MDS's topology service over brpc's HTTP+JSON ----------------------------------
#
# brpc serves every protobuf service of a server over HTTP too: POST
# /<package.Service>/<Method> with the request as JSON answers the response as JSON,
# fields by their proto names, enums by name (brpc json2pb). The leader MDS's main port
# (mds.listen.addr) serves curve.mds.topology.TopologyService (proto/topology.proto).

TOPOLOGY_SERVICE = "/curve.mds.topology.TopologyService/"


def parse_mds_json(text: str, what: str) -> dict:
    """A TopologyService response: a JSON object whose statusCode is 0 (kTopoErrCodeSuccess)."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise CurveError(f"{what}: not JSON") from None
    if not isinstance(doc, dict):
        raise CurveError(f"{what}: not a JSON object")
    code = doc.get("statusCode", 0)
    if code != 0:
        raise CurveError(f"{what}: the MDS answered statusCode {code}")
    return doc


def parse_mds_physical_pools(text: str) -> list[int]:
    """ListPhysicalPool: {"statusCode": 0, "physicalPoolInfos": [{"physicalPoolID": 1, ...}]}."""
    doc = parse_mds_json(text, "ListPhysicalPool")
    return [p["physicalPoolID"] for p in doc.get("physicalPoolInfos") or ()
            if isinstance(p, dict) and isinstance(p.get("physicalPoolID"), int)]


def parse_mds_logical_pools(text: str) -> list[LogicalPoolInfo]:
    """ListLogicalPool: {"statusCode": 0, "logicalPoolInfos": [{"logicalPoolID": 1,
    "logicalPoolName": "pool1", ...}]}."""
    doc = parse_mds_json(text, "ListLogicalPool")
    return [LogicalPoolInfo(p["logicalPoolID"], p["logicalPoolName"])
            for p in doc.get("logicalPoolInfos") or ()
            if isinstance(p, dict) and isinstance(p.get("logicalPoolID"), int)
            and isinstance(p.get("logicalPoolName"), str)]


def parse_mds_chunkservers(text: str) -> list[ChunkserverInfo]:
    """GetChunkServerInCluster: {"statusCode": 0, "chunkServerInfos": [{"chunkServerID": 1,
    "hostIp": "10.0.0.1", "port": 8200, "onlineState": "ONLINE", ...}]}."""
    doc = parse_mds_json(text, "GetChunkServerInCluster")
    out = []
    for c in doc.get("chunkServerInfos") or ():
        if not isinstance(c, dict) or not isinstance(c.get("chunkServerID"), int) or \
                not isinstance(c.get("hostIp"), str) or not isinstance(c.get("port"), int):
            continue
        state = c.get("onlineState")
        out.append(ChunkserverInfo(
            id=c["chunkServerID"], ip=c["hostIp"], port=c["port"],
            online=state == "ONLINE" if isinstance(state, str) else None,
            disk_type=c.get("diskType") if isinstance(c.get("diskType"), str) else None,
            disk_state=c.get("diskStatus") if isinstance(c.get("diskStatus"), str) else None))
    return out
