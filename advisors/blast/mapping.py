"""Each PG's up set before and after a change: osdmaptool, crushtool, or crush_do_rule in-process.

Ceph's own crush_do_rule (advisors/crushlib.py) maps only the few PGs a lowered weight can
move; the tools map the rest.
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import operator
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from stormdeck.advisors import crushlib
from stormdeck.advisors.blast.seeds import mask_of, pps, stable_mod
from stormdeck.advisors.blast.tools import Tools
from stormdeck.collectors.placement import NONE_OSD, ClusterState, PoolInfo

Up = tuple[int, ...]
PG_LINE = re.compile(r"^(\d+\.[0-9a-f]+)\s+raw \(\[([-\d,]*)\], p-?\d+\)\s+up \(\[([-\d,]*)\]")
CRUSH_LINE = re.compile(r"^CRUSH rule \d+ x (\d+) \[([-\d,]*)\]")


def _ids(text: str) -> Up:
    return tuple(int(x) for x in text.split(",") if x)


def parse_dump_all(text: str) -> dict[str, Up]:
    """osdmaptool --test-map-pgs-dump-all: each PG's *up* set (its acting is pg_temp).

    A million lines: split, not a regex per line (the regex only for a line whose shape
    the split does not recognise)."""
    up = {}
    for line in text.splitlines():
        f = line.split(" ", 6)
        # "1.0 raw ([6,3,7], p6) up ([6,3,7], p6) acting ...": f[5] is "([6,3,7],"
        if len(f) == 7 and f[1] == "raw" and f[4] == "up" and f[5][:2] == "([":
            inner = f[5][2:-2]
            up[f[0]] = tuple(map(int, inner.split(","))) if inner else ()
            continue
        m = PG_LINE.match(line)
        if m:
            up[m.group(1)] = _ids(m.group(3))
    return up


def parse_mappings(text: str) -> dict[int, Up]:
    """crushtool --test --show-mappings: x -> the OSDs the rule chose."""
    out = {}
    for line in text.splitlines():
        m = CRUSH_LINE.match(line)
        if m:
            out[int(m.group(1))] = _ids(m.group(2))
    return out


def osdmaptool_up(tools: Tools, mapfile: str, extra: Sequence[str] = ()) -> dict[str, Up]:
    return parse_dump_all(tools.run("osdmaptool", [tools.inside(mapfile),
                                                   "--test-map-pgs-dump-all", "--clear-temp",
                                                   *extra]))


# The map as it is, mapped once: a second prediction on the same map (the guard's, then
# whatif's, or several OSDs tried in turn) does not map every PG again. One entry: at a
# million PGs it is a few hundred MB, and only the newest map matters.
_MAPPED: dict[tuple[bytes, str], dict[str, Up]] = {}


def osdmaptool_up_now(tools: Tools, state: ClusterState, mapfile: str) -> dict[str, Up]:
    """Every PG's up set from the map as it is, cached by the map's own bytes."""
    key = (hashlib.sha256(state.osdmap).digest(), tools.describe(state.version))
    got = _MAPPED.get(key)
    if got is None:
        got = osdmaptool_up(tools, mapfile)
        _MAPPED.clear()
        _MAPPED[key] = got
    return got


# ---- only the PGs that can change -------------------------------------------------------
#
# Lowering OSDs' weights (out, or a smaller reweight) changes only the CRUSH draws that
# picked one of them: is_out() then rejects a draw it accepted, never accepts one it
# rejected, and a draw it accepted put that OSD in the PG's raw set. So the PGs that can
# change are those whose raw set holds one of the OSDs: in the up set (pg dump) while the
# OSD is up, and otherwise short of a member; plus every PG with a pg_upmap or
# pg_upmap_items entry (an upmap to an OSD that goes out is dropped). Those few are mapped
# before and after with Ceph's own crush_do_rule (advisors/crushlib.py); every other PG
# keeps its up set. The "before" mapping must equal pg dump's up sets for every candidate
# and a sample of the rest, or the whole map is mapped by osdmaptool as before.

SAMPLE = 256  # PGs outside the candidates checked against pg dump


def _mapped_up(state: ClusterState, mapper: crushlib.Mapper, pool: PoolInfo, pgid: str,
               ps: int, wvec: Any, weights: Mapping[int, float], down: set[int]) -> Up:
    """OSDMap::_pg_to_up_acting_osds's up set: CRUSH, nonexistent OSDs removed, upmaps,
    down OSDs removed."""
    raw = mapper.do_rule(pool.rule, pps(pool.id, ps, pool.pgp_num, pool.hashpspool),
                         pool.size, wvec)
    if pool.erasure:
        raw = tuple(o if o in state.osds else NONE_OSD for o in raw)
    else:
        raw = tuple(o for o in raw if o in state.osds)
    return to_up(apply_upmaps(pgid, raw, state, weights), pool, down)


def lowered_up_sets(state: ClusterState, tools: Tools, mapfile: str, tmp: str,
                    lowered: Mapping[int, float]) -> tuple[dict[str, Up], dict[str, Up], str]:
    """Up sets before and after OSDs' weights are lowered (out = 0), mapping only the PGs
    that can change. Raises crushlib.Unsupported when that cannot be done exactly."""
    if tools.root is not None or tools.cephadm is not None:
        raise crushlib.Unsupported("the tools run in a release root or a container, not "
                                   "this host's library")
    weights = _weights(state)
    ids = set(lowered)
    if any(lowered[i] > weights.get(i, 0.0) for i in ids):
        raise crushlib.Unsupported("a weight goes up")
    down = {i for i, o in state.osds.items() if not o.up}
    crushfile = os.path.join(tmp, "crush.bin")
    tools.run("osdmaptool", [tools.inside(mapfile), "--export-crush", tools.inside(crushfile)])
    dump = json.loads(tools.run("crushtool", ["-i", tools.inside(crushfile), "--dump"]))
    upmapped = state.upmap.keys() | state.upmap_items.keys()
    short = bool(ids & down)  # a down OSD is in no up set: look for PGs short of a member
    # A million PGs: comprehensions and C-level counting, not a statement-per-PG loop.
    items = state.pgs.items()
    if len(ids) == 1:
        one = next(iter(ids))
        hit = {pgid for pgid, pg in items if one in pg.up}
    else:
        hit = {pgid for pgid, pg in items if not ids.isdisjoint(pg.up)}
    if short:
        size = {p.id: p.size for p in state.pools.values()}
        hit |= {pgid for pgid, pg in items
                if len(pg.up) - pg.up.count(NONE_OSD) < size.get(pg.pool, 0)}
    hit |= upmapped & state.pgs.keys()
    candidates = sorted(hit, key=_pg_order)
    step = max(len(state.pgs) // SAMPLE, 1)
    sample = [pgid for pgid in itertools.islice(state.pgs, 0, None, step) if pgid not in hit]
    counts = collections.Counter(map(operator.attrgetter("pool"), state.pgs.values()))
    missing = [p.name for p in state.pools.values() if counts.get(p.id, 0) != p.pg_num]
    if missing:
        raise crushlib.Unsupported(f"pg dump does not list every PG of {missing[0]}")
    after_w = dict(weights)
    after_w.update(lowered)
    # 16.16 fixed point: the map's own weights come back from osd dump as floats (rounded
    # back); a new reweight is truncated as the monitor does (int)(w * 0x10000).
    fixed_now = {i: round(w * 0x10000) for i, w in weights.items()}
    fixed_after = dict(fixed_now)
    fixed_after.update({i: int(w * 0x10000) for i, w in lowered.items()})
    with crushlib.Mapper(dump) as mapper:
        max_osd = max(state.osds, default=-1) + 1
        wnow, wafter = mapper.weights(fixed_now, max_osd), mapper.weights(fixed_after, max_osd)
        before: dict[str, Up] = {}
        after: dict[str, Up] = {}
        for pgid in candidates + sample:
            pg = state.pgs[pgid]
            pool = state.pools.get(pg.pool)
            if pool is None:
                continue
            now = _mapped_up(state, mapper, pool, pgid, pg.ps, wnow, weights, down)
            if now != pg.up:
                raise crushlib.Unsupported(
                    f"Ceph's own CRUSH code puts PG {pgid} on {list(now)}, pg dump on "
                    f"{list(pg.up)} (pg dump older than the map?)")
            before[pgid] = now
            after[pgid] = _mapped_up(state, mapper, pool, pgid, pg.ps, wafter, after_w, down)
    moved = [pgid for pgid in sample if after[pgid] != before[pgid]]
    if moved:  # the reasoning above says this cannot be: trust none of it
        raise crushlib.Unsupported(f"PG {moved[0]}, which holds none of the OSDs, would move")
    method = (f"{len(candidates)} PGs that can change (up set holding the OSD, or an upmap) "
              "mapped before and after by Ceph's crush_do_rule (libceph-common, in-process) "
              "on the CRUSH map from osdmaptool --export-crush and crushtool --dump, "
              f"checked against pg dump's up sets with {len(sample)} more; every other PG "
              "keeps its up set")
    return before, after, method


def crush_map(tools: Tools, crushfile: str, pool: PoolInfo, count: int,
              weights: Mapping[int, float]) -> dict[int, Up]:
    """The rule's choice for seeds 0..count-1 of `pool` (hashed with the pool id as
    raw_pg_to_pps does, by crushtool's --pool-id), under device weights `weights`."""
    args = ["-i", tools.inside(crushfile), "--test", "--rule", str(pool.rule), "--num-rep",
            str(pool.size), "--show-mappings"]
    if pool.hashpspool:
        args += ["--pool-id", str(pool.id), "--min-x", "0", "--max-x", str(count - 1)]
    else:  # legacy pools: seed + pool id, unhashed
        args += ["--min-x", str(pool.id), "--max-x", str(pool.id + count - 1)]
    for osd, w in sorted(weights.items()):
        args += ["--weight", str(osd), f"{w:.5f}"]
    got = parse_mappings(tools.run("crushtool", args))
    return got if pool.hashpspool else {x - pool.id: v for x, v in got.items()}


def apply_upmaps(pgid: str, raw: Up, state: ClusterState, weights: Mapping[int, float]) -> Up:
    """OSDMap::_apply_upmap: pg_upmap replaces the set (unless a target is out), then each
    pg_upmap_items pair moves `from` to `to` where `to` is in and not already there."""
    def out(osd: int) -> bool:
        return osd != NONE_OSD and weights.get(osd, 1.0) == 0

    full = state.upmap.get(pgid)
    if full is not None and not any(out(o) for o in full):
        raw = full
    items = state.upmap_items.get(pgid)
    if items:
        lst = list(raw)
        for frm, to in items:
            if to in lst:
                continue
            pos = next((i for i, o in enumerate(lst) if o == frm and not out(to)), -1)
            if pos >= 0:
                lst[pos] = to
        raw = tuple(lst)
    return raw


def to_up(raw: Up, pool: PoolInfo, down: set[int]) -> Up:
    """OSDMap::_raw_to_up_osds: down OSDs leave a replicated set, leave a hole in an EC one."""
    if pool.erasure:
        return tuple(NONE_OSD if o in down else o for o in raw)
    return tuple(o for o in raw if o not in down and o != NONE_OSD)


def _weights(state: ClusterState, changed: Mapping[int, float] | None = None) -> dict[int, float]:
    """Device weights as CRUSH sees them: reweight, 0 when out."""
    w = {i: (o.reweight if o.in_ else 0.0) for i, o in state.osds.items()}
    w.update(changed or {})
    return w


def crush_up_sets(state: ClusterState, tools: Tools, crushfile: str,
                  weights: Mapping[int, float], pools: Iterable[PoolInfo] | None = None,
                  pgp: Mapping[int, int] | None = None, pg_num: Mapping[int, int] | None = None,
                  down: set[int] | None = None) -> dict[str, Up]:
    """Every PG's up set from crushtool: the rule's choice for its seed, upmaps applied,
    down OSDs removed. `pgp`/`pg_num` override a pool's (for pg_num predictions)."""
    down = down if down is not None else {i for i, o in state.osds.items() if not o.up}
    up: dict[str, Up] = {}
    for pool in pools if pools is not None else state.pools.values():
        n_pgp = (pgp or {}).get(pool.id, pool.pgp_num)
        n_pg = (pg_num or {}).get(pool.id, pool.pg_num)
        chosen = crush_map(tools, crushfile, pool, n_pgp, weights)
        mask = mask_of(n_pgp)
        for ps in range(n_pg):
            pgid = f"{pool.id}.{ps:x}"
            raw = chosen.get(stable_mod(ps, n_pgp, mask), ())
            up[pgid] = to_up(apply_upmaps(pgid, raw, state, weights), pool, down)
    return up


def _pg_order(pgid: str) -> tuple[int, int]:
    pool, _, ps = pgid.partition(".")
    return int(pool), int(ps, 16)
