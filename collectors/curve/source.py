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

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from stormdeck.collectors.curve.connection import Connection, run_tool, why_failed
from stormdeck.collectors.curve.metrics import (
    chunkserver_daemon,
    int_value,
    mds_chunkserver_daemon,
    mds_chunkservers,
    mds_listen_addr,
    mds_operator_pools,
    mds_pools,
    mds_transfers,
)
from stormdeck.collectors.curve.parse import (
    TOPOLOGY_SERVICE,
    ChunkserverInfo,
    CurveError,
    LogicalPoolInfo,
    RaftNode,
    Value,
    bvar_name,
    chunkserver_prefix,
    parse_chunkserver_status,
    parse_cli_chunkservers,
    parse_cli_copysets_status,
    parse_cli_logical_pools,
    parse_copysets_status,
    parse_mds_chunkservers,
    parse_mds_logical_pools,
    parse_mds_physical_pools,
    parse_ops_chunkserver_list,
    parse_ops_logical_pools,
    parse_raft_stat,
)
from stormdeck.collectors.model import CurveCluster, CurvePool, Daemon, MdsStatus, Partial

# What a chunkserver poll asks /vars for (brpc matches these wildcards).
CHUNKSERVER_VARS = ("chunkserver_*", "raft_storage_append_entries*", "raft_send_entries*",
                    "process_cpu_usage", "process_memory_resident", "process_thread_count",
                    "bthread_worker_usage", "bthread_worker_count")
MDS_VARS = ("topology_metric_*", "mds_scheduler_metric_*", "curve_version", "mds_status",
            "mds_config_mds_listen_addr")
TOPOLOGY = "the MDS's topology service"  # how the pool ids' and addresses' source is named


@dataclass
class _Call:
    """One tool call's latest answer: its value, or, when it failed, None and why."""

    value: object = None
    at: float | None = None
    error: str | None = None


@dataclass
class _Memory:
    """What the source remembers between polls, to see elections."""

    # Each chunkserver's last leader count, by whose count it is ("chunkserver" or "mds")
    # and its id where known (its address else): an address that joins later keeps it.
    leaders: dict[tuple[str, int | str], int] = field(default_factory=dict)
    terms: dict[str, dict[str, int]] = field(default_factory=dict)
    raft_at: dict[str, float] = field(default_factory=dict)
    calls: dict[str, _Call] = field(default_factory=dict)
    # Where the chunkservers are, from the last listing that answered: addresses to
    # poll, not values to show (a failed listing leaves online states unknown).
    located: dict[str, ChunkserverInfo] = field(default_factory=dict)
    transfers: dict[str, float] = field(default_factory=dict)  # raft group -> last seen
    groups_pool: set[int] = field(default_factory=set)  # pool ids of the raft groups seen
    rpc: dict[str, _Call] = field(default_factory=dict)  # the MDS's topology service calls
    pool_ids: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (id, from)


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
                 timeout: float = 2.0, concurrency: int = 32,
                 schedules: Callable[[], Sequence[tuple[float, float | None]]] | None = None
                 ) -> None:
        if not mds and not chunkservers and not ops_tool and not curve_cli:
            raise ValueError("a Curve source needs MDS or chunkserver addresses, or a tool")
        self.mds = list(mds)
        self.chunkservers = list(chunkservers)
        self.ops_tool = list(ops_tool) if ops_tool else None
        self.curve_cli = list(curve_cli) if curve_cli else None
        self.timeout = timeout
        self._pool = ThreadPoolExecutor(max_workers=max(1, concurrency),
                                        thread_name_prefix="curve-http")
        self.conn = Connection(timeout)
        self._mem = _Memory()
        # When stormdeck's own leader schedules ran (the caller reads its journal): stamped
        # on each poll's cluster, so that what the rules judge travels with the snapshot.
        self.schedules = schedules
        # Clocks, replaceable so that a test can step a session's time as Curve would live
        # it, whatever the speed of the host it runs on.
        self.clock: Callable[[], float] = time.monotonic
        self.wall: Callable[[], float] = time.time

    @property
    def poll_timeout(self) -> float:
        # MDS roles, the leader's vars, then chunkservers and their raft pages,
        # each step bounded by one request timeout; the tools by five each.
        return self.timeout * 4 + (self.timeout * 20 if self.ops_tool or self.curve_cli else
                                   self.timeout * 3 if self.mds else 0)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.conn.close()

    # -- endpoints --

    def _mds_role(self, addr: str) -> MdsStatus:
        try:
            v = self.conn.fetch_vars(addr, ["mds_status"])
        except (OSError, CurveError) as exc:
            return MdsStatus(addr, None, why_failed(exc, self.timeout))
        role = v.get("mds_status")
        return MdsStatus(addr, role if isinstance(role, str) else None,
                         None if isinstance(role, str) else "no mds_status bvar")

    # -- tools --

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
            rc, out, err = run_tool(argv, self.timeout * 5)
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
        if listed is None and not (self.ops_tool or self.curve_cli):
            slot = self._mem.rpc.get("GetChunkServerInCluster")
            listed = slot.value if slot is not None else None
        return listed if isinstance(listed, list) else None

    def _rpc(self, addr: str, method: str, body: object, parse: Callable[[str], object],
             now: float, key: str | None = None) -> object:
        """One TopologyService call, at most every TOOL_EVERY; its last answer, or None."""
        slot = self._mem.rpc.setdefault(key or method, _Call())
        if slot.at is not None and now - slot.at < self.TOOL_EVERY:
            return slot.value
        slot.at = now
        try:
            status, text = self.conn.post_json(addr, TOPOLOGY_SERVICE + method, body)
            if status != 200:
                line = text.strip().splitlines()[:1]
                raise CurveError(f"{method}: HTTP {status}" + (f" ({line[0][:120]})"
                                                               if line else ""))
            slot.value, slot.error = parse(text), None
        except CurveError as exc:
            slot.value, slot.error = None, str(exc)
        return slot.value

    def _topology(self, mds_vars: Mapping[str, Value], now: float) -> None:
        """With no tool to list them, the chunkservers' addresses and the pools' ids from
        the leader MDS's own topology service, on its main port (mds.listen.addr)."""
        if self.ops_tool or self.curve_cli or not mds_vars:
            return
        addr = mds_listen_addr(mds_vars)
        if addr is None:
            self._mem.rpc.setdefault("ListPhysicalPool", _Call()).error = (
                "the leader MDS does not show its mds.listen.addr")
            return
        physical = self._rpc(addr, "ListPhysicalPool", {}, parse_mds_physical_pools, now)
        if not isinstance(physical, list):
            # A port that does not answer costs a timeout a call: one is enough to know.
            return
        if physical:
            pools: list[LogicalPoolInfo] = []
            for pid in physical:
                got = self._rpc(addr, "ListLogicalPool", {"physicalPoolID": pid},
                                parse_mds_logical_pools, now, key=f"ListLogicalPool {pid}")
                pools += got if isinstance(got, list) else []
            for p in pools:
                self._mem.pool_ids[bvar_name(p.name)] = (p.id, f"{TOPOLOGY} at {addr}")
        listed = self._rpc(addr, "GetChunkServerInCluster", {}, parse_mds_chunkservers, now)
        if isinstance(listed, list):
            self._mem.located = {c.addr: c for c in listed}

    def _topology_error(self) -> str | None:
        errors = [c.error for c in self._mem.rpc.values() if c.error is not None]
        return errors[0] if errors else None

    def _pool_ids(self, pools: tuple[CurvePool, ...], mds_vars: Mapping[str, Value]
                  ) -> tuple[dict[str, int], dict[str, str]]:
        """Mangled pool name -> logical pool id, and where each came from (or why not).

        The MDS's per-pool series are named by the pool's NAME
        (topology_metric_logical_pool_<name>_*, src/mds/topology/topology_metric.h), so
        the id comes from: the tools' pool listing; the MDS's topology service; with one
        pool in the series, the pool id its scheduler's operators name
        (mds_scheduler_metric_copyset_<pool id>_<copyset id>, while any is in flight) or
        the raft groups of the copysets the chunkservers hold (pool << 32 | copyset).
        An id once learned is kept: a pool keeps its id for its life.
        """
        listed = self._value("curve bs list logical-pool")
        tool = "curve bs list logical-pool"
        if listed is None:
            listed, tool = self._value("logical-pool-list"), "curve_ops_tool logical-pool-list"
        known = self._mem.pool_ids
        if isinstance(listed, list):
            for p in listed:
                known[bvar_name(p.name)] = (p.id, tool)
        if len(pools) == 1 and pools[0].name not in known:
            named = mds_operator_pools(mds_vars)
            if len(named) == 1:
                known[pools[0].name] = (next(iter(named)),
                                        "the operators its MDS scheduler shows in flight")
            elif len(self._mem.groups_pool) == 1:
                known[pools[0].name] = (next(iter(self._mem.groups_pool)),
                                        "the raft groups of its copysets")
        ids, where = {}, {}
        for p in pools:
            if p.name in known:
                ids[p.name], where[p.name] = known[p.name]
            else:
                why = self._topology_error()
                where[p.name] = (
                    "the MDS names its pools' series by name, not id"
                    + (f"; {TOPOLOGY} did not answer ({why})" if why else "")
                    + ("" if len(pools) == 1 else "; with several pools no operator or raft "
                       "group tells which id is whose")
                    + " (give --curve-ops-tool or --curve-cli, or let this host reach the "
                    "MDS's main port)")
        return ids, where

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
        v = self.conn.fetch_vars(addr, CHUNKSERVER_VARS)
        if not any(k.startswith(chunkserver_prefix(addr)) for k in v):
            raise CurveError("answers, but not as the chunkserver at this address")
        raft = None
        if with_raft:
            try:
                status, body = self.conn.get(addr, "/raft_stat?console=1")
                if status == 200:
                    raft = parse_raft_stat(body)
            except (OSError, CurveError):
                raft = None  # the page is optional; leader counts still show elections
        return chunkserver_daemon(addr, v, curve_id), raft

    # -- the poll --

    def poll(self) -> Partial:
        now = self.clock()
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
                mds_vars = self.conn.fetch_vars(leader, MDS_VARS)
            except (OSError, CurveError) as exc:
                endpoint_errors[leader] = why_failed(exc, self.timeout)
        elif self.mds:
            errors.append("no MDS says it is the leader")
        self._topology(mds_vars, now)
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
                endpoint_errors[addr] = why_failed(exc, self.timeout)
                # What the MDS knows of it still shows, marked as the MDS's count.
                d = replace(mds_chunkserver_daemon(ids[addr], mds), id=addr,
                            host=addr.rpartition(":")[0], read_iops=None, write_iops=None,
                            read_bps=None, write_bps=None) if mds else Daemon(
                    id=addr, kind="chunkserver", host=addr.rpartition(":")[0],
                    curve_id=ids[addr])
                raft = None
            daemons[addr] = self._with_history(d, raft, info_now.get(addr), known.get(addr),
                                               mds, now)
        # The chunkservers the MDS names that no address stands for: a row each, by id.
        joined = {i for i in ids.values() if i is not None}
        lone = sorted(i for i in per_id if i not in joined)
        unmatched = [a for a in addrs if ids[a] is None]
        if lone and unmatched:
            # Addresses whose ids are unknown: a row by id beside them could be the same
            # chunkserver twice, so none is made; said only where some surely lack a row.
            if len(lone) > len(unmatched):
                errors.append(
                    f"at least {len(lone) - len(unmatched)} of the chunkservers the MDS names "
                    f"have no row: the {len(unmatched)} addresses given have no known id to "
                    f"match the MDS's by ({TOPOLOGY} or --curve-ops-tool/--curve-cli gives "
                    "the ids)")
        elif lone:
            for i in lone:
                d = mds_chunkserver_daemon(i, per_id[i])
                daemons[d.id] = self._with_history(d, None, None, None, {}, now)
        answered = sum(1 for r in roles if r.error is None) + (len(addrs) - sum(
            1 for a in addrs if a in endpoint_errors))
        if answered == 0 and (self.mds or addrs):
            raise CurveError("no Curve endpoint answered: " + "; ".join(
                f"{a}: {e}" for a, e in list(endpoint_errors.items())[:4]))
        silent = sum(1 for a in addrs if a in endpoint_errors)
        if silent:
            errors.append(f"{silent} of {len(addrs)} chunkservers did not answer")
        cluster = self._cluster(roles, leader, mds_vars, endpoint_errors, now)
        return Partial(source=self.name, time=self.wall(), daemons=daemons, curve=cluster,
                       errors=tuple(errors))

    def _with_history(self, d: Daemon, raft: dict[str, RaftNode] | None,
                      info: ChunkserverInfo | None, located: ChunkserverInfo | None,
                      mds: Mapping[str, int], now: float) -> Daemon:
        m = self._mem
        delta = None
        whose = d.leaders_from or "chunkserver"
        if d.leaders is not None:
            # Keyed by whose count and the chunkserver's id where known: a chunkserver
            # first known by id keeps its history when its address joins, and a live
            # count is never compared with the MDS's 10 s old one.
            key = (whose, d.curve_id if d.curve_id is not None else d.id)
            prev = m.leaders.get(key)
            delta = d.leaders - prev if prev is not None else None
            m.leaders[key] = d.leaders
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
            candidates=candidates, leaders_from=whose if d.leaders is not None else None,
            # From this poll's listing only: a listing that failed says nothing now.
            online=info.online if info is not None else d.online,
            device_class=where.disk_type if where is not None else d.device_class,
            leaders_mds=mds.get("leadernum", d.leaders_mds), leaders_heartbeat=mds.get(
                "leader_count_from_heartbeat", d.leaders_heartbeat),
            copysets=mds.get("copysetnum", info.copysets if info else d.copysets))

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
        ids, ids_from = self._pool_ids(pools, v)
        pools = tuple(replace(p, pool_id=ids.get(p.name, p.pool_id)) for p in pools)
        recent = tuple(sorted(g for g, at in m.transfers.items()
                              if now - at <= self.TRANSFER_MEMORY))
        own: tuple[tuple[float, float | None], ...] = ()
        if self.schedules is not None:
            try:
                own = tuple(self.schedules())
            except Exception:  # a journal that does not read explains nothing
                own = ()
        return CurveCluster(
            mds=tuple(roles), leader_mds=leader, pools=pools,
            version=version if isinstance(version, str) else None,
            operators=int_value(v.get("mds_scheduler_metric_operator_num")),
            transfer_leader_ops=int_value(v.get("mds_scheduler_metric_transfer_leader_num")),
            chunkservers_online=online, chunkservers_offline=offline,
            copysets_total=copysets[1] if copysets else None,
            copysets_unhealthy=copysets[2] if copysets else None,
            endpoint_errors=endpoint_errors, transfer_copysets=recent,
            tool_errors={name: slot.error for name, slot in m.calls.items()
                         if slot.error is not None},
            own_schedules=own, pool_ids_from=ids_from)
