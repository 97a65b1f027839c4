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


DAEMON_QUERIES: dict[str, str] = {
    "up": _per_daemon("ceph_osd_up"),
    "in_": _per_daemon("ceph_osd_in"),
    "commit_latency": _per_daemon("ceph_osd_commit_latency_ms") + " / 1000",
    "apply_latency": _per_daemon("ceph_osd_apply_latency_ms") + " / 1000",
    "read_iops": _per_daemon(f"rate(ceph_osd_op_r[{RATE}])"),
    "write_iops": _per_daemon(f"rate(ceph_osd_op_w[{RATE}])"),
    "read_bps": _per_daemon(f"rate(ceph_osd_op_r_out_bytes[{RATE}])"),
    "write_bps": _per_daemon(f"rate(ceph_osd_op_w_in_bytes[{RATE}])"),
    "op_read_latency": _per_daemon(f"rate(ceph_osd_op_r_latency_sum[{RATE}])"
                                   f" / rate(ceph_osd_op_r_latency_count[{RATE}]) > -1"),
    "op_write_latency": _per_daemon(f"rate(ceph_osd_op_w_latency_sum[{RATE}])"
                                    f" / rate(ceph_osd_op_w_latency_count[{RATE}]) > -1"),
    # PGs instantiated on the OSD, strays awaiting removal included; librados'
    # `osd df` counts PGs mapped to it. They agree once strays are purged.
    "pgs": _per_daemon("ceph_osd_numpg"),
    "utilization": _per_daemon("ceph_osd_stat_bytes_used / ceph_osd_stat_bytes"),
    # CPU: stormdeck's exporter where it runs, else ceph-exporter (Reef+, K7.1), whose
    # modes are summed once each.
    "cores_used": _per_daemon(f"rate(stormdeck_daemon_cpu_seconds_total[{RATE}])")
                  + " or sum by (ceph_daemon) (max by (ceph_daemon, mode) "
                  f'(rate(ceph_exporter_cpu_total{{mode=~"user|kernel|system"}}[{RATE}])))',
    "cores_allowed": _per_daemon("stormdeck_daemon_cores_allowed"),
    "threads": _per_daemon("stormdeck_daemon_threads"),
    "rss_bytes": _per_daemon("stormdeck_daemon_rss_bytes"),
}
INT_FIELDS = frozenset({"pgs", "threads", "rss_bytes"})
BOOL_FIELDS = frozenset({"up", "in_"})


# Disk series from node_exporter, given the host name through node_uname_info (itself
# deduplicated, or a second copy of it makes the join refuse to match).
def _hosted(expr: str) -> str:
    return (f"max by (nodename, device) (({expr}) * on(instance) group_left(nodename) "
            "max by (instance, nodename) (node_uname_info))")


DISK_QUERIES: dict[str, str] = {
    "disk_util": _hosted(f"rate(node_disk_io_time_seconds_total[{RATE}])"),
    "disk_read_iops": _hosted(f"rate(node_disk_reads_completed_total[{RATE}])"),
    "disk_write_iops": _hosted(f"rate(node_disk_writes_completed_total[{RATE}])"),
    "disk_read_bps": _hosted(f"rate(node_disk_read_bytes_total[{RATE}])"),
    "disk_write_bps": _hosted(f"rate(node_disk_written_bytes_total[{RATE}])"),
    "disk_read_await": _hosted(f"rate(node_disk_read_time_seconds_total[{RATE}])"
                               f" / rate(node_disk_reads_completed_total[{RATE}]) > -1"),
    "disk_write_await": _hosted(f"rate(node_disk_write_time_seconds_total[{RATE}])"
                                f" / rate(node_disk_writes_completed_total[{RATE}]) > -1"),
    "disk_queue_depth": _hosted(f"rate(node_disk_io_time_weighted_seconds_total[{RATE}])"),
}

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
    # Daemons whose up series Prometheus holds more than once: named in a warning.
    "duplicates": "count by (ceph_daemon) (ceph_osd_up) > 1",
    # When the mgr's newest scrape was taken: a poll reads the fleet once per scrape,
    # every query evaluated at this instant (so all see the same, complete scrape).
    "newest": "max(timestamp(ceph_health_status))",
}

# What changes when a daemon or disk is added or replaced, not between scrapes: read
# again every STATIC_EVERY seconds, or when a daemon appears that they do not name.
STATIC_QUERIES = frozenset({"metadata", "occupation", "pools", "disk_info", "tuned",
                            "cores_allowed"})
STATIC_EVERY = 300.0

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
