"""A Curve cluster's HTTP endpoints and tools, served on 127.0.0.1 in Curve's real wire formats.

Curve cannot run here, so tests (and the Curve benchmark) talk to this: an
MDS pair's dummy ports and N chunkservers, each on its own port, serving
brpc's /vars (with its wildcard filters), brpc's Prometheus text and braft's
/raft_stat text page, as the sources in CURVE.md describe them. One asyncio
loop in one thread serves every port, so a thousand chunkservers cost a
thousand sockets, not a thousand threads. Behaviour per endpoint is set by
the test: answer, refuse, answer too slowly, talk garbage, lack /vars.

Underneath is a small model of what Curve does with leaders: logical pools,
each with its chunkservers and copysets (three peers each, raft group id
`pool << 32 | copyset`); a leader transfer is an MDS operator (shown in the
scheduler's bvars while in flight) that completes a heartbeat later and
raises the copyset's term; an election raises the term with no operator.
`tool_script` writes curve_ops_tool and `curve` stand-ins that answer from
this model with the outputs tests/data/curve/ holds from the real tools.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import random
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

POOL = "default_logical_pool"  # the mangled pool name, as in Curve's tuning guide
POOL_ID = 1
CONTROL = "/_stand_in/"  # the tool stand-ins' path to the model; no Curve daemon serves it

# `curve bs list chunkserver` columns in the order tools-v2 writes each row
# (tools-v2/pkg/cli/command/curvebs/list/chunkserver/chunkserver.go).
CLI_CHUNKSERVER_HEADER = ("id", "type", "ip", "port", "rwStatus", "diskState", "copysetNum",
                          "mountpoint", "diskCapacity", "diskUsed", "unhealthyCopyset",
                          "extAddr")


def fmt_var(value: object) -> str:
    """A bvar's value as brpc prints it: strings quoted, nothing escaped inside."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def prometheus_text(values: dict[str, object]) -> str:
    """bvars as brpc's Prometheus endpoint writes them: numbers as gauges, Curve's JSON
    config strings as label sets, other strings dropped."""
    lines = []
    for name, value in values.items():
        if isinstance(value, str):
            if '"conf_value":"' not in value:
                continue
            conf_name = value.split('"conf_name":"')[1].split('"')[0]
            conf_value = value.split('"conf_value":"')[1].split('"')[0]
            lines += [f"# TYPE {name} gauge",
                      f'{name}{{conf_name="{conf_name}",conf_value="{conf_value}"}} 0']
        else:
            lines += [f"# HELP {name} {name}", f"# TYPE {name} gauge", f"{name} {value}"]
    return "\n".join(lines) + "\n"


def go_json(doc: object) -> str:
    """What tools-v2 prints for `-f json`: json.MarshalIndent(finalCmd, "", "  ")."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


@dataclass(eq=False)
class Chunkserver:
    id: int
    port: int
    leaders: int = 0  # kept equal to the copysets it leads
    copysets: int = 0  # copysets it is a peer of
    pool: int = POOL_ID
    mode: str = "ok"  # ok | refuse | slow | garbage | no_vars
    write_lat_us: int = 1820
    append_lat_us: int = 410
    send_lat_us: int = 900
    cpu: float = 3.42
    bthread_usage: float = 6.5

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def prefix(self) -> str:
        return f"chunkserver_127_0_0_1_{self.port}"

    def vars(self) -> dict[str, object]:
        p = self.prefix
        return {
            f"{p}_leader_count": self.leaders,
            f"{p}_write_lat_latency": self.write_lat_us,
            f"{p}_write_lat_latency_80": self.write_lat_us,
            f"{p}_write_lat_latency_99": self.write_lat_us * 3,
            f"{p}_write_lat_max_latency": self.write_lat_us * 5,
            f"{p}_write_lat_qps": 850,
            f"{p}_write_iops": 850,
            f"{p}_write_bps": 3481600,
            f"{p}_write_request_num": 123456,
            f"{p}_read_iops": 120,
            f"{p}_read_bps": 491520,
            f"{p}_chunkfilepool_left": 7000,
            f"{p}_config_copyset_election_timeout_ms":
                '{"conf_name":"copyset.election_timeout_ms","conf_value":"1000"}',
            f"{p}_config_copyset_enable_odsync_when_open_chunkfile":
                '{"conf_name":"copyset.enable_odsync_when_open_chunkfile","conf_value":"false"}',
            "raft_storage_append_entries_latency": self.append_lat_us,
            "raft_storage_append_entries_latency_99": self.append_lat_us * 3,
            "raft_storage_append_entries_max_latency": self.append_lat_us * 10,
            "raft_storage_append_entries_qps": 2550,
            "raft_storage_append_entries_count": 9876543,
            "raft_send_entries_latency": self.send_lat_us,
            "raft_send_entries_qps": 1700,
            "process_cpu_usage": self.cpu,
            "process_memory_resident": 2147483648,
            "process_thread_count": 183,
            "bthread_worker_usage": self.bthread_usage,
            "bthread_worker_count": 18,
            "bthread_count": 431,
        }

    def prometheus(self) -> str:
        svc = f"rpc_server_{self.port}_braft_raft_service_append_entries"
        return prometheus_text(self.vars()) + "\n".join([
            f"# TYPE {svc} summary", f'{svc}{{quantile="0.99"}} 1500',
            f"{svc}_sum 12345000", f"{svc}_count 10000"]) + "\n"


@dataclass(eq=False)
class Copyset:
    pool: int
    id: int
    peers: list[Chunkserver]
    leader: Chunkserver
    term: int = 2
    candidate: Chunkserver | None = None  # a peer standing for election right now

    @property
    def group(self) -> int:
        return (self.pool << 32) | self.id


@dataclass(eq=False)
class Pool:
    id: int
    name: str  # as bvar mangles it, which is how the metrics name it
    chunkservers: list[Chunkserver]
    copysets: list[Copyset] = field(default_factory=list)

    @property
    def leader_range(self) -> int:
        counts = [c.leaders for c in self.chunkservers]
        return max(counts) - min(counts)


@dataclass(eq=False)
class Operator:
    """An MDS TransferLeader operator: in flight until the next heartbeat reports it done."""

    copyset: Copyset
    target: Chunkserver
    start: float
    due: float


@dataclass
class Mds:
    port: int  # its dummy port: /vars, whether leader or not
    leader: bool
    mode: str = "ok"
    main_port: int = 0  # mds.listen.addr's port: the topology service, on the leader only

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


class CurveWire:
    """The endpoints of one Curve cluster, served from one background asyncio loop.

    `pools` gives each logical pool as (name, chunkservers, copysets, leader counts
    or None); without it there is one pool, `default_logical_pool`, id 1.
    `heartbeat` is how long a leader transfer takes to complete, in seconds, on `clock`
    (monotonic seconds: a test that steps a tests.clock.ManualClock decides when each
    transfer lands, whatever the speed of the host).
    """

    def __init__(self, chunkservers: int = 6, copysets: int = 100,
                 leaders: list[int] | None = None, slow_seconds: float = 3.0,
                 pools: Sequence[tuple[str, int, int, list[int] | None]] | None = None,
                 heartbeat: float = 0.3, topology_service: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.slow_seconds = slow_seconds
        self.heartbeat = heartbeat
        self.clock = clock
        self.flapping = False
        self.unhealthy_copysets = 0
        self.operators: dict[int, Operator] = {}  # group -> operator in flight
        self.transfers_done = 0
        self.elections = 0
        self.tool_calls: list[tuple[str, ...]] = []
        self._lock = threading.RLock()
        self._rng = random.Random(11)
        self._loop = asyncio.new_event_loop()
        self._servers: dict[int, asyncio.AbstractServer] = {}
        self._open: dict[int, set[asyncio.StreamWriter]] = {}  # port -> open connections
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="curve-wire")
        self._thread.start()
        self.mds = [Mds(self._listen(), True), Mds(self._listen(), False)]
        # The leader's main port serves TopologyService over brpc's HTTP+JSON when asked
        # for; otherwise nothing listens there, as where a firewall keeps it from us.
        # A port bound but never listened on refuses connections, and stays ours until
        # close(): a probe closed at once let a chunkserver's listener get the same port
        # later, and its /vars were then answered as the topology service (404).
        self._held: list[socket.socket] = []
        self.mds[0].main_port = self._listen() if topology_service else self._hold()
        self.mds[1].main_port = self._hold()
        self.topology_calls: list[str] = []
        self.control_port = self._listen()
        specs = list(pools) if pools else [(POOL, chunkservers, copysets, leaders)]
        self.pools: list[Pool] = []
        self.chunkservers: list[Chunkserver] = []
        self._member: dict[int, list[Copyset]] = {}  # chunkserver port -> its copysets
        for pool_id, (name, n, total, counts) in enumerate(specs, start=1):
            css = [Chunkserver(id=len(self.chunkservers) + i + 1, port=self._listen(),
                               pool=pool_id) for i in range(n)]
            self.chunkservers += css
            pool = Pool(pool_id, name, css)
            for k in range(1, total + 1):
                peers = [css[(k - 1 + j) % n] for j in range(min(3, n))]
                pool.copysets.append(Copyset(pool_id, k, peers, peers[0]))
            for cs in pool.copysets:
                for peer in cs.peers:
                    peer.copysets += 1
                    self._member.setdefault(peer.port, []).append(cs)
            self.pools.append(pool)
            self._recount(pool)
            if counts is not None:
                self.set_pool_leaders(pool_id, counts)
        self.requests = 0
        self.connections = 0  # accepted, over all ports: keep-alive clients reuse theirs

    @staticmethod
    def spread(total: int, n: int) -> list[int]:
        """Leader counts as even as they can be: a range of 0 or 1."""
        return [total // n + (1 if i < total % n else 0) for i in range(n)]

    # -- the model --

    def pool(self, pool_id: int) -> Pool:
        return next(p for p in self.pools if p.id == pool_id)

    @staticmethod
    def _recount(pool: Pool) -> None:
        for c in pool.chunkservers:
            c.leaders = 0
        for cs in pool.copysets:
            cs.leader.leaders += 1

    def set_leaders(self, counts: list[int]) -> None:
        """Leader counts for the chunkservers of every pool, in order (one pool: its own)."""
        at = 0
        for p in self.pools:
            self.set_pool_leaders(p.id, counts[at:at + len(p.chunkservers)])
            at += len(p.chunkservers)
        if at != len(counts):
            raise ValueError(f"{len(counts)} counts for {at} chunkservers")

    def set_pool_leaders(self, pool_id: int, counts: list[int]) -> None:
        """Make each chunkserver lead exactly that many of the copysets it is a peer of."""
        with self._lock:
            pool = self.pool(pool_id)
            if len(counts) != len(pool.chunkservers) or sum(counts) != len(pool.copysets):
                raise ValueError(f"leader counts {counts} do not fit pool {pool.name}")
            need = dict(zip(pool.chunkservers, counts, strict=True))
            owner: dict[int, Chunkserver] = {}

            def place(cs: Copyset, seen: set[int]) -> bool:
                # Augmenting path: take a peer with room, or move a peer's copyset on.
                for p in cs.peers:
                    if need[p] > 0:
                        need[p] -= 1
                        owner[cs.id] = p
                        return True
                for p in cs.peers:
                    for other in pool.copysets:
                        if owner.get(other.id) is p and other.id not in seen:
                            seen.add(other.id)
                            if place(other, seen):
                                owner[cs.id] = p
                                return True
                return False

            for cs in pool.copysets:
                if not place(cs, {cs.id}):
                    raise ValueError(f"no way to give pool {pool.name} leaders {counts}")
            for cs in pool.copysets:
                if cs.leader is not owner[cs.id]:
                    cs.leader = owner[cs.id]
                    cs.term += 1
            self._recount(pool)

    @property
    def leader_range(self) -> int:
        return self.pools[0].leader_range

    def transfer(self, cs: Copyset, target: Chunkserver, after: float | None = None) -> None:
        """An MDS TransferLeader operator, done one heartbeat from now."""
        now = self.clock()
        with self._lock:
            self.operators[cs.group] = Operator(cs, target, now,
                                                now + (self.heartbeat if after is None else after))

    def _tick(self) -> None:
        now = self.clock()
        with self._lock:
            for group, op in list(self.operators.items()):
                if op.due <= now:
                    del self.operators[group]
                    cs = op.copyset
                    if op.target in cs.peers and cs.leader is not op.target:
                        cs.leader = op.target
                        cs.term += 1  # the target's TimeoutNow election
                        self.transfers_done += 1
                        self._recount(self.pool(cs.pool))

    def leader_schedule(self, pool_id: int, rapid: bool = True) -> int:
        """What the MDS's leader scheduler does for a pool: transfers from the chunkservers
        above the average to peers below it; the periodic one makes one per round, the
        rapid one (rapid-leader-schedule) as many as balance needs. Returns how many."""
        with self._lock:
            pool = self.pool(pool_id)
            counts = {c: c.leaders for c in pool.chunkservers}
            busy = {op.copyset.group for op in self.operators.values()}
            made = 0
            while True:
                hi = max(counts, key=lambda c: counts[c])
                moved = False
                for cs in pool.copysets:
                    if cs.leader is not hi or cs.group in busy:
                        continue
                    lo = min(cs.peers, key=lambda c: counts[c])
                    if counts[hi] - counts[lo] >= 2:
                        self.transfer(cs, lo, self.heartbeat * (1 + made % 2))
                        busy.add(cs.group)
                        counts[hi] -= 1
                        counts[lo] += 1
                        made += 1
                        moved = True
                        break
                if not moved or not rapid:
                    return made

    def elect(self, n: int = 1) -> None:
        """Elections: leaders change and terms rise with no operator behind them (K2.3)."""
        with self._lock:
            every = [cs for p in self.pools for cs in p.copysets if len(cs.peers) > 1]
            for cs in self._rng.sample(every, min(n, len(every))):
                cs.leader = self._rng.choice([p for p in cs.peers if p is not cs.leader])
                cs.term += 1
                self.elections += 1
            for cs in every:
                cs.candidate = None
            for cs in self._rng.sample(every, min(max(1, n // 2), len(every))):
                cs.candidate = self._rng.choice([p for p in cs.peers if p is not cs.leader])
            for p in self.pools:
                self._recount(p)

    def refuse(self, cs: Chunkserver) -> None:
        cs.mode = "refuse"
        server = self._servers.pop(cs.port)
        asyncio.run_coroutine_threadsafe(self._close(server), self._loop).result(5)

    def drop_connections(self) -> None:
        """Close every kept-alive connection, still listening: as a daemon that restarts
        between two polls, or a load balancer's idle timeout, does."""
        async def drop() -> None:
            closing = [w for writers in self._open.values() for w in list(writers)]
            for writer in closing:
                writer.close()
            # Closed on the wire before this returns: the client's next request finds them
            # gone however soon it comes.
            await asyncio.gather(*(w.wait_closed() for w in closing), return_exceptions=True)

        asyncio.run_coroutine_threadsafe(drop(), self._loop).result(5)

    async def _close(self, server: asyncio.AbstractServer) -> None:
        # A daemon that stops takes its kept-alive connections with it.
        port = server.sockets[0].getsockname()[1]
        server.close()
        for writer in list(self._open.get(port, ())):
            writer.close()
        await server.wait_closed()

    # -- what the daemons say --

    def raft_stat(self, me: Chunkserver) -> str:
        """braft's /raft_stat as text: `[group]` then NodeImpl::describe per copyset."""
        out = []
        with self._lock:
            for cs in sorted(self._member.get(me.port, ()), key=lambda c: c.group):
                state = ("LEADER" if cs.leader is me else
                         "CANDIDATE" if cs.candidate is me else "FOLLOWER")
                out.append(f"[{cs.group}]")
                out.append(f"peer_id: {me.addr}:0")
                out.append(f"state: {state}")
                out.append("readonly: 0")
                out.append(f"term: {cs.term}")
                out.append("conf_index: 2")
                out.append("peers: " + " ".join(f"{p.addr}:0" for p in cs.peers))
                if state == "LEADER":
                    out.append("changing_conf: NO    stage: STAGE_NONE")
                elif state == "FOLLOWER":  # braft names a leader for followers only
                    out.append(f"leader: {cs.leader.addr}:0")
                out.append("election_timer: timeout(1000ms) SCHEDULING(in 712ms)")
                out.append("")
        return "\r\n".join(out) + "\r\n"

    def mds_vars(self, mds: Mds) -> dict[str, object]:
        v: dict[str, object] = {"mds_status": "leader" if mds.leader else "follower",
                                "curve_version": "1.2.5+2c4861ca",
                                "mds_config_mds_heartbeat_interval_ms":
                                    '{"conf_name":"mds.heartbeat.intervalMs",'
                                    '"conf_value":"10000"}',
                                # Configuration::ExposeMetric("mds_config"): every conf key
                                # a JSON string bvar (src/common/configuration.cpp).
                                "mds_config_mds_listen_addr":
                                    '{"conf_name":"mds.listen.addr",'
                                    f'"conf_value":"127.0.0.1:{mds.main_port}"}}'}
        if not mds.leader:
            return v  # only the leader MDS fills in the topology metrics
        with self._lock:
            for p in self.pools:
                counts = [c.leaders for c in p.chunkservers]
                mean = sum(counts) / len(counts)
                var = sum((c - mean) ** 2 for c in counts) / len(counts)
                pool = f"topology_metric_logical_pool_{p.name}"
                v.update({
                    f"{pool}_chunkserver_num": len(counts),
                    f"{pool}_copyset_num": len(p.copysets),
                    f"{pool}_leadernum_range": float(max(counts) - min(counts)),
                    f"{pool}_leadernum_min": float(min(counts)),
                    f"{pool}_leadernum_max": float(max(counts)),
                    f"{pool}_leadernum_avg": float(mean),
                    f"{pool}_leadernum_variance": float(var),
                    f"{pool}_leadernum_standard_deviation": float(var ** 0.5),
                    f"{pool}_copysetnum_range": 0.0,
                })
            ops = list(self.operators.values())
            v["mds_scheduler_metric_operator_num"] = len(ops)
            v["mds_scheduler_metric_transfer_leader_num"] = len(ops)
            for op in ops:
                cs = op.copyset
                # StringStatus::Update: the keys of a std::map, so sorted; nothing escaped.
                kv = {"copySetEpoch": str(cs.term), "copySetId": str(cs.id),
                      "copySetLeader": cs.leader.addr,
                      "copySetPeers": ",".join(p.addr for p in cs.peers),
                      "logicalPoolId": str(cs.pool), "opItem": op.target.addr,
                      "opPriority": "NormalPriority", "opType": "TransferLeader",
                      "startEpoch": str(cs.term)}
                v[f"mds_scheduler_metric_copyset_{cs.pool}_{cs.id}"] = "{" + ",".join(
                    f'"{k}":"{kv[k]}"' for k in sorted(kv)) + "}"
            v["topology_metric_cluster_logicalpool_num"] = len(self.pools)
            v["topology_metric_cluster_chunkserver_num"] = len(self.chunkservers)
            # ChunkServerMetric (src/mds/topology/topology_metric.h): prefix
            # "topology_metric_chunkserver_Id_", names such as "<id>_leaderCount_from_heartbeat"
            # and "<id>_writeIOPS", as bvar's to_underscored_name mangles them.
            for c in self.chunkservers:
                k = f"topology_metric_chunkserver_id_{c.id}"
                v.update({f"{k}_leadernum": c.leaders, f"{k}_copysetnum": c.copysets,
                          f"{k}_leader_count_from_heartbeat": c.leaders,
                          f"{k}_copyset_count_from_heartbeat": c.copysets,
                          f"{k}_scatterwidth": 4, f"{k}_read_iops": 120,
                          f"{k}_write_iops": 850, f"{k}_read_rate": 491520,
                          f"{k}_write_rate": 3481600, f"{k}_disk_capacity": 41875931136,
                          f"{k}_disk_used": 1073741824})
        return v

    # -- the MDS's topology service (proto/topology.proto), as brpc's HTTP+JSON gives it --

    def topology(self, method: str, body: dict) -> tuple[int, str]:
        """A TopologyService call's HTTP status and JSON: fields by their proto names,
        enums by name, bytes in base64 (brpc's pb2json)."""
        self.topology_calls.append(method)
        if method == "ListPhysicalPool":
            return 200, json.dumps({"statusCode": 0, "physicalPoolInfos": [
                {"physicalPoolID": p.id, "physicalPoolName": f"pool{p.id}",
                 "desc": "", "poolsetId": 1, "poolsetName": "default"} for p in self.pools]})
        if method == "ListLogicalPool":
            pid = body.get("physicalPoolID")
            return 200, json.dumps({"statusCode": 0, "logicalPoolInfos": [
                {"logicalPoolID": p.id, "logicalPoolName": p.name, "physicalPoolID": p.id,
                 "type": "PAGEFILE", "createTime": 1700000000,
                 "redundanceAndPlaceMentPolicy": "eyJyZXBsaWNhTnVtIjozfQ==",
                 "userPolicy": "e30=", "allocateStatus": "ALLOW", "scanEnable": True}
                for p in self.pools if p.id == pid]})
        if method == "GetChunkServerInCluster":
            return 200, json.dumps({"statusCode": 0, "chunkServerInfos": [
                {"chunkServerID": c.id, "diskType": "nvme", "hostIp": "127.0.0.1",
                 "port": c.port, "status": "READWRITE", "diskStatus": "DISKNORMAL",
                 "onlineState": "OFFLINE" if c.mode == "refuse" else "ONLINE",
                 "mountPoint": f"local:///data/chunkserver{c.id}", "diskCapacity": 41875931136,
                 "diskUsed": 1073741824, "externalIp": "127.0.0.1", "version": "1.2.5"}
                for c in self.chunkservers]})
        # brpc's answer to a method the service lacks.
        return 404, f"Fail to find method={method}\n"

    # -- the tools --

    def ops_tool_output(self, command: str) -> str:
        """What curve_ops_tool prints for this cluster (src/tools/status_tool.cpp,
        copyset_check.cpp; the lines in tests/data/curve/)."""
        return self.ops_tool([command])[1]

    def ops_tool(self, argv: Sequence[str]) -> tuple[int, str]:
        """curve_ops_tool's exit status and stdout for `argv` (without the program)."""
        command = argv[0] if argv else ""
        flags = dict(a.lstrip("-").partition("=")[::2] for a in argv[1:])
        off = sum(1 for c in self.chunkservers if c.mode == "refuse")
        n = len(self.chunkservers)
        if command == "chunkserver-list":
            lines = ["curve chunkserver list: "] + [
                f"chunkServerID = {c.id}, diskType = nvme, hostIP = 127.0.0.1, "
                f"port = {c.port}, rwStatus = READWRITE, diskState = DISKNORMAL, "
                f"onlineState = {'OFFLINE' if c.mode == 'refuse' else 'ONLINE'}, "
                f"copysetNum = {c.copysets}, mountPoint = local:///data/chunkserver{c.id}, "
                f"diskCapacity = 39 GB, diskUsed = 1 GB, unhealthyCopysetRatio = "
                f"{100 if c.mode == 'refuse' else 0}%, externalIP = 127.0.0.1"
                for c in self.chunkservers]
            return 0, "\n".join(lines) + f"\ntotal: {n}, online: {n - off}, unstable: 0, " \
                                         f"offline: {off}\npendding: 0, penddingCopyset: 0, " \
                                         "retired:0\n"
        if command == "copysets-status":
            total = sum(len(p.copysets) for p in self.pools)
            bad = self.unhealthy_copysets
            head = "Copysets not healthy!" if bad else "Copysets are healthy!"
            # CopysetCheck returns -1 when unhealthy: the shell sees 255.
            return (255 if bad else 0), (f"{head}\ntotal copysets: {total}, unhealthy "
                                         f"copysets: {bad}, unhealthy_ratio: "
                                         f"{bad * 100 / total:g}%\n")
        if command == "chunkserver-status":
            return (255 if off else 0), (
                f"ChunkServer status:\nversion: 1.2.5+2c4861ca\nchunkserver: total num = {n}, "
                f"online = {n - off}, offline = {off}(recoveringout = 0, "
                "chunkserverlist: [])\n")
        if command == "logical-pool-list":
            lines = ["curve logical pool list: "] + [
                f"id = {p.id}, name = {p.name}, physicalPoolID = {p.id}, type = PAGEFILE, "
                "scanEnable = 1, allocateStatus = ALLOW, total space = 44GB, used space = "
                "0GB(0%, can be recycled = 0GB(0%)), left space = 44GB(100%)"
                for p in self.pools]
            return 0, "\n".join(lines) + f"\ntotal: {len(self.pools)}\n"
        if command == "rapid-leader-schedule":
            all_pools = flags.get("scheduleAll", "true") != "false"
            ids = [p.id for p in self.pools] if all_pools else \
                [int(flags.get("logical_pool_id", "1"))]
            failed = [i for i in ids if i not in {p.id for p in self.pools}]
            for i in ids:
                if i not in failed:
                    self.leader_schedule(i)
            # It prints nothing on success (src/tools/schedule_tool.cpp).
            return (255, "".join(f"RapidLeaderSchedule pool {i} fail\n" for i in failed)) \
                if failed else (0, "")
        return 255, "Command not supported!\n"

    def cli(self, argv: Sequence[str]) -> tuple[int, str]:
        """The Go `curve` CLI's exit status and stdout, `-f json` as tools-v2 writes it."""
        words = [a for a in argv if not a.startswith("-")]
        opts = list(argv)
        ok = {"code": 0, "message": "success"}
        if words[:3] == ["bs", "list", "chunkserver"]:
            rows = []
            for c in self.chunkservers:
                row = {"id": str(c.id), "type": "nvme", "ip": "127.0.0.1", "port": str(c.port),
                       "rwStatus": "READWRITE", "diskState": "DISKNORMAL",
                       "copysetNum": str(c.copysets),
                       "mountpoint": f"local:///curvebs/playground/chunkserver{c.id}/data",
                       "diskCapacity": "39 GiB", "diskUsed": "39 GiB",
                       "unhealthyCopyset": f"{100 if c.mode == 'refuse' else 0} %",
                       "extAddr": "127.0.0.1"}
                rows.append([row[h] for h in CLI_CHUNKSERVER_HEADER])
            # ListMap2ListSortByKeys: sorted as strings by ip, id, rwStatus, type, ...
            rows.sort(key=lambda r: (r[2], r[0], r[4], r[1], r[5], r[11]))
            return 0, go_json({"error": ok, "result": rows})
        if words[:3] == ["bs", "list", "logical-pool"]:
            rows = [{"alloc": "ALLOW", "id": str(p.id), "left": "44 GiB", "name": p.name,
                     "phyPool": str(p.id), "recycle": "0 B", "scan": "true",
                     "total": "44 GiB", "type": "PAGEFILE", "used": "0 B"} for p in self.pools]
            return 0, go_json({"error": ok, "result": rows})
        if words[:3] == ["bs", "status", "copyset"]:
            total = sum(len(p.copysets) for p in self.pools)
            bad = self.unhealthy_copysets
            # Error stays nil in this command: Go marshals it as null.
            return 0, go_json({"error": None, "result": [{
                "healthy": str(total - bad), "total": str(total), "unhealthy": str(bad),
                "unhealthyRatio": f"{bad / total * 100:.2f}%"}]})
        if words[:3] == ["bs", "update", "leader-schedule"]:
            if "--all" in opts:
                ids = [p.id for p in self.pools]
            elif "--logicalpoolid" in opts:
                ids = [int(opts[opts.index("--logicalpoolid") + 1])]
            else:
                return 1, "Error: all or logicalpoolid is required\n"
            if any(i not in {p.id for p in self.pools} for i in ids):
                bad = {"code": 9999, "message": "invalid logical pool id"}
                return 0, go_json({"error": bad, "result": {
                    "reason": "invalid logical pool id", "result": "failed"}})
            for i in ids:
                self.leader_schedule(i)
            return 0, go_json({"error": ok, "result": {"reason": "success",
                                                        "result": "success"}})
        return 1, f"Error: unknown command {' '.join(words)!r}\n"

    def tool_script(self, directory: Path, name: str = "curve_ops_tool") -> Path:
        """A stand-in for curve_ops_tool (or, named `curve`, the Go CLI) that asks this
        model over CONTROL and prints what the real tool would, with its exit status."""
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / name
        kind = "cli" if name == "curve" else "ops"
        path.write_text(
            "#!/usr/bin/env python3\n"
            "import json, sys, urllib.parse, urllib.request\n"
            f"url = 'http://127.0.0.1:{self.control_port}{CONTROL}{kind}?argv=' + "
            "urllib.parse.quote(json.dumps(sys.argv[1:]))\n"
            "doc = json.load(urllib.request.urlopen(url, timeout=10))\n"
            "sys.stdout.write(doc['out'])\n"
            "sys.exit(doc['rc'])\n")
        path.chmod(0o755)
        return path

    # -- serving --

    def _flap(self) -> None:
        # Leaders move and terms rise between any two looks, as in K2.3's election storms.
        self.elect(max(2, sum(len(p.copysets) for p in self.pools) // 20))

    def respond(self, port: int, path: str, body: bytes = b"") -> tuple[int, str]:
        self.requests += 1
        self._tick()
        if port == self.mds[0].main_port:
            service, _, method = path.split("?")[0].lstrip("/").partition("/")
            if service != "curve.mds.topology.TopologyService":
                return 404, f"Fail to find service={service}\n"
            try:
                doc = json.loads(body or b"{}")
            except ValueError:
                return 400, "Fail to parse JSON\n"
            return self.topology(method, doc if isinstance(doc, dict) else {})
        if port == self.control_port and path.startswith(CONTROL):
            kind, _, query = path.removeprefix(CONTROL).partition("?")
            argv = json.loads(urllib.parse.parse_qs(query)["argv"][0])
            self.tool_calls.append((kind, *argv))
            rc, out = self.cli(argv) if kind == "cli" else self.ops_tool(argv)
            return 200, json.dumps({"rc": rc, "out": out})
        for m in self.mds:
            if m.port == port:
                if path in ("/metrics", "/brpc_metrics"):
                    return 200, prometheus_text(self.mds_vars(m))
                return 200, self._vars_page(self.mds_vars(m), path)
        cs = next(c for c in self.chunkservers if c.port == port)
        if self.flapping and path.startswith("/vars"):
            self._flap()
        if cs.mode == "garbage":
            return 200, "<html><body>\u2603 Service Unavailable \x1b[31m\x00 {}</body></html>\n"
        if path.startswith("/vars"):
            if cs.mode == "no_vars":
                return 404, "Unknown path /vars\n"
            return 200, self._vars_page(cs.vars(), path)
        if path in ("/metrics", "/brpc_metrics"):
            if cs.mode == "no_vars" and path == "/metrics":
                return 404, "Unknown path\n"
            return 200, cs.prometheus()
        if path.startswith("/raft_stat"):
            return 200, self.raft_stat(cs)
        return 404, f"Unknown path {path}\n"

    @staticmethod
    def _vars_page(values: dict[str, object], path: str) -> str:
        spec = path.split("?")[0].removeprefix("/vars").strip("/")
        patterns = [p for p in spec.replace(";", ",").split(",") if p]
        lines = [f"{name} : {fmt_var(value)}" for name, value in values.items()
                 if not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)]
        return "\n".join(lines) + "\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # HTTP/1.1 keep-alive, as brpc serves it: requests follow each other on one
        # connection until the client closes it or asks to with `Connection: close`.
        port = writer.get_extra_info("sockname")[1]
        self.connections += 1
        self._open.setdefault(port, set()).add(writer)
        try:
            while True:
                request = await reader.readuntil(b"\r\n\r\n")
                path = request.split(b" ", 2)[1].decode()
                length = next((int(line.split(b":", 1)[1]) for line in request.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                payload = await reader.readexactly(length) if length else b""
                close = b"\r\nconnection: close" in request.lower()
                cs = next((c for c in self.chunkservers if c.port == port), None)
                if cs is not None and cs.mode == "slow":
                    await asyncio.sleep(self.slow_seconds)
                if port == self.control_port and path == CONTROL + "stats":
                    status, body = 200, json.dumps(self.stats())
                elif port == self.control_port:
                    # A tool's schedule may take the model's lock: keep it off the loop.
                    status, body = await asyncio.get_running_loop().run_in_executor(
                        None, self.respond, port, path)
                else:
                    status, body = self.respond(port, path, payload)
                data = body.encode("utf-8", errors="replace")
                writer.write(f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\n"
                             f"Content-Type: text/plain\r\nContent-Length: {len(data)}\r\n"
                             f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
                             .encode() + data)
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            self._open.get(port, set()).discard(writer)
            writer.close()

    def stats(self) -> dict[str, int]:
        """Requests served and connections accepted so far, on every port."""
        return {"requests": self.requests, "connections": self.connections}

    def _listen(self) -> int:
        async def start() -> asyncio.AbstractServer:
            return await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=256)

        server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(5)
        port = server.sockets[0].getsockname()[1]
        self._servers[port] = server
        return port

    def _hold(self) -> int:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self._held.append(sock)
        return sock.getsockname()[1]

    def close(self) -> None:
        for sock in self._held:
            sock.close()

        async def shutdown() -> None:
            for server in self._servers.values():
                server.close()
            # Handlers still sleeping (a "slow" endpoint) end here, not with the loop.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._servers.clear()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> CurveWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def addrs(self) -> Iterator[str]:
        return (c.addr for c in self.chunkservers)
