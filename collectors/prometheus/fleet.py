"""The fleet model made from a read's answers: OSDs, chunkservers, disks, hosts, the cluster."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from stormdeck.base.secrets import redact_value
from stormdeck.collectors.model import (
    Cluster,
    CurveCluster,
    CurvePool,
    Daemon,
    Disk,
    HealthCheck,
    Host,
    Pool,
    disk_key,
)
from stormdeck.collectors.prometheus.decode import (
    _CONVERT,
    _DISK_CONVERT,
    _EMPTY,
    _disk_extra,
    _fill,
    _is_osd,
    _osd_extra,
    _short,
    _value,
)
from stormdeck.collectors.prometheus.queries import (
    CURVE_QUERIES,
    DAEMON_FIELDS,
    DISK_QUERIES,
    HEALTH,
)
from stormdeck.collectors.prometheus.reuse import _maker, _Reuse

# What the static series give a Daemon or Disk besides its columns (extra's keys).
_OSD_NAMED = ("host", "device_class", "objectstore", "devices")
_DISK_NAMED = ("write_cache", "device_cache", "rotational", "virtual", "transport", "model",
               "daemons")

_OSD_ROWS = _maker(Daemon, ("id",), {"kind": "osd"}, _OSD_NAMED)
_DISK_ROWS = _maker(Disk, ("host", "name"), {}, _DISK_NAMED)

_VERSION = re.compile(r"ceph version (\d+\.\d+\.\d+)\S* \([0-9a-f]+\) (\w+)")


class FleetModel:
    """The records one read's answers make, each kept while what it is made of stays: an
    unchanged daemon, disk, host or pool is the same object read after read."""

    def __init__(self) -> None:
        self._daemons: _Reuse[Daemon] = _Reuse()
        self._disks_seen: _Reuse[Disk] = _Reuse()
        # What the static series made, kept while they are the same answers.
        self._osd_extra: tuple[Any, Any, dict[str, dict[str, Any]]] = (None, None, {})
        self._disk_static: tuple[Any, ...] = (None, None, None, None, {})
        self._hosts_of: tuple[Any, dict[str, str]] = (None, {})
        self._rekeys: tuple[Any, Any, dict[tuple[str, str], tuple[str, str]], bool] | None = \
            None
        self._disk_map: tuple[Any, Mapping[str, Disk]] = (None, {})
        self._hosts: _Reuse[Host] = _Reuse()
        self._pools: _Reuse[Pool] = _Reuse()
        self._cluster_last: Cluster | None = None
        self._versions: tuple[Any, set[tuple[tuple[int, ...], str]]] = (None, set())

    def hosts(self, tuned: Iterable[Any]) -> Mapping[str, Host]:
        """Each host's tuned profile, from stormdeck's exporter."""
        hosts: dict[str, Host] = {}
        for s in tuned:
            m = s.get("metric", {})
            if m.get("hostname"):
                name = _short(m["hostname"])
                hosts[name] = Host(name=name, tuned_profile=m.get("profile", ""))
        return self._hosts.reuse(hosts)

    def duplicates(self, q: Any) -> list[str]:
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

    def osds(self, q: Any) -> Mapping[str, Daemon]:
        cols = {name: q(name) or _EMPTY for name in DAEMON_FIELDS}
        meta, occ = q("metadata"), q("occupation")
        if self._osd_extra[0] is not meta or self._osd_extra[1] is not occ:
            # The static series change every few minutes: what they say of each OSD is
            # made again only then, and compared key by key only then.
            self._osd_extra = (meta, occ, _osd_extra(meta, occ))
        return self._daemons.build(cols, self._osd_extra[2],
                                   lambda name, f: Daemon(id=name, kind="osd", **f),
                                   convert=_CONVERT, keep=_is_osd, rows=_OSD_ROWS)

    def curve(self, q: Any) -> tuple[dict[str, Daemon], CurveCluster]:
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

    def disks(self, q: Any, daemons: Mapping[str, Daemon],
              given: Callable[[str], bool]) -> Mapping[str, Disk]:
        """`given(name)`: whether the read took that query's figure whole from a recorded
        series or a site's query, which names the host itself."""
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
            rekey, merge = self._rekey(raw, None if given(query_name) else hosts)
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

    def cluster(self, q: Any, daemons: Mapping[str, Daemon]) -> Cluster:
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
