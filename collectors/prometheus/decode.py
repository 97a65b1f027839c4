"""Prometheus answers read as figures: a sample's value, a pool's fill, what static series say."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from stormdeck.collectors.prometheus.queries import BOOL_FIELDS, INT_FIELDS


def _value(sample: Mapping[str, Any]) -> float | None:
    try:
        v = float(sample["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _fill(f: Mapping[str, float]) -> tuple[int | None, int | None, float | None]:
    """A pool's stored bytes, max avail bytes and used ratio (0..1), as librados' `df`
    gives them (collectors/ceph/usage.py): the mgr exports `df`'s own figures, and
    percent_used is already stored / (stored + max_avail), a ratio whatever its name."""
    stored = int(f["stored"]) if "stored" in f else None
    avail = int(f["max_avail"]) if "max_avail" in f else None
    used = f.get("percent_used")
    if used is None and stored is not None and avail is not None and stored + avail > 0:
        used = stored / (stored + avail)
    return stored, avail, min(1.0, max(0.0, used)) if used is not None else None


def _short(host: str) -> str:
    return host.split(".")[0]


_BY_DAEMON = ("ceph_daemon",)
_BY_NODE = ("device", "nodename")  # in label-name order, as Prometheus writes them
_BY_INSTANCE = ("device", "instance")
_BY_HOSTNAME = ("device", "hostname")
_CACHES = {"disk_write_cache": "write_cache", "disk_device_cache": "device_cache"}
# What a per-daemon column holds, as the Daemon's field wants it.
_CONVERT: dict[str, Callable[[float], Any]] = {
    **{name: (lambda v: v >= 1) for name in BOOL_FIELDS},
    **{name: int for name in INT_FIELDS}}
_DISK_CONVERT: dict[str, Callable[[float], Any]] = {"util": lambda v: min(1.0, max(0.0, v))}

_EMPTY: Mapping[Any, float] = {}
_NONE: Mapping[str, Any] = {}


def _divide(num: Mapping[Any, float], den: Mapping[Any, float]) -> dict[Any, float]:
    """Each key's numerator over its denominator, where both are and the denominator is
    not 0 (PromQL's would be NaN or infinite, which the queries drop)."""
    return {k: n / d for k, n in num.items() if (d := den.get(k))}


def _is_osd(name: str) -> bool:
    return name.startswith("osd.")


def _osd_extra(meta: Any, occ: Any) -> dict[str, dict[str, Any]]:
    """What the static series say of each OSD: its host, class, store and devices."""
    out: dict[str, dict[str, Any]] = {}
    for s in meta:
        m = s["metric"]
        if "ceph_daemon" in m:
            d = out.setdefault(m["ceph_daemon"], {})
            d["host"] = _short(m["hostname"]) if m.get("hostname") else None
            d["device_class"] = m.get("device_class") or None
            d["objectstore"] = m.get("objectstore") or None
    for s in occ:
        m = s["metric"]
        if "ceph_daemon" not in m:
            continue
        d = out.setdefault(m["ceph_daemon"], {})
        names = [x for x in m.get("devices", "").split(",") if x and x != "N/A"]
        if not names and m.get("device", "").startswith("/dev/"):
            names = [m["device"].removeprefix("/dev/")]
        d["devices"] = tuple(sorted(set(d.get("devices", ())) | set(names)))
        d.setdefault("host", _short(m["instance"]) if m.get("instance") else None)
    return out


def _disk_extra(write_cache: Mapping[tuple[str, str], float],
                device_cache: Mapping[tuple[str, str], float], info: Any,
                osds: Mapping[str, Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """What stormdeck's exporter says of each disk (its caches, what it is) and which
    OSDs sit on it, by (host, device): static series, made again only when re-read."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for col, field_name in ((write_cache, "write_cache"), (device_cache, "device_cache")):
        for (device, hostname), v in col.items():
            if device and hostname:
                out.setdefault((_short(hostname), device), {})[field_name] = \
                    "write back" if v >= 1 else "write through"
    for s in info:
        m = s.get("metric", {})
        if not (m.get("device") and m.get("hostname")):
            continue
        f = out.setdefault((_short(m["hostname"]), m["device"]), {})
        if m.get("rotational") in ("0", "1"):
            f["rotational"] = m["rotational"] == "1"
        if m.get("virtual") in ("0", "1"):
            f["virtual"] = m["virtual"] == "1"
        if m.get("transport"):
            f["transport"] = m["transport"]
        if m.get("model"):
            f["model"] = m["model"]
    holders: dict[tuple[str, str], list[str]] = {}
    for name, d in osds.items():
        if not _is_osd(name) or not d.get("host"):
            continue
        for dev in d.get("devices") or ():
            holders.setdefault((d["host"], dev), []).append(name)
    for key, names in holders.items():
        out.setdefault(key, {})["daemons"] = tuple(sorted(names))
    return out

