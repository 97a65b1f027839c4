"""The Prometheus source: the fleet view through PromQL, for a console far from the OSD hosts.

It reads what ceph-mgr's prometheus module (9283), ceph-exporter (9926,
Reef+), node_exporter and stormdeck's own exporter publish, and fills the
same Snapshot model as librados and the host source. Every field is one
PromQL expression, overridable, so a site's recording rules or relabelled
series can be used instead.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stormdeck.base.secrets import redact_urls, redact_value, safe_url
from stormdeck.collectors.model import (
    Cluster,
    CurveCluster,
    CurvePool,
    Daemon,
    Disk,
    Host,
    Partial,
    Pool,
)

RATE = "2m"  # the queries as written: four scrapes at the default 30 s interval
SCRAPE_INTERVAL = 30.0  # seconds, what --prometheus-scrape-interval assumes unless told


def rate_window(scrape_interval: float) -> str:
    """The range of every rate(): four scrape intervals, as Grafana's $__rate_interval.

    rate() needs two samples in its range and one scrape may fail, so Grafana takes
    four intervals (grafana.com/blog/2020/09/28, "$__rate_interval for Prometheus
    rate queries that just work"). A fixed 2m smears a change over two minutes where
    Prometheus scrapes every 5 s, and misses every other sample where it scrapes
    once a minute.
    """
    return f"{max(1, round(4 * scrape_interval))}s"

# Queries in flight at once: a poll's 37 (55 with Curve) take a round trip per eight,
# not one each, and stay well under Prometheus's own --query.max-concurrency (20).
CONCURRENCY = 8

# Per-daemon series, keyed by their `ceph_daemon` label.
DAEMON_QUERIES: dict[str, str] = {
    "up": "ceph_osd_up",
    "in_": "ceph_osd_in",
    "commit_latency": "ceph_osd_commit_latency_ms / 1000",
    "apply_latency": "ceph_osd_apply_latency_ms / 1000",
    "read_iops": f"rate(ceph_osd_op_r[{RATE}])",
    "write_iops": f"rate(ceph_osd_op_w[{RATE}])",
    "read_bps": f"rate(ceph_osd_op_r_out_bytes[{RATE}])",
    "write_bps": f"rate(ceph_osd_op_w_in_bytes[{RATE}])",
    "op_read_latency": f"rate(ceph_osd_op_r_latency_sum[{RATE}])"
                       f" / rate(ceph_osd_op_r_latency_count[{RATE}]) > -1",
    "op_write_latency": f"rate(ceph_osd_op_w_latency_sum[{RATE}])"
                        f" / rate(ceph_osd_op_w_latency_count[{RATE}]) > -1",
    # PGs instantiated on the OSD, strays awaiting removal included; librados'
    # `osd df` counts PGs mapped to it. They agree once strays are purged.
    "pgs": "ceph_osd_numpg",
    "utilization": "ceph_osd_stat_bytes_used / ceph_osd_stat_bytes",
    # CPU: stormdeck's exporter where it runs, else ceph-exporter (Reef+, K7.1).
    "cores_used": f"sum by (ceph_daemon) (rate(stormdeck_daemon_cpu_seconds_total[{RATE}]))"
                  f" or sum by (ceph_daemon) (rate(ceph_exporter_cpu_total"
                  f'{{mode=~"user|kernel|system"}}[{RATE}]))',
    "cores_allowed": "stormdeck_daemon_cores_allowed",
    "threads": "stormdeck_daemon_threads",
    "rss_bytes": "stormdeck_daemon_rss_bytes",
}
INT_FIELDS = frozenset({"pgs", "threads", "rss_bytes"})
BOOL_FIELDS = frozenset({"up", "in_"})

# Disk series from node_exporter, given the host name through node_uname_info.
_HOSTED = " * on(instance) group_left(nodename) node_uname_info"
DISK_QUERIES: dict[str, str] = {
    "disk_util": f"rate(node_disk_io_time_seconds_total[{RATE}])" + _HOSTED,
    "disk_read_iops": f"rate(node_disk_reads_completed_total[{RATE}])" + _HOSTED,
    "disk_write_iops": f"rate(node_disk_writes_completed_total[{RATE}])" + _HOSTED,
    "disk_read_bps": f"rate(node_disk_read_bytes_total[{RATE}])" + _HOSTED,
    "disk_write_bps": f"rate(node_disk_written_bytes_total[{RATE}])" + _HOSTED,
    "disk_read_await": f"(rate(node_disk_read_time_seconds_total[{RATE}])"
                  f" / rate(node_disk_reads_completed_total[{RATE}]) > -1)" + _HOSTED,
    "disk_write_await": f"(rate(node_disk_write_time_seconds_total[{RATE}])"
                   f" / rate(node_disk_writes_completed_total[{RATE}]) > -1)" + _HOSTED,
    "disk_queue_depth": f"rate(node_disk_io_time_weighted_seconds_total[{RATE}])" + _HOSTED,
}

OTHER_QUERIES: dict[str, str] = {
    "metadata": "ceph_osd_metadata",
    "occupation": "ceph_disk_occupation",
    "health": "ceph_health_status",
    "slow_ops": "ceph_healthcheck_slow_ops",
    "pg_total": "sum(ceph_pg_total)",
    "pg_flags": 'sum by (__name__) ({__name__=~"ceph_pg_[a-z_]+", __name__!="ceph_pg_total"})',
    "pools": "ceph_pool_metadata",
    "pool_pgs": "ceph_pg_total",
    "flags": '{__name__=~"ceph_osd_flag_.+"} == 1',
    "disk_write_cache": "stormdeck_device_write_cache_on",
    "disk_device_cache": "stormdeck_device_cache_on",
    "disk_info": "stormdeck_device_info",
    "tuned": "stormdeck_host_tuned_profile_info",
}

# Curve, as Prometheus scrapes each daemon's brpc metrics endpoint: a chunkserver's
# own series carry its address in the name, and the scrape target in `instance`.
CURVE_CS = r"chunkserver_[0-9_]+"
CURVE_QUERIES: dict[str, str] = {
    "curve_leaders": f'{{__name__=~"{CURVE_CS}_leader_count"}}',
    "curve_write_latency": f'{{__name__=~"{CURVE_CS}_write_lat_latency"}} / 1e6',
    "curve_write_latency_p99": f'{{__name__=~"{CURVE_CS}_write_lat_latency_99"}} / 1e6',
    "curve_write_iops": f'{{__name__=~"{CURVE_CS}_write_iops"}}',
    "curve_read_iops": f'{{__name__=~"{CURVE_CS}_read_iops"}}',
    "curve_write_bps": f'{{__name__=~"{CURVE_CS}_write_bps"}}',
    "curve_read_bps": f'{{__name__=~"{CURVE_CS}_read_bps"}}',
    "curve_raft_append_latency": "raft_storage_append_entries_latency / 1e6",
    "curve_raft_append_latency_p99": "raft_storage_append_entries_latency_99 / 1e6",
    "curve_raft_append_latency_max": "raft_storage_append_entries_max_latency / 1e6",
    "curve_raft_send_latency": "raft_send_entries_latency / 1e6",
    "curve_cores_used": "process_cpu_usage",
    "curve_bthread_usage": "bthread_worker_usage",
    "curve_bthread_workers": "bthread_worker_count",
    "curve_config": f'{{__name__=~"{CURVE_CS}_config_.+", conf_value!=""}}',
    "curve_pools": '{__name__=~"topology_metric_logical_pool_.+_(leadernum_(range|min|max|avg|'
             'standard_deviation)|copyset_num|chunkserver_num)"}',
    "curve_cs_leaders_mds": '{__name__=~"topology_metric_chunkserver_id_[0-9]+_(leadernum|'
                      'leader_count_from_heartbeat|copysetnum)"}',
    "curve_operators": "mds_scheduler_metric_operator_num",
}

HEALTH = {0: "HEALTH_OK", 1: "HEALTH_WARN", 2: "HEALTH_ERR"}

# One namespace of query names, so that overriding one by name is unambiguous: a
# clash would silently replace one field's query with another's.
ALL_QUERIES = {**DAEMON_QUERIES, **DISK_QUERIES, **OTHER_QUERIES, **CURVE_QUERIES}
if len(ALL_QUERIES) != sum(map(len, (DAEMON_QUERIES, DISK_QUERIES, OTHER_QUERIES,
                                     CURVE_QUERIES))):
    raise RuntimeError("two Prometheus queries share a name")


class PrometheusError(Exception):
    """Prometheus did not answer or refused a query; the text says which."""


def _value(sample: Mapping[str, Any]) -> float | None:
    try:
        v = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _secret(path: str) -> str:
    """A token or password from its file, without the newline editors add."""
    from stormdeck.base.files import read_text

    # A regular file of at most 64 KiB: a FIFO or /dev/zero named here must not hang.
    return read_text(path, 64 << 10).strip()


def _short(host: str) -> str:
    return host.split(".")[0]


class PrometheusSource:
    """Polls a Prometheus server. `queries` overrides any field's PromQL by name.

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
                 scrape_interval: float = SCRAPE_INTERVAL) -> None:
        import requests
        from prometheus_api_client import PrometheusConnect
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        from stormdeck.collectors.promql import inject

        self.url = url.rstrip("/")
        # What messages show: a password in the URL (http://user:pw@host) never is.
        self.shown_url = safe_url(self.url)
        self.timeout = timeout
        self.ceph, self.curve = ceph, curve
        self.window = rate_window(scrape_interval)
        # `[2m]` occurs in the queries only as their range selectors.
        self.queries = {k: v.replace(f"[{RATE}]", f"[{self.window}]")
                        for k, v in ALL_QUERIES.items()}
        unknown = set(queries or {}) - set(self.queries)
        if unknown:
            raise ValueError(f"no Prometheus query named {', '.join(sorted(unknown))}")
        self.queries.update(queries or {})
        self.match = match
        if match:
            self.queries = {k: inject(v, match) for k, v in self.queries.items()}
        if ca and insecure:
            raise ValueError("a CA to verify with and no verification contradict each other")
        session = requests.Session()
        session.verify = ca if ca else not insecure
        if insecure:
            # Asked for by name; a warning per request would only bury the console.
            import urllib3

            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        headers = None
        auth = None
        if token_file:
            headers = {"Authorization": f"Bearer {_secret(token_file)}"}
        if user is not None:
            if token_file:
                raise ValueError("a bearer token and basic auth exclude each other")
            auth = (user, _secret(password_file) if password_file else "")
        # The client retries with backoff by default, which turns a hung server
        # into a poll of many timeouts; the next poll is our retry.
        no_retry = Retry(total=0, raise_on_status=False)
        self._client = PrometheusConnect(url=self.url, timeout=timeout, session=session,
                                         headers=headers, auth=auth, retry=no_retry)
        # The client mounts an adapter for the URL with requests' default of 10 kept
        # connections; this one, mounted for the same prefix, replaces it with one
        # sized to the queries in flight, so none is opened and dropped per poll.
        self.concurrency = max(1, concurrency)
        self._session = session
        session.mount(self.url, HTTPAdapter(pool_connections=1,
                                            pool_maxsize=self.concurrency,
                                            max_retries=no_retry))
        # The workers share the session: its urllib3 pool hands each request its own
        # connection under a lock, and Prometheus sets no cookies for them to race on.
        self._pool = ThreadPoolExecutor(max_workers=self.concurrency,
                                        thread_name_prefix="prometheus-query")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._session.close()

    def query_names(self) -> list[str]:
        """The queries one poll sends, the reachability check first."""
        names = ["health", *DAEMON_QUERIES, *DISK_QUERIES, *OTHER_QUERIES] if self.ceph \
            else []
        if self.curve:
            # Not curve_cs_leaders_mds: no field reads it, for its series are keyed by
            # chunkserver id, which nothing here maps to a scrape target's address.
            names += [n for n in CURVE_QUERIES if n != "curve_cs_leaders_mds"]
        return list(dict.fromkeys(names))

    def query(self, name: str) -> list[dict[str, Any]]:
        from prometheus_api_client import PrometheusApiClientException

        expr = self.queries[name]
        try:
            result = self._client.custom_query(expr, timeout=self.timeout)
        except PrometheusApiClientException as exc:
            if "Status Code 401" in str(exc) or "Status Code 403" in str(exc):
                raise PrometheusError(
                    f"Prometheus at {self.shown_url} refused our credentials "
                    f"({str(exc).split('(')[0].strip()}): set prometheus_token_file, or "
                    "prometheus_user and prometheus_password_file, for this cluster in the "
                    "config file") from None
            raise PrometheusError(f"Prometheus refused the {name} query: "
                                  f"{redact_urls(str(exc))}") from None
        except (ValueError, KeyError, TypeError):  # JSON that is torn or of another shape
            raise PrometheusError(f"Prometheus at {self.shown_url} answered the {name} query with "
                                  "malformed JSON") from None
        except Exception as exc:  # requests' connection errors and timeouts
            from requests.exceptions import SSLError

            if isinstance(exc, SSLError):
                raise PrometheusError(f"Prometheus at {self.shown_url}: its certificate could not "
                                      "be verified (give the CA with --prometheus-ca FILE, "
                                      "or --prometheus-insecure)") from None
            raise PrometheusError(f"Prometheus at {self.shown_url} did not answer: "
                                  f"{type(exc).__name__}") from None
        if not isinstance(result, list):
            raise PrometheusError(f"Prometheus answered the {name} query with no vector")
        # Shape-check each sample once here, so the code below can trust it.
        return [{"metric": s.get("metric") if isinstance(s.get("metric"), dict) else {},
                 "value": s["value"]}
                for s in result
                if isinstance(s, dict) and isinstance(s.get("value"), list)
                and len(s["value"]) == 2]

    def poll(self) -> Partial:
        names = self.query_names()
        # The first query doubles as the reachability check: if it fails, all fail, and a
        # server that is down is asked once, not once per query.
        first = self.query(names[0])
        results = {names[0]: first}
        errors: list[str] = []
        futures = {name: self._pool.submit(self.query, name) for name in names[1:]}
        for name, fut in futures.items():  # in query order, so errors read the same each poll
            try:
                results[name] = fut.result()
            except PrometheusError as exc:
                errors.append(str(exc))
                results[name] = []

        def q(name: str) -> list[dict[str, Any]]:
            return results[name]

        daemons: dict[str, Daemon] = {}
        disks: dict[str, Disk] = {}
        cluster = curve = None
        if self.ceph:
            daemons = self._osds(q)
            disks = self._disks(q, daemons)
            cluster = self._cluster(first, q)
        if self.curve:
            chunkservers, curve = self._curve(q)
            daemons.update(chunkservers)
        hosts = {}
        for s in q("tuned") if self.ceph else ():
            m = s.get("metric", {})
            if m.get("hostname"):
                name = _short(m["hostname"])
                hosts[name] = Host(name=name, tuned_profile=m.get("profile", ""))
        return Partial(source=self.name, time=time.time(), cluster=cluster, daemons=daemons,
                       disks=disks, errors=tuple(errors), curve=curve, hosts=hosts)

    def _osds(self, q: Any) -> dict[str, Daemon]:
        fields: dict[str, dict[str, Any]] = {}
        for field_name in DAEMON_QUERIES:
            for s in q(field_name):
                daemon = s["metric"].get("ceph_daemon")
                v = _value(s)
                if daemon is None or v is None:
                    continue
                if field_name in BOOL_FIELDS:
                    v = v >= 1
                elif field_name in INT_FIELDS:
                    v = int(v)
                fields.setdefault(daemon, {})[field_name] = v
        for s in q("metadata"):
            m = s["metric"]
            if "ceph_daemon" in m:
                d = fields.setdefault(m["ceph_daemon"], {})
                d["host"] = _short(m["hostname"]) if m.get("hostname") else None
                d["device_class"] = m.get("device_class") or None
                d["objectstore"] = m.get("objectstore") or None
        for s in q("occupation"):
            m = s["metric"]
            if "ceph_daemon" not in m:
                continue
            d = fields.setdefault(m["ceph_daemon"], {})
            names = [x for x in m.get("devices", "").split(",") if x and x != "N/A"]
            if not names and m.get("device", "").startswith("/dev/"):
                names = [m["device"].removeprefix("/dev/")]
            d["devices"] = tuple(sorted(set(d.get("devices", ())) | set(names)))
            d.setdefault("host", _short(m["instance"]) if m.get("instance") else None)
        return {name: Daemon(id=name, kind="osd", **f) for name, f in fields.items()
                if name.startswith("osd.")}

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

    def _disks(self, q: Any, daemons: Mapping[str, Daemon]) -> dict[str, Disk]:
        values: dict[tuple[str, str], dict[str, Any]] = {}
        for query_name in DISK_QUERIES:
            field_name = query_name.removeprefix("disk_")
            for s in q(query_name):
                m = s.get("metric", {})
                v = _value(s)
                if v is None or not m.get("device") or not m.get("nodename"):
                    continue
                if field_name == "util":
                    v = min(1.0, max(0.0, v))
                values.setdefault((_short(m["nodename"]), m["device"]), {})[field_name] = v
        # stormdeck's exporter: caches (the kernel's view, the device's own), what it is.
        for query_name, field_name in (("disk_write_cache", "write_cache"),
                                       ("disk_device_cache", "device_cache")):
            for s in q(query_name):
                m = s.get("metric", {})
                v = _value(s)
                if v is not None and m.get("device") and m.get("hostname"):
                    key = (_short(m["hostname"]), m["device"])
                    values.setdefault(key, {})[field_name] = \
                        "write back" if v >= 1 else "write through"
        for s in q("disk_info"):
            m = s.get("metric", {})
            if not (m.get("device") and m.get("hostname")):
                continue
            f = values.setdefault((_short(m["hostname"]), m["device"]), {})
            if m.get("rotational") in ("0", "1"):
                f["rotational"] = m["rotational"] == "1"
            if m.get("virtual") in ("0", "1"):
                f["virtual"] = m["virtual"] == "1"
            if m.get("transport"):
                f["transport"] = m["transport"]
            if m.get("model"):
                f["model"] = m["model"]
        holders: dict[tuple[str, str], list[str]] = {}
        for d in daemons.values():
            for dev in d.devices or ():
                if d.host:
                    holders.setdefault((d.host, dev), []).append(d.id)
        out = {}
        for (host, dev), f in values.items():
            disk = Disk(host=host, name=dev, daemons=tuple(sorted(holders.get((host, dev), ()))),
                        **f)
            out[disk.key] = disk
        return out

    def _cluster(self, health: list[dict[str, Any]], q: Any) -> Cluster:
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
        pools = []
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
            pools.append(Pool(id=pid, name=m.get("name", str(pid)),
                              type="erasure" if erasure else "replicated",
                              size=size, min_size=None, pg_num=int(pg) if pg else 0,
                              ec_k=k, ec_m=mm))
        # librados spells it nodeep-scrub; the exporter can only use underscores.
        osd_flags = tuple(sorted(
            s["metric"]["__name__"].removeprefix("ceph_osd_flag_").replace("nodeep_", "nodeep-")
            for s in q("flags") if "__name__" in s.get("metric", {})))
        num_pgs = _value(total[0]) if total else None
        return Cluster(
            health=HEALTH.get(int(status)) if status is not None else None,
            num_pgs=int(num_pgs) if num_pgs is not None else None,
            pg_flags=flags,
            slow_ops=int(_value(slow[0]) or 0) if slow else None,
            osd_flags=osd_flags, pools=tuple(sorted(pools, key=lambda p: p.id)))
