"""A Curve cluster's HTTP endpoints, served on 127.0.0.1 in Curve's real wire formats.

Curve cannot run here, so tests (and the Curve benchmark) talk to this: an
MDS pair's dummy ports and N chunkservers, each on its own port, serving
brpc's /vars (with its wildcard filters), brpc's Prometheus text and braft's
/raft_stat text page, as the sources in CURVE.md describe them. One asyncio
loop in one thread serves every port, so a thousand chunkservers cost a
thousand sockets, not a thousand threads. Behaviour per endpoint is set by
the test: answer, refuse, answer too slowly, talk garbage, lack /vars.
"""

from __future__ import annotations

import asyncio
import fnmatch
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

POOL = "default_logical_pool"  # the mangled pool name, as in Curve's tuning guide
POOL_ID = 1


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


@dataclass
class Chunkserver:
    id: int
    port: int
    leaders: int
    copysets: int
    mode: str = "ok"  # ok | refuse | slow | garbage | no_vars
    write_lat_us: int = 1820
    append_lat_us: int = 410
    send_lat_us: int = 900
    cpu: float = 3.42
    bthread_usage: float = 6.5
    terms: dict[int, int] = field(default_factory=dict)  # copyset id -> term

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

    def raft_stat(self, peers: list[Chunkserver]) -> str:
        out = []
        ring = [c.addr for c in peers]
        for copyset in sorted(self.terms):
            group = (POOL_ID << 32) | copyset
            leading = copyset % len(peers) == peers.index(self) % len(peers)
            me = f"{self.addr}:0"
            out.append(f"[{group}]")
            out.append(f"peer_id: {me}")
            out.append(f"state: {'LEADER' if leading else 'FOLLOWER'}")
            out.append("readonly: 0")
            out.append(f"term: {self.terms[copyset]}")
            out.append("conf_index: 2")
            out.append("peers: " + " ".join(f"{a}:0" for a in ring[:3]))
            if leading:
                out.append("changing_conf: NO    stage: STAGE_NONE")
            else:
                out.append(f"leader: {ring[copyset % len(ring)]}:0")
            out.append("election_timer: timeout(1000ms) SCHEDULING(in 712ms)")
            out.append("")
        return "\r\n".join(out) + "\r\n"


@dataclass
class Mds:
    port: int
    leader: bool
    mode: str = "ok"

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"


class CurveWire:
    """The endpoints of one Curve cluster, served from one background asyncio loop."""

    def __init__(self, chunkservers: int = 6, copysets: int = 100,
                 leaders: list[int] | None = None, slow_seconds: float = 3.0) -> None:
        self.slow_seconds = slow_seconds
        self.flapping = False
        self._rng = random.Random(11)
        self._loop = asyncio.new_event_loop()
        self._servers: dict[int, asyncio.AbstractServer] = {}
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="curve-wire")
        self._thread.start()
        counts = leaders or self.spread(copysets, chunkservers)
        self.mds = [Mds(self._listen(), True), Mds(self._listen(), False)]
        self.chunkservers = [
            Chunkserver(id=i + 1, port=self._listen(), leaders=counts[i],
                        copysets=copysets * 3 // chunkservers,
                        terms={c: 2 for c in range(1, copysets + 1) if c % chunkservers == i})
            for i in range(chunkservers)]
        self.requests = 0

    @staticmethod
    def spread(total: int, n: int) -> list[int]:
        """Leader counts as even as they can be: a range of 0 or 1."""
        return [total // n + (1 if i < total % n else 0) for i in range(n)]

    # -- scenario --

    def set_leaders(self, counts: list[int]) -> None:
        for cs, n in zip(self.chunkservers, counts, strict=True):
            cs.leaders = n

    @property
    def leader_range(self) -> int:
        counts = [c.leaders for c in self.chunkservers]
        return max(counts) - min(counts)

    def refuse(self, cs: Chunkserver) -> None:
        cs.mode = "refuse"
        server = self._servers.pop(cs.port)
        asyncio.run_coroutine_threadsafe(self._close(server), self._loop).result(5)

    async def _close(self, server: asyncio.AbstractServer) -> None:
        server.close()
        await server.wait_closed()

    def mds_vars(self, mds: Mds) -> dict[str, object]:
        v: dict[str, object] = {"mds_status": "leader" if mds.leader else "follower",
                                "curve_version": "1.2.5+2c4861ca",
                                "mds_config_mds_heartbeat_interval_ms":
                                    '{"conf_name":"mds.heartbeat.intervalMs",'
                                    '"conf_value":"10000"}'}
        if not mds.leader:
            return v  # only the leader MDS fills in the topology metrics
        counts = [c.leaders for c in self.chunkservers]
        mean = sum(counts) / len(counts)
        var = sum((c - mean) ** 2 for c in counts) / len(counts)
        pool = f"topology_metric_logical_pool_{POOL}"
        v.update({
            f"{pool}_chunkserver_num": len(counts),
            f"{pool}_copyset_num": sum(len(c.terms) for c in self.chunkservers),
            f"{pool}_leadernum_range": float(max(counts) - min(counts)),
            f"{pool}_leadernum_min": float(min(counts)),
            f"{pool}_leadernum_max": float(max(counts)),
            f"{pool}_leadernum_avg": float(mean),
            f"{pool}_leadernum_variance": float(var),
            f"{pool}_leadernum_standard_deviation": float(var ** 0.5),
            f"{pool}_copysetnum_range": 0.0,
            "mds_scheduler_metric_operator_num": 0,
            "mds_scheduler_metric_transfer_leader_num": 0,
        })
        for c in self.chunkservers:
            k = f"topology_metric_chunkserver_id_{c.id}"
            v.update({f"{k}_leadernum": c.leaders, f"{k}_copysetnum": c.copysets,
                      f"{k}_leader_count_from_heartbeat": c.leaders,
                      f"{k}_scatterwidth": 4, f"{k}_read_iops": 120, f"{k}_write_iops": 850})
        return v

    def ops_tool_output(self, command: str) -> str:
        """What curve_ops_tool prints for this cluster (CURVE.md's formats)."""
        if command == "chunkserver-list":
            lines = [f"chunkServerID = {c.id}, diskType = nvme, hostIP = 127.0.0.1, "
                     f"port = {c.port}, rwStatus = READWRITE, diskState = DISKNORMAL, "
                     f"onlineState = {'OFFLINE' if c.mode == 'refuse' else 'ONLINE'}, "
                     f"copysetNum = {c.copysets}, mountPoint = local:///data/chunkserver{c.id}, "
                     f"diskCapacity = 39 GB, diskUsed = 1 GB" for c in self.chunkservers]
            off = sum(1 for c in self.chunkservers if c.mode == "refuse")
            n = len(self.chunkservers)
            return "\n".join(lines) + f"\ntotal: {n}, online: {n - off}, unstable: 0, " \
                                      f"offline: {off}\n"
        if command == "copysets-status":
            return ("Copysets are healthy!\ntotal copysets: 100, unhealthy copysets: 0, "
                    "unhealthy_ratio: 0%\n")
        if command == "chunkserver-status":
            off = sum(1 for c in self.chunkservers if c.mode == "refuse")
            n = len(self.chunkservers)
            return f"chunkserver: total num = {n}, online = {n - off}, offline = {off}\n"
        raise ValueError(command)

    # -- serving --

    def _flap(self) -> None:
        # Leaders move and terms rise between any two looks, as in K2.3's election storms.
        donor, taker = self._rng.sample(self.chunkservers, 2)
        moved = self._rng.randint(1, max(1, donor.leaders // 3))
        donor.leaders -= moved
        taker.leaders += moved
        for c in self.chunkservers:
            for k in c.terms:
                if self._rng.random() < 0.3:
                    c.terms[k] += 1

    def respond(self, port: int, path: str) -> tuple[int, str]:
        self.requests += 1
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
            return 200, cs.raft_stat(self.chunkservers)
        return 404, f"Unknown path {path}\n"

    @staticmethod
    def _vars_page(values: dict[str, object], path: str) -> str:
        spec = path.split("?")[0].removeprefix("/vars").strip("/")
        patterns = [p for p in spec.replace(";", ",").split(",") if p]
        lines = [f"{name} : {fmt_var(value)}" for name, value in values.items()
                 if not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)]
        return "\n".join(lines) + "\n"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        port = writer.get_extra_info("sockname")[1]
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            path = request.split(b" ", 2)[1].decode()
            cs = next((c for c in self.chunkservers if c.port == port), None)
            if cs is not None and cs.mode == "slow":
                await asyncio.sleep(self.slow_seconds)
            status, body = self.respond(port, path)
            data = body.encode("utf-8", errors="replace")
            writer.write(f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\n"
                         f"Content-Type: text/plain\r\nContent-Length: {len(data)}\r\n"
                         "Connection: close\r\n\r\n".encode() + data)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    def _listen(self) -> int:
        async def start() -> asyncio.AbstractServer:
            return await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=256)

        server = asyncio.run_coroutine_threadsafe(start(), self._loop).result(5)
        port = server.sockets[0].getsockname()[1]
        self._servers[port] = server
        return port

    def close(self) -> None:
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
