"""What a placement prediction reads from Ceph: the binary osdmap, per-PG bytes, pools, OSD space.

One fetch, on demand (never on the console's poll cadence): `osd getmap` is the
map osdmaptool simulates on, `pg dump pgs_brief` each PG's up and acting sets,
`osd dump` the pools, OSD states, ratios and upmaps, `osd df` each OSD's space.
The bytes of a PG (which pgs_brief lacks) are read afterwards for the PGs a
prediction finds moving only (ClusterState.need_bytes: `pg ls-by-osd` for a few
OSDs, `pg ls-by-pool`, else the whole `pg dump pgs`): at a million PGs the full
dump is 282 MB of JSON and most of the time. The parsing is plain functions over
the JSON, so unit tests can feed them outputs captured from the lab.
"""

from __future__ import annotations

import gc
import json
import operator
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, NamedTuple, Protocol

from stormdeck.base.gcpause import gc_paused
from stormdeck.collectors.ceph.connection import CommandError

NONE_OSD = 2147483647  # CRUSH_ITEM_NONE: an EC shard with no OSD


class Commands(Protocol):
    """The one call a fetch needs: a mon or mgr command, its output as bytes
    (collectors.ceph.CephConnection has it)."""

    def command(self, target: str, cmd: dict[str, Any], timeout: float | None = None
                ) -> bytes: ...


@dataclass(frozen=True, slots=True)
class PoolInfo:
    id: int
    name: str
    size: int
    min_size: int
    rule: int
    pg_num: int
    pgp_num: int
    erasure: bool
    k: int  # data chunks of an EC pool; 1 for a replicated one (a copy is the whole PG)
    hashpspool: bool
    pg_num_target: int
    pgp_num_target: int


class PgInfo(NamedTuple):
    """One PG of `pg dump` (a tuple: a million of them are made per prediction, and a
    frozen dataclass costs twice as much to build)."""

    pgid: str
    pool: int
    ps: int
    bytes: int  # stat_sum.num_bytes + num_omap_bytes (0 until read: see need_bytes)
    up: tuple[int, ...]
    acting: tuple[int, ...]
    state: str


@dataclass(frozen=True, slots=True)
class OsdInfo:
    id: int
    up: bool
    in_: bool
    reweight: float
    kb: int  # 0 when the OSD reports no space (down since start)
    kb_used: int
    group_flags: frozenset[str] = frozenset()


@dataclass
class ClusterState:
    """Everything a prediction computes from, read at one moment."""

    osdmap: bytes
    epoch: int
    version: str  # the monitors' release, "16.2.15"
    release: str  # "pacific"
    pools: dict[int, PoolInfo]
    pgs: dict[str, PgInfo]
    osds: dict[int, OsdInfo]
    full_ratio: float
    backfillfull_ratio: float
    nearfull_ratio: float
    flags: frozenset[str]
    upmap_items: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    upmap: dict[str, tuple[int, ...]] = field(default_factory=dict)
    recovery_bytes_per_sec: float | None = None
    misplaced_ratio: float | None = None
    down_out_interval: float | None = None
    target_max_misplaced_ratio: float | None = None
    # Reads the bytes of PGs that pgs_brief listed without them; None: every PG's are in.
    sizer: PgSizer | None = None

    def need_bytes(self, pgids: Iterable[str]) -> None:
        """Make sure these PGs' `bytes` are read (a prediction calls it for the PGs that
        move, before it counts bytes)."""
        if self.sizer is not None:
            self.sizer.fill(self, pgids)

    def pool_by_name(self, name: str) -> PoolInfo | None:
        return next((p for p in self.pools.values() if p.name == name), None)


def _json(raw: bytes) -> Any:
    return json.loads(raw) if raw.strip() else None


def parse_pools(dump: Mapping[str, Any], profiles: Mapping[str, int]) -> dict[int, PoolInfo]:
    """`osd dump` pools; `profiles` maps an EC profile's name to its k."""
    pools = {}
    for p in dump.get("pools", ()):
        erasure = p.get("type") == 3
        pgp = p.get("pg_placement_num", p.get("pgp_num")) or p["pg_num"]
        flags = p.get("flags_names") or ""
        pools[int(p["pool"])] = PoolInfo(
            id=int(p["pool"]), name=str(p["pool_name"]), size=int(p["size"]),
            min_size=int(p["min_size"]), rule=int(p["crush_rule"]), pg_num=int(p["pg_num"]),
            pgp_num=int(pgp), erasure=erasure,
            k=profiles.get(p.get("erasure_code_profile") or "", 1) if erasure else 1,
            hashpspool="hashpspool" in flags.split(","),
            pg_num_target=int(p.get("pg_num_target") or p["pg_num"]),
            pgp_num_target=int(p.get("pg_placement_num_target") or p.get("pgp_num_target")
                               or pgp))
    return pools


def parse_osds(dump: Mapping[str, Any], df: Mapping[str, Any] | None) -> dict[int, OsdInfo]:
    space = {int(n["id"]): n for n in (df or {}).get("nodes", ()) if n.get("id", -1) >= 0}
    osds = {}
    for o in dump.get("osds", ()):
        i = int(o["osd"])
        s = space.get(i, {})
        state = set(o.get("state") or ())
        osds[i] = OsdInfo(id=i, up=bool(o.get("up")), in_=bool(o.get("in")),
                          reweight=float(o.get("weight", 1.0)), kb=int(s.get("kb") or 0),
                          kb_used=int(s.get("kb_used") or 0),
                          group_flags=frozenset(state & {"noup", "nodown", "noin", "noout"}))
    return osds


def pg_rows(dump: Any) -> Any:
    """The PG rows of `pg dump pgs|pgs_brief`, `pg ls-by-osd|ls-by-pool`: a bare list, or
    {"pg_ready": ..., "pg_stats": [...]}, or a full dump's {"pg_map": {"pg_stats": ...}}
    (the shape differs by command and release)."""
    if isinstance(dump, Mapping):
        rows = dump.get("pg_stats")
        if rows is None:
            rows = (dump.get("pg_map") or {}).get("pg_stats", ())
        return rows
    return dump or ()


def parse_pgs(dump: Any) -> dict[str, PgInfo]:
    """`pg dump pgs` or `pgs_brief` JSON (pg_rows' shapes); a brief row has no stat_sum,
    its bytes are 0 until ClusterState.need_bytes reads them."""
    rows = pg_rows(dump)
    pgs = {}
    empty: dict[str, Any] = {}
    make = PgInfo._make
    for r in rows:  # a million rows at scale: no per-row generator or regex
        pgid = r["pgid"]
        pool, _, ps = pgid.partition(".")
        s = r.get("stat_sum") or empty
        up, acting = r.get("up") or (), r.get("acting") or ()
        up_t = tuple(up)
        pgs[pgid] = make((pgid, int(pool), int(ps, 16),
                          (s.get("num_bytes") or 0) + (s.get("num_omap_bytes") or 0),
                          up_t, up_t if acting == up else tuple(acting),
                          r.get("state") or ""))
    return pgs


# A `pgs_brief` row as every release since Luminous writes it (pg_stat_t::dump_brief after
# the pgid): pgid, state, up, acting, up_primary, acting_primary. The mgr's JSON is compact;
# the spaced form (json-pretty, a file saved by hand) is tried when it does not match.
BRIEF_ROWS = (
    re.compile(r'"pgid":"((\d+)\.([0-9a-f]+))","state":"([^"]*)","up":\[([-\d,]*)\],'
               r'"acting":\[([-\d,]*)\]'),
    re.compile(r'"pgid":\s*"((\d+)\.([0-9a-f]+))",\s*"state":\s*"([^"]*)",\s*'
               r'"up":\s*\[([-\d,\s]*)\],\s*"acting":\s*\[([-\d,\s]*)\]'))


def parse_brief(raw: bytes) -> dict[str, PgInfo] | None:
    """`pg dump pgs_brief` read straight from its bytes, whatever wraps the rows (a list,
    {"pg_ready", "pg_stats"}), bytes 0; None when a row is not in the shape above (then
    parse_pgs reads the JSON). At a million PGs: about 2.9 s CPU instead of 4.2 s through
    json.loads and a dict per row, which were most of the time a prediction took."""
    text = raw.decode("utf-8", "replace")
    count = text.count('"pgid"')
    rows: list[tuple[str, ...]] = []
    for pattern in BRIEF_ROWS:
        rows = pattern.findall(text)
        if len(rows) == count:
            break
    if not rows or len(rows) != count:
        return None
    del text
    ids, pool_s, ps_s, state_s, up_s, acting_s = zip(*rows, strict=True)
    del rows
    n = len(ids)
    # every up set in one json.loads (C), not a parse per PG; most acting sets equal it
    ups = list(map(tuple, json.loads("[[" + "],[".join(up_s) + "]]")))
    if all(map(operator.eq, up_s, acting_s)):
        acting = ups
    else:
        acting = [u if a == b else tuple(json.loads(f"[{b}]"))
                  for u, a, b in zip(ups, up_s, acting_s, strict=True)]
    pgs = dict(zip(ids, map(tuple.__new__, repeat(PgInfo), zip(  # PgInfo without __new__
        ids, map(int, pool_s), map(int, ps_s, repeat(16, n)), repeat(0, n), ups, acting,
        map(sys.intern, state_s), strict=True)), strict=True))
    return pgs if len(pgs) == n else None


def row_bytes(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Each row's stat_sum.num_bytes + num_omap_bytes, by PG id."""
    out = {}
    for r in rows:
        s = r.get("stat_sum")
        if isinstance(s, Mapping) and "pgid" in r:
            out[str(r["pgid"])] = int(s.get("num_bytes") or 0) + \
                int(s.get("num_omap_bytes") or 0)
    return out


# More `pg ls-by-osd` calls than this for one need_bytes and the whole `pg dump pgs` is
# read instead (each call is a mgr round trip; a few hundred PGs at 10,000 OSDs).
LS_CALLS_MAX = 16


class PgSizer:
    """Reads PGs' bytes on demand: `pg ls-by-osd` for the acting OSDs that cover most of
    the PGs still unread (a handful of round trips for an OSD going out), `pg ls-by-pool`
    for a pool most of whose PGs are asked, and the whole `pg dump pgs` when that is not
    enough. A PG is taken as read only when a reply names it: which OSDs Ceph's filter
    matches (acting, in Pacific) does not decide exactness."""

    def __init__(self, conn: Commands) -> None:
        self.conn = conn
        self.known: set[str] = set()
        self.complete = False
        self.sent: list[str] = []  # what was asked, for the method line and the tests

    def _ask(self, prefix: str, **kw: Any) -> dict[str, int]:
        self.sent.append(" ".join([prefix, *(str(v) for v in kw.values())]))
        with gc_paused():
            return row_bytes(pg_rows(_json(self.conn.command("mgr", {"prefix": prefix, **kw}))))

    def _take(self, state: ClusterState, got: Mapping[str, int]) -> None:
        pgs = state.pgs
        for pgid, b in got.items():
            pg = pgs.get(pgid)
            if pg is not None:
                if pg.bytes != b:
                    pgs[pgid] = pg._replace(bytes=b)
                self.known.add(pgid)

    def fill(self, state: ClusterState, pgids: Iterable[str]) -> None:
        if self.complete:
            return
        pgs = state.pgs
        left = {p for p in pgids if p in pgs and p not in self.known}
        if not left:
            return
        by_pool = Counter(pgs[p].pool for p in left)
        for pool_id, n in by_pool.items():
            pool = state.pools.get(pool_id)
            if pool is not None and n * 2 > pool.pg_num:
                self._take(state, self._ask("pg ls-by-pool", poolstr=pool.name))
        left -= self.known
        tried: set[int] = set()
        calls = 0
        while left and calls < LS_CALLS_MAX:
            # Ceph lists an OSD's PGs by their acting set, and refuses a down OSD (EAGAIN)
            cover = Counter(o for p in left for o in pgs[p].acting
                            if o not in tried and o in state.osds and state.osds[o].up)
            if not cover:
                break
            osd = cover.most_common(1)[0][0]
            tried.add(osd)
            calls += 1
            try:
                self._take(state, self._ask("pg ls-by-osd", osd=osd))
            except CommandError:  # refused (the OSD went down meanwhile): the next one
                continue
            left -= self.known
        if left:  # PGs no OSD's list named (no acting set, or too many OSDs): all of them
            self._take(state, self._ask("pg dump", dumpcontents=["pgs"]))
            self.complete = True


def parse_upmaps(dump: Mapping[str, Any]) -> tuple[dict[str, tuple[tuple[int, int], ...]],
                                                   dict[str, tuple[int, ...]]]:
    items = {str(u["pgid"]): tuple((int(m["from"]), int(m["to"])) for m in u["mappings"])
             for u in dump.get("pg_upmap_items") or ()}
    full = {str(u["pgid"]): tuple(int(x) for x in u["osds"]) for u in dump.get("pg_upmap") or ()}
    return items, full


VERSION = re.compile(r"ceph version (\d+\.\d+\.\d+)\S* \(\w+\) (\w+)")


def parse_version(versions: Mapping[str, Any]) -> tuple[str, str]:
    """The monitors' release: the map is theirs. ("16.2.15", "pacific")."""
    for text in (versions.get("mon") or versions.get("overall") or {}):
        m = VERSION.search(str(text))
        if m:
            return m.group(1), m.group(2)
    return "unknown", "unknown"


def _float(text: bytes) -> float | None:
    try:
        value = json.loads(text) if text.strip() else None
        return float(value) if value is not None else None
    except (ValueError, TypeError):
        try:
            return float(text.decode().strip())
        except ValueError:
            return None


def parse_pgs_of(raw: bytes) -> dict[str, PgInfo]:
    """`pg dump pgs` or `pgs_brief` from its bytes, the collector held off."""
    with gc_paused():
        return parse_pgs(_json(raw))


def fetch(conn: Commands, brief: bool = True) -> ClusterState:
    """Read what a prediction needs, in one go (a few round trips; `pg dump` dominates).
    `brief`: every PG's up/acting from `pgs_brief`, bytes later for the PGs that move;
    otherwise the whole `pg dump pgs` now."""
    with gc_paused():
        state = _fetch(conn, brief)
        # Its million PG tuples hold no cycles: they go to the permanent generation (cheap,
        # a list is spliced) so that the first collection after gc.enable() does not walk
        # them all (0.8 s CPU at 1.28 M PGs); reference counting still frees them with the
        # state. advisors/loop.py freezes alike and unfreezes now and then to collect.
        gc.freeze()
    return state


def _fetch(conn: Commands, brief: bool) -> ClusterState:
    def mon(prefix: str, **kw: Any) -> bytes:
        return conn.command("mon", {"prefix": prefix, **kw})

    def mgr(prefix: str, **kw: Any) -> bytes:
        return conn.command("mgr", {"prefix": prefix, **kw})

    osdmap = mon("osd getmap")
    dump = _json(mon("osd dump"))
    profiles: dict[str, int] = {}
    for p in dump.get("pools", ()):
        name = p.get("erasure_code_profile")
        if p.get("type") == 3 and name and name not in profiles:
            prof = _json(mon("osd erasure-code-profile get", name=name)) or {}
            profiles[name] = int(prof.get("k", 1))
    df = _json(mgr("osd df"))
    if brief:
        raw = mgr("pg dump", dumpcontents=["pgs_brief"])
        pgs = parse_brief(raw)
        if pgs is None:
            pgs = parse_pgs(_json(raw))
        del raw
    else:
        pgs = parse_pgs(_json(mgr("pg dump", dumpcontents=["pgs"])))
    status = _json(mon("status")) or {}
    pgmap = status.get("pgmap") or {}
    version, release = parse_version(_json(mon("versions")) or {})
    items, full = parse_upmaps(dump)
    flags = dump.get("flags") or ""
    return ClusterState(
        osdmap=osdmap, epoch=int(dump.get("epoch", 0)), version=version, release=release,
        pools=parse_pools(dump, profiles), pgs=pgs, osds=parse_osds(dump, df),
        full_ratio=float(dump.get("full_ratio") or 0.95),
        backfillfull_ratio=float(dump.get("backfillfull_ratio") or 0.90),
        nearfull_ratio=float(dump.get("nearfull_ratio") or 0.85),
        flags=frozenset(flags.split(",") if isinstance(flags, str) else flags),
        upmap_items=items, upmap=full,
        recovery_bytes_per_sec=float(pgmap["recovering_bytes_per_sec"])
        if pgmap.get("recovering_bytes_per_sec") else None,
        misplaced_ratio=float(pgmap["misplaced_ratio"]) if "misplaced_ratio" in pgmap else None,
        down_out_interval=_float(mon("config get", who="mon", key="mon_osd_down_out_interval")),
        target_max_misplaced_ratio=_float(mon("config get", who="mgr",
                                              key="target_max_misplaced_ratio")),
        sizer=PgSizer(conn) if brief else None)


def ok_to_stop(conn: Any, osd_ids: list[int]) -> dict[str, Any] | None:
    """Ceph's own answer to "may these OSDs stop?" (mgr `osd ok-to-stop`): its JSON even
    when the answer is no (EBUSY), which CephConnection.command would turn into an error.
    None when it cannot be asked."""
    rados = getattr(conn, "_rados", None)
    if rados is None:
        connect = getattr(conn, "_connect", None)
        if connect is None:
            return None
        rados = conn._rados = connect()
    body = json.dumps({"prefix": "osd ok-to-stop", "ids": [str(i) for i in osd_ids],
                       "format": "json"})
    try:
        _, out, _ = rados.mgr_command(body, b"", timeout=30)
    except Exception:  # librados errors of any kind: the cross-check is then missing
        return None
    try:
        answer = json.loads(out) if out.strip() else None
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
