"""mClock's idea of each OSD's IOPS capacity: a boot bench that fell back, or an outlier."""

from __future__ import annotations

import re
from collections.abc import Iterable
from statistics import median

from stormdeck.advisors import overrides
from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.collectors.model import Daemon

# The OSD's own cluster-log line when its boot bench is out of range (src/osd/OSD.cc,
# OSD::maybe_override_max_osd_capacity_for_qos), as the Tentacle lab wrote it.
_FALLBACK = re.compile(
    r"OSD bench result of (\d+(?:\.\d+)?) IOPS is not within the threshold limit range of "
    r"(\d+(?:\.\d+)?) IOPS and (\d+(?:\.\d+)?) IOPS for (osd\.\d+)\. IOPS capacity is "
    r"unchanged at (\d+(?:\.\d+)?) IOPS")
OPTION = {"hdd": "osd_mclock_max_capacity_iops_hdd", "ssd": "osd_mclock_max_capacity_iops_ssd"}


def kind(d: Daemon) -> str:
    return "hdd" if (d.device_class or "hdd") == "hdd" else "ssd"


class MclockCapacity(Rule):
    id = "ceph.mclock.capacity"
    title = "mClock works from an IOPS capacity nobody measured"
    source = "mclock-osd-capacity, mclock-recovery-limits-profiles"
    explanation = (
        "Under mclock_scheduler every profile's shares are fractions of the OSD's IOPS "
        "capacity (osd_mclock_max_capacity_iops_hdd/ssd). At boot the OSD measures it with "
        "a short bench; a result outside osd_mclock_iops_capacity_low_threshold_* and "
        "osd_mclock_iops_capacity_threshold_* (50-500 IOPS for HDD, 1000-80000 for SSD by "
        "default) is discarded, the last valid value or the default (315 for HDD, 21500 "
        "for SSD) stays, and the OSD says so in the cluster log. An OSD far from the OSDs "
        "of its class (outlier_factor times their median or less than its inverse, judged "
        "from min_class_osds OSDs of a class on: stormdeck's own judgement) likely measured "
        "something else than its disk (a cache, a busy moment). "
        "Either way, profile advice means little with a wrong capacity: the mClock docs "
        "recommend measuring the device with fio (4K random writes) and setting the value "
        "per OSD.")

    def __init__(self) -> None:
        # What the cluster log said, kept after the line scrolls out of its tail: the
        # capacity stays at the fallback until someone sets it or the OSD benches again.
        self.fallen: dict[str, tuple[float, float, float]] = {}

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or not overrides.is_mclock(overrides.scheduler(c)):
            return
        for e in c.log:
            m = _FALLBACK.search(e.message)
            if m:
                self.fallen[m.group(4)] = (float(m.group(1)), float(m.group(5)), e.stamp)
        stored: dict[str, dict[str, float]] = {"hdd": {}, "ssd": {}}
        osds = list(ctx.osds())
        for d in osds:
            opt = ctx.option(OPTION[kind(d)])
            v = opt.values.get(d.id) if opt is not None else None
            try:
                if v is not None:
                    stored[kind(d)][d.id] = float(v)
            except ValueError:
                pass
        for d in osds:
            option = OPTION[kind(d)]
            opt = ctx.option(option)
            mine = stored[kind(d)].get(d.id)
            set_by_hand = opt is not None and any(
                w in opt.values for w in ("osd", "global", d.id, f"osd/class:{kind(d)}"))
            fell = self.fallen.get(d.id)
            # The median of the whole class, this OSD included: of three OSDs with one
            # outlier, the median of each healthy OSD's two peers is the mean of a healthy
            # figure and the outlier, and made both healthy ones outliers too (the Reef lab).
            same = list(stored[kind(d)].values())
            factor = float(ctx.p("outlier_factor"))
            mid = median(same) if len(same) >= int(ctx.p("min_class_osds")) else None
            outlier = mine is not None and mid is not None and mid > 0 and (
                mine > factor * mid or mine < mid / factor)
            fire = (fell is not None and not set_by_hand) or outlier
            if not ctx.matters(d.id, fire):
                continue
            if fell is not None and not set_by_hand:
                summary = (f"{d.id}'s boot bench measured {fell[0]:.0f} IOPS, out of range: "
                           f"{option} stays at the fallback {fell[1]:.0f}")
            else:
                summary = (f"{d.id}'s {option} is {mine or 0:.0f}, against a median of "
                           f"{mid or 0:.0f} over the {len(same)} {kind(d).upper()} OSDs")
            yield Check(
                target=d.id, fire=fire, clear=not fire, severity=Severity.INFO,
                summary=summary,
                evidence=(ctx.evidence(option, [mine] if mine is not None else
                                       [fell[1]] if fell is not None else []),),
                procedure=(
                    f"Measure the device with fio on its host (4K random writes, "
                    "direct I/O, with the OSD stopped or on a twin device), then "
                    f"`ceph config set {d.id} {option} <IOPS>`.",
                    "Until then the mClock profiles' shares are fractions of a made-up "
                    "figure: judge osd_mclock_profile advice with that in mind."),
                badness=1.0)


RULES = (MclockCapacity,)
