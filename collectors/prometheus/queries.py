"""The PromQL of every field the Prometheus source fills, and the window of its rates."""

from __future__ import annotations

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

# Per-daemon series, keyed by their `ceph_daemon` label. Each is `max by` the labels
# read: only those come back (a tenth of the bytes), and a series Prometheus holds
# twice (a scrape job duplicated, Thanos replicas not deduplicated) counts once; a
# `sum` would double it (2.000x the cores used, measured).
def _per_daemon(expr: str) -> str:
    return f"max by (ceph_daemon) ({expr})"


# What stormdeck derives per daemon, every label kept: the raw queries take `max by` of
# these, and assets/stormdeck-recording.yml records each as `stormdeck:NAME`.
DAEMON_DERIVED: dict[str, str] = {
    "read_iops": f"rate(ceph_osd_op_r[{RATE}])",
    "write_iops": f"rate(ceph_osd_op_w[{RATE}])",
    "read_bps": f"rate(ceph_osd_op_r_out_bytes[{RATE}])",
    "write_bps": f"rate(ceph_osd_op_w_in_bytes[{RATE}])",
    "op_read_latency": f"rate(ceph_osd_op_r_latency_sum[{RATE}])"
                       f" / rate(ceph_osd_op_r_latency_count[{RATE}]) > -1",
    "op_write_latency": f"rate(ceph_osd_op_w_latency_sum[{RATE}])"
                        f" / rate(ceph_osd_op_w_latency_count[{RATE}]) > -1",
}
# CPU: stormdeck's exporter where it runs, else ceph-exporter (Reef+, K7.1), whose
# modes are summed once each.
_CEPH_EXPORTER_CPU = f'rate(ceph_exporter_cpu_total{{mode=~"user|kernel|system"}}[{RATE}])'
_STORMDECK_CPU = f"rate(stormdeck_daemon_cpu_seconds_total[{RATE}])"

# Figures that are one series' rate (or value) over another's: the raw queries ask
# Prometheus for the numerator alone and the source divides by a column it reads anyway
# (named here). A division in PromQL matches 10,000 series to 10,000 by their labels:
# on bench/fleet_bench.py's fleet each such query cost Prometheus 3-10 times a plain
# `max by` of the same series, five of them most of a read's CPU. The divisions are
# exact: the same rates of the same samples at the same instant, divided in IEEE doubles
# as Prometheus would. An OSD counts each read (write) once in op_r (op_w) and once in
# op_r_latency's (op_w_latency's) count, in one place (PrimaryLogPG::log_op_stats), so
# the op rate is the latency's count rate. A site's override, or a recorded series,
# still gives the whole figure, and is not divided.
DIVIDED_BY: dict[str, str] = {
    "op_read_latency": "read_iops",
    "op_write_latency": "write_iops",
    "utilization": "osd_bytes",
    "disk_read_await": "disk_read_iops",
    "disk_write_await": "disk_write_iops",
}

DAEMON_QUERIES: dict[str, str] = {
    "up": _per_daemon("ceph_osd_up"),
    "in_": _per_daemon("ceph_osd_in"),
    "commit_latency": _per_daemon("ceph_osd_commit_latency_ms") + " / 1000",
    "apply_latency": _per_daemon("ceph_osd_apply_latency_ms") + " / 1000",
    **{name: _per_daemon(expr) for name, expr in DAEMON_DERIVED.items()},
    # The latencies' sums alone (seconds spent per second): divided by the op rates.
    "op_read_latency": _per_daemon(f"rate(ceph_osd_op_r_latency_sum[{RATE}])"),
    "op_write_latency": _per_daemon(f"rate(ceph_osd_op_w_latency_sum[{RATE}])"),
    # PGs instantiated on the OSD, strays awaiting removal included; librados'
    # `osd df` counts PGs mapped to it. They agree once strays are purged.
    "pgs": _per_daemon("ceph_osd_numpg"),
    # Bytes used, divided by the OSD's size (`osd_bytes`, a static series).
    "utilization": _per_daemon("ceph_osd_stat_bytes_used"),
    "osd_bytes": _per_daemon("ceph_osd_stat_bytes"),
    "cores_used": _per_daemon(_STORMDECK_CPU)
                  + " or sum by (ceph_daemon) (max by (ceph_daemon, mode) "
                  f"({_CEPH_EXPORTER_CPU}))",
    "cores_allowed": _per_daemon("stormdeck_daemon_cores_allowed"),
    "threads": _per_daemon("stormdeck_daemon_threads"),
    "rss_bytes": _per_daemon("stormdeck_daemon_rss_bytes"),
}
# The whole figure of each divided query, sent where its denominator is a recorded
# series or a site's query (their keys may differ from the raw numerator's).
WHOLE_QUERIES: dict[str, str] = {
    "op_read_latency": _per_daemon(DAEMON_DERIVED["op_read_latency"]),
    "op_write_latency": _per_daemon(DAEMON_DERIVED["op_write_latency"]),
    "utilization": _per_daemon("ceph_osd_stat_bytes_used / ceph_osd_stat_bytes"),
}
# The per-daemon queries that are a Daemon's fields (osd_bytes only divides).
DAEMON_FIELDS = tuple(name for name in DAEMON_QUERIES if name != "osd_bytes")
INT_FIELDS = frozenset({"pgs", "threads", "rss_bytes"})
BOOL_FIELDS = frozenset({"up", "in_"})


# Disk series from node_exporter, given the host name through node_uname_info (itself
# deduplicated, or a second copy of it makes the join refuse to match).
def _join_host(expr: str) -> str:
    return (f"({expr}) * on(instance) group_left(nodename) "
            "max by (instance, nodename) (node_uname_info)")


# The raw disk queries leave the join to the client: a join of every disk series to
# node_uname_info cost Prometheus 4x a plain `max by` of the same series (0.78 against
# 0.18 s of CPU for 10,000 disks, measured on bench/fleet_bench.py's fleet), eight of
# them a read. The source maps `instance` to its host with the static `nodes` query.
def _hosted(expr: str) -> str:
    return f"max by (instance, device) ({expr})"


_DISK_RATES: dict[str, str] = {
    "disk_util": f"rate(node_disk_io_time_seconds_total[{RATE}])",
    "disk_read_iops": f"rate(node_disk_reads_completed_total[{RATE}])",
    "disk_write_iops": f"rate(node_disk_writes_completed_total[{RATE}])",
    "disk_read_bps": f"rate(node_disk_read_bytes_total[{RATE}])",
    "disk_write_bps": f"rate(node_disk_written_bytes_total[{RATE}])",
    "disk_read_await": f"rate(node_disk_read_time_seconds_total[{RATE}])"
                       f" / rate(node_disk_reads_completed_total[{RATE}]) > -1",
    "disk_write_await": f"rate(node_disk_write_time_seconds_total[{RATE}])"
                        f" / rate(node_disk_writes_completed_total[{RATE}]) > -1",
    "disk_queue_depth": f"rate(node_disk_io_time_weighted_seconds_total[{RATE}])",
}
DISK_QUERIES: dict[str, str] = {
    **{name: _hosted(expr) for name, expr in _DISK_RATES.items()},
    # The time spent per second alone: divided by the IOPS.
    "disk_read_await": _hosted(f"rate(node_disk_read_time_seconds_total[{RATE}])"),
    "disk_write_await": _hosted(f"rate(node_disk_write_time_seconds_total[{RATE}])"),
}
WHOLE_QUERIES.update({name: _hosted(_DISK_RATES[name])
                      for name in ("disk_read_await", "disk_write_await")})
if set(WHOLE_QUERIES) != set(DIVIDED_BY):
    raise RuntimeError("a divided query without its whole figure")

OTHER_QUERIES: dict[str, str] = {
    "metadata": "max by (ceph_daemon, hostname, device_class, objectstore, ceph_version) "
                "(ceph_osd_metadata)",
    "occupation": "max by (ceph_daemon, device, devices, instance) (ceph_disk_occupation)",
    "health": "max(ceph_health_status)",
    # Every check the mgr has seen, 1 while it is raised (Pacific+).
    "health_detail": "max by (name, severity) (ceph_health_detail) == 1",
    "slow_ops": "max(ceph_healthcheck_slow_ops)",
    "pg_total": "sum(max by (pool_id) (ceph_pg_total))",
    "pg_flags": 'sum by (__name__) (max by (__name__, pool_id) '
                '({__name__=~"ceph_pg_[a-z_]+", __name__!="ceph_pg_total"}))',
    "pools": "max by (pool_id, name, type, description) (ceph_pool_metadata)",
    "pool_pgs": "max by (pool_id) (ceph_pg_total)",
    # Pools' fill as `ceph df` gives it (stored, max avail, %used as a ratio): one query.
    "pool_fill": 'max by (__name__, pool_id) '
                 '({__name__=~"ceph_pool_(stored|max_avail|percent_used)"})',
    "client_read_iops": f"sum(max by (pool_id) (rate(ceph_pool_rd[{RATE}])))",
    "client_write_iops": f"sum(max by (pool_id) (rate(ceph_pool_wr[{RATE}])))",
    "client_read_bps": f"sum(max by (pool_id) (rate(ceph_pool_rd_bytes[{RATE}])))",
    "client_write_bps": f"sum(max by (pool_id) (rate(ceph_pool_wr_bytes[{RATE}])))",
    "flags": 'max by (__name__) ({__name__=~"ceph_osd_flag_.+"}) == 1',
    "disk_write_cache": "max by (hostname, device) (stormdeck_device_write_cache_on)",
    "disk_device_cache": "max by (hostname, device) (stormdeck_device_cache_on)",
    "disk_info": "max by (hostname, device, rotational, virtual, transport, model) "
                 "(stormdeck_device_info)",
    "tuned": "max by (hostname, profile) (stormdeck_host_tuned_profile_info)",
    # Each node_exporter target's host: the raw disk queries are keyed by `instance`.
    "nodes": "max by (instance, nodename) (node_uname_info)",
    # Daemons whose up series Prometheus holds more than once: named in a warning.
    "duplicates": "count by (ceph_daemon) (ceph_osd_up) > 1",
    # When the mgr's newest scrape was taken: a poll reads the fleet once per scrape,
    # every query evaluated at this instant (so all see the same, complete scrape).
    "newest": "max(timestamp(ceph_health_status))",
}

# What changes when a daemon or disk is added or replaced, not between scrapes: read
# again every STATIC_EVERY seconds, or when a daemon appears that they do not name.
STATIC_QUERIES = frozenset({"metadata", "occupation", "pools", "disk_info", "tuned",
                            "cores_allowed", "nodes", "duplicates", "osd_bytes"})
STATIC_EVERY = 300.0

# What moves without urgency, read once a minute instead of every scrape: each
# exporter's thread count and RSS (the memory rule judges minutes) and the disks' write
# caches (a setting). Each query timed alone on bench/fleet_bench.py's 10,000-OSD fleet,
# these were a quarter of what a read cost Prometheus (1.4 s of its CPU every 15 s).
# Not the PG counts and fill: librados reads them (`osd df`) every 10 s, and a console
# that compares the two, or follows a split, must not see a minute-old count beside
# fresh states.
SLOW_QUERIES = frozenset({"threads", "rss_bytes", "disk_write_cache", "disk_device_cache"})
if SLOW_QUERIES & (set(DIVIDED_BY) | set(DIVIDED_BY.values())):
    raise RuntimeError("a slow query that divides or is divided: kept, it would be divided again")
SLOW_EVERY = 60.0

# Recording rules (assets/stormdeck-recording.yml, made by recording_rules_yaml): what
# stormdeck derives (rates, latencies, cores used, disks joined to their host), computed
# by Prometheus as it ingests instead of at every read. Each keeps every label of its
# inputs (so --prometheus-match and the dedup below still apply) and is named
# `stormdeck:` + the query it replaces; the source reads `max by` of it where the rule's
# series exist, and the raw query where they do not.
RECORDED = "stormdeck:"
RECORDING_RULES: dict[str, str] = {
    **DAEMON_DERIVED,
    # `or on(ceph_daemon)`: ceph-exporter's only for daemons stormdeck's exporter lacks,
    # as the raw query prefers the latter.
    "cores_used": f"{_STORMDECK_CPU} or on(ceph_daemon) sum without (mode) "
                  f"({_CEPH_EXPORTER_CPU})",
    **{name: _join_host(expr) for name, expr in _DISK_RATES.items()},
}
RECORDED_QUERIES: dict[str, str] = {
    name: f"max by ({'nodename, device' if name in DISK_QUERIES else 'ceph_daemon'}) "
          f"({RECORDED}{name})"
    for name in RECORDING_RULES}
# Which recorded series Prometheus holds: asked with the static series, one small answer.
RECORDED_PROBE = (f'group by (__name__) ({{__name__=~"{RECORDED}('
                  + "|".join(RECORDING_RULES) + ')"})')
RECORDING_GROUP = "stormdeck"


def recording_rules_yaml(window: str = RATE) -> str:
    """The rules file shipped in assets/, written from the queries so the two never drift;
    `window` the range of every rate() (the shipped file's: 2m, four 30 s scrapes)."""
    import json

    lines = [
        "# stormdeck's recording rules: what the console derives from the mgr module's,",
        "# ceph-exporter's, node_exporter's and stormdeck exporter's series, computed by",
        "# Prometheus as it ingests. Load with `rule_files: [/etc/prometheus/"
        "stormdeck-recording.yml]`;",
        "# `stormdeck watch --prometheus URL` uses them when their series exist (the header",
        "# says \"recording rules\") and its raw queries otherwise. Rates are over "
        f"{window}: four",
        "# scrape intervals, as --prometheus-scrape-interval takes them for the raw queries.",
        "# Written by collectors/prometheus/queries.py (recording_rules_yaml);",
        "# checked by promtool in tests/unit/test_recording_rules.py.",
        "groups:",
        f"  - name: {RECORDING_GROUP}",
        "    rules:",
    ]
    for name, expr in RECORDING_RULES.items():
        lines.append(f"      - record: {RECORDED}{name}")
        lines.append(f"        expr: {json.dumps(expr.replace(f'[{RATE}]', f'[{window}]'))}")
    return "\n".join(lines) + "\n"


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
