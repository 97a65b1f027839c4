"""Peering storms, scrubbing under load and OSD map caches (KNOWLEDGE.md K3)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors import overrides
from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.findings import Change, Check, Severity
from stormdeck.advisors.rules.base import (
    NUMBER,
    Context,
    Proposes,
    Rule,
    config_change,
    mean,
    unset_step,
)
from stormdeck.advisors.rules.mclock import client_iops, client_latency, profile_blocked
from stormdeck.collectors.options import same_value


def _inactive(s) -> float | None:  # Snapshot -> PGs not active
    c = s.cluster
    if c is None:
        return None
    # Judged by base/pgstate.py: stale+active+clean is not known to be active.
    n = c.pgs_inactive
    return None if n is None else float(n)


def mgr_blind(c) -> bool:
    """Every PG unknown at once: the active mgr has no PG stats from any OSD (a failover
    or restart that no OSD has reported to yet)."""
    return bool(c.num_pgs) and c.pgs_in("unknown") >= c.num_pgs


class PeeringStorm(Rule):
    id = "ceph.peering.storm"
    proposes = (Proposes("osd_flag", ("noscrub", "nodeep-scrub"), "cluster", "set"),)
    title = "Peering storm: PGs not active"
    source = "peering-blocks-io, peering-tuning-measurements"
    explanation = (
        "A PG that is peering (or activating, creating, unknown) serves no IO: peering "
        "blocks clients, while backfill and recovery only compete with them (K3.7). OSD "
        "restarts, additions and removals all start peering, so look for flapping OSDs "
        "first. Scrubs compete for the same disks: pause them for the storm and unset the "
        "flags after. On filestore OSDs the op threads set the pace (filestore_op_threads "
        "2 -> 6 halved a measured storm, K3.4-K3.5); never give peering more threads than "
        "the host has CPUs (K3.3). Every PG unknown at once is a manager without PG stats "
        "(after a mgr failover), not a storm, and is not judged.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        now = _inactive(ctx.latest)
        if c is None or now is None:
            return
        if mgr_blind(c):
            # Every PG unknown: the active mgr's PG map comes from the osdmap alone and no
            # OSD has reported to it. A mgr that takes over holds that map back from the
            # mon until every up OSD has reported or 4 x mgr_stats_period (20 s) have
            # passed (DaemonServer::send_report; 22-40 s on the Pacific, Reef and Tentacle
            # labs), so `ceph status` shows it only when no OSD reached the new mgr in that
            # time, with every OSD up and HEALTH_OK (test_mgr_failover_lab pauses them all).
            # No PG is known to be inactive: not a storm, and nothing to judge until it knows.
            return
        need = max(float(ctx.p("min_pgs")), float(ctx.p("min_fraction")) * (c.num_pgs or 0))
        if not ctx.matters("cluster", now >= need):
            return  # no storm and none tracked: the window and every OSD need no walk
        series = ctx.values(_inactive)
        critical = now >= float(ctx.p("critical_fraction")) * (c.num_pgs or 1)
        moved = ctx.changed("up")  # only these can have been both up and down
        flapping = [d.id for d in ctx.osds() if (moved is None or d.id in moved)
                    and len({v for v in ctx.daemon_values(d.id, "up")}) > 1]
        procedure = [f"OSDs that went down or up in the last {ctx.span:.0f} s: "
                     f"{', '.join(flapping)}; look at their logs and hosts first (K7.5)."
                     if flapping else "No OSD went down or up in the window."]
        changes: list[Change] = []
        scrubbing = c.pg_flags.get("scrubbing", 0) + c.pg_flags.get("deep", 0)
        for flag in ("noscrub", "nodeep-scrub"):
            if scrubbing and flag not in c.osd_flags:
                changes.append(change(
                    "osd_flag", "cluster", flag, "unset", "set",
                    note=f"unset it when the storm is over: ceph osd unset {flag}"))
        filestore = [d.id for d in ctx.osds() if d.objectstore == "filestore"]
        if filestore and ctx.option("filestore_op_threads") and \
                ctx.option("filestore_op_threads").exists:  # type: ignore[union-attr]
            procedure.append(f"{len(filestore)} OSDs are on filestore: filestore_op_threads "
                             f"is {ctx.effective('filestore_op_threads')}; 6 halved a "
                             "measured storm (K3.4-K3.5); it applies after a restart.")
        peering_threads = ctx.effective("osd_peering_wq_threads")
        cpus = [h.cpus for h in ctx.latest.hosts.values() if h.cpus]
        if peering_threads and cpus and float(peering_threads) > min(cpus):
            procedure.append(f"osd_peering_wq_threads is {peering_threads}, above the "
                             f"{min(cpus)} CPUs of a host: that made peering slower (K3.3).")
        yield Check(
            target="cluster", fire=now >= need, clear=now < need / 2,
            severity=Severity.CRITICAL if critical else Severity.WARNING,
            summary=f"{now:.0f} of {c.num_pgs} PGs not active "
                    f"({c.pgs_in('peering'):.0f} peering, {c.pgs_in('activating'):.0f} "
                    f"activating, {c.pgs_in('stale'):.0f} stale)"
                    + (f"; flapping: {', '.join(flapping)}" if flapping else ""),
            evidence=(ctx.evidence("PGs not active", series, "PGs"),),
            changes=tuple(changes), procedure=tuple(procedure), badness=now)


class MgrWithoutPgStats(Rule):
    id = "ceph.mgr.no_pg_stats"
    title = "The active mgr has no PG stats from any OSD"
    source = "peering-blocks-io, ceph-mixin-alerts"
    explanation = (
        "Every PG unknown means the active mgr has heard from no OSD: its PG map comes "
        "from the osdmap alone. After a mgr failover that lasts until the OSDs report, and "
        "the mon is shown it only after every up OSD has reported or 4 x mgr_stats_period "
        "(20 s) have passed (DaemonServer::send_report). Longer than that, the OSDs cannot "
        "reach the new mgr (its address, a firewall, auth) or are hung, and Ceph says "
        "HEALTH_OK with every OSD up: a hung OSD serves no IO (K3.7) and no PG check "
        "(inactive, degraded) can see it (K7.5). Nothing here can tell which: it is shown, "
        "not changed.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or not c.num_pgs:
            return
        blind = mgr_blind(c)
        series = ctx.values(lambda s: float(s.cluster.pgs_in("unknown"))
                            if s.cluster is not None else None)
        up = f"{c.num_up_osds} of {c.num_osds} OSDs up" if c.num_osds is not None else \
            "OSDs up unknown"
        yield Check(
            target="cluster", fire=blind, clear=not blind, severity=Severity.WARNING,
            summary=f"all {c.num_pgs} PGs unknown with {up} and {c.health or 'no health'}: "
                    "the active mgr has no PG stats from any OSD",
            evidence=(ctx.evidence("PGs unknown", series, "PGs"),),
            procedure=(
                "Are the OSDs alive and answering? On an OSD host: `ceph daemon osd.N "
                "status` (a hung OSD does not answer its admin socket either).",
                "Can they reach the mgr? `ceph mgr dump` gives the active mgr's addresses; "
                "an OSD's log says why it cannot open a session (`MgrClient`).",
                "If the mgr itself is stuck: `ceph mgr fail` hands over to a standby."),
            badness=float(c.num_pgs))


class ScrubDuringLoad(Rule):
    id = "ceph.scrub.during_load"
    proposes = (Proposes("ceph_config", ("osd_scrub_sleep",), "osd", NUMBER),
                Proposes("ceph_config", ("osd_mclock_profile",), "osd", "high_client_ops"),)
    title = "Scrubs that crowd out client IO"
    source = ("scrub-load-and-sleep, mclock-forces-sleeps-zero, scrub-load-threshold-per-cpu, "
              "config-history-and-reset")
    explanation = (
        "Under the wpq scheduler (Pacific's default) a running scrub with osd_scrub_sleep 0 "
        "takes the disk from client IO; 0.1 s between chunks lets client IO through "
        "(K3.6). Under mclock_scheduler (the default since Quincy) the OSD forces every "
        "sleep to 0 (K8.1), so the levers are osd_mclock_profile high_client_ops, which "
        "gives clients the larger share while scrubs run, or the scrub hours "
        "(osd_scrub_begin_hour/osd_scrub_end_hour). osd_scrub_load_threshold is not "
        "proposed: it is load per CPU since Luminous, 10 by default in Tentacle, and "
        "raising it lets more scrubs start under load (K8.4). The report also stretched "
        "the scrub intervals, a choice about how often data is checked, not made here. "
        "Judged only while a scrub runs, and under mClock only where clients' latency "
        "rose with it; high_client_ops is never proposed while PGs are degraded or "
        "undersized, nor over an operator's high_recovery_ops (K9.5).")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        iops = ctx.kept("client_iops", client_iops)
        loaded = (mean(iops) or 0) >= float(ctx.p("min_client_iops"))
        scheduler = overrides.scheduler(c)
        if overrides.is_mclock(scheduler):
            yield self._mclock(ctx, iops, loaded, scheduler)
            return
        changes = []
        procedure: list[str] = []
        # What the OSDs run (a value set at runtime or in ceph.conf wins over the
        # database's): the judgement; the database's: what a change replaces.
        sleep = ctx.effective("osd_scrub_sleep")
        where = ctx.provenance("osd_scrub_sleep")
        short = scheduler == overrides.WPQ and sleep is not None and _num(sleep) == 0
        if short:
            want = str(ctx.p("scrub_sleep"))
            if same_value(ctx.database("osd_scrub_sleep"), want):
                procedure.append(unset_step(ctx, "osd_scrub_sleep"))
            else:
                changes.append(config_change(ctx, "osd_scrub_sleep", want))
                if ctx.running_value("osd_scrub_sleep") is not None:
                    procedure.append(unset_step(ctx, "osd_scrub_sleep", already=False))
        # A sleep between chunks matters only while a scrub runs: no scrub, nothing to say.
        scrubbing = ctx.kept("pgs_scrubbing", lambda s: s.cluster.pgs_in("scrubbing"))
        busy = max(scrubbing, default=0.0)
        yield Check(
            target="osd", fire=loaded and busy > 0 and short,
            clear=not short or busy == 0,
            severity=Severity.INFO,
            summary=f"osd_scrub_sleep is {sleep}" + (f" ({where})" if where else "") +
                    f" under {scheduler} while up to {busy:.0f} PGs scrub and clients do "
                    f"{mean(iops) or 0:.0f} IOPS"
                    if short else "scrub settings fit the load",
            evidence=(ctx.evidence("client IOPS", iops, "IOPS"),
                      ctx.evidence("PGs scrubbing", scrubbing, "PGs")),
            changes=tuple(changes), procedure=tuple(procedure), badness=float(short))

    @staticmethod
    def _mclock(ctx: Context, iops: list[float], loaded: bool, scheduler: str | None) -> Check:
        """Under mClock the sleeps do nothing (K8.1): while scrubs run under client load,
        point to the profile and the scrub hours instead."""
        scrubbing = ctx.kept("pgs_scrubbing", lambda s: s.cluster.pgs_in("scrubbing"))
        profile = (ctx.effective("osd_mclock_profile") or "").strip().lower()
        where = ctx.provenance("osd_mclock_profile")
        during, before = ScrubDuringLoad._latency(ctx)
        factor, floor = float(ctx.p("factor")), float(ctx.p("min_latency"))
        # The evidence that scrubs hurt clients: their latency while PGs scrub, above the
        # floor, and (where the window has samples without a scrub) above that too.
        hurt = during is not None and during > floor and (
            before is None or during > factor * before)
        changes = []
        procedure = []
        blocked = profile_blocked(ctx, profile)
        if blocked:
            procedure.append(blocked)
        elif profile not in ("high_client_ops", "custom") and \
                same_value(ctx.database("osd_mclock_profile"), "high_client_ops"):
            procedure.append(unset_step(ctx, "osd_mclock_profile"))
        elif profile not in ("high_client_ops", "custom") and ctx.option("osd_mclock_profile"):
            changes.append(config_change(
                ctx, "osd_mclock_profile", "high_client_ops",
                note="the share background work loses slows recovery as well; set "
                     f"{profile or 'balanced'} back when the load is over (K8.2)"))
            if ctx.running_value("osd_mclock_profile") is not None:
                procedure.append(unset_step(ctx, "osd_mclock_profile", already=False))
        hours = (ctx.effective("osd_scrub_begin_hour"), ctx.effective("osd_scrub_end_hour"))
        procedure.append(f"osd_scrub_sleep is forced to 0 under {scheduler} and is not the "
                         "lever here (K8.1).")
        if hours[0] is not None and _num(hours[0]) == _num(hours[1]):
            procedure.append("Scrubs may start at any hour (osd_scrub_begin_hour = "
                             "osd_scrub_end_hour): confine them to quiet hours, e.g. "
                             "ceph config set osd osd_scrub_begin_hour 22 and "
                             "osd_scrub_end_hour 6.")
        busy = max(scrubbing, default=0.0)
        fire = loaded and busy > 0 and hurt and (bool(changes) or bool(blocked)) and \
            profile != "high_client_ops"
        lat = (f"; client latency {during * 1000:.1f} ms while scrubbing"
               + (f" against {before * 1000:.1f} ms without" if before is not None else "")
               if during is not None else "; no client latency known")
        return Check(
            target="osd", fire=fire, clear=not fire, severity=Severity.INFO,
            summary=f"up to {busy:.0f} PGs scrubbing while clients do {mean(iops) or 0:.0f} "
                    f"IOPS under {scheduler}, osd_mclock_profile {profile or 'unknown'}"
                    + (f" ({where})" if where else "") + lat,
            evidence=(ctx.evidence("client IOPS", iops, "IOPS"),
                      ctx.evidence("PGs scrubbing", scrubbing, "PGs")),
            changes=tuple(changes), procedure=tuple(procedure), badness=busy)

    @staticmethod
    def _latency(ctx: Context) -> tuple[float | None, float | None]:
        """Clients' mean latency in the window's snapshots with a scrub running, and in
        those without (None where there were none, or too few to compare)."""
        attr = next((a for a in ("op_write_latency", "commit_latency")
                     if client_latency(ctx.latest, a) is not None), None)
        if attr is None:
            return None, None
        busy, quiet = [], []
        for s in ctx.window:
            c, lat = s.cluster, client_latency(s, attr)
            if c is None or lat is None:
                continue
            (busy if c.pgs_in("scrubbing") else quiet).append(lat)
        enough = len(quiet) >= int(ctx.p("min_quiet_samples"))
        return mean(busy), mean(quiet) if enough else None


def _num(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


# (option, who, default, reduced, reduced further for very many OSDs) per K3.1. The monitor
# and the OSDs both read osd_map_message_max (how many maps go in one message): global.
MAP_CACHES = (
    ("mon_osd_cache_size", "mon", 500, 300, 100),
    ("osd_map_cache_size", "osd", 50, 30, 20),
    ("osd_map_max_advance", "osd", 40, 20, 10),
    ("osd_map_share_max_epochs", "osd", 40, 20, 10),
    ("osd_pg_epoch_persisted_max_stale", "osd", 40, 20, 10),
    ("osd_map_message_max", "global", 40, 20, 10),
)


class OsdmapCache(Rule):
    id = "ceph.osdmap.cache"
    title = "OSD map caches: what to lower if memory is short, and a cache too small"
    source = "osdmap-cache-sizes, peering-tuning-measurements"
    explanation = (
        "Every daemon caches OSD maps; with very many OSDs each map is large. The report "
        "lowered mon_osd_cache_size 500 -> 300, osd_map_cache_size 50 -> 30 and four epoch "
        "limits 40 -> 20 (100, 20, 10 for very many OSDs) to save memory (K3.1), but found "
        "no peering time gained by moving from the defaults (K3.3): so this is advice for a "
        "cluster short of memory, never an automatic change. osd_map_cache_size must stay "
        "above osd_pg_epoch_persisted_max_stale + 2, or each OSD warns at start "
        "(OSD::check_config: 'osd_map_cache_size ... is not > "
        "osd_pg_epoch_persisted_max_stale'), and a cache that small reads maps back from "
        "disk while peering.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        cache = _num(ctx.effective("osd_map_cache_size"))
        stale = _num(ctx.effective("osd_pg_epoch_persisted_max_stale"))
        if cache is not None and stale is not None:
            small = cache <= stale + 2
            yield Check(
                target="osd_map_cache_size", fire=small, clear=not small,
                severity=Severity.WARNING,
                summary=f"osd_map_cache_size {cache:g} is not above "
                        f"osd_pg_epoch_persisted_max_stale {stale:g} + 2" + "".join(
                            f" ({w})" for w in (ctx.provenance("osd_map_cache_size"),
                                                ctx.provenance(
                                                    "osd_pg_epoch_persisted_max_stale"))
                            if w),
                evidence=(ctx.evidence("osd_map_cache_size", [cache]),
                          ctx.evidence("osd_pg_epoch_persisted_max_stale", [stale])),
                procedure=(f"Raise osd_map_cache_size above {stale + 2:g} (`ceph config set "
                           f"osd osd_map_cache_size {max(stale + 3, 50):g}`, the default is "
                           "50) or lower osd_pg_epoch_persisted_max_stale; OSDs read the "
                           "cache size at start.",),
                badness=stale + 3 - cache)
        if c.num_osds is None:
            return
        many, very = int(ctx.p("many_osds")), int(ctx.p("very_many_osds"))
        steps = []
        for option, who, default, reduced, further in MAP_CACHES:
            opt = ctx.option(option)
            value = _num(ctx.effective(option, who))
            if opt is None or not opt.exists or value is None or value != default:
                continue
            target = further if c.num_osds >= very else reduced
            steps.append(f"ceph config set {who} {option} {target}")
        fire = c.num_osds >= many and bool(steps)
        yield Check(
            target="cluster", fire=fire, clear=not fire, severity=Severity.INFO,
            summary=f"{c.num_osds} OSDs with {len(steps)} OSD map cache option(s) at their "
                    "defaults: lower them only if daemons are short of memory",
            evidence=(ctx.evidence("OSDs", [float(c.num_osds)], "OSDs"),),
            procedure=("Only if mon or OSD memory is short (the report gained no peering "
                       "time from these, K3.3): " + "; ".join(f"`{x}`" for x in steps)
                       + ". The reduced values keep osd_map_cache_size above "
                       "osd_pg_epoch_persisted_max_stale + 2.",) if steps else (),
            badness=float(c.num_osds))


RULES = (PeeringStorm, MgrWithoutPgStats, ScrubDuringLoad, OsdmapCache)
