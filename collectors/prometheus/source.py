"""The Prometheus source: the fleet view through PromQL, for a console far from the OSD hosts.

It reads what ceph-mgr's prometheus module (9283), ceph-exporter (9926,
Reef+), node_exporter and stormdeck's own exporter publish, and fills the
same Snapshot model as librados and the host source. Every field is one
PromQL expression, overridable, so a site's recording rules or relabelled
series can be used instead.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stormdeck.base.gcpause import gc_paused
from stormdeck.collectors.model import Daemon, Disk, Partial
from stormdeck.collectors.prometheus.client import PrometheusClient, PrometheusError
from stormdeck.collectors.prometheus.decode import (
    _BY_DAEMON,
    _BY_HOSTNAME,
    _BY_INSTANCE,
    _BY_NODE,
    _CACHES,
    _EMPTY,
    _divide,
    _value,
)
from stormdeck.collectors.prometheus.fleet import FleetModel
from stormdeck.collectors.prometheus.promql import inject
from stormdeck.collectors.prometheus.queries import (
    ALL_QUERIES,
    CONCURRENCY,
    CURVE_QUERIES,
    DAEMON_QUERIES,
    DISK_QUERIES,
    DIVIDED_BY,
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
        self._model = FleetModel()  # the records made of the reads, kept while unchanged
        self._known: tuple[Any, set[Any], set[Any]] = (None, set(), set())
        self._stores: tuple[Any, bool] = (None, False)  # metadata -> all OSDs on BlueStore
        self._unknown_asked: frozenset[str] = frozenset()
        self._numerators: set[str] = set()  # what the last ask of each name must divide

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
            daemons = self._model.osds(q)
            disks = self._model.disks(q, daemons, self._given)
            cluster = self._model.cluster(q, daemons)
            errors += self._model.duplicates(q)
            if newest is not None and time.time() - newest > 3 * self.scrape_interval + 30:
                errors.append(f"Prometheus' newest scrape of the mgr is "
                              f"{time.time() - newest:.0f} s old: is its target down?")
        if self.curve:
            chunkservers, curve = self._model.curve(q)
            daemons = {**daemons, **chunkservers}
        hosts = self._model.hosts(q("tuned") if self.ceph else ())
        part = Partial(source=self.name, time=time.time(), cluster=cluster,
                       daemons=daemons, disks=disks, errors=tuple(errors), curve=curve,
                       hosts=hosts)
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
