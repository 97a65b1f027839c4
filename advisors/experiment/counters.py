"""What an experiment reads each second: the OSDs' own op counters and the cluster's harms."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.base.text import printable

# Totals over the OSD's life (src/osd/osd_perf_counters.cc): a window's figure is the
# difference of two reads, never `avgtime` (the mean since start, or since the last
# read in Pacific and later, which another reader moves). Latency counters are a sum of
# seconds and a count, so a window's mean latency is exact: Δsum / Δcount.
PLAIN = ("op_r", "op_w", "op_rw", "op_in_bytes", "op_out_bytes")
TIMED = ("op_r_latency", "op_w_latency", "op_rw_latency")


@dataclass(frozen=True, slots=True)
class OsdCounters:
    """One OSD's op counters at one read: counts, bytes, and latency sums (seconds) with
    their counts."""

    op_r: float
    op_w: float
    op_rw: float
    in_bytes: float
    out_bytes: float
    r_sum: float
    r_count: float
    w_sum: float
    w_count: float
    rw_sum: float
    rw_count: float

    def minus(self, before: OsdCounters) -> OsdCounters | None:
        """What happened between `before` and this read; None when a counter went back
        (the OSD restarted and counts from zero again)."""
        diff = OsdCounters(*(a - b for a, b in zip(self.values(), before.values(),
                                                   strict=True)))
        return diff if all(v >= 0 for v in diff.values()) else None

    def values(self) -> tuple[float, ...]:
        return (self.op_r, self.op_w, self.op_rw, self.in_bytes, self.out_bytes, self.r_sum,
                self.r_count, self.w_sum, self.w_count, self.rw_sum, self.rw_count)


def _number(d: Mapping[str, Any], key: str) -> float:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"perf dump: {key} is {printable(repr(v), 40)}, not a number")
    return float(v)


def parse_perf_dump(doc: Any) -> OsdCounters:
    """`perf dump` of one OSD (`ceph tell osd.N perf dump osd`, or the whole dump of its
    admin socket): its "osd" section's op counters. ValueError, in one sentence, when the
    shape is not Ceph's."""
    if isinstance(doc, bytes | str):
        try:
            doc = json.loads(doc)
        except ValueError:
            raise ValueError("perf dump: the answer is not JSON") from None
    osd = doc.get("osd") if isinstance(doc, dict) else None
    if not isinstance(osd, dict):
        raise ValueError("perf dump: no \"osd\" section")
    timed = []
    for key in TIMED:
        t = osd.get(key)
        if not isinstance(t, dict):
            raise ValueError(f"perf dump: {key} is not a sum and a count")
        timed += [_number(t, "sum"), _number(t, "avgcount")]
    plain = [_number(osd, k) for k in ("op_r", "op_w", "op_rw")]
    # op_in_bytes / op_out_bytes are every op's, reads' and writes' alike.
    return OsdCounters(*plain, _number(osd, "op_in_bytes"), _number(osd, "op_out_bytes"),
                       *timed)


@dataclass(frozen=True, slots=True)
class Harms:
    """What stops an experiment at once: the cluster's state at one read."""

    slow_ops: int
    up_osds: int | None
    pgs_inactive: int | None
    health: str | None
    # PGs not active+clean (scrubbing counts as clean): what a change that moves data
    # leaves until its data has moved.
    pgs_unclean: int | None = None

    def worse_than(self, base: Harms) -> str | None:
        """Why this read is a harm the baseline did not have, or None."""
        if self.slow_ops > base.slow_ops:
            return f"{self.slow_ops} slow ops (none before the experiment)" \
                if not base.slow_ops else \
                f"{self.slow_ops} slow ops ({base.slow_ops} before the experiment)"
        if None not in (self.up_osds, base.up_osds) and self.up_osds < base.up_osds:  # type: ignore[operator]
            return f"{base.up_osds - self.up_osds} OSD(s) went down"  # type: ignore[operator]
        if (self.pgs_inactive or 0) > (base.pgs_inactive or 0):
            return f"{self.pgs_inactive} PGs not active"
        return None


def parse_harms(status: Mapping[str, Any]) -> Harms:
    """`status` as the mons give it: slow ops (its SLOW_OPS check), OSDs up, PGs active."""
    from stormdeck.base import pgstate
    from stormdeck.collectors.ceph.parse import parse_health_slow, parse_status

    fields = parse_status(status)
    _checks, slow, _daemons, _oldest = parse_health_slow(status.get("health", {}))
    states: Mapping[str, int] = fields["pg_states"]
    known = fields["num_pgs"] is not None
    inactive = sum(n for s, n in states.items() if not pgstate.is_active(s)) \
        if known else None
    unclean = fields["num_pgs"] - sum(n for s, n in states.items() if pgstate.is_healthy(s)) \
        if known else None
    return Harms(slow, fields["num_up_osds"], inactive, fields["health"], unclean)


@dataclass(frozen=True, slots=True)
class Sample:
    """One read of the OSDs measured and of the cluster: monotonic seconds, per OSD."""

    time: float
    osds: Mapping[str, OsdCounters]
    harms: Harms
    failed: tuple[str, ...] = ()  # OSDs that did not answer this read
    # CPU seconds (user and system, every thread) of the OSD processes on this host
    cpu: Mapping[str, float] = field(default_factory=dict)


class Reader:
    """Reads the named OSDs' counters over the admin's one connection (`perf dump` to
    each OSD, a few milliseconds each; the OSDs answer it themselves, not the mgr) and
    `status` once."""

    def __init__(self, admin: Any, osds: Sequence[str],
                 pids: Mapping[str, int] | None = None) -> None:
        self.admin = admin
        self.osds = tuple(osds)
        self.pids = {o: p for o, p in (pids or {}).items() if o in self.osds}

    def read(self) -> Sample:
        from stormdeck.collectors.ceph.connection import CommandError

        got: dict[str, OsdCounters] = {}
        failed = []
        for osd in self.osds:
            try:
                raw = self.admin.connection.command(osd, {"prefix": "perf dump",
                                                          "logger": "osd"})
                got[osd] = parse_perf_dump(raw)
            except (CommandError, ValueError):
                failed.append(osd)
        cpu = {}
        for osd, pid in self.pids.items():
            t = process_cpu(pid)
            if t is not None and osd in got:
                cpu[osd] = t
        at = time.monotonic()
        try:
            status = self.admin.cmd("status")
        except UserError as exc:
            raise UserError(f"the mons did not answer `status` during the experiment: "
                            f"{exc}") from None
        return Sample(at, got, parse_harms(status), tuple(failed), cpu)


def harm_of(s: Sample, base: Sample) -> str | None:
    """Why a read stops a run whose baseline is `base` (the experiment's windows, the
    CPU sweep's steps), or None."""
    why = s.harms.worse_than(base.harms)
    if why is None and s.failed:
        why = f"{', '.join(s.failed)} did not answer `perf dump`"
    return why


def process_cpu(pid: int) -> float | None:
    """A process's CPU seconds, user and system, over all its threads; None once gone."""
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return None
    return float(t.user + t.system)


def local_osd_pids(osds: Iterable[str], fsid: str | None) -> dict[str, int]:
    """The processes on this host of the OSDs named, of the cluster `fsid` (another
    cluster's osd.0 may run here too): {"osd.0": pid}."""
    import psutil

    from stormdeck.collectors.host.processes import DaemonFsids, osd_id_from_argv

    wanted, found = set(osds), {}
    fsids = DaemonFsids()
    for p in psutil.process_iter(["pid", "name", "cmdline"]):
        argv = p.info.get("cmdline") or []
        if not (p.info.get("name") or "").startswith("ceph-osd") or not argv:
            continue
        n = osd_id_from_argv(argv)
        if n is None or f"osd.{n}" not in wanted:
            continue
        theirs = fsids.of(p.info["pid"], argv)
        if fsid is None or theirs is None or theirs == fsid:
            found[f"osd.{n}"] = int(p.info["pid"])
    return found


def osds_to_read(up: Iterable[str], targets: Iterable[str], limit: int) -> tuple[str, ...]:
    """The OSDs an experiment reads: those its changes name, else every up OSD, at most
    `limit` (spread over the ids, so one host's OSDs are not all that is seen)."""
    up_ids = sorted(set(up), key=lambda o: int(o.removeprefix("osd.")))
    named = [t for t in targets if t in up_ids]
    chosen = named or up_ids
    if len(chosen) <= limit:
        return tuple(chosen)
    step = len(chosen) / limit
    return tuple(chosen[int(i * step)] for i in range(limit))
