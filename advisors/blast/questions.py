"""whatif's questions, one prediction each: out, CRUSH weight, reweight, pg_num, down, upmaps."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar, cast

from stormdeck.advisors import crushlib
from stormdeck.advisors.blast.compare import compare
from stormdeck.advisors.blast.mapping import (
    Up,
    _weights,
    crush_up_sets,
    lowered_up_sets,
    osdmaptool_up,
    osdmaptool_up_now,
    to_up,
)
from stormdeck.advisors.blast.prediction import Prediction
from stormdeck.advisors.blast.seeds import mask_of, stable_mod
from stormdeck.advisors.blast.tools import Tools
from stormdeck.base.errors import UserError
from stormdeck.collectors.placement import ClusterState, gc_paused

F = TypeVar("F", bound=Callable[..., Any])


def _paused(fn: F) -> F:
    """Run a prediction with the cyclic collector held off (collectors.placement.gc_paused):
    it walks a million PGs and would otherwise be interrupted by collections that walk them
    all again."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with gc_paused():
            return fn(*args, **kwargs)
    return cast(F, run)


def _pg_bytes(state: ClusterState, pgid: str) -> int:
    pg = state.pgs.get(pgid)
    return pg.bytes if pg is not None else 0


def _current_up(state: ClusterState) -> dict[str, Up]:
    return {pgid: pg.up for pgid, pg in state.pgs.items()}


def _write(path: str, data: bytes) -> None:
    Path(path).write_bytes(data)


def _check_osds(state: ClusterState, osds: Iterable[int]) -> list[int]:
    ids = sorted(set(osds))
    missing = [i for i in ids if i not in state.osds]
    if missing:
        raise UserError(f"osd.{missing[0]} is not in this cluster's OSD map")
    return ids


def _lowered(state: ClusterState, tools: Tools, mapfile: str, tmp: str,
             lowered: Mapping[int, float]
             ) -> tuple[tuple[dict[str, Up], dict[str, Up], str] | None, str]:
    """lowered_up_sets, or None and why every PG is mapped with the tools instead."""
    try:
        return lowered_up_sets(state, tools, mapfile, tmp, lowered), ""
    except crushlib.Unsupported as exc:
        return None, (f"every PG mapped with the tools (slower at scale): only the PGs that "
                      f"can change could not be mapped alone: {exc}")


@_paused
def predict_out(state: ClusterState, tools: Tools, osds: Iterable[int],
                what: str | None = None) -> Prediction:
    """OSDs marked out: only the PGs that can change, by Ceph's crush_do_rule in-process
    (lowered_up_sets); where that cannot be done exactly, osdmaptool --mark-out for one,
    crushtool with their weights at 0 for several (osdmaptool takes only one --mark-out)."""
    started = time.monotonic()
    ids = _check_osds(state, osds)
    what = what or f"out {' '.join(f'osd.{i}' for i in ids)}"
    already = [i for i in ids if not state.osds[i].in_]
    with tools.workdir() as tmp:
        mapfile = os.path.join(tmp, "osdmap")
        _write(mapfile, state.osdmap)
        fast, slow_note = _lowered(state, tools, mapfile, tmp, {i: 0.0 for i in ids})
        if fast is not None:
            before, after, method = fast
        elif len(ids) == 1:
            before = osdmaptool_up_now(tools, state, mapfile)
            # --mark-out also marks the OSD up: if it is down now, the up sets before are
            # the map's own, and an out OSD is in no up set either way.
            after = osdmaptool_up(tools, mapfile, ["--mark-out", str(ids[0])])
            method = (f"osdmaptool --test-map-pgs-dump-all --clear-temp, without and with "
                      f"--mark-out {ids[0]}, up sets compared")
        else:
            crushfile = os.path.join(tmp, "crush")
            tools.run("osdmaptool", [tools.inside(mapfile), "--export-crush",
                                     tools.inside(crushfile)])
            weights = _weights(state)
            before = crush_up_sets(state, tools, crushfile, weights)
            after = crush_up_sets(state, tools, crushfile,
                                  _weights(state, {i: 0.0 for i in ids}))
            method = ("crushtool --test --pool-id per pool with the OSDs' weights at 0 "
                      "(osdmaptool marks out only one), upmaps and down OSDs applied")
    p = compare(state, what, before, after, method=method,
                tool=tools.describe(state.version), going_out=ids,
                rest_from_state=fast is not None)
    if slow_note:
        p.notes.append(slow_note)
    if already:
        p.notes.append(f"{', '.join(f'osd.{i}' for i in already)} already out")
    p.seconds = time.monotonic() - started
    return p


@_paused
def predict_crush_weight(state: ClusterState, tools: Tools,
                         weights: Mapping[int, float]) -> Prediction:
    started = time.monotonic()
    ids = _check_osds(state, weights)
    adjust = ",".join(f"{i}:{weights[i]:g}" for i in ids)
    with tools.workdir() as tmp:
        mapfile = os.path.join(tmp, "osdmap")
        _write(mapfile, state.osdmap)
        before = osdmaptool_up_now(tools, state, mapfile)
        after = osdmaptool_up(tools, mapfile, ["--adjust-crush-weight", adjust])
    p = compare(state, "crush weight " + ", ".join(f"osd.{i} {weights[i]:g}" for i in ids),
                before, after, tool=tools.describe(state.version),
                method="osdmaptool --test-map-pgs-dump-all --clear-temp, without and with "
                       f"--adjust-crush-weight {adjust}, up sets compared")
    p.seconds = time.monotonic() - started
    return p


@_paused
def predict_reweight(state: ClusterState, tools: Tools,
                     weights: Mapping[int, float]) -> Prediction:
    started = time.monotonic()
    ids = _check_osds(state, weights)
    for i in ids:
        if not 0.0 <= weights[i] <= 1.0:
            raise UserError(f"a reweight is between 0 and 1, not {weights[i]:g}")
    with tools.workdir() as tmp:
        mapfile, crushfile = os.path.join(tmp, "osdmap"), os.path.join(tmp, "crush")
        _write(mapfile, state.osdmap)
        tools.run("osdmaptool", [tools.inside(mapfile), "--export-crush",
                                 tools.inside(crushfile)])
        fast, slow_note = None, ""
        now = _weights(state)
        if all(weights[i] <= now.get(i, 0.0) for i in ids):  # only lowered: few PGs move
            fast, slow_note = _lowered(state, tools, mapfile, tmp, dict(weights))
        if fast is not None:
            before, after, method = fast
        else:
            before = crush_up_sets(state, tools, crushfile, now)
            after = crush_up_sets(state, tools, crushfile, _weights(state, dict(weights)))
            method = ("crushtool --test --pool-id per pool with --weight (osdmaptool has no "
                      "reweight option), before and after, upmaps and down OSDs applied")
    p = compare(state, "reweight " + ", ".join(f"osd.{i} {weights[i]:g}" for i in ids),
                before, after, tool=tools.describe(state.version), method=method,
                rest_from_state=fast is not None)
    if slow_note:
        p.notes.append(slow_note)
    p.seconds = time.monotonic() - started
    return p


@_paused
def predict_pg_num(state: ClusterState, tools: Tools, pool_name: str, target: int,
                   key: str = "pg_num") -> Prediction:
    """pg_num (and pgp_num with it, as the mgr steps it) or pgp_num alone to `target`:
    each PG's seed over pgp_num before and after, through the pool's rule."""
    started = time.monotonic()
    pool = state.pool_by_name(pool_name)
    if pool is None:
        raise UserError(f"there is no pool {pool_name!r} in this cluster")
    if target < 1 or target > 1 << 17:
        raise UserError(f"{key} {target} is not a PG count Ceph accepts")
    old_pg, old_pgp = pool.pg_num, pool.pgp_num
    new_pg = target if key == "pg_num" else old_pg
    if key == "pgp_num" and target > old_pg:
        raise UserError(f"pgp_num {target} is above pool {pool_name}'s pg_num {old_pg}")
    new_pgp = target
    # Every PG that exists once the split is done (or before a merge starts): before the
    # placement change it sits on its seed over the old pgp_num; after, over the new.
    n = max(old_pg, new_pg)
    old_mask = mask_of(old_pg)
    children: dict[int, int] = {}
    for ps in range(n):
        parent = stable_mod(ps, old_pg, old_mask)
        children[parent] = children.get(parent, 0) + 1
    state.need_bytes(f"{pool.id}.{ps:x}" for ps in range(old_pg))
    pg_bytes = {}
    for ps in range(n):
        parent = stable_mod(ps, old_pg, old_mask)
        pg_bytes[f"{pool.id}.{ps:x}"] = \
            _pg_bytes(state, f"{pool.id}.{parent:x}") // children[parent]
    with tools.workdir() as tmp:
        mapfile, crushfile = os.path.join(tmp, "osdmap"), os.path.join(tmp, "crush")
        _write(mapfile, state.osdmap)
        tools.run("osdmaptool", [tools.inside(mapfile), "--export-crush",
                                 tools.inside(crushfile)])
        weights = _weights(state)
        parents = crush_up_sets(state, tools, crushfile, weights, [pool], {pool.id: old_pgp},
                                {pool.id: old_pg})
        after = crush_up_sets(state, tools, crushfile, weights, [pool], {pool.id: new_pgp},
                              {pool.id: n})
    # A split child's data starts where its parent's is (the parent's upmap included: the
    # child has no entry of its own), and goes where its own seed over the new pgp_num maps.
    before = {f"{pool.id}.{ps:x}": parents[f"{pool.id}.{stable_mod(ps, old_pg, old_mask):x}"]
              for ps in range(n)}
    p = compare(state, f"{key} of {pool_name} {old_pg if key == 'pg_num' else old_pgp} -> "
                f"{target}", before, after, pg_bytes, tool=tools.describe(state.version),
                method="placement seeds as raw_pg_to_pps (ceph_stable_mod over pgp_num, "
                       "crush_hash32_2 with the pool id) through the pool's rule by "
                       "crushtool --test --pool-id, old pgp_num against new")
    ratio = state.target_max_misplaced_ratio or 0.05
    p.notes.append(f"the mgr steps pgp_num a little at a time so that misplaced objects stay "
                   f"under target_max_misplaced_ratio ({ratio:g}): the move is spread over "
                   "many small rounds, each waiting for the last to backfill, so it takes "
                   "longer than the bytes alone say")
    if key == "pg_num" and new_pg > old_pg:
        p.notes.append(f"{new_pg - old_pg} new PGs are split off (bytes per child: the "
                       "parent's shared evenly)")
    p.seconds = time.monotonic() - started
    return p


@_paused
def predict_down(state: ClusterState, tools: Tools | None, osds: Iterable[int],
                 verdict: Mapping[str, Any] | None = None, what: str | None = None
                 ) -> Prediction:
    """OSDs going down and staying down (noup held, a host stopped): PGs lose those OSDs
    from their up sets at once; below min_size they stop serving IO. `verdict` is Ceph's
    own `osd ok-to-stop` answer, compared. Then, after mon_osd_down_out_interval unless
    noout holds them in, the OSDs are marked out and their data backfills elsewhere."""
    started = time.monotonic()
    ids = _check_osds(state, osds)
    down = set(ids) | {i for i, o in state.osds.items() if not o.up}
    before = _current_up(state)
    after = {}
    for pgid, up in before.items():
        pool = state.pools.get(int(pgid.split(".")[0]))
        after[pgid] = to_up(up, pool, down) if pool is not None else up
    p = compare(state, f"down {' '.join(f'osd.{i}' for i in ids)}", before, after,
                method="each PG's up set now (pg dump) without the OSDs going down",
                tool="no tool: pg dump and osd dump")
    p.copies_to_create, p.bytes_to_move, p.largest_per_osd = 0, 0, 0
    for f in p.per_osd:
        f.bytes_in, f.bytes_out, f.used_ratio_after = 0, 0, f.used_ratio_now
    p.osds_past_nearfull, p.osds_past_backfillfull, p.osds_past_full = [], [], []
    p.eta_seconds, p.eta_note = 0.0, "at once: the PGs peer without those OSDs"
    if what:
        p.what = what
    if verdict is not None:
        bad = sorted(str(x) for x in verdict.get("bad_become_inactive") or ())
        p.notes.append(f"ceph osd ok-to-stop: ok_to_stop={verdict.get('ok_to_stop')}, "
                       f"{len(bad)} become inactive, "
                       f"{len(verdict.get('ok_become_degraded') or ())} become degraded"
                       + ("" if set(bad) == set(p.pgs_inactive) else
                          f" (it names {', '.join(bad[:8])}; this count is of the up sets "
                          "alone)"))
        for pgid in bad:
            if pgid not in p.pgs_inactive:
                p.pgs_inactive.append(pgid)
    held = "noout" in state.flags or all("noout" in state.osds[i].group_flags for i in ids)
    interval = state.down_out_interval
    if held:
        p.notes.append("noout is set: the OSDs stay in, nothing backfills while they are down")
    elif interval == 0:
        p.notes.append("mon_osd_down_out_interval is 0: down OSDs are never marked out "
                       "automatically")
    elif tools is not None:
        p.then = predict_out(state, tools, ids,
                             what=f"out {' '.join(f'osd.{i}' for i in ids)} after "
                                  f"mon_osd_down_out_interval ({interval or 600:g} s) "
                                  "unless noout is set")
    p.seconds = time.monotonic() - started
    return p


# ---- upmap and pg-upmap-primary (`whatif upmap`, `whatif upmap-primary`) -----------------
# No rule proposes either yet (ceph.leaders names pg-upmap-primary in its procedure only):
# these predict what an operator's own command would do, from the same map.


def predict_upmap_items(state: ClusterState, tools: Tools, pgid: str,
                        pairs: Sequence[tuple[int, int]],
                        crushfile: str | None = None) -> Prediction:
    """`ceph osd pg-upmap-items PGID FROM TO [FROM TO ...]`: the PG's up set with the items
    applied as OSDMap::_apply_upmap does. The command replaces the PG's whole items list, so
    the rule's own (raw) set is mapped by crushtool and the new items applied to it."""
    started = time.monotonic()
    pg = state.pgs.get(pgid)
    pool = state.pools.get(pg.pool) if pg is not None else None
    if pg is None or pool is None:
        raise UserError(f"there is no PG {pgid} in this cluster's pg dump")
    _check_osds(state, [o for pair in pairs for o in pair])
    if any(frm == to for frm, to in pairs):
        raise UserError("an upmap pair maps an OSD to itself")
    changed = replace(state, upmap_items={**state.upmap_items, pgid: tuple(pairs)})
    weights = _weights(state)
    with tools.workdir() as tmp:
        if crushfile is None:
            mapfile = os.path.join(tmp, "osdmap")
            _write(mapfile, state.osdmap)
            crushfile = os.path.join(tmp, "crush")
            tools.run("osdmaptool", [tools.inside(mapfile), "--export-crush",
                                     tools.inside(crushfile)])
        before = crush_up_sets(state, tools, crushfile, weights, pools=[pool])
        after = crush_up_sets(changed, tools, crushfile, weights, pools=[pool])
        # The set the new items apply to: the rule's, without the PG's old items.
        base = crush_up_sets(replace(changed, upmap_items={**state.upmap_items, pgid: ()}),
                             tools, crushfile, weights, pools=[pool])[pgid]
    shown = " ".join(f"{a} {b}" for a, b in pairs)
    p = compare(state, f"pg-upmap-items {pgid} {shown}", {pgid: before[pgid]},
                {pgid: after[pgid]},
                method="the pool's rule mapped by crushtool --test --pool-id, the PG's new "
                       "upmap items applied as OSDMap::_apply_upmap does (they replace its "
                       "old ones)", tool=tools.describe(state.version))
    old = state.upmap_items.get(pgid)
    if old:
        p.notes.append(f"{pgid} has upmap items now ({', '.join(f'{a}->{b}' for a, b in old)}):"
                       " the command replaces them")
    for frm, to in pairs:
        if frm not in base:
            p.notes.append(f"osd.{frm} is not in {pgid}'s set: the pair {frm} {to} moves "
                           "nothing")
        elif to in base:
            p.notes.append(f"osd.{to} is in {pgid}'s set already: the pair {frm} {to} is "
                           "skipped, as Ceph skips it")
    p.seconds = time.monotonic() - started
    return p


def predict_upmap_primary(state: ClusterState, pgid: str, osd: int) -> Prediction:
    """`ceph osd pg-upmap-primary PGID OSD` (Reef and later, replicated pools): the primary
    moves to OSD within the same up set; no data moves, reads and the primary's work do."""
    started = time.monotonic()
    pg = state.pgs.get(pgid)
    pool = state.pools.get(pg.pool) if pg is not None else None
    if pg is None or pool is None:
        raise UserError(f"there is no PG {pgid} in this cluster's pg dump")
    if state.release in ("luminous", "mimic", "nautilus", "octopus", "pacific", "quincy"):
        raise UserError(f"pg-upmap-primary needs Reef (18) or later; this cluster runs "
                        f"{state.version} {state.release}")
    if pool.erasure:
        raise UserError(f"{pgid} is in an erasure-coded pool: pg-upmap-primary takes "
                        "replicated pools only")
    if osd not in pg.up:
        raise UserError(f"osd.{osd} is not in {pgid}'s up set ({', '.join(map(str, pg.up))}): "
                        "Ceph refuses a primary outside it")
    after = (osd, *(o for o in pg.up if o != osd))
    p = compare(state, f"pg-upmap-primary {pgid} osd.{osd}", {pgid: pg.up}, {pgid: after},
                method="the PG's up set now (pg dump), the primary moved to the front as "
                       "OSDMap::_apply_upmap_primary does", tool="no tool: pg dump")
    p.notes.append(f"moves no data: the primary of {pgid} goes from osd.{pg.up[0]} to "
                   f"osd.{osd}" if after != pg.up else
                   f"moves no data and changes nothing: osd.{osd} is {pgid}'s primary already")
    p.seconds = time.monotonic() - started
    return p
