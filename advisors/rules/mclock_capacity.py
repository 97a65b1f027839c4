"""mClock's idea of each OSD's IOPS capacity: the fallback default, or far from its peers'."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from stormdeck.advisors import overrides
from stormdeck.advisors.model import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.collectors.model import Daemon

# src/common/options/osd.yaml.in defaults: what an OSD runs with when its boot bench was
# skipped or refused (above osd_mclock_iops_capacity_threshold_hdd 500 / _ssd 80000, or
# from Squid below the low thresholds 50 / 1000).
FALLBACK = {"hdd": 315.0, "ssd": 21500.0}
OPTION = {"hdd": "osd_mclock_max_capacity_iops_hdd", "ssd": "osd_mclock_max_capacity_iops_ssd"}


def media(d: Daemon) -> str | None:
    """Which of the two options the OSD reads: hdd for rotational, ssd for the rest."""
    cls = (d.device_class or "").lower()
    if not cls:
        return None
    return "hdd" if cls == "hdd" else "ssd"


def capacity(ctx: Context, d: Daemon, kind: str) -> tuple[float | None, bool]:
    """The capacity the config database gives the OSD, and whether it is the OSD's own
    (the boot bench stores it as `osd.N`, as does an operator who measured it)."""
    opt = ctx.option(OPTION[kind])
    if opt is None or not opt.exists:
        return None, False
    own = d.id in opt.values
    raw = ctx.effective(OPTION[kind], d.id)
    try:
        return (float(raw) if raw is not None else FALLBACK[kind]), own
    except ValueError:
        return None, own


class MclockCapacity(Rule):
    id = "ceph.mclock.capacity"
    title = "mClock's IOPS capacity of an OSD: the fallback default, or an outlier"
    source = "mclock-capacity, mclock-recovery-limits-profiles"
    explanation = (
        "Under mclock_scheduler every profile's reservations and limits are shares of the "
        "OSD's IOPS capacity, osd_mclock_max_capacity_iops_hdd/ssd. At its first boot an "
        "OSD measures it with a short bench (4 KiB writes) and stores the result in the "
        "config database as osd.N; a result above osd_mclock_iops_capacity_threshold_hdd "
        "(500) or _ssd (80000), or from Squid below the low thresholds, is refused and "
        "the OSD falls back to the default (315 for HDD, 21500 for SSD). Ceph's docs say "
        "the bench can give unrealistic figures and advise measuring with fio. A fallback "
        "default is information (the real disk may be much faster or slower); a measured "
        "value far from the median of the same device class (by `factor`, stormdeck's own "
        "margin, with at least three OSDs) is a warning: that OSD's recovery and client "
        "shares are off by as much. Judged only where the OSDs run mclock_scheduler.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or not overrides.is_mclock(overrides.scheduler(c)):
            return
        factor = float(ctx.p("factor"))
        seen: dict[str, dict[str, tuple[float, bool]]] = {"hdd": {}, "ssd": {}}
        for d in ctx.osds():
            kind = media(d)
            if kind is None:
                continue
            value, own = capacity(ctx, d, kind)
            if value is not None:
                seen[kind][d.id] = (value, own)
        for kind, osds in seen.items():
            measured = [v for v, own in osds.values() if own]
            median = statistics.median(measured) if len(measured) >= 3 else None
            for osd, (value, own) in osds.items():
                fallback = not own and value == FALLBACK[kind]
                outlier = (own and median is not None and median > 0
                           and not (median / factor <= value <= median * factor))
                fire = fallback or outlier
                if not ctx.matters(osd, fire):
                    continue
                opt = OPTION[kind]
                what = (f"runs on the fallback {opt} = {value:g} (no bench result stored)"
                        if fallback else
                        f"{opt} = {value:g}, {value / median:.1f} x the median {median:g} "
                        f"of {len(measured)} {kind} OSDs" if outlier and median else
                        f"{opt} = {value:g}")
                yield Check(
                    target=osd, fire=fire, clear=not fire,
                    severity=Severity.WARNING if outlier else Severity.INFO,
                    summary=f"{osd} {what}",
                    evidence=(ctx.evidence(opt, [value], "IOPS"),
                              ctx.evidence(f"median of measured {kind} OSDs",
                                           [median] if median is not None else [], "IOPS")),
                    procedure=(
                        f"`ceph config dump | grep {opt}`: every OSD's stored value; "
                        f"`ceph config show {osd} {opt}`: what {osd} runs with.",
                        "Measure the disk's 4 KiB random-write IOPS with fio (Ceph's docs "
                        "recommend it over the boot bench), e.g. on a spare disk of the "
                        "same model: `fio --name=cap --ioengine=libaio --direct=1 "
                        "--rw=randwrite --bs=4k --iodepth=32 --runtime=60 --time_based "
                        "--filename=/dev/X` (it overwrites /dev/X: never an OSD's disk); "
                        f"or `ceph tell {osd} bench 12288000 4096 4194304 100` as the docs' "
                        "quick check.",
                        f"Then `ceph config set {osd} {opt} IOPS` with what you measured; "
                        f"`ceph config rm {osd} {opt}` goes back to the default."),
                    badness=abs(value / median - 1.0) if outlier and median else 0.0)


RULES = (MclockCapacity,)
