"""`stormdeck snapshot`: one Snapshot, printed, for scripts and bug reports."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from stormdeck.assembly import assemble
from stormdeck.base.text import printable
from stormdeck.base.units import ms, num, pct
from stormdeck.collectors.hub import Hub
from stormdeck.collectors.model import to_json_dict
from stormdeck.collectors.registry import cluster_sources
from stormdeck.output import add_format_options, dump, is_json
from stormdeck.sources import add_source_options


def register(sub: Any) -> None:
    p = sub.add_parser("snapshot", help="print one snapshot of the cluster",
                       description="Poll every source twice (so rates are real), merge, print. "
                                   "Exits 0, or 3 when no cluster source could be read.")
    add_format_options(p, "the whole snapshot")
    p.add_argument("--interval", type=float, default=1.0,
                   help="seconds between the two polls (default 1)")
    add_source_options(p)
    p.set_defaults(handler=cmd_snapshot)


def take_snapshot(args: argparse.Namespace):  # -> Snapshot

    hub = Hub(assemble(args, judge=False).sources, interval=max(0.2, args.interval),
              timeout=args.timeout)
    hub.start()
    try:
        hub.wait_polls(2, timeout=hub.longest_poll * 2 + args.interval + 1)
        return hub.snapshot()
    finally:
        hub.stop()


def cmd_snapshot(args: argparse.Namespace) -> int:
    snap = take_snapshot(args)
    if is_json(args):
        dump(to_json_dict(snap), args, allow_nan=False)
    else:
        print(render_text(snap))
    cluster = [s for n, s in snap.sources.items() if n in cluster_sources()]
    if cluster and not any(s.last_success for s in cluster):
        errors = "; ".join(f"{s.name}: {s.error}" for s in cluster)
        print(f"stormdeck: could not read the cluster ({printable(errors, 400)})",
              file=sys.stderr)
        return 3
    return 0


# ---- text rendering ----------------------------------------------------------------


def _bytes(v: float | None) -> str:
    if v is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(v) < 1024 or unit == "GiB":
            return f"{v:.0f}{unit}" if unit == "B" else f"{v:.1f}{unit}"
        v /= 1024
    return f"{v:.1f}GiB"


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*headers).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]


def render_text(snap) -> str:  # Snapshot -> str
    p = printable
    out: list[str] = []
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(snap.time))
    src = []
    for s in snap.sources.values():
        state = "ok" if s.ok else ("stale" if s.stale else "error")
        took = f" {s.poll_seconds:.2f}s" if s.poll_seconds is not None else ""
        how = f" ({s.mode})" if s.mode else ""  # Prometheus: recording rules or raw queries
        src.append(f"{s.name}{how} {state}{took}" + (f" ({p(s.error, 160)})" if s.error else ""))
    out.append(f"snapshot {when}   sources: {', '.join(src)}")
    c = snap.cluster
    if c is not None:
        ver = f"{p(c.release)} {p(c.version)}" if c.release else "version unknown"
        if c.versions_mixed:
            ver += " (mixed versions)"
        out.append(f"cluster {p(c.fsid or '?')}  {p(c.health or '?')}  {ver}  "
                   f"osdmap e{num(c.osdmap_epoch)}  OSDs {num(c.num_osds)}: "
                   f"{num(c.num_up_osds)} up, {num(c.num_in_osds)} in")
        for chk in c.checks:
            out.append(f"  {p(chk.severity)} {p(chk.code)}: {p(chk.summary)}"
                       + (" (muted)" if chk.muted else ""))
        m = c.mgr
        if m is not None and not m.serving and m.down_since is not None:
            when = time.strftime("%H:%M:%S", time.localtime(m.down_since))
            why = "none active in the mgr map" if m.available is False else \
                f"no answer to `{p(m.silent)}`"
            dated = time.strftime("%H:%M:%S", time.localtime(m.answered_at)) \
                if m.answered_at is not None else None
            out.append(f"mgr {p(m.active or '?')} down since {when}: {why}; "
                       + (f"PG states, latency and fill as of {dated}" if dated else
                          "PG states, latency and fill not read"))
        states = c.pg_states or c.pg_flags
        out.append(f"pgs {num(c.num_pgs)}: " + ", ".join(
            f"{n} {p(k)}" for k, n in sorted(states.items(), key=lambda kv: -kv[1])))
        out.append(f"client io: {num(c.client_read_iops)} rd/s, {num(c.client_write_iops)} "
                   f"wr/s, {_bytes(c.client_read_bps)}/s rd, {_bytes(c.client_write_bps)}/s wr"
                   f"; slow ops {num(c.slow_ops)}"
                   + (f" on {', '.join(p(d) for d in c.slow_ops_daemons)}"
                      if c.slow_ops_daemons else "")
                   + f"; flags: {', '.join(p(f) for f in c.osd_flags) or 'none'}")
    cv = snap.curve
    if cv is not None:
        roles = ", ".join(f"{p(m.addr)} {p(m.role or 'unreachable')}" for m in cv.mds)
        out.append(f"curve {p(cv.version or '?')}  mds: {roles or '-'}  operators "
                   f"{num(cv.operators)}  chunkservers online {num(cv.chunkservers_online)}"
                   f", offline {num(cv.chunkservers_offline)}"
                   + (f"  copysets unhealthy {cv.copysets_unhealthy} of {cv.copysets_total}"
                      if cv.copysets_total is not None else ""))
        for pool in cv.pools:
            out.append(f"  pool {p(pool.name)}: leadernum range {num(pool.leader_range, '{:g}')}"
                       f" (min {num(pool.leader_min, '{:g}')}, max "
                       f"{num(pool.leader_max, '{:g}')}), {num(pool.copysets)} copysets on "
                       f"{num(pool.chunkservers)} chunkservers")
        for addr, err in cv.endpoint_errors.items():
            out.append(f"  {p(addr)}: {p(err)}")
    if snap.daemons:
        rows = []
        for d in snap.daemons.values():
            cores = f"{num(d.cores_used, '{:.2f}')}/{num(d.cores_allowed, '{:g}')}"
            rows.append([
                p(d.id, 40), p(d.host or "-", 30),
                "up" if d.up else ("down" if d.up is False else "-"),
                "in" if d.in_ else ("out" if d.in_ is False else "-"), cores,
                f"{num(d.read_iops)}/{num(d.write_iops)}",
                ms(d.commit_latency if d.kind == "osd" else d.raft_append_latency),
                ms(d.apply_latency if d.kind == "osd" else d.raft_send_latency),
                num(d.pgs if d.kind == "osd" else d.copysets),
                num(d.primary_pgs if d.kind == "osd" else d.leaders),
                p(",".join(d.devices or ()) or "-", 40), pct(d.utilization)])
        out.append("")
        kinds = {d.kind for d in snap.daemons.values()}
        if kinds == {"chunkserver"}:
            names = ["APPEND", "SEND", "COPYSETS", "LEADERS"]
        elif "chunkserver" in kinds:
            names = ["COMMIT|APPEND", "APPLY|SEND", "PGS|COPYSETS", "PRIMARY|LEADERS"]
        else:
            names = ["COMMIT", "APPLY", "PGS", "PRIMARY"]
        out += _table(["DAEMON", "HOST", "UP", "IN", "CORES", "IOPS r/w", *names,
                       "DEVICES", "FULL"], rows)
    if snap.disks:
        rows = []
        for k in snap.disks.values():
            rows.append([p(k.key, 60), pct(k.util), num(k.read_iops), num(k.write_iops),
                         ms(k.read_await), ms(k.write_await), num(k.queue_depth, "{:.1f}"),
                         p(k.write_cache or "-"), p(k.device_cache or "-"),
                         p(k.transport or "-") + (" (virtual)" if k.virtual else ""),
                         p(",".join(k.daemons) or "-", 60)])
        out.append("")
        out += _table(["DISK", "UTIL", "R/S", "W/S", "R_AWAIT", "W_AWAIT", "QUEUE",
                       "KERNEL CACHE", "DEVICE CACHE", "TRANSPORT", "DAEMONS"], rows)
    if c is not None and c.pools:
        rows = [[str(pl.id), p(pl.name, 60), pl.type,
                 num(pl.size) + (f" ({pl.ec_k}+{pl.ec_m})" if pl.ec_k else ""),
                 str(pl.pg_num), pct(pl.used_ratio), p(",".join(pl.flags) or "-", 60),
                 num(pl.read_balance_score, "{:.2f}")] for pl in c.pools]
        out.append("")
        out += _table(["POOL", "NAME", "TYPE", "SIZE", "PGS", "USED", "FLAGS", "READ BALANCE"],
                      rows)
    return "\n".join(out)
