"""Counting what differs between two sets of up sets: copies, bytes, PGs short of size, fill."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from stormdeck.advisors.blast.mapping import Up, _pg_order
from stormdeck.advisors.blast.prediction import OsdFill, Prediction, human
from stormdeck.collectors.placement import NONE_OSD, ClusterState, PoolInfo


def compare(state: ClusterState, what: str, before: Mapping[str, Up], after: Mapping[str, Up],
            pg_bytes: Mapping[str, int] | None = None, method: str = "", tool: str = "",
            going_out: Iterable[int] = (), rest_from_state: bool = False) -> Prediction:
    """Count what differs between two sets of up sets: copies created (replicated: OSDs
    new to the set; EC: positions whose OSD changes, each a shard of bytes/k), bytes in
    and out per OSD, PGs left below size or min_size, and each OSD's fill after.
    `rest_from_state`: `after` holds only the PGs that can change; every other PG keeps
    its up set from pg dump (and is still checked for being below size)."""
    bytes_in: dict[int, int] = {}
    bytes_out: dict[int, int] = {}
    p = Prediction(what=what, method=method, tool=tool, epoch=state.epoch, made=time.time(),
                   ratios={"nearfull": state.nearfull_ratio,
                           "backfillfull": state.backfillfull_ratio,
                           "full": state.full_ratio})
    pgs = state.pgs
    pools: dict[str, PoolInfo | None] = {}

    def pool_of(pgid: str) -> PoolInfo | None:
        prefix = pgid[:pgid.find(".")]
        if prefix not in pools:
            pools[prefix] = state.pools.get(int(prefix)) if prefix.isdigit() else None
        return pools[prefix]

    def below(pgid: str, up: Up, pool: PoolInfo) -> None:
        live = len(up) - up.count(NONE_OSD)
        if live < pool.min_size:
            p.pgs_inactive.append(pgid)
        elif live < pool.size:
            p.pgs_undersized.append(pgid)

    if pg_bytes is None:  # the bytes of the PGs that move only (pgs_brief has none)
        state.need_bytes([pgid for pgid, new in after.items() if before.get(pgid, new) != new])
    if rest_from_state:  # a million PGs whose up set stays: only the size checks
        size = {p.id: p.size for p in state.pools.values()}
        for pgid, pg in [(pgid, pg) for pgid, pg in pgs.items()
                         if len(pg.up) < size.get(pg.pool, 0) or NONE_OSD in pg.up]:
            pool = state.pools.get(pg.pool)
            if pgid not in after and pool is not None:
                below(pgid, pg.up, pool)
    for pgid, new in after.items():
        pool = pool_of(pgid)
        if pool is None:
            continue
        below(pgid, new, pool)
        old = before.get(pgid, new)
        if new == old:
            continue
        p.pgs_remapped.append(pgid)
        if pg_bytes is not None:
            size = pg_bytes.get(pgid, 0)
        else:
            pg = pgs.get(pgid)
            size = pg.bytes if pg is not None else 0
        shard = size // max(pool.k, 1)
        if pool.erasure:
            moves = [(b, a) for b, a in zip(old, new, strict=False) if a != b]
            created = [a for _, a in moves if a != NONE_OSD]
            removed = [b for b, _ in moves if b != NONE_OSD]
        else:
            created = [o for o in new if o not in old]
            removed = [o for o in old if o not in new]
        live = len(new) - new.count(NONE_OSD)
        lost = [o for o in old if o not in new and o != NONE_OSD]
        if lost and live < len([o for o in old if o != NONE_OSD]) and not created:
            p.pgs_degraded.append(pgid)
        p.copies_to_create += len(created)
        for o in created:
            bytes_in[o] = bytes_in.get(o, 0) + shard
        for o in removed:
            bytes_out[o] = bytes_out.get(o, 0) + shard
    for found in (p.pgs_remapped, p.pgs_inactive, p.pgs_undersized, p.pgs_degraded):
        found.sort(key=_pg_order)
    p.bytes_to_move = sum(bytes_in.values())
    p.largest_per_osd = max(bytes_in.values(), default=0)
    gone = set(going_out)
    for i, osd in sorted(state.osds.items()):
        bi, bo = bytes_in.get(i, 0), bytes_out.get(i, 0)
        total = osd.kb * 1024
        now = osd.kb_used * 1024 / total if total else None
        after_ratio = None
        if total:
            after_ratio = max(0.0, (osd.kb_used * 1024 + bi - bo) / total)
        if not (bi or bo or i in gone) and not osd.in_:
            continue
        p.per_osd.append(OsdFill(i, bi, bo, now, after_ratio))
        if bi and after_ratio is not None:
            if after_ratio >= state.full_ratio:
                p.osds_past_full.append(i)
            if after_ratio >= state.backfillfull_ratio:
                p.osds_past_backfillfull.append(i)
            elif after_ratio >= state.nearfull_ratio:
                p.osds_past_nearfull.append(i)
    rate = state.recovery_bytes_per_sec
    if p.bytes_to_move == 0:
        p.eta_seconds, p.eta_note = 0.0, "nothing to move"
    elif rate:
        p.eta_seconds = p.bytes_to_move / rate
        p.eta_note = f"at the current recovery rate, {human(rate)}/s"
    else:
        p.eta_note = "no recovery running to measure a rate from"
    return p
