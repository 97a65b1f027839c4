"""A disk failing early: Ceph's read-repair, scrub, BlueStore and device-health signs, per OSD."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.advisors.rules.heartbeats import flapped
from stormdeck.collectors.model import Daemon, HealthCheck, Snapshot, disk_key

_OSD = re.compile(r"\bosd\.(\d+)\b")
# PG_DAMAGED's detail (PGMap.cc): "pg 2.5 is active+clean+inconsistent, acting [1,0,2]".
_PG = re.compile(r"\bpg (\S+) is (\S+), acting \[([\d,\s]*)\]")
# DEVICE_HEALTH's detail (mgr/devicehealth): "DEVID (host:sdb); daemons osd.3; life ...".
_WHERE = re.compile(r"\(([^():\s]+:[^()\s]+)\)")

# The checks that name an OSD whose disk or its path misbehaves, with what each says.
PER_OSD = {
    "OSD_TOO_MANY_REPAIRS": "reads repaired from other copies (OSD_TOO_MANY_REPAIRS)",
    "BLUESTORE_SPURIOUS_READ_ERRORS": "reads that failed once and passed on retry "
                                      "(BLUESTORE_SPURIOUS_READ_ERRORS)",
    "BLUESTORE_SLOW_OP_ALERT": "slow BlueStore operations (BLUESTORE_SLOW_OP_ALERT)",
    "DEVICE_HEALTH": "its device is predicted to fail (DEVICE_HEALTH)",
    "DEVICE_HEALTH_IN_USE": "its failing device still holds data (DEVICE_HEALTH_IN_USE)",
    "DEVICE_HEALTH_TOOMANY": "too many devices predicted to fail (DEVICE_HEALTH_TOOMANY)",
}


def _osd_ids(text: str) -> list[str]:
    return [f"osd.{n}" for n in _OSD.findall(text)]


def signs(checks: Sequence[HealthCheck]) -> tuple[dict[str, list[str]], dict[str, list[str]],
                                                  dict[str, str]]:
    """From Ceph's checks: per OSD, what names it (one line each) and the damaged PGs
    whose acting set holds it; per OSD, the device location DEVICE_HEALTH gives."""
    named: dict[str, list[str]] = {}
    damaged: dict[str, list[str]] = {}
    where: dict[str, str] = {}
    for h in checks:
        if h.code in PER_OSD:
            for line in h.detail or (h.summary,):
                for osd in dict.fromkeys(_osd_ids(line)):
                    named.setdefault(osd, []).append(f"{PER_OSD[h.code]}: {line.strip()}")
                    m = _WHERE.search(line)
                    if m:
                        where.setdefault(osd, m.group(1))
        elif h.code == "PG_DAMAGED":
            for line in h.detail:
                m = _PG.search(line)
                if m:
                    for n in m.group(3).replace(" ", "").split(","):
                        if n:
                            damaged.setdefault(f"osd.{n}", []).append(m.group(1))
    return named, damaged, where


def crashes(checks: Sequence[HealthCheck]) -> dict[str, str]:
    """RECENT_CRASH's detail: OSD -> its line ("osd.1 crashed on host vm at ...")."""
    out: dict[str, str] = {}
    for h in checks:
        if h.code == "RECENT_CRASH":
            for line in h.detail:
                for osd in _osd_ids(line)[:1]:
                    out.setdefault(osd, line.strip())
    return out


def disk_names(snap: Snapshot, d: Daemon, where: str | None) -> str:
    """The OSD's disks as the host source maps them ('vm:/dev/sdb', with model and
    serial where udev knows them), else the location Ceph's device health gave."""
    out = []
    for dev in d.devices or ():
        key = disk_key(d.host, dev)
        disk = snap.disks.get(key)
        extra = " ".join(x for x in ((disk.model, f"serial {disk.serial}" if disk.serial
                                      else None) if disk else ()) if x)
        out.append(f"{key} ({extra})" if extra else key)
    if not out and where:
        out.append(where)
    return ", ".join(out) if out else f"{d.host or 'its host'}, disk not known"


class FailingDisk(Rule):
    id = "ceph.osd.failing_disk"
    title = "An OSD's disk shows signs of failing"
    source = "early-disk-failure, ceph-mixin-alerts"
    explanation = (
        "A disk seldom dies at once: first reads need a retry (BLUESTORE_SPURIOUS_READ_ERRORS) "
        "or another copy (OSD_TOO_MANY_REPAIRS, past mon_osd_warn_num_repaired = 10), "
        "BlueStore's operations slow down (BLUESTORE_SLOW_OP_ALERT), scrubs find bad "
        "copies (OSD_SCRUB_ERRORS, PG_DAMAGED) and SMART predicts failure (DEVICE_HEALTH). "
        "Ceph raises each alone; this rule joins them into one finding per OSD, naming its "
        "disk from the host source. A damaged PG names its whole acting set, so it counts "
        "against an OSD only when the OSD is in every damaged PG (two or more), or beside "
        "another sign. A RECENT_CRASH of an OSD that also went down and up in the window "
        "counts too: the crash is why it flaps. Two or more signs are critical: mark the "
        "OSD out while its peers still hold the data, not after a second failure.")
    # All parts (the default): a crash counts with a flap within the window, which
    # slides even while the data stands still.

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        named, damaged, where = signs(c.checks)
        pgs = {pg for lst in damaged.values() for pg in lst}
        crashed = crashes(c.checks)
        flappers = set(flapped(ctx, crashed)) if crashed else set()
        osds: Iterable[Daemon] = ctx.osds() if ctx.columns is None else ()
        if ctx.columns is not None:
            # An OSD no check names, not flapping, in no damaged PG and not tracked
            # cannot fire nor change anything: look at the few others only, in order.
            osds = ctx.osds_among(set(named) | flappers | set(damaged) | ctx.tracked)
        for d in osds:
            found = list(named.get(d.id, ()))
            if d.id in flappers:
                found.append(f"crashed and went down and up: {crashed[d.id]}")
            mine = damaged.get(d.id, [])
            if mine and (found or (len(pgs) >= 2 and len(set(mine)) == len(pgs))):
                found.append(f"in the acting set of {len(set(mine))} of {len(pgs)} damaged "
                             f"PGs ({', '.join(sorted(set(mine))[:4])})")
            fire = bool(found)
            if not ctx.matters(d.id, fire):
                continue
            disk = disk_names(ctx.latest, d, where.get(d.id))
            host = d.host or "its host"
            dev = f"/dev/{d.devices[0]}" if d.devices else "its disk"
            yield Check(
                target=d.id, fire=fire, clear=not fire,
                severity=Severity.CRITICAL if len(found) >= 2 else Severity.WARNING,
                summary=f"{d.id} on {disk}: " + "; ".join(found[:3]),
                evidence=(ctx.evidence("signs of a failing disk", [float(len(found))],
                                       "signs"),
                          ctx.evidence("damaged PGs with it", [float(len(set(mine)))], "PGs")),
                procedure=(
                    f"`ceph device ls-by-daemon {d.id}`: its device ids; on {host} "
                    f"`smartctl -a` on {dev}: "
                    "reallocated and pending sectors, media and CRC errors; `journalctl -k` "
                    "for I/O errors.",
                    "Inconsistent PGs: `rados list-inconsistent-obj PGID --format=json-pretty`"
                    " names the bad copy (read_error on this OSD is its disk); `ceph pg "
                    "repair PGID` after the disk is judged, as a failing disk brings it back.",
                    f"If the disk is failing: `ceph osd out {d.id.split('.')[1]}` while its "
                    "peers still hold the data (they need room for it: `ceph osd df`), "
                    "wait for recovery to finish, then replace the disk.",
                    "`ceph crash ls-new` / `ceph crash info ID` for its crashes; `ceph crash "
                    "archive ID` once read; `ceph tell "
                    f"{d.id} clear_shards_repaired` resets its repair count once the disk is "
                    "replaced or cleared."),
                badness=float(len(found)))


RULES = (FailingDisk,)
