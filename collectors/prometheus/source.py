"""The Prometheus source: the fleet view through PromQL, for a console far from the OSD hosts.

It reads what ceph-mgr's prometheus module (9283), ceph-exporter (9926,
Reef+), node_exporter and stormdeck's own exporter publish, and fills the
same Snapshot model as librados and the host source. Every field is one
PromQL expression, overridable, so a site's recording rules or relabelled
series can be used instead.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stormdeck.base.gcpause import gc_paused
from stormdeck.base.secrets import redact_value
from stormdeck.collectors.model import (
    Cluster,
    CurveCluster,
    CurvePool,
    Daemon,
    Disk,
    HealthCheck,
    Host,
    Partial,
    Pool,
    disk_key,
)
from stormdeck.collectors.prometheus.client import PrometheusClient, PrometheusError
from stormdeck.collectors.prometheus.decode import (
    _BY_DAEMON,
    _BY_HOSTNAME,
    _BY_INSTANCE,
    _BY_NODE,
    _CACHES,
    _CONVERT,
    _DISK_CONVERT,
    _EMPTY,
    _disk_extra,
    _divide,
    _fill,
    _is_osd,
    _osd_extra,
    _short,
    _value,
)
from stormdeck.collectors.prometheus.promql import inject
from stormdeck.collectors.prometheus.queries import (
    ALL_QUERIES,
    CONCURRENCY,
    CURVE_QUERIES,
    DAEMON_FIELDS,
    DAEMON_QUERIES,
    DISK_QUERIES,
    DIVIDED_BY,
    HEALTH,
    OTHER_QUERIES,
    RATE,
    RECORDED,
    RECORDED_PROBE,
    RECORDED_QUERIES,
    SCRAPE_INTERVAL,
    SLOW_EVERY,
    SLOW_QUERIES,
    STATIC_EVERY,
    STATIC_QUERIES,
    WHOLE_QUERIES,
    rate_window,
)
from stormdeck.collectors.prometheus.reuse import _maker, _Reuse

# What the static series give a Daemon or Disk besides its columns (extra's keys).
_OSD_NAMED = ("host", "device_class", "objectstore", "devices")
_DISK_NAMED = ("write_cache", "device_cache", "rotational", "virtual", "transport", "model",
               "daemons")

_OSD_ROWS = _maker(Daemon, ("id",), {"kind": "osd"}, _OSD_NAMED)
_DISK_ROWS = _maker(Disk, ("host", "name"), {}, _DISK_NAMED)

_VERSION = re.compile(r"ceph version (\d+\.\d+\.\d+)\S* \([0-9a-f]+\) (\w+)")


def _replace(part: Partial, **changes: Any) -> Partial:
    return dataclasses.replace(part, **changes)


class PrometheusSource:
    """Polls a Prometheus server. `queries` overrides any field's PromQL by name.

    Where Prometheus holds the series of assets/stormdeck-recording.yml, the fields
    they record are read from them (`mode` says so); `recording_rules=False` keeps to
    the raw queries.

    https is verified against the system's CAs, or `ca`; `insecure` alone turns
    that off. `token_file` (a bearer token) or `user` with `password_file` (basic
    auth) authenticate; the secrets are read from files so that they never sit on
    a command line. `match` (label matchers) narrows every query to one cluster.
    A poll sends its queries `concurrency` at a time over one pooled, kept-alive
    session: each one costs a round trip, and one after another they no longer fit a
    1 s poll past about 27 ms of it.
    """

    name = "prometheus"

    def __init__(self, url: str, timeout: float = 10.0,
                 queries: Mapping[str, str] | None = None, ceph: bool = True,
                 curve: bool = False, match: str | None = None, ca: str | None = None,
                 insecure: bool = False, token_file: str | None = None,
                 user: str | None = None, password_file: str | None = None,
                 concurrency: int = CONCURRENCY,
                 scrape_interval: float = SCRAPE_INTERVAL, org_id: str | None = None,
                 recording_rules: bool = True) -> None:
        self.ceph, self.curve = ceph, curve
        self.window = rate_window(scrape_interval)
        # `[2m]` occurs in the queries only as their range selectors.
        self.queries = {k: v.replace(f"[{RATE}]", f"[{self.window}]")
                        for k, v in ALL_QUERIES.items()}
        unknown = set(queries or {}) - set(self.queries)
        if unknown:
            raise ValueError(f"no Prometheus query named {', '.join(sorted(unknown))}")
        self.queries.update(queries or {})
        self._whole = {k: v.replace(f"[{RATE}]", f"[{self.window}]")
                       for k, v in WHOLE_QUERIES.items()}
        self.match = match
        self._overridden = frozenset(queries or {})
        # A query overridden by name is the site's: a recorded series never replaces it.
        self._recorded_queries = {k: v for k, v in RECORDED_QUERIES.items()
                                  if k not in (queries or {})}
        self._probe = RECORDED_PROBE
        if match:
            self.queries = {k: inject(v, match) for k, v in self.queries.items()}
            self._recorded_queries = {k: inject(v, match)
                                      for k, v in self._recorded_queries.items()}
            self._probe = inject(self._probe, match)
            self._whole = {k: inject(v, match) for k, v in self._whole.items()}
        # The queries whose recording rule's series Prometheus holds: asked with the
        # static series (every STATIC_EVERY s), and at once when a recorded one goes empty.
        self._recorded: frozenset[str] = frozenset()
        self._probe_mono: float | None = None
        self.recording_rules = recording_rules  # False: the raw queries, never asking
        self.client = PrometheusClient(url, timeout=timeout, ca=ca, insecure=insecure,
                                       token_file=token_file, user=user,
                                       password_file=password_file, concurrency=concurrency,
                                       org_id=org_id)
        self.url, self.shown_url, self.timeout = url.rstrip("/"), self.client.shown_url, timeout
        self.concurrency = self.client.concurrency
        # The workers share the session: its urllib3 pool hands each request its own
        # connection under a lock, and Prometheus sets no cookies for them to race on.
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency,
                                        thread_name_prefix="prometheus-query")
        self.scrape_interval = scrape_interval
        self._at: float | None = None  # the instant every query of a read is evaluated at
        self._last: Partial | None = None
        self._read_newest: float | None = None  # the mgr scrape the last read saw
        self._read_mono: float | None = None
        self._static: dict[str, Any] = {}
        self._static_mono: float | None = None
        self._slow: dict[str, Any] = {}  # SLOW_QUERIES' answers, read once a minute
        self._slow_mono: float | None = None
        self._daemons: _Reuse[Daemon] = _Reuse()
        self._disks_seen: _Reuse[Disk] = _Reuse()
        # What the static series made, kept while they are the same answers.
        self._osd_extra: tuple[Any, Any, dict[str, dict[str, Any]]] = (None, None, {})
        self._disk_static: tuple[Any, ...] = (None, None, None, None, {})
        self._hosts_of: tuple[Any, dict[str, str]] = (None, {})
        self._rekeys: tuple[Any, Any, dict[tuple[str, str], tuple[str, str]], bool] | None = \
            None
        self._known: tuple[Any, set[Any], set[Any]] = (None, set(), set())
        self._stores: tuple[Any, bool] = (None, False)  # metadata -> all OSDs on BlueStore
        self._unknown_asked: frozenset[str] = frozenset()
        self._numerators: set[str] = set()  # what the last ask of each name must divide
        self._disk_map: tuple[Any, Mapping[str, Disk]] = (None, {})
        self._hosts: _Reuse[Host] = _Reuse()
        self._pools: _Reuse[Pool] = _Reuse()
        self._cluster_last: Cluster | None = None
        self._versions: tuple[Any, set[tuple[tuple[int, ...], str]]] = (None, set())

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def query_names(self) -> list[str]:
        """The queries one read of the fleet sends, the reachability check first."""
        names = ["newest", *DAEMON_QUERIES, *DISK_QUERIES, *OTHER_QUERIES] if self.ceph \
            else []
        if self.curve:
            # Not curve_cs_leaders_mds: no field reads it, for its series are keyed by
            # chunkserver id, which nothing here maps to a scrape target's address.
            names += [n for n in CURVE_QUERIES if n != "curve_cs_leaders_mds"]
        return list(dict.fromkeys(names))

    def _given(self, name: str) -> bool:
        """Whether a read takes `name`'s figure whole from a recorded series or a site's
        query (and so never divides it, nor divides by it)."""
        return name in self._recorded or name in self._overridden

    def _expr(self, name: str) -> tuple[str, bool]:
        """What a read sends for `name`, and whether the answer is a numerator that the
        source divides by its DIVIDED_BY column."""
        if name in self._recorded:
            return self._recorded_queries[name], False
        den = DIVIDED_BY.get(name)
        if den is None or name in self._overridden:
            return self.queries[name], False
        if self._given(den):
            return self._whole[name], False
        return self.queries[name], True

    def keyed_by(self, name: str) -> tuple[str, ...] | None:
        """The labels a query's answer is read as a column by (each daemon's or disk's
        value), or None: its samples, whole."""
        if name in DAEMON_QUERIES:
            return _BY_DAEMON
        if name in DISK_QUERIES:
            # The raw queries are per scrape target; a recorded series or a site's own
            # query carries the host's name itself (as the docs ask of an override).
            return _BY_NODE if self._given(name) else _BY_INSTANCE
        if name in _CACHES:  # read every scrape, and nearly never changed: a column
            return _BY_HOSTNAME
        return None

    def query(self, name: str) -> Any:
        """One query's answer: a column (`keyed_by`) or the samples."""
        expr, labels = self._expr(name)[0], self.keyed_by(name)
        if labels is None:
            return self.client.query(expr, name, self._at)
        return self.client.query_column(expr, name, self._at, labels)

    @property
    def mode(self) -> str:
        """What the header says of how the fleet is read: Prometheus' recording rules
        (assets/stormdeck-recording.yml) or the raw queries."""
        if not self.ceph:
            return "raw queries"
        if not self._recorded:
            return "raw queries"
        if self._recorded >= set(self._recorded_queries):
            return "recording rules"
        return f"recording rules for {len(self._recorded)} of {len(RECORDED_QUERIES)} queries"

    def _detect_recorded(self) -> list[str]:
        """Which recorded series exist; an error (and the raw queries) if the probe fails."""
        try:
            rows = self.client.query(self._probe, "recording rules", self._at)
        except PrometheusError as exc:
            self._recorded = frozenset()
            return [str(exc)]
        names = {str(s["metric"].get("__name__", "")).removeprefix(RECORDED) for s in rows}
        self._recorded = frozenset(names & set(self._recorded_queries))
        return []

    def forget_newest(self) -> None:
        """Read the whole fleet at the next poll, as if a new scrape had landed."""
        self._read_newest = None
        self._read_mono = None

    def poll(self) -> Partial:
        """The fleet as the mgr's newest scrape left it: read once per scrape.

        The hub asks every second; one tiny query says when the mgr's newest scrape
        was taken. Until a newer one lands, the Partial read from the last is handed
        back (the same mappings, so nothing is built again); when one does, every
        query is evaluated at that instant, so rates and states all come from one
        complete scrape. Without the mgr's series (Curve alone, or before its first
        scrape) every poll reads, at Prometheus' now.
        """
        self._at = None
        newest: float | None = None
        if self.ceph:
            # Doubles as the reachability check: if it fails, all would, and a server
            # that is down is asked once, not once per query.
            rows = self.query("newest")
            newest = _value(rows[0]) if rows else None
        last, mono = self._last, time.monotonic()
        if last is not None and newest is not None and newest == self._read_newest:
            return _replace(last, time=time.time())
        # A read makes ~20,000 records from ~400,000 strings and tuples, none in a cycle;
        # each collection run meanwhile would walk them all again (measured: a third of
        # the columns' reading at 10,000 OSDs).
        with gc_paused():
            return self._read(newest, mono)

    def _read(self, newest: float | None, mono: float) -> Partial:
        """Every query of a read at the instant `newest`, and the Partial made of them."""
        self._at = newest
        names = [n for n in self.query_names() if n != "newest"]
        static_due = self._static_mono is None or mono - self._static_mono >= STATIC_EVERY
        slow_due = static_due or self._slow_mono is None or \
            mono - self._slow_mono >= SLOW_EVERY
        asked = [n for n in names if (static_due or n not in STATIC_QUERIES)
                 and (slow_due or n not in SLOW_QUERIES)]
        # BlueStore reports its apply latency from the very counter it reports commit
        # latency from (BSPerfTracker::update_from_perfcounters, src/os/bluestore/
        # BlueStore.cc: both l_bluestore_commit_lat), and the mgr exports both from the
        # same osd_stats: where the metadata names only BlueStore OSDs, the apply column
        # is the commit column, and 10,000 series a read are not asked.
        same_latency = self.ceph and "apply_latency" in asked and \
            not {"apply_latency", "commit_latency"} & self._overridden and \
            self._bluestore_only(self._static.get("metadata"))
        if same_latency:
            asked.remove("apply_latency")
        errors: list[str] = []
        if self.ceph and self.recording_rules and \
                (self._probe_mono is None or mono - self._probe_mono >= STATIC_EVERY):
            errors += self._detect_recorded()
            self._probe_mono = mono
        results, asked_errors = self._ask(asked)
        if asked and len(asked_errors) == len(asked):
            # Not one query answered (Prometheus stopped after the probe): no read, so the
            # hub keeps the last one, marked stale, instead of a read of empty answers.
            raise PrometheusError(asked_errors[0])
        errors += asked_errors
        # A recorded series that went empty while OSDs answer (the rules unloaded, their
        # group failing): those fields read raw at once, and the probe asks again next read.
        gone = [n for n in self._recorded if not results.get(n)] if results.get("up") else []
        if gone:
            self._recorded = self._recorded - set(gone)
            self._probe_mono = None
            raw, raw_errors = self._ask(gone)
            results.update(raw)
            errors += raw_errors
        if static_due:
            self._static = {n: results[n] for n in STATIC_QUERIES if n in results}
            self._static_mono = mono
        else:
            unknown = self._unknown(results)
            if unknown - self._unknown_asked:
                # A daemon or host added or replaced since: what it is, read now (once:
                # a daemon the static series never name does not make every read re-read),
                # and its slow figures with it.
                more, more_errors = self._ask(
                    [n for n in names if n in STATIC_QUERIES
                     or (not slow_due and n in SLOW_QUERIES)])
                slow_due = True
                results.update({n: v for n, v in more.items() if n in SLOW_QUERIES})
                self._static = {n: v for n, v in more.items() if n in STATIC_QUERIES}
                self._static_mono = mono
                self._unknown_asked = unknown
                errors += more_errors
            results.update(self._static)

        if same_latency:
            if self._bluestore_only(results.get("metadata")):
                results["apply_latency"] = results.get("commit_latency")
            else:  # the metadata read with this read names another store: ask after all
                more, more_errors = self._ask(["apply_latency"])
                results.update(more)
                errors += more_errors

        # The slow figures kept are merged after the divisions: none divides, nor is
        # divided by (a slow numerator would be divided again every read).
        for name in self._numerators & set(results):
            results[name] = _divide(results[name] or _EMPTY,
                                    results.get(DIVIDED_BY[name]) or _EMPTY)
        if slow_due:
            self._slow = {n: results[n] for n in SLOW_QUERIES if n in results}
            self._slow_mono = mono
        else:
            results.update(self._slow)

        def q(name: str) -> Any:
            return results.get(name) or ()

        daemons: Mapping[str, Daemon] = {}
        disks: Mapping[str, Disk] = {}
        cluster = curve = None
        if self.ceph:
            daemons = self._osds(q)
            disks = self._disks(q, daemons)
            cluster = self._cluster(q, daemons)
            errors += self._duplicates(q)
            if newest is not None and time.time() - newest > 3 * self.scrape_interval + 30:
                errors.append(f"Prometheus' newest scrape of the mgr is "
                              f"{time.time() - newest:.0f} s old: is its target down?")
        if self.curve:
            chunkservers, curve = self._curve(q)
            daemons = {**daemons, **chunkservers}
        hosts: dict[str, Host] = {}
        for s in q("tuned") if self.ceph else ():
            m = s.get("metric", {})
            if m.get("hostname"):
                name = _short(m["hostname"])
                hosts[name] = Host(name=name, tuned_profile=m.get("profile", ""))
        part = Partial(source=self.name, time=time.time(), cluster=cluster,
                       daemons=daemons, disks=disks, errors=tuple(errors), curve=curve,
                       hosts=self._hosts.reuse(hosts))
        self._last, self._read_newest, self._read_mono = part, newest, mono
        return part

    def _bluestore_only(self, metadata: Any) -> bool:
        """Whether the OSD metadata answer names OSDs, all of them on BlueStore."""
        if metadata is None:
            return False
        if self._stores[0] is not metadata:
            self._stores = (metadata, bool(metadata) and all(
                s["metric"].get("objectstore") == "bluestore" for s in metadata
                if str(s["metric"].get("ceph_daemon", "")).startswith("osd.")))
        return self._stores[1]

    def _unknown(self, results: Mapping[str, Any]) -> frozenset[str]:
        """Daemons that answer but the static series do not name, and scrape targets
        whose disks answer but whose host node_uname_info does not name."""
        static = self._static
        if self._known[0] is not static:
            self._known = (static,
                           {s["metric"].get("ceph_daemon") for s in static.get("metadata", ())},
                           {s["metric"].get("instance") for s in static.get("nodes", ())})
        daemons = set(results.get("up") or ()) - self._known[1]
        util = results.get("disk_util")
        targets = set() if not util or self._given("disk_util") \
            else {x for _dev, x in util} - self._known[2]
        return frozenset(daemons | targets)

    def _ask(self, names: list[str]) -> tuple[dict[str, Any], list[str]]:
        """`names` asked `concurrency` at a time; a query that fails is an error and
        an empty answer, the rest stand."""
        results: dict[str, Any] = {}
        errors: list[str] = []
        self._numerators.update(n for n in names if self._expr(n)[1])
        self._numerators.difference_update(n for n in names if not self._expr(n)[1])
        futures = {name: self._pool.submit(self.query, name) for name in names}
        for name, fut in futures.items():  # in query order, so errors read the same each poll
            try:
                results[name] = fut.result()
            except PrometheusError as exc:
                # An override the site wrote is the first thing to suspect: say it is one.
                errors.append(str(exc) + (" (the query is overridden: --prometheus-query "
                                          "or the config's prometheus_query)"
                                          if name in self._overridden else ""))
                results[name] = [] if self.keyed_by(name) is None else {}
        return results, errors

    def _duplicates(self, q: Any) -> list[str]:
        twice = sorted((s["metric"].get("ceph_daemon", "?"), _value(s) or 0)
                       for s in q("duplicates"))
        if not twice:
            return []
        name, n = twice[0]
        more = f" and {len(twice) - 1} more daemons" if len(twice) > 1 else ""
        return [f"Prometheus holds {n:.0f} copies of ceph_osd_up for {name}{more} (a scrape "
                "job twice, or replicas not deduplicated): each figure is taken once; "
                "narrow with --prometheus-match"]

    def _rekey(self, raw: Mapping[tuple[str, str], float], hosts: Mapping[str, str] | None
               ) -> tuple[dict[tuple[str, str], tuple[str, str]], bool]:
        """Each (device, target-or-node) key of a disk answer as its (host, device), and
        whether two keys name one disk; kept while the answers' keys and hosts stay (10,000
        disks re-keyed once, not eight times a read)."""
        memo = self._rekeys
        if memo is not None and memo[0] is hosts and memo[1] == raw.keys():
            return memo[2], memo[3]
        if hosts is None:
            rekey = {(dev, node): (_short(node), dev) for dev, node in raw}
        else:
            rekey = {(dev, x): (hosts[x], dev) for dev, x in raw if x in hosts}
        merge = len(set(rekey.values())) < len(rekey)
        self._rekeys = (hosts, raw.keys(), rekey, merge)
        return rekey, merge

    def _osds(self, q: Any) -> Mapping[str, Daemon]:
        cols = {name: q(name) or _EMPTY for name in DAEMON_FIELDS}
        meta, occ = q("metadata"), q("occupation")
        if self._osd_extra[0] is not meta or self._osd_extra[1] is not occ:
            # The static series change every few minutes: what they say of each OSD is
            # made again only then, and compared key by key only then.
            self._osd_extra = (meta, occ, _osd_extra(meta, occ))
        return self._daemons.build(cols, self._osd_extra[2],
                                   lambda name, f: Daemon(id=name, kind="osd", **f),
                                   convert=_CONVERT, keep=_is_osd, rows=_OSD_ROWS)

    def _curve(self, q: Any) -> tuple[dict[str, Daemon], CurveCluster]:
        fields: dict[str, dict[str, Any]] = {}
        # Which scrape targets are chunkservers: those with a leader count.
        for s in q("curve_leaders"):
            inst = s["metric"].get("instance")
            v = _value(s)
            if inst and v is not None:
                fields[inst] = {"leaders": int(v)}
        for query_name in CURVE_QUERIES:
            field_name = query_name.removeprefix("curve_")
            if field_name in ("leaders", "config", "pools", "cs_leaders_mds", "operators"):
                continue
            for s in q(query_name):
                inst = s["metric"].get("instance")
                v = _value(s)
                if inst in fields and v is not None:
                    fields[inst][field_name] = int(v) if field_name == "bthread_workers" else v
        for s in q("curve_config"):
            m = s["metric"]
            if m.get("instance") in fields and m.get("conf_name"):
                fields[m["instance"]].setdefault("config", {})[m["conf_name"]] = \
                    redact_value(m["conf_name"], m["conf_value"])
        daemons = {inst: Daemon(id=inst, kind="chunkserver", host=inst.rpartition(":")[0], **f)
                   for inst, f in fields.items()}
        pools: dict[str, dict[str, float]] = {}
        leader_mds = None
        for s in q("curve_pools"):
            m = re.match(r"topology_metric_logical_pool_(.+)_(leadernum_\w+|copyset_num|"
                         r"chunkserver_num)$", s["metric"].get("__name__", ""))
            v = _value(s)
            if m and v is not None:
                pools.setdefault(m.group(1), {})[m.group(2)] = v
                leader_mds = leader_mds or s["metric"].get("instance")
        ops = q("curve_operators")
        cluster = CurveCluster(
            leader_mds=leader_mds,
            pools=tuple(CurvePool(
                name=name, leader_range=f.get("leadernum_range"),
                leader_min=f.get("leadernum_min"), leader_max=f.get("leadernum_max"),
                leader_avg=f.get("leadernum_avg"),
                leader_stddev=f.get("leadernum_standard_deviation"),
                copysets=int(f["copyset_num"]) if "copyset_num" in f else None,
                chunkservers=int(f["chunkserver_num"]) if "chunkserver_num" in f else None)
                for name, f in sorted(pools.items())),
            operators=int(_value(ops[0]) or 0) if ops else None)
        return daemons, cluster

    def _disks(self, q: Any, daemons: Mapping[str, Daemon]) -> Mapping[str, Disk]:
        nodes = q("nodes")
        if self._hosts_of[0] is not nodes:
            self._hosts_of = (nodes, {s["metric"]["instance"]: _short(s["metric"]["nodename"])
                                      for s in nodes
                                      if s["metric"].get("instance")
                                      and s["metric"].get("nodename")})
        hosts = self._hosts_of[1]
        cols: dict[str, dict[tuple[str, str], float]] = {}
        for query_name in DISK_QUERIES:
            raw = q(query_name) or _EMPTY
            # Keyed by scrape target, its host from node_uname_info as a join would;
            # a recorded series or a site's query names the host itself.
            rekey, merge = self._rekey(raw, None if self._given(query_name) else hosts)
            if not merge:
                col = dict(zip(map(rekey.get, raw), raw.values(), strict=True))
                col.pop(None, None)  # type: ignore[call-overload]  # hosts not named
            else:  # two targets (or names) of one host: the larger, as `max by` takes
                col = {}
                for k, v in raw.items():
                    key = rekey.get(k)
                    if key is not None and v > col.get(key, -math.inf):
                        col[key] = v
            cols[query_name.removeprefix("disk_")] = col
        static = (q("disk_write_cache") or _EMPTY, q("disk_device_cache") or _EMPTY,
                  q("disk_info"),
                  self._osd_extra[2])
        # The caches are read every scrape (a change may have turned one off), as
        # columns: an unchanged answer is the same object, and nothing is made again.
        if any(a is not b for a, b in zip(static, self._disk_static[:4], strict=True)):
            self._disk_static = (*static, _disk_extra(*static))
        built = self._disks_seen.build(cols, self._disk_static[4],
                                       lambda k, f: Disk(host=k[0], name=k[1], **f),
                                       convert=_DISK_CONVERT, rows=_DISK_ROWS)
        if built is not self._disk_map[0]:
            self._disk_map = (built, {disk_key(h, dev): d for (h, dev), d in built.items()})
        return self._disk_map[1]

    def _cluster(self, q: Any, daemons: Mapping[str, Daemon]) -> Cluster:
        health = q("health")
        status = _value(health[0]) if health else None
        slow = q("slow_ops")
        total = q("pg_total")
        flags = {}
        for s in q("pg_flags"):
            name = s.get("metric", {}).get("__name__", "")
            v = _value(s)
            if name.startswith("ceph_pg_") and v is not None:
                flags[name.removeprefix("ceph_pg_")] = int(v)
        pool_pgs = {s["metric"].get("pool_id"): _value(s) for s in q("pool_pgs")}
        fill: dict[str, dict[str, float]] = {}
        for s in q("pool_fill"):
            m, v = s.get("metric", {}), _value(s)
            if v is not None and m.get("pool_id") and m.get("__name__"):
                fill.setdefault(m["pool_id"], {})[m["__name__"].removeprefix("ceph_pool_")] = v
        pools: dict[str, Pool] = {}
        for s in q("pools"):
            m = s.get("metric", {})
            try:
                pid = int(m["pool_id"])
            except (KeyError, ValueError):
                continue
            desc = m.get("description", "")
            erasure = m.get("type") == "erasure"
            size = k = mm = None
            if desc.startswith("replica:"):
                size = int(desc.split(":")[1]) if desc.split(":")[1].isdigit() else None
            elif desc.startswith("ec:") and "+" in desc:
                try:
                    k, mm = (int(x) for x in desc[3:].split("+"))
                    size = k + mm
                except ValueError:
                    pass
            pg = pool_pgs.get(m["pool_id"])
            stored, avail, used = _fill(fill.get(m["pool_id"], {}))
            pools[str(pid)] = Pool(id=pid, name=m.get("name", str(pid)),
                                   type="erasure" if erasure else "replicated",
                                   size=size, min_size=None, pg_num=int(pg) if pg else 0,
                                   ec_k=k, ec_m=mm, stored_bytes=stored,
                                   used_ratio=used, max_avail_bytes=avail)
        # librados spells it nodeep-scrub; the exporter can only use underscores.
        osd_flags = tuple(sorted(
            s["metric"]["__name__"].removeprefix("ceph_osd_flag_").replace("nodeep_", "nodeep-")
            for s in q("flags") if "__name__" in s.get("metric", {})))
        num_pgs = _value(total[0]) if total else None
        slow_ops = int(_value(slow[0]) or 0) if slow else None
        checks = []
        for s in q("health_detail"):
            m = s.get("metric", {})
            code = str(m.get("name") or "")
            if code:
                checks.append(HealthCheck(
                    code=code, severity=str(m.get("severity") or "HEALTH_WARN"),
                    # The mgr exports a check's name and severity, not its message.
                    summary=f"{slow_ops} slow ops" if code == "SLOW_OPS" and slow_ops
                    else "raised (Prometheus has no message)",
                    count=slow_ops if code == "SLOW_OPS" else None))
        osds = [d for d in daemons.values() if d.kind == "osd"]
        meta = q("metadata")
        if self._versions[0] is not meta:  # static: the versions found once per read of it
            found = set()
            for text in {s.get("metric", {}).get("ceph_version", "") for s in meta}:
                v = _VERSION.search(text)
                if v:
                    found.add((tuple(int(x) for x in v.group(1).split(".")), v.group(2)))
            self._versions = (meta, found)
        found = self._versions[1]
        oldest = min(found) if found else None

        def one(name: str) -> float | None:
            rows = q(name)
            return _value(rows[0]) if rows else None
        pool_list = self._pools.reuse(pools)
        cluster = Cluster(
            health=HEALTH.get(int(status)) if status is not None else None,
            checks=tuple(sorted(checks, key=lambda c: c.code)),
            num_pgs=int(num_pgs) if num_pgs is not None else None,
            pg_flags=flags, slow_ops=slow_ops, osd_flags=osd_flags,
            pools=tuple(sorted(pool_list.values(), key=lambda p: p.id)),
            num_osds=len(osds) if osds else None,
            num_up_osds=sum(1 for d in osds if d.up) if osds else None,
            num_in_osds=sum(1 for d in osds if d.in_) if osds else None,
            release=oldest[1] if oldest else None,
            version=".".join(map(str, oldest[0])) if oldest else None,
            versions_mixed=len(found) > 1,
            client_read_iops=one("client_read_iops"), client_write_iops=one("client_write_iops"),
            client_read_bps=one("client_read_bps"), client_write_bps=one("client_write_bps"))
        if cluster == self._cluster_last:
            return self._cluster_last
        self._cluster_last = cluster
        return cluster
