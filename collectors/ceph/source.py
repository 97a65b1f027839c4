"""The Ceph source: runs the commands on a cadence and keeps the last good result of each.

Cheap commands every poll, heavy ones (the PG dump, OSD metadata) less often.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from stormdeck.base.gcpause import gc_paused
from stormdeck.collectors.ceph.connection import CephConnection, CommandError, MgrBusy
from stormdeck.collectors.ceph.mgr import mgr_dropped, parse_mgr_stat
from stormdeck.collectors.ceph.parse import (
    BAD_OUTPUT,
    PER_POOL_MAX_PGS,
    ROUTINE_FLAGS,
    OsdIO,
    OsdMeta,
    OsdUsage,
    count_primaries,
    mgr_modules_problem,
    parse_autoscale_status,
    parse_config_dump,
    parse_config_help,
    parse_config_log,
    parse_features,
    parse_health_slow,
    parse_log_last,
    parse_mgr_modules,
    parse_osd_df,
    parse_osd_dump,
    parse_osd_metadata,
    parse_osd_perf,
    parse_osd_status,
    parse_pools,
    parse_status,
    parse_versions,
)
from stormdeck.collectors.ceph.running import RunningSampler, read_running
from stormdeck.collectors.ceph.usage import audit_tail, parse_df
from stormdeck.collectors.model import (
    Cluster,
    ConfigOption,
    Daemon,
    LogEntry,
    MgrState,
    Partial,
    Pool,
    RunningValue,
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
    # PGs per OSD before the mon refuses a split, and when a down OSD is marked out;
    # mClock's idea of each OSD's capacity (advisors/rules/mclock_capacity.py).
    "mon_max_pg_per_osd", "mon_osd_down_out_interval", "osd_mclock_max_capacity_iops_hdd",
    "osd_mclock_max_capacity_iops_ssd",
)
# Of those, the ones an OSD runs with (not the mons' own, nor those a pool is created
# with): what `config show osd.N` reports, where a value set at runtime or in ceph.conf
# wins over the database's.
RUNNING_OPTIONS = frozenset(
    n for n in WATCHED_OPTIONS if not n.startswith(("mon_", "osd_pool_")))


@dataclass
class _Cached:
    value: Any = None
    at: float | None = None  # monotonic time of the last success; None: never
    error: str | None = None
    epoch: int | None = None  # the osdmap epoch it was fetched at
    digest: bytes | None = None  # of the raw output last parsed


def _digest(raw: bytes) -> bytes:
    # SHA-256 runs on the CPU's SHA extensions where there are some (x86 since 2016,
    # ARMv8): the 128 MB PG dump of a million PGs in 73 ms against BLAKE2b's 151.
    return hashlib.sha256(raw).digest()[:16]


class CephSource:
    """Polls a Ceph cluster through librados. One connection, kept and re-made on failure."""

    name = "ceph"

    # Seconds between runs of each command group; 0 = every poll.
    FAST, SLOW, RARE = 0.0, 10.0, 300.0
    # What changes with an operator's act, not with load: the connected clients' releases
    # (`features`) and the autoscaler's targets, read for advice, not for an incident.
    STATIC = 60.0
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
        # The mgr as this source has seen it: its last known name, its newest answer and
        # since when none serves (wall seconds), for MgrState.
        self._mgr_name: str | None = None
        self._mgr_answered: float | None = None
        self._mgr_down_since: float | None = None
        self._mgr_state: MgrState | None = None
        # The values the OSDs run with, a few OSDs a poll (collectors/ceph/running.py).
        self._running = RunningSampler(tuple(n for n in self.options if n in RUNNING_OPTIONS))
        self._running_seen: tuple[int, tuple[dict[str, dict[str, RunningValue]],
                                             frozenset[str], str | None]] = (
            0, ({}, frozenset(), None))

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
                        with gc_paused():
                            c.value, c.digest = parse(raw), digest
                c.at, c.error, c.epoch = now, None, epoch
            except MgrBusy as exc:  # not sent: the poll says so once for all the mgr's parts
                c.error, c.digest = str(exc), None
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

        # What only the mgr answers is asked only while the mons' mgr map names an active
        # one, and none of our earlier commands still waits for it (docs/mgr-failure.md):
        # a dead mgr costs a poll one wait, not one per command.
        skipped: list[str] = []
        answered: list[str] = []
        gate: list[str] = []  # why no mgr command is sent this poll, once known

        def to_mgr(cmd: dict[str, Any], timeout: float) -> bytes:
            if gate:
                skipped.append(cmd["prefix"])
                raise MgrBusy(f"{cmd['prefix']}: not sent: {gate[0]}")
            try:
                out = self._send("mgr", cmd, timeout)
            except MgrBusy:
                skipped.append(cmd["prefix"])
                raise
            answered.append(cmd["prefix"])
            return out

        def mgr(prefix: str, **kw: Any) -> bytes:
            # Half the timeout: the poll, the mons' commands included, ends within it.
            return to_mgr({"prefix": prefix, **kw}, max(1.0, t / 2))

        # Status first and unguarded: if it fails, the cluster is unreachable.
        try:
            status = parse_status(json.loads(mon("status")))
        except BAD_OUTPUT as exc:
            raise CommandError(f"status: unexpected output ({exc})") from None
        self._cache["status"] = _Cached(status, now)
        r = self._run
        available, name, standbys = r("mgr stat", self.FAST, now, lambda: mon("mgr stat"),
                                      errors, parse=lambda raw: parse_mgr_stat(json.loads(raw))
                                      ) or (None, None, None)
        lane = getattr(self._conn, "mgr", None)
        waiting = lane.pending if lane is not None else None
        if available is False:
            gate.append("no active mgr in the mgr map")
        elif waiting is not None:
            gate.append(f"the mgr has not answered `{waiting[0]}` for "
                        f"{time.monotonic() - waiting[1]:.0f} s")
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
        primaries = r("pgs_brief", self.RARE, now, lambda: to_mgr(
            {"prefix": "pg dump", "dumpcontents": ["pgs_brief"]}, t * 3), errors, epoch,
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
        if self._running.names and dump is not None and not gate and \
                self._running.ready(now):
            hosts = {i: m.host for i, m in (meta or {}).items()}
            up = {f"osd.{i}": hosts.get(i) for i, (is_up, _) in dump["osds"].items() if is_up}
            read_running(self._running, up, now, lambda who: mgr("config show", who=who),
                         errors.append)
        fresh = r("log last", self.FAST, now, lambda: mon(
            "log last", num=self.LOG_FETCH, level="debug", channel="cluster"), errors,
            parse=lambda raw: parse_log_last(json.loads(raw)))
        log = self._log_tail(fresh or ())
        config_log = r("config log", 2.0, now, lambda: mon("config log", num=self.CONFIG_LOG),
                       errors, parse=lambda raw: parse_config_log(json.loads(raw)))
        # Pools' fill (`df`), and who set what lately (the audit channel, kept across polls:
        # every read command is audited too, and pushes the `osd set` out of its tail).
        usage = r("df", self.SLOW, now, lambda: mon("df"), errors,
                  parse=lambda raw: parse_df(json.loads(raw)))
        audit = r("audit", self.FAST, now, lambda: mon(
            "log last", num=self.LOG_FETCH, level="info", channel="audit"), errors,
            parse=lambda raw: parse_log_last(json.loads(raw)))
        if audit is not getattr(self, "_audit_fresh", None):
            self._audit_fresh = audit
            self._audit = audit_tail(getattr(self, "_audit", ()), audit or (), self.LOG_LINES)
        clients = r("features", self.STATIC, now, lambda: mon("features"), errors,
                    parse=parse_features)
        self._targets = r("osd pool autoscale-status", self.STATIC, now,
                          lambda: mgr("osd pool autoscale-status"), errors,
                          parse=lambda raw: parse_autoscale_status(json.loads(raw)))
        if skipped:
            # One line for all the mgr's parts, not one per command not sent.
            errors.append(f"mgr parts not read ({', '.join(dict.fromkeys(skipped))}): "
                          f"{gate[0] if gate else 'an earlier mgr command is unanswered'}")
        mgr_state = self._mgr(available, name, standbys, bool(answered),
                              lane.pending if lane is not None else None, log)
        status = {**status, "client_releases": clients or {}, "log": log,
                  "config_log": config_log or (), "audit": getattr(self, "_audit", ()),
                  "mgr": mgr_state}
        self._usage = usage
        with gc_paused():  # records of every OSD, once per stats period: no cycles
            return self._assemble(status, health, perf, io, df, dump, primaries, pools_raw,
                                  config, meta, versions, helps, errors)

    def _mgr(self, available: bool | None, name: str | None, standbys: int | None,
             answered: bool, waiting: tuple[str, float] | None,
             log: tuple[LogEntry, ...]) -> MgrState:
        """The mgr as this poll saw it; the same record while nothing about it moved."""
        wall = self.wall()
        if answered:
            self._mgr_answered = wall
        if name:
            self._mgr_name = name
        if available is False or waiting is not None:
            # Started during the outage: the mons' log names the mgr they dropped, and when.
            dropped = mgr_dropped(log) if available is False else None
            if dropped is not None and self._mgr_name is None:
                self._mgr_name = dropped[0]
            if self._mgr_down_since is None:
                # The earliest evidence: an unanswered command's sending, the mons dropping
                # it, else this poll.
                seen = [wall - (time.monotonic() - waiting[1]) if waiting is not None
                        else wall]
                if dropped is not None and dropped[0] == self._mgr_name:
                    seen.append(dropped[1])
                self._mgr_down_since = min(seen)
        elif available:
            self._mgr_down_since = None
        state = MgrState(active=self._mgr_name, available=available, standbys=standbys,
                         down_since=self._mgr_down_since,
                         silent=waiting[0] if waiting is not None else None,
                         answered_at=self._mgr_answered)
        if state != self._mgr_state:
            self._mgr_state = state
        return self._mgr_state  # type: ignore[return-value]

    def _filled(self, pools: tuple[Pool, ...], usage: Any) -> tuple[Pool, ...]:
        """Pools with `df`'s figures, made again only when either changed (by identity)."""
        if not usage:
            return pools
        last = getattr(self, "_fill", None)
        if last is not None and last[0] is pools and last[1] is usage:
            return last[2]
        out = tuple(replace(p, stored_bytes=u[0], used_ratio=u[1], max_avail_bytes=u[2])
                    if (u := usage.get(p.name)) is not None else p for p in pools)
        self._fill = (pools, usage, out)
        return out

    def _autoscaled(self, pools: tuple[Pool, ...], targets: Any) -> tuple[Pool, ...]:
        """Pools with the autoscaler's pg_num, made again only when either changed."""
        if not targets:
            return pools
        last = getattr(self, "_scaled", None)
        if last is not None and last[0] is pools and last[1] is targets:
            return last[2]
        out = tuple(replace(p, autoscale_target=targets[p.name]) if p.name in targets else p
                    for p in pools)
        self._scaled = (pools, targets, out)
        return out

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
        if self._running_seen[0] != self._running.version:
            # Made anew only when a value above the database, the OSDs read or a failure's
            # reason moved: most rounds re-read what was known, and nothing downstream moves.
            self._running_seen = (self._running.version, self._running.by_option())
        running = self._running_seen[1]
        options_key = (helps, config, running)
        if self._options is not None and _same_objects(self._options[0], options_key):
            options = self._options[1]
        else:
            options = {}
            above = running[0]
            for name, opt in (helps or {}).items():
                options[name] = replace(opt, values=dict((config or {}).get(name, {})),
                                        running=above.get(name, {}))
            self._options = (options_key, options)
        pools = self._filled(pools, getattr(self, "_usage", None))
        pools = self._autoscaled(pools, getattr(self, "_targets", None))
        ratios = {k: dump[k] for k in ("nearfull_ratio", "backfillfull_ratio", "full_ratio",
                                       "osd_state_flags") if k in dump}
        cluster = Cluster(
            **status, **ratios, checks=checks, slow_ops=slow, slow_ops_daemons=slow_daemons,
            slow_ops_oldest=slow_oldest,
            osd_flags=tuple(f for f in dump["flags"] if f not in ROUTINE_FLAGS),
            require_min_compat_client=dump.get("require_min_compat_client"),
            primary_affinity=dump.get("primary_affinity") or {}, pools=pools,
            config=options, running_read=running[1], running_error=running[2],
            release=release, version=version, versions_mixed=mixed)
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


def _same_objects(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal element by element, each the very same object or an equal plain value.

    The inputs are values parsed from one command output: unchanged output keeps them
    the same objects, so identity says "unchanged" without comparing their insides.
    """
    return all(x is y or (type(x) in _BY_VALUE and x == y) for x, y in zip(a, b, strict=True))


# Small values compared by value: an OSD's row parsed anew from output where other
# rows moved is equal to the last one, and the Daemon made from it is kept.
_BY_VALUE = frozenset({int, float, bool, str, tuple, type(None), OsdIO, OsdUsage, OsdMeta})


_make_osd = _osd_builder()
