"""OSD memory: the targets of a host's OSDs against its RAM, each OSD's RSS against its target."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.collectors.model import ConfigOption, Daemon
from stormdeck.collectors.options import LAYER_FROM, size

GIB = float(1 << 30)
DEFAULT_TARGET = 4 * (1 << 30)  # osd_memory_target's default (osd.yaml.in: 4 GiB)
_FROM = LAYER_FROM


def running_target(opt: ConfigOption | None, osd_id: str) -> tuple[float, str] | None:
    """The osd_memory_target `osd_id` runs with from a layer above the config database
    (ceph.conf, command line, runtime), as it last reported it to the mgr (`config
    show`), and that layer; None where no such layer sets it, or it was never read."""
    r = opt.running.get(osd_id) if opt is not None else None
    if r is None or r.source is None:
        return None
    v = size(r.value)
    return (v, r.source) if v is not None else None


def target_of(ctx: Context, d: Daemon) -> float:
    """The osd_memory_target this OSD runs with as the config database says: the OSD's
    own, its host's mask (cephadm's autotune writes `osd/host:NAME`), osd, global, else
    the default."""
    return target_for(ctx, d.id, d.host)


def target_for(ctx: Context, osd_id: str, host: str | None) -> float:
    """target_of by the OSD's id and host."""
    opt = ctx.option("osd_memory_target")
    values = opt.values if opt is not None else {}
    for who in (osd_id, f"osd/host:{host}" if host else "", "osd", "global"):
        if who and who in values and (v := size(values[who])) is not None:
            return v
    default = size(opt.default) if opt is not None and opt.default else None
    return default or float(DEFAULT_TARGET)


class OsdMemory(Rule):
    id = "ceph.osd.memory"
    title = "OSD memory: targets beyond the host's RAM, or RSS far past the target"
    source = "osd-memory-target, running-config"
    explanation = (
        "osd_memory_target is what an OSD tries to keep mapped (its caches shrink to it); "
        "it is not a limit, and the process's RSS overshoots it during recovery and "
        "peering. When a host's RAM cannot hold its OSDs' targets with room to spare, the "
        "kernel's OOM killer ends an OSD, which is a top cause of OSDs flapping. Two "
        "judgements: the targets of a host's OSDs summed against its RAM, beyond the "
        "share cephadm's autotune gives OSDs (mgr/cephadm/autotune_memory_target_ratio, "
        "0.7 of RAM); and an OSD whose RSS stays past its target by more than the "
        "overshoot allowed here (1.5 x by default, stormdeck's margin) for the rule's "
        "duration: its caches cannot shrink enough (pglog, onodes during recovery).")
    # Config (the targets), the OSDs and the hosts' RAM: not the disks, Curve or evidence.
    reads = ("cluster", "daemons", "hosts")

    def __init__(self) -> None:
        # The targets as last worked out: (option, ids, hosts) -> (each OSD's target,
        # each host's targets). The config and the OSDs' hosts rarely move; their RSS
        # does, so only the RSS is read again each tick.
        self._made: tuple[Any, list[str], list[Any], list[float],
                          dict[str, list[float]], dict[str, list[str]],
                          frozenset[str]] | None = None
        # host -> where each of its OSDs' targets came from, as last worked out.
        self._sources: dict[str, list[str]] = {}
        # The OSDs past their limit, by the RSS column and targets they were found in.
        self._hot: tuple[list[Any], list[float], float, list[int]] | None = None

    def _targets(self, ctx: Context, ids: list[str], host_of: list[Any]
                 ) -> tuple[list[float], dict[str, list[float]]]:
        opt = ctx.option("osd_memory_target")
        read = ctx.cluster.running_read if ctx.cluster is not None else frozenset()
        made = self._made
        if made is not None and made[0] is opt and made[6] is read and made[1] == ids \
                and made[2] == host_of:
            self._sources = made[5]
            return made[3], made[4]
        own = opt.values if opt is not None else {}
        running = opt.running if opt is not None else {}
        # What an OSD without its own value runs with depends only on its host:
        # target_of once per host, not per OSD (10,000 a tick on the librados path).
        per_host: dict[str | None, float] = {}
        by_host: dict[str, list[float]] = {}
        targets = []
        self._sources = sources = {}
        for osd_id, host in zip(ids, host_of, strict=True):
            ran = running_target(opt, osd_id) if osd_id in running else None
            if ran is not None:
                # What the OSD reported it runs with outranks what the database holds:
                # `ceph tell`, ceph.conf and the command line all win over it.
                target = ran[0]
                if host:
                    by_host.setdefault(host, []).append(target)
                    sources.setdefault(host, []).append(ran[1])
                targets.append(target)
                continue
            if host:
                # Read and not above the database: it runs the database's (or default).
                sources.setdefault(host, []).append("mon" if osd_id in read else "unread")
            if osd_id in own:
                target = target_for(ctx, osd_id, host)
            else:
                got = per_host.get(host)
                target = per_host[host] = got if got is not None else target_for(
                    ctx, osd_id, host)
            if host:
                by_host.setdefault(host, []).append(target)
            targets.append(target)
        if ctx.columns is not None:  # the walk (the reference) keeps nothing
            self._made = (opt, ids, host_of, targets, by_host, sources, read)
        return targets, by_host

    def check(self, ctx: Context) -> Iterable[Check]:
        hosts = ctx.latest.hosts
        overshoot = float(ctx.p("rss_overshoot"))
        share = float(ctx.p("ram_share"))
        # Ids, hosts and RSS read as columns: making 10,000 Daemons to read three
        # fields of each was most of this rule's cost.
        ids, (host_of, rss_of) = ctx.osd_columns("host", "rss_bytes")
        targets, by_host = self._targets(ctx, ids, host_of)
        if ctx.columns is not None:
            # Only an OSD past its limit or tracked can change a verdict: those past it
            # picked in one pass while the RSS column or the targets are new (the same
            # lists stand for a stats period), the tracked ones by their place.
            hot = self._hot
            if hot is None or hot[0] is not rss_of or hot[1] is not targets or \
                    hot[2] != overshoot:
                past = [] if rss_of.count(None) == len(rss_of) else [
                    i for i, (rss, target) in enumerate(zip(rss_of, targets, strict=True))
                    if rss is not None and rss > overshoot * target]
                hot = self._hot = (rss_of, targets, overshoot, past)
            walk: Iterable[int] = ctx.and_tracked(ids, hot[3])
        else:
            walk = range(len(ids))
        for i in walk:
            osd_id, rss, target = ids[i], rss_of[i], targets[i]
            if rss is None:
                continue
            fire = rss > overshoot * target
            if not ctx.matters(osd_id, fire):
                continue
            yield Check(
                target=osd_id, fire=fire, clear=rss < target * (1 + (overshoot - 1) / 2),
                severity=Severity.WARNING,
                summary=f"{osd_id} RSS {rss / GIB:.1f} GiB, {rss / target:.1f} x its "
                        f"osd_memory_target {target / GIB:.1f} GiB",
                evidence=(ctx.evidence("RSS", ctx.daemon_values(osd_id, "rss_bytes"), "B"),
                          ctx.evidence("osd_memory_target", [target], "B")),
                procedure=(
                    f"`ceph daemon {osd_id} dump_mempools` on its host: which pool holds the "
                    "memory (osd_pglog, bluestore_cache_*, buffer_anon).",
                    "`journalctl -k | grep -i oom` on the host: has the OOM killer ended "
                    "OSDs already?",
                    "A long pglog (many PGs per OSD, long recovery) is memory no cache "
                    "setting gives back: fewer PGs per OSD, or more RAM."),
                badness=rss / target)
        why = ctx.cluster.running_error if ctx.cluster is not None else None
        for host, osds in sorted(by_host.items()):
            h = hosts.get(host)
            ram = h.mem_total if h is not None else None
            if not ram:
                continue
            total = sum(osds)
            fire = total > share * ram
            yield Check(
                target=f"host {host}", fire=fire, clear=total <= share * ram * 0.95,
                severity=Severity.CRITICAL if total > ram else Severity.WARNING,
                summary=f"host {host}: {len(osds)} OSDs' osd_memory_target sum to "
                        f"{total / GIB:.1f} GiB, {total / ram:.0%} of its {ram / GIB:.1f} GiB "
                        f"RAM (beyond {share:.0%}); {_where(self._sources.get(host, []), why)}",
                evidence=(ctx.evidence("targets summed", [total], "B"),
                          ctx.evidence("RAM", [float(ram)], "B")),
                procedure=(
                    *_winning_layer(self._sources.get(host, []), host),
                    f"Lower the targets so they sum to about {share:.0%} of RAM: `ceph "
                    f"config set osd/host:{host} osd_memory_target "
                    f"{int(share * ram / len(osds))}` (or cephadm's "
                    "osd_memory_target_autotune).",
                    "Below 2-4 GiB an OSD's caches are small and reads go to disk: if that "
                    "is where it ends, the host needs more RAM or fewer OSDs."),
                badness=total / ram)


def _winning_layer(sources: list[str], host: str) -> tuple[str, ...]:
    """A database change is lost under a layer that outranks it: say which to change."""
    steps = []
    if "override" in sources:
        steps.append("Targets set at runtime outrank the config database until the OSDs "
                     "restart: `ceph tell osd.N config unset osd_memory_target` hands each "
                     "back to it (a `ceph config set` alone changes nothing they run with).")
    if "file" in sources or "cmdline" in sources:
        steps.append(f"ceph.conf (or the command line) on {host} sets the target and "
                     "outranks the config database: change it there and restart the OSDs, "
                     "or remove it there and set it with `ceph config set`.")
    if "env" in sources:
        steps.append("The OSDs' environment sets the target and outranks the database: "
                     "change it where the OSDs are deployed (their container's "
                     "environment), not in ceph.conf or the database.")
    return tuple(steps)


def _where(sources: list[str], why: str | None = None) -> str:
    """Where the summed targets came from: "3 as the OSDs run them, set at runtime (...)"."""
    counts: dict[str, int] = {}
    for src in sources:
        counts[src] = counts.get(src, 0) + 1
    parts = [f"{n} {_FROM.get(src, src)}" for src, n in sorted(counts.items())
             if src != "unread"]
    said = "as the OSDs run them: " + ", ".join(parts) if parts else ""
    if unread := counts.get("unread"):
        tail = f"{unread} not read yet (`config show`), the config database's value taken"
        if why:
            tail += f" ({why})"
        said = f"{said}; {tail}" if said else tail
    return said


RULES = (OsdMemory,)
