"""Under the mClock scheduler: background work (recovery, backfill, scrub) that slows clients
(KNOWLEDGE.md K8.1-K8.2, K3.7)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors import overrides
from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Proposes, Rule, config_change, mean, unset_step
from stormdeck.collectors.model import Snapshot
from stormdeck.collectors.options import same_value

BACKGROUND = ("recovering", "backfilling", "scrubbing")


def background(s: Snapshot) -> float | None:
    """PGs recovering, backfilling or scrubbing in this snapshot."""
    c = s.cluster
    if c is None or c.num_pgs is None:
        return None
    return float(c.pgs_in(*BACKGROUND))


def reduced_redundancy(s: Snapshot) -> int:
    """PGs degraded or undersized in this snapshot: copies missing, to be recovered."""
    c = s.cluster
    return c.pgs_in("degraded", "undersized") if c is not None else 0


def profile_blocked(ctx: Context, profile: str) -> str | None:
    """Why high_client_ops must not be proposed now, or None. While PGs are degraded or
    undersized, recovery restores the copies: giving clients the larger share
    lengthens the window in which one more failure loses data (K9.5). And an operator
    who chose high_recovery_ops chose recovery over clients: not ours to undo."""
    n = reduced_redundancy(ctx.latest)
    if n:
        return (f"{n} PGs are degraded or undersized: recovery is restoring their copies, "
                "and high_client_ops would slow it, a longer window with fewer copies "
                "(K9.5). Not proposed; see that no OSD is stuck down instead.")
    if profile == "high_recovery_ops":
        return ("osd_mclock_profile is high_recovery_ops, chosen to speed recovery up "
                "(K9.5): set it back to balanced yourself once recovery is done; not "
                "proposed here.")
    return None


def client_iops(s: Snapshot) -> float:
    """The clients' read and write ops a second, together (a missing one counts 0)."""
    return (s.cluster.client_read_iops or 0) + (s.cluster.client_write_iops or 0)  # type: ignore[union-attr]


def client_latency(s: Snapshot, attr: str) -> float | None:
    """The OSDs' mean latency of `attr` in this snapshot (the ones that report it)."""
    vals = [v for d in s.daemons.values() if d.kind == "osd"
            and (v := getattr(d, attr, None)) is not None and v == v]
    return sum(vals) / len(vals) if vals else None


class MclockBackgroundVsClients(Rule):
    id = "ceph.mclock.background_vs_clients"
    proposes = (Proposes("ceph_config", ("osd_mclock_profile",), "osd", "high_client_ops"),)
    title = "Recovery, backfill or scrub slowing clients under mClock"
    source = ("mclock-forces-sleeps-zero, mclock-recovery-limits-profiles, peering-blocks-io, "
              "config-history-and-reset")
    explanation = (
        "Backfill and recovery do not block client IO as peering does, but they compete "
        "with it for disks and network (K3.7); scrubs do the same. Under mclock_scheduler "
        "(the default since Quincy) the old throttles do nothing: the OSD forces "
        "osd_recovery_sleep*, osd_scrub_sleep and the other sleeps to 0, and removes "
        "changes of osd_max_backfills and osd_recovery_max_active* unless "
        "osd_mclock_override_recovery_settings is true (K8.1-K8.2). The lever is "
        "osd_mclock_profile: high_client_ops gives client IO the larger reservation and "
        "weight while background work runs (doc/rados/configuration/mclock-config-ref.rst); "
        "recovery then takes longer, so set the profile back when it is over.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None:
            return
        scheduler = overrides.scheduler(c)
        if not overrides.is_mclock(scheduler):
            return
        # Client op latency where a source gives it (ceph-exporter), else commit latency.
        attr = next((a for a in ("op_write_latency", "commit_latency")
                     if client_latency(ctx.latest, a) is not None), None)
        if attr is None:
            return
        busy, quiet, work = [], [], []
        for s in ctx.window:
            n, lat = background(s), client_latency(s, attr)
            if n is None or lat is None:
                continue
            (busy if n > 0 else quiet).append(lat)
            if n > 0:
                work.append(n)
        iops = ctx.kept("client_iops", client_iops)
        now = background(ctx.latest) or 0.0
        during, before = mean(busy), mean(quiet)
        factor, floor = float(ctx.p("factor")), float(ctx.p("min_latency"))
        enough = len(quiet) >= int(ctx.p("min_quiet_samples")) and len(busy) >= 2
        up = enough and during is not None and before is not None and \
            during > factor * before and during > floor
        loaded = (mean(iops) or 0) >= float(ctx.p("min_client_iops"))
        profile = (ctx.effective("osd_mclock_profile") or "").strip().lower()
        where = ctx.provenance("osd_mclock_profile")
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
                note=f"recovery and scrubs slow down; set {profile or 'balanced'} back when "
                     "they are done (K8.2)"))
            if ctx.running_value("osd_mclock_profile") is not None:
                procedure.append(unset_step(ctx, "osd_mclock_profile", already=False))
        if profile == "custom":
            procedure.append("osd_mclock_profile is custom: raise the client reservation "
                             "(osd_mclock_scheduler_client_res) or lower the background "
                             "limits (osd_mclock_scheduler_background_*_lim) yourself.")
        fire = up and loaded and now > 0 and bool(changes or procedure) and \
            profile != "high_client_ops"
        ratio = during / before if during is not None and before else 0.0
        yield Check(
            target="osd", fire=fire, clear=not up or now == 0,
            severity=Severity.WARNING,
            summary=(f"client {attr.replace('_', ' ')} {(during or 0) * 1000:.1f} ms while "
                     f"PGs recover, backfill or scrub, against {(before or 0) * 1000:.1f} ms "
                     f"without ({ratio:.1f}x), under {scheduler} with osd_mclock_profile "
                     f"{profile or 'unknown'}" + (f" ({where})" if where else "")),
            evidence=(ctx.evidence(f"{attr} with background work", busy, "s"),
                      ctx.evidence(f"{attr} without", quiet, "s"),
                      ctx.evidence("PGs recovering, backfilling or scrubbing", work, "PGs",
                                   now=now),
                      ctx.evidence("client IOPS", iops, "IOPS")),
            changes=tuple(changes), procedure=tuple(procedure), badness=ratio)


RULES = (MclockBackgroundVsClients,)
