"""The immutable Snapshot every view and advisor reads, and the partial snapshots sources make.

Units are SI throughout: seconds, bytes, cores (float), ratios 0..1.
Collectors convert at their boundary; displays convert back. A field is
None when no source could say (unknown is not zero).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from stormdeck.base import pgstate
from stormdeck.collectors.curve_model import CurveCluster, CurvePool, MdsStatus
from stormdeck.collectors.options import ConfigChange, ConfigOption, RunningValue

# Re-exported: the model is where readers look for every type a Snapshot holds.
__all__ = ["ConfigChange", "ConfigOption", "CurveCluster", "CurvePool", "MdsStatus",
           "RunningValue"]

T = TypeVar("T")

# ---- per daemon -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Daemon:
    """A Ceph OSD ("osd.12") or a Curve chunkserver ("10.0.0.3:8200")."""

    id: str
    kind: str  # "osd" | "chunkserver"
    host: str | None = None
    devices: tuple[str, ...] | None = None  # kernel names: ("sdb",), ("nvme0n1",)
    up: bool | None = None
    in_: bool | None = None
    objectstore: str | None = None
    device_class: str | None = None
    pid: int | None = None
    cores_used: float | None = None
    cores_allowed: float | None = None
    # True where cores_allowed comes from a cpuset narrower than the host or a CPU quota
    # someone set; False: the OSD may run on every CPU of its host (nothing pinned it).
    cpu_limit_explicit: bool | None = None
    # Of the CFS periods since the last poll, the share in which its CPU quota throttled
    # it (cgroup cpu.stat nr_throttled / nr_periods); 0.0 without a quota.
    cpu_throttled: float | None = None
    cpu_throttled_time: float | None = None  # throttled seconds per second, same cgroup
    # The systemd unit it runs in, as its cgroup says ("ceph-FSID@osd.3.service" under
    # cephadm, "ceph-osd@3.service" from packages), or None when it runs in none.
    unit: str | None = None
    threads: int | None = None
    rss_bytes: int | None = None
    read_iops: float | None = None
    write_iops: float | None = None
    read_bps: float | None = None
    write_bps: float | None = None
    commit_latency: float | None = None  # Ceph, seconds
    apply_latency: float | None = None
    op_read_latency: float | None = None
    op_write_latency: float | None = None
    raft_append_latency: float | None = None  # Curve, seconds
    raft_send_latency: float | None = None
    write_latency: float | None = None
    pgs: int | None = None
    primary_pgs: int | None = None
    leaders: int | None = None
    copysets: int | None = None
    utilization: float | None = None  # of its capacity, 0..1
    has_slow_ops: bool | None = None  # Ceph names the daemons, but counts only cluster-wide
    # When the monitors last marked it down (`osd dump` osd_xinfo down_stamp), while it is
    # down; None while up, or when unknown (recordings made before this field).
    down_since: float | None = None
    # Curve chunkservers: leaders as the MDS's topology and heartbeats see them,
    # raft and write latency tails, bthread saturation, signs of elections.
    curve_id: int | None = None
    leaders_mds: int | None = None
    leaders_heartbeat: int | None = None
    raft_append_latency_p99: float | None = None
    raft_append_latency_max: float | None = None
    write_latency_p99: float | None = None
    bthread_usage: float | None = None  # busy workers, in cores
    bthread_workers: int | None = None
    leader_delta: int | None = None  # change in leaders since the previous poll
    # Whose count `leaders` is: "chunkserver" (its own bvar, live) or "mds" (the leader
    # MDS's topology, refreshed every 10 s), so a delta is judged against the right clock.
    leaders_from: str | None = None
    term_rises: int | None = None  # copysets whose raft term rose since the last look
    # Of those rises, the ones no MDS TransferLeader operator explains: elections.
    elections: int | None = None
    candidates: int | None = None  # copysets in raft state CANDIDATE at the last look
    online: bool | None = None
    config: Mapping[str, str] | None = None  # daemon-local config, e.g. Curve conf keys

    @property
    def iops(self) -> float | None:
        if self.read_iops is None and self.write_iops is None:
            return None
        return (self.read_iops or 0.0) + (self.write_iops or 0.0)

    @property
    def down(self) -> bool:
        """The cluster says it serves nothing now: a Ceph OSD down, a Curve chunkserver
        offline. Its own figures (latency, IOPS, CPU) are then from before, not current."""
        return self.up is False or self.online is False


# ---- per disk ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Disk:
    """A block device on a host, as iostat sees it, with its cache state and daemons."""

    host: str
    name: str  # kernel name: "sdb", "nvme0n1", "loop0"
    util: float | None = None  # 0..1 of wall time busy
    read_iops: float | None = None
    write_iops: float | None = None
    read_bps: float | None = None
    write_bps: float | None = None
    read_await: float | None = None  # seconds per completed read
    write_await: float | None = None
    queue_depth: float | None = None  # average requests in flight (aqu-sz)
    rotational: bool | None = None
    write_cache: str | None = None  # the kernel's view: "write back" | "write through"
    device_cache: str | None = None  # the device's own, where readable (scsi_disk cache_type)
    model: str | None = None
    transport: str | None = None  # "nvme", "sata", "sas", "scsi", "virtio", "loop", ...
    virtual: bool = False  # loop, dm, md, rbd, zram...: its "cache" is something else's
    daemons: tuple[str, ...] = ()
    # What udev knows (None where no udev runs: containers, chroots). A recording made
    # before these fields existed reads back with them None.
    serial: str | None = None  # the drive's own (ID_SERIAL_SHORT), as on its label
    wwn: str | None = None  # world wide name (ID_WWN_WITH_EXTENSION, else ID_WWN)
    bus: str | None = None  # udev's ID_BUS: "ata", "scsi", "usb", "nvme"...
    rpm: int | None = None  # ATA rotation rate; 0 = solid state (ID_ATA_ROTATION_RATE_RPM)
    links: tuple[str, ...] = ()  # /dev/disk/by-id/..., /dev/disk/by-path/... (udev's)
    # A loop device's: the whole disks its I/O lands on (those under its backing file's
    # filesystem). Those disks carry its daemons too: their cache and limit are theirs.
    backing: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return disk_key(self.host, self.name)


def disk_key(host: str | None, name: str) -> str:
    """How a disk is named everywhere (Snapshot.disks, findings, changes): 'host:/dev/sdb'."""
    return f"{host}:/dev/{name}"


# ---- per host ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Host:
    """A host whose daemons and disks are shown: what limits it besides the daemons."""

    name: str
    cpus: int | None = None  # online logical CPUs
    cpu_busy: float | None = None  # 0..1 of all CPUs over the last interval
    iowait: float | None = None  # 0..1
    load1: float | None = None
    mem_total: int | None = None  # bytes of RAM (psutil.virtual_memory().total)
    # Per NIC: its counters of receive/send errors and drops since boot, its MTU and link
    # state (psutil's net_io_counters and net_if_stats); loopback and virtual ones left out.
    nics: Mapping[str, Nic] = field(default_factory=dict)
    tuned_profile: str | None = None  # None: unknown; "" : tuned not installed or no profile
    udev: bool | None = None  # False: no udev database here (a container), disks from sysfs
    disk_events: tuple[DiskEvent, ...] = ()  # disks that appeared or vanished since the last poll


@dataclass(frozen=True, slots=True)
class Nic:
    """One network interface's error and drop counters (since boot), MTU and link state."""

    name: str
    errin: int = 0
    errout: int = 0
    dropin: int = 0
    dropout: int = 0
    mtu: int | None = None
    up: bool | None = None
    speed: int | None = None  # Mbit/s; 0 or None: unknown


@dataclass(frozen=True, slots=True)
class DiskEvent:
    """A whole disk that appeared on a host or vanished from it (udev's hot-plug news)."""

    time: float
    name: str  # kernel name: "sdc", "loop3"
    appeared: bool
    detail: str = ""  # what it is, for a disk that appeared: size, model, serial


# ---- cluster -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HealthCheck:
    code: str  # "SLOW_OPS", "PG_AVAILABILITY", ...
    severity: str  # "HEALTH_WARN" | "HEALTH_ERR"
    summary: str
    count: int | None = None
    detail: tuple[str, ...] = ()
    muted: bool = False


@dataclass(frozen=True, slots=True)
class Pool:
    id: int
    name: str
    type: str  # "replicated" | "erasure"
    size: int | None
    min_size: int | None
    pg_num: int
    pgp_num: int | None = None
    crush_rule: int | None = None
    ec_profile: str | None = None
    ec_k: int | None = None
    ec_m: int | None = None
    stripe_unit: int | None = None  # bytes
    flags: tuple[str, ...] = ()
    applications: tuple[str, ...] = ()
    read_balance_score: float | None = None  # Reef+; may be inf or nan
    primaries: Mapping[str, int] = field(default_factory=dict)  # osd id -> acting primaries
    # osd id -> this pool's PGs whose acting set holds it (the read balancer's pgs_by_osd)
    pgs_by_osd: Mapping[str, int] = field(default_factory=dict)
    pg_num_target: int | None = None  # where pg_num is heading while PGs split or merge
    autoscale_mode: str | None = None  # "on" | "warn" | "off"
    # The pg_num the autoscaler would give the pool (`osd pool autoscale-status`
    # pg_num_final); None when not asked or the mgr module is off.
    autoscale_target: int | None = None
    # The erasure-code profile's plugin, technique, failure domain and device class.
    ec_plugin: str | None = None
    ec_technique: str | None = None
    ec_failure_domain: str | None = None
    ec_device_class: str | None = None
    # Every key of the erasure-code profile as `osd dump` gives it (crush-root too), so a
    # profile copied from it keeps them all.
    ec_profile_settings: Mapping[str, str] = field(default_factory=dict)
    # `df`: what the pool stores (before replication), and its share of what it may hold:
    # percent_used = stored / (stored + max_avail), max_avail counting the full ratio.
    stored_bytes: int | None = None
    used_ratio: float | None = None  # 0..1
    max_avail_bytes: int | None = None

    @property
    def ec_optimizations(self) -> bool:
        return "ec_optimizations" in self.flags


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One line of the cluster log, as `ceph -w` shows it."""

    stamp: float  # epoch seconds
    seq: int
    who: str  # "mon.a", "osd.3"
    priority: str  # "[INF]", "[WRN]", "[ERR]", "[DBG]"
    message: str
    channel: str = "cluster"


@dataclass(frozen=True, slots=True)
class MgrState:
    """The active mgr, as the mons' mgr map and the console's own commands to it see it.

    What only the mgr answers (PG states in detail, `osd perf`, `osd df`, the PG dump) is
    as old as `answered_at` while it is down or silent; what the mons answer stays live.
    """

    active: str | None = None  # the active mgr's name; the last one known while none is
    available: bool | None = None  # the mgr map says an active mgr serves commands
    standbys: int | None = None
    # Since when (wall seconds) the console has seen no mgr serve: an unanswered command's
    # sending, else the first poll whose mgr map had none. The mgr map keeps no time of
    # failure, so this is the console's own evidence, never earlier than it allows.
    down_since: float | None = None
    silent: str | None = None  # the command a mgr has not answered yet, if one
    answered_at: float | None = None  # the newest mgr answer (wall seconds)

    @property
    def serving(self) -> bool:
        return bool(self.available) and self.silent is None


@dataclass(frozen=True, slots=True)
class Cluster:
    fsid: str | None = None
    health: str | None = None  # HEALTH_OK | HEALTH_WARN | HEALTH_ERR
    checks: tuple[HealthCheck, ...] = ()
    num_pgs: int | None = None
    pg_states: Mapping[str, int] = field(default_factory=dict)  # "active+clean" -> count
    # PGs having each state word ("active", "clean", "peering", ...). Prometheus
    # only knows these; librados' pg_states give them too (pg_flags_from_states).
    pg_flags: Mapping[str, int] = field(default_factory=dict)
    slow_ops: int | None = None
    slow_ops_daemons: tuple[str, ...] = ()
    slow_ops_oldest: float | None = None  # seconds the oldest slow op has been blocked
    osd_flags: tuple[str, ...] = ()
    # Flags set on one OSD (`ceph osd add-noout osd.3`) or on a CRUSH node or device
    # class (`ceph osd set-group noout host1`): "osd.3" / "host1" / "class:hdd" -> flags.
    osd_state_flags: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The monitors' fullness ratios (`osd dump`): nearfull warns, backfillfull stops
    # backfill into the OSD, full stops writes.
    nearfull_ratio: float | None = None
    backfillfull_ratio: float | None = None
    full_ratio: float | None = None
    audit: tuple[LogEntry, ...] = ()  # the audit channel's newest entries, the newest last
    osdmap_epoch: int | None = None
    require_min_compat_client: str | None = None  # "luminous", "reef", ...
    # Clients connected now, by the release their features say (`ceph features`):
    # {"luminous": 4, "reef": 2}; empty when not asked. Later clients are not in it.
    client_releases: Mapping[str, int] = field(default_factory=dict)
    # osd id -> primary affinity, for OSDs whose affinity is not 1 (`osd dump`)
    primary_affinity: Mapping[str, float] = field(default_factory=dict)
    num_osds: int | None = None
    num_up_osds: int | None = None
    num_in_osds: int | None = None
    pools: tuple[Pool, ...] = ()
    config: Mapping[str, ConfigOption] = field(default_factory=dict)
    # The OSDs whose running values were read (`config show`; ConfigOption.running), and
    # why the newest read failed, if one did.
    running_read: frozenset[str] = frozenset()
    running_error: str | None = None
    release: str | None = None  # "pacific", "reef", ...
    version: str | None = None  # "16.2.15"; the oldest running, if mixed
    versions_mixed: bool = False
    client_read_iops: float | None = None
    client_write_iops: float | None = None
    client_read_bps: float | None = None
    client_write_bps: float | None = None
    recovering_bps: float | None = None
    recovering_objects_per_sec: float | None = None
    degraded_objects: int | None = None
    misplaced_objects: int | None = None
    num_objects: int | None = None  # `status` pgmap: objects stored, before replication
    log: tuple[LogEntry, ...] = ()  # the newest last
    config_log: tuple[ConfigChange, ...] = ()  # the newest last
    mgr: MgrState | None = None  # None: a source that does not see the mgr map

    def pgs_in(self, *words: str) -> int:
        """PGs whose state contains any of `words` ("peering", "degraded", ...)."""
        if self.pg_states:
            return pgstate.count_with(self.pg_states, *words)
        # Per-word counts overlap, so with several words this is a lower bound.
        return max((self.pg_flags.get(w, 0) for w in words), default=0)

    @property
    def pgs_not_clean(self) -> int | None:
        """PGs not healthy as base/pgstate.py judges them (not exactly active+clean, give
        or take scrubbing and snap trimming): stale+active+clean counts here."""
        if self.num_pgs is None:
            return None
        if self.pg_states:
            return pgstate.count_unhealthy(self.pg_states)
        return pgstate.unhealthy_from_flags(self.num_pgs, self.pg_flags)

    @property
    def pgs_inactive(self) -> int | None:
        """PGs not known to be active now (a stale PG's "active" is old news)."""
        if self.num_pgs is None:
            return None
        if self.pg_states:
            return sum(n for state, n in self.pg_states.items() if not pgstate.is_active(state))
        if "active" not in self.pg_flags:
            return None
        return max(self.num_pgs - self.pg_flags["active"], self.pg_flags.get("stale", 0))

    def pgs_by_problem(self) -> dict[str, int]:
        """Unhealthy PGs by state, worst-first order kept by count: {"stale+active+clean": 53}."""
        return {state: n for state, n in sorted(self.pg_states.items(), key=lambda kv: -kv[1])
                if n and not pgstate.is_healthy(state)}


def pg_flags_from_states(states: Mapping[str, int]) -> dict[str, int]:
    flags: dict[str, int] = {}
    for state, n in states.items():
        for word in state.split("+"):
            flags[word] = flags.get(word, 0) + n
    return flags


# ---- sources and the whole ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SourceHealth:
    name: str
    ok: bool
    last_success: float | None = None  # epoch seconds
    error: str | None = None
    stale: bool = False  # values shown are from last_success, not from now
    poll_seconds: float | None = None  # how long the last poll took
    # How the source reads, where it says (Prometheus: "recording rules" or "raw queries").
    mode: str | None = None


@dataclass(frozen=True, slots=True)
class Partial:
    """What one source saw in one poll. Fields it cannot see stay None/empty."""

    source: str
    time: float
    cluster: Cluster | None = None
    daemons: Mapping[str, Daemon] = field(default_factory=dict)
    disks: Mapping[str, Disk] = field(default_factory=dict)  # keyed by Disk.key
    errors: tuple[str, ...] = ()  # non-fatal: one command failed, the rest stand
    curve: CurveCluster | None = None
    hosts: Mapping[str, Host] = field(default_factory=dict)


R = TypeVar("R")


def row_maker(cls: type[T], key: tuple[str, ...], fixed: Mapping[str, Any],
              positional: tuple[str, ...], named: tuple[str, ...]) -> Callable[..., T] | None:
    """A maker of `cls` records as `make(k, extra, *values)`: `k` the `key` field's value
    (a tuple of them for several), then a dict holding any of `named` (a missing one
    keeps its default), then `positional` in order; `fixed` the same for every record.
    It sets the slots
    as the dataclass's own __init__ would, minus the keyword parsing and per-field
    lookups: a fleet read makes 10,000 Daemons and 10,000 Disks from columns (half
    the time of `cls(**fields)`, tested against it). None where `cls` is not a plain
    frozen record of defaults (a default factory, a __post_init__): use its __init__."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields]
    given = {*key, *fixed, *positional, *named}
    if len(given) != len(key) + len(fixed) + len(positional) + len(named) or \
            not given <= set(names) or hasattr(cls, "__post_init__") or \
            any(f.default_factory is not dataclasses.MISSING for f in fields) or \
            any(f.default is dataclasses.MISSING for f in fields if f.name not in given):
        return None
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    args = [f"v{i}" for i in range(len(positional))]
    lines = [f"def make(k, ex, {', '.join(args)}):" if args else "def make(k, ex):",
             "    self = _new(_cls)", "    get = ex.get"]
    for f in fields:
        env[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        env[f"_d_{f.name}"] = f.default
        if f.name in key:
            value = "k" if len(key) == 1 else f"k[{key.index(f.name)}]"
        elif f.name in fixed:
            env[f"_x_{f.name}"] = fixed[f.name]
            value = f"_x_{f.name}"
        elif f.name in positional:
            value = args[positional.index(f.name)]
        elif f.name in named:
            value = f"get({f.name!r}, _d_{f.name})"
        else:
            value = f"_d_{f.name}"
        lines.append(f"    _set_{f.name}(self, {value})")
    lines.append("    return self")
    exec("\n".join(lines), env)  # code made above from the dataclass's field names only
    return env["make"]  # type: ignore[no-any-return]


class Records(Mapping[str, R]):
    """A snapshot's daemons or disks. What they say never changes; how they are stored
    may: the History packs an older snapshot's into columns (collectors/packing.py)
    through compact(), so the Snapshot that holds them is never touched. Each snapshot
    has its own (Snapshot.__post_init__), so packing an old one leaves a newer one, which
    may share the same mapping underneath, whole."""

    # get, keys, values and items are the stored mapping's own (bound per instance, as
    # it is stored now): a view reads thousands of records a frame, at the dict's speed.
    __slots__ = ("_m", "get", "items", "keys", "values")

    def __init__(self, records: Mapping[str, R]) -> None:
        self._hold(records.inner if isinstance(records, Records) else records)

    def _hold(self, m: Mapping[str, R]) -> None:
        self._m = m
        self.get, self.keys, self.values, self.items = m.get, m.keys, m.values, m.items

    @property
    def inner(self) -> Mapping[str, R]:
        """What they are stored in now: a dict, or a packing of one."""
        return self._m

    def compact(self, pack: Callable[[Mapping[str, R]], Mapping[str, R]]) -> None:
        """Store them as `pack` does (an equal mapping, another representation)."""
        self._hold(pack(self._m))

    def __getitem__(self, key: str) -> R:
        return self._m[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._m)

    def __len__(self) -> int:
        return len(self._m)

    def __contains__(self, key: object) -> bool:
        return key in self._m

    def __eq__(self, other: object) -> bool:
        return self._m == (other.inner if isinstance(other, Records) else other)

    __hash__ = None  # type: ignore[assignment]  # as a dict's

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._m!r})"

    def __reduce__(self) -> Any:
        return (type(self), (dict(self._m),))


class Daemons(Records[Daemon]):
    """A snapshot's daemons, keyed by id (see Records)."""

    __slots__ = ()


class Disks(Records[Disk]):
    """A snapshot's disks, keyed by Disk.key (see Records): ~10,000 at 10,000 OSDs."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Snapshot:
    time: float
    cluster: Cluster | None
    daemons: Mapping[str, Daemon]
    disks: Mapping[str, Disk]
    sources: Mapping[str, SourceHealth]
    curve: CurveCluster | None = None
    hosts: Mapping[str, Host] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Made, not changed: each snapshot holds its own Daemons and Disks (see Records).
        object.__setattr__(self, "daemons", Daemons(self.daemons))
        object.__setattr__(self, "disks", Disks(self.disks))


# ---- merging ------------------------------------------------------------------


def merge_records(records: Iterable[T]) -> T:
    """Field-wise merge: the first non-None (non-empty) value wins, in source priority order."""
    items = list(records)
    if len(items) == 1:
        return items[0]
    first = items[0]
    values: dict[str, Any] = {}
    for f in dataclasses.fields(first):  # type: ignore[arg-type]
        for item in items:
            v = getattr(item, f.name)
            if v is not None and v != () and v != {}:
                values[f.name] = v
                break
        else:
            values[f.name] = getattr(first, f.name)
    return type(first)(**values)


# ---- to JSON -----------------------------------------------------------------


def plain(value: Any) -> Any:
    """Dataclasses, mappings and tuples as JSON-ready values (inf and nan as text)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name.rstrip("_"): plain(getattr(value, f.name))
               for f in dataclasses.fields(value)}
        for prop in ("iops", "key", "pgs_not_clean", "ec_optimizations"):
            if hasattr(type(value), prop):
                out[prop] = plain(getattr(value, prop))
        return out
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, frozenset):
        return sorted(plain(v) for v in value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no inf/nan; keep the fact, as text
    return value


def to_json_dict(snapshot: Snapshot) -> dict[str, Any]:
    return plain(snapshot)
