"""Blast radius: what a change moves, computed from the cluster's own map before it is confirmed.

Every prediction starts from the cluster's current osdmap (`osd getmap`) and per-PG
bytes (`pg dump`), maps every PG before and after the change, and counts what differs:

- OSDs out, and reweights that only lower: only the PGs that can change are mapped (those
  whose up set holds one of the OSDs, or that have an upmap), before and after, by Ceph's
  own crush_do_rule called in-process (advisors/crushlib.py); every other PG keeps its up
  set. That "before" must equal pg dump's up sets (checked for every candidate and a
  sample of the rest), or it falls back to the tools below. At 10,000 OSDs and 1.28
  million PGs this is about a second instead of minutes (docs/measured.md).
- OSD out (one OSD) and CRUSH weight: `osdmaptool --test-map-pgs-dump-all --clear-temp`,
  run twice (as the map is, and with --mark-out / --adjust-crush-weight), up sets compared;
  the map as it is is mapped once and kept for the next prediction on the same map.
  osdmaptool's pitfalls (K9.2): --mark-out takes one OSD and also marks it up; -dump's
  "acting" is pg_temp, so the *up* sets are compared.
- Several OSDs out, and reweight: osdmaptool has no option for either, so each pool's
  rule is mapped by `crushtool --test --pool-id P --weight ID W` before and after, and
  the map's pg_upmap/pg_upmap_items and down OSDs are applied as OSDMap does.
- pg_num / pgp_num: osdmaptool cannot simulate it (--pg_num leaves pgp_num, so every
  child maps to its parent). Each child's placement seed is computed as
  pg_pool_t::raw_pg_to_pps does (ceph_stable_mod over pgp_num, then
  crush_hash32_2(RJENKINS1, seed, poolid) for hashpspool pools) and mapped through the
  pool's CRUSH rule with crushtool, whose --pool-id applies that same hash.
- OSDs going down (noup held, a host stopped): the up sets lose those OSDs at once (PGs
  below min_size go inactive), `ceph osd ok-to-stop` is asked for its own verdict, and
  the out-move that follows after mon_osd_down_out_interval (unless noout) is predicted
  as well.

Tools run are the cluster's own release where it can be found (the host's, or a
stormdeck release root under /var/tmp), and the prediction says which one it used.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import itertools
import json
import operator
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

from stormdeck.advisors import crushlib
from stormdeck.base.errors import UserError
from stormdeck.collectors.placement import NONE_OSD, ClusterState, PoolInfo, gc_paused

# ---- Ceph's placement-seed arithmetic (src/crush/hash.c, src/include/rados.h,
# src/osd/osd_types.cc pg_pool_t::raw_pg_to_pps) -------------------------------------

_M = 0xFFFFFFFF
CRUSH_HASH_SEED = 1315423911


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    """crush_hashmix: Robert Jenkins' 96-bit mix, in 32-bit unsigned arithmetic."""
    a = (a - b - c) & _M
    a ^= c >> 13
    b = (b - c - a) & _M
    b ^= (a << 8) & _M
    c = (c - a - b) & _M
    c ^= b >> 13
    a = (a - b - c) & _M
    a ^= c >> 12
    b = (b - c - a) & _M
    b ^= (a << 16) & _M
    c = (c - a - b) & _M
    c ^= b >> 5
    a = (a - b - c) & _M
    a ^= c >> 3
    b = (b - c - a) & _M
    b ^= (a << 10) & _M
    c = (c - a - b) & _M
    c ^= b >> 15
    return a, b, c


def crush_hash32_2(a: int, b: int) -> int:
    """crush_hash32_rjenkins1_2(a, b), CRUSH_HASH_RJENKINS1 (the only hash in use)."""
    a &= _M
    b &= _M
    h = CRUSH_HASH_SEED ^ a ^ b
    x, y = 231232, 1232
    a, b, h = _mix(a, b, h)
    x, a, h = _mix(x, a, h)
    b, y, h = _mix(b, y, h)
    return h


def mask_of(n: int) -> int:
    """pg_num_mask / pgp_num_mask: (1 << cbits(n - 1)) - 1."""
    return (1 << max(n - 1, 0).bit_length()) - 1


def stable_mod(x: int, b: int, bmask: int) -> int:
    """ceph_stable_mod: x mod b, stable while b grows one at a time."""
    return x & bmask if (x & bmask) < b else x & (bmask >> 1)


def seed(ps: int, pgp_num: int) -> int:
    """The seed a PG's placement comes from: stable_mod over pgp_num (the x crushtool's
    --pool-id hashes)."""
    return stable_mod(ps, pgp_num, mask_of(pgp_num))


def pps(pool: int, ps: int, pgp_num: int, hashpspool: bool = True) -> int:
    """pg_pool_t::raw_pg_to_pps: the x CRUSH maps for PG pool.ps."""
    s = seed(ps, pgp_num)
    return crush_hash32_2(s, pool) if hashpspool else s + pool


# ---- the tools ------------------------------------------------------------------------


@dataclass(frozen=True)
class Tools:
    """Where osdmaptool and crushtool run: on the host, chrooted in a release root, or in
    the cluster's own container image through `cephadm shell` (a cephadm host has no Ceph
    packages of its own)."""

    root: Path | None  # None: the host's own binaries
    version: str  # "16.2.15"
    release: str  # "pacific"
    cephadm: str | None = None  # the cephadm binary, when the tools run in its shell

    def describe(self, cluster_version: str) -> str:
        where = (f"release root {self.root}" if self.root else
                 "cephadm shell" if self.cephadm else "host")
        same = self.version == cluster_version
        return (f"osdmaptool/crushtool {self.version} {self.release} ({where})"
                + ("" if same else f", not the cluster's {cluster_version}: a tool older "
                   "than the map drops what it does not know"))

    def workdir(self) -> tempfile.TemporaryDirectory[str]:
        base = self.root / "tmp" if self.root else None
        return tempfile.TemporaryDirectory(prefix="stormdeck-blast-", dir=base)

    def inside(self, path: str) -> str:
        """A path of the work directory as the tool sees it."""
        if self.root is None:
            return path
        return "/" + os.path.relpath(path, self.root)

    def argv(self, tool: str, args: Sequence[str]) -> list[str]:
        if self.root is not None:
            return [shutil.which("chroot") or "/usr/sbin/chroot", str(self.root),
                    f"/usr/bin/{tool}", *args]
        if self.cephadm is not None:
            # The work directory is under the temporary directory: mounted at the same
            # path, the tool reads and writes the files where stormdeck put them.
            tmp = tempfile.gettempdir()
            return [self.cephadm, "shell", "--mount", f"{tmp}:{tmp}", "--", tool, *args]
        path = shutil.which(tool)
        if path is None:
            raise UserError(f"{tool} is not installed on this host (package ceph-base): "
                            "the prediction needs it")
        return [path, *args]

    def run(self, tool: str, args: Sequence[str], timeout: float = 300.0) -> str:
        argv = self.argv(tool, args)
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise UserError(f"{tool} did not finish in {timeout:g} s") from None
        if res.returncode != 0:
            lines = (res.stderr or res.stdout).strip().splitlines()
            raise UserError(f"{tool} failed: {lines[-1] if lines else res.returncode}")
        return res.stdout


VERSION = re.compile(r"ceph version (\d+\.\d+\.\d+)\S* \(\w+\) (\w+)")


def _host_version() -> tuple[str, str] | None:
    path = shutil.which("osdmaptool")
    return _version_of([path, "--version"], 30) if path else None


def _cephadm_version(cephadm: str) -> tuple[str, str] | None:
    """The Ceph version of the image `cephadm shell` runs (it may pull it: minutes)."""
    return _version_of([cephadm, "shell", "--", "osdmaptool", "--version"], 300)


def _version_of(argv: list[str], timeout: float) -> tuple[str, str] | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = VERSION.search(out)
    return (m.group(1), m.group(2)) if m else None


def _root_version(root: Path) -> str | None:
    """The Ceph version a release root's package database holds (no chroot needed)."""
    try:
        text = (root / "var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"Package: ceph-base\n(?:[^\n]+\n)*?Version: (?:\d+:)?(\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


def find_tools(cluster_version: str, cluster_release: str) -> Tools:
    """The cluster's own release's tools where they can be found: the host's when they
    match, else a stormdeck release root (/var/tmp/stormdeck-root-<release>, or
    $STORMDECK_ROOTS_DIR) when running as root, else the cluster's image through
    `cephadm shell`; otherwise the host's, said so."""
    host = _host_version()
    if host is not None and host[1] == cluster_release:
        return Tools(None, host[0], host[1])
    root = Path(os.environ.get("STORMDECK_ROOTS_DIR", "/var/tmp")) / \
        f"stormdeck-root-{cluster_release}"
    if os.geteuid() == 0 and (root / "usr/bin/osdmaptool").exists() and \
            shutil.which("chroot") is not None:
        return Tools(root, _root_version(root) or "unknown", cluster_release)
    cephadm = shutil.which("cephadm") if os.geteuid() == 0 else None
    image = _cephadm_version(cephadm) if cephadm else None
    if image is not None and (image[1] == cluster_release or host is None):
        return Tools(None, image[0], image[1], cephadm=cephadm)
    if host is None:
        raise UserError("osdmaptool is not installed on this host (package ceph-base, or "
                        "run as root on a cephadm host): the prediction needs it")
    return Tools(None, host[0], host[1])


# ---- mapping ------------------------------------------------------------------------

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


# ---- the prediction -------------------------------------------------------------------


@dataclass
class OsdFill:
    osd: int
    bytes_in: int
    bytes_out: int
    used_ratio_now: float | None
    used_ratio_after: float | None


@dataclass
class Prediction:
    """What a change does to placement, the same fields everywhere (console, plan, apply,
    journal, `whatif -f json`)."""

    what: str  # "out osd.3", "pg_num of rbd 32 -> 64"
    pgs_remapped: list[str] = field(default_factory=list)  # PGs whose up set changes
    copies_to_create: int = 0  # shard copies backfill must write
    bytes_to_move: int = 0
    largest_per_osd: int = 0  # the most bytes one OSD receives
    pgs_inactive: list[str] = field(default_factory=list)
    pgs_undersized: list[str] = field(default_factory=list)
    pgs_degraded: list[str] = field(default_factory=list)
    per_osd: list[OsdFill] = field(default_factory=list)
    osds_past_nearfull: list[int] = field(default_factory=list)
    osds_past_backfillfull: list[int] = field(default_factory=list)
    osds_past_full: list[int] = field(default_factory=list)
    ratios: dict[str, float] = field(default_factory=dict)
    eta_seconds: float | None = None
    eta_note: str = ""
    method: str = ""
    tool: str = ""
    epoch: int = 0
    made: float = 0.0
    seconds: float = 0.0  # how long the prediction took
    notes: list[str] = field(default_factory=list)
    then: Prediction | None = None  # what follows (the out-move after OSDs stay down)

    # -- the guard --

    def refusal(self) -> str | None:
        """Why a change with this outcome is refused (inactive PGs, an OSD past
        backfillfull), or None."""
        reasons = []
        for p in self.stages():
            if p.pgs_inactive:
                reasons.append(f"{p.what} makes {len(p.pgs_inactive)} PG(s) inactive "
                               f"({', '.join(p.pgs_inactive[:8])}"
                               f"{', ...' if len(p.pgs_inactive) > 8 else ''}): client IO "
                               "to them stops")
            if p.osds_past_backfillfull:
                reasons.append(f"{p.what} fills "
                               f"{', '.join(f'osd.{i}' for i in p.osds_past_backfillfull)} "
                               f"past backfillfull ({p.ratios.get('backfillfull', 0):.2f}): "
                               "backfill stops there")
        return "; ".join(reasons) or None

    def phrase_reason(self) -> str | None:
        """Past nearfull (not backfillfull): allowed with the typed phrase."""
        past = sorted({i for p in self.stages() for i in p.osds_past_nearfull})
        if past:
            return (f"it fills {', '.join(f'osd.{i}' for i in past)} past nearfull "
                    f"({self.ratios.get('nearfull', 0):.2f})")
        return None

    def stages(self) -> list[Prediction]:
        out, p = [], self
        while p is not None:
            out.append(p)
            p = p.then
        return out

    # -- what it says --

    def to_dict(self) -> dict[str, Any]:
        """The keys the issue names (whatif -f json), then the detail."""
        d: dict[str, Any] = {
            "what": self.what,
            "pgs_remapped": len(self.pgs_remapped),
            "copies_to_create": self.copies_to_create,
            "bytes_to_move": self.bytes_to_move,
            "pgs_inactive": len(self.pgs_inactive),
            "pgs_undersized": len(self.pgs_undersized),
            "osds_past_nearfull": self.osds_past_nearfull,
            "osds_past_backfillfull": self.osds_past_backfillfull,
            "osds_past_full": self.osds_past_full,
            "eta_seconds": self.eta_seconds,
            "per_osd": [{"osd": f.osd, "bytes_in": f.bytes_in, "bytes_out": f.bytes_out,
                         "used_ratio_after": f.used_ratio_after} for f in self.per_osd],
            "method": self.method,
            "tool": self.tool,
            "largest_per_osd": self.largest_per_osd,
            "pgs_degraded": len(self.pgs_degraded),
            "pgs_remapped_ids": self.pgs_remapped,
            "pgs_inactive_ids": self.pgs_inactive,
            "pgs_undersized_ids": self.pgs_undersized,
            "pgs_degraded_ids": self.pgs_degraded,
            "ratios": self.ratios,
            "eta_note": self.eta_note,
            "epoch": self.epoch,
            "made": self.made,
            "seconds": self.seconds,
            "notes": self.notes,
            "refused": self.refusal(),
            "then": self.then.to_dict() if self.then is not None else None,
        }
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Prediction:
        """Read back from a plan file or a journal record (data: shown, never trusted for
        the guard, which predicts again at apply time)."""
        def ints(name: str) -> list[int]:
            return [int(x) for x in d.get(name) or () if isinstance(x, int | float)]

        def strs(name: str) -> list[str]:
            return [str(x) for x in d.get(name) or ()][:100000]

        per = [OsdFill(int(f.get("osd", -1)), int(f.get("bytes_in") or 0),
                       int(f.get("bytes_out") or 0), None,
                       float(f["used_ratio_after"]) if isinstance(
                           f.get("used_ratio_after"), int | float) else None)
               for f in d.get("per_osd") or () if isinstance(f, Mapping)]
        then = d.get("then")
        eta = d.get("eta_seconds")
        return cls(what=str(d.get("what", "")), pgs_remapped=strs("pgs_remapped_ids"),
                   copies_to_create=int(d.get("copies_to_create") or 0),
                   bytes_to_move=int(d.get("bytes_to_move") or 0),
                   largest_per_osd=int(d.get("largest_per_osd") or 0),
                   pgs_inactive=strs("pgs_inactive_ids"),
                   pgs_undersized=strs("pgs_undersized_ids"),
                   pgs_degraded=strs("pgs_degraded_ids"), per_osd=per,
                   osds_past_nearfull=ints("osds_past_nearfull"),
                   osds_past_backfillfull=ints("osds_past_backfillfull"),
                   osds_past_full=ints("osds_past_full"),
                   ratios={str(k): float(v) for k, v in (d.get("ratios") or {}).items()
                           if isinstance(v, int | float)},
                   eta_seconds=float(eta) if isinstance(eta, int | float) else None,
                   eta_note=str(d.get("eta_note") or ""), method=str(d.get("method") or ""),
                   tool=str(d.get("tool") or ""), epoch=int(d.get("epoch") or 0),
                   made=float(d.get("made") or 0), seconds=float(d.get("seconds") or 0),
                   notes=[str(n) for n in d.get("notes") or ()],
                   then=cls.from_dict(then) if isinstance(then, Mapping) else None)

    def lines(self) -> list[str]:
        """The prediction as a review shows it."""
        out = []
        for i, p in enumerate(self.stages()):
            head = "predicted" if i == 0 else "then"
            out.append(f"{head}: {p.what}: {len(p.pgs_remapped)} PG(s) change their up set, "
                       f"{p.copies_to_create} shard copies to create, "
                       f"{human(p.bytes_to_move)} to move (most into one OSD: "
                       f"{human(p.largest_per_osd)})")
            bad = [f"{len(p.pgs_inactive)} inactive" if p.pgs_inactive else "",
                   f"{len(p.pgs_undersized)} undersized" if p.pgs_undersized else "",
                   f"{len(p.pgs_degraded)} degraded" if p.pgs_degraded else ""]
            bad = [b for b in bad if b]
            out.append("  PGs: " + (", ".join(bad) if bad else "none become inactive, "
                                    "undersized or degraded"))
            fills = [f"osd.{f.osd} {_pct(f.used_ratio_now)} -> {_pct(f.used_ratio_after)}"
                     for f in sorted(p.per_osd, key=lambda f: -(f.used_ratio_after or 0))
                     if f.bytes_in or f.bytes_out][:6]
            if fills:
                out.append(f"  fill (nearfull {p.ratios.get('nearfull', 0):.2f}, backfillfull "
                           f"{p.ratios.get('backfillfull', 0):.2f}, full "
                           f"{p.ratios.get('full', 0):.2f}): " + ", ".join(fills))
            for name, osds in (("nearfull", p.osds_past_nearfull),
                               ("backfillfull", p.osds_past_backfillfull),
                               ("full", p.osds_past_full)):
                if osds:
                    out.append(f"  past {name}: {', '.join(f'osd.{i}' for i in osds)}")
            out.append("  time: " + (f"about {_duration(p.eta_seconds)} ({p.eta_note})"
                                     if p.eta_seconds is not None else p.eta_note))
            out.append(f"  method: {p.method}; {p.tool}")
            out.extend(f"  note: {n}" for n in p.notes)
        return out

    def text(self) -> str:
        return "\n".join(self.lines())


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _pct(r: float | None) -> str:
    return "?" if r is None else f"{r * 100:.1f}%"


def _duration(s: float | None) -> str:
    if s is None:
        return "unknown"
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


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


def _pg_order(pgid: str) -> tuple[int, int]:
    pool, _, ps = pgid.partition(".")
    return int(pool), int(ps, 16)


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


# ---- the changes that move data -------------------------------------------------------

# (kind, key) of changes whose placement effect is computed: pg_num/pgp_num on pools,
# an OSD's noup (it stays down the next time it goes down), the cluster's noup/noin.
MOVING_POOL_KEYS = ("pg_num", "pgp_num")


def splits_pool(change: Any) -> bool:
    """A pool's pg_num or pgp_num: data moves as the mgr steps pgp_num, for hours."""
    return change.kind == "pool_set" and change.key in MOVING_POOL_KEYS


def moves_data(change: Any) -> bool:
    if splits_pool(change):
        return True
    return change.kind == "osd_flag" and change.key == "noup" and change.proposed == "set" \
        and change.target != "cluster"


def predict_changes(state: ClusterState, tools: Tools, changes: Sequence[Any],
                    verdict_of: Any = None) -> Prediction | None:
    """The prediction for a plan's data-moving changes, together: every OSD held down by
    noup at once (two of them may share a PG), each pool's pg_num. None: nothing moves."""
    moving = [c for c in changes if moves_data(c)]
    if not moving:
        return None
    parts: list[Prediction] = []
    held = sorted(int(c.target.removeprefix("osd.")) for c in moving if c.kind == "osd_flag")
    if held:
        verdict = verdict_of(held) if verdict_of is not None else None
        parts.append(predict_down(state, tools, held, verdict,
                                  what=f"noup holds {' '.join(f'osd.{i}' for i in held)} "
                                       "down (the next time each goes down)"))
    for c in moving:
        if c.kind == "pool_set":
            try:
                target = int(c.proposed)
            except ValueError:
                raise UserError(f"{c.key} {c.proposed!r} is not a number") from None
            parts.append(predict_pg_num(state, tools, c.target, target, c.key))
    first = parts[0]
    tail = first
    for nxt in parts[1:]:
        while tail.then is not None:
            tail = tail.then
        tail.then = nxt
    return first


def changes_key(changes: Sequence[Any]) -> tuple[Any, ...]:
    """What a prediction of `changes` depends on besides the cluster."""
    return tuple((c.kind, c.key, c.target, c.proposed) for c in changes if moves_data(c))


def reusable(previous: Prediction | None, epoch_now: int | None) -> bool:
    """A prediction made on the osdmap epoch the cluster is still at can be used again
    (apply predicts for its guard, then journals the same; at a million PGs each costs
    seconds). An unknown epoch, or a prediction that recorded none, is made again."""
    return previous is not None and bool(epoch_now) and previous.epoch == epoch_now


def state_of(conn: Any) -> ClusterState:
    from stormdeck.collectors.placement import fetch

    return fetch(conn)


def verdicts(conn: Any) -> Any:
    from stormdeck.collectors.placement import ok_to_stop

    return lambda ids: ok_to_stop(conn, ids)


def predict_down_now(conn: Any, osd_ids: Sequence[int]) -> Prediction:
    """For other rules (the flapping rule, issue 31): what holding `osd_ids` down does,
    read from the cluster now through a CephConnection. `.pgs_inactive` lists the PGs
    that stop serving IO; `.refusal()` the reason a change causing it is refused."""
    state = state_of(conn)
    tools = find_tools(state.version, state.release)
    return predict_down(state, tools, osd_ids, verdicts(conn)(list(osd_ids)))


def plan_prediction(conn: Any, changes: Sequence[Any]) -> Prediction | None:
    """What a plan's changes move, read from the cluster now; None when none moves data."""
    if not any(moves_data(c) for c in changes):
        return None
    state = state_of(conn)
    tools = find_tools(state.version, state.release)
    return predict_changes(state, tools, changes, verdicts(conn))


def against_outcome(prediction: Mapping[str, Any], observed: Mapping[str, Any] | None,
                    settled: Mapping[str, Any] | None) -> str:
    """A journal entry's prediction beside what happened: PGs remapped and bytes predicted
    against those seen (right after, and the most seen while it moved), eta_seconds against
    the real seconds until active+clean (advisors/apply.py Executor.settle)."""
    p = Prediction.from_dict(prediction)
    eta = "no eta (no recovery rate)" if p.eta_seconds is None else \
        f"eta {_duration(p.eta_seconds)}"
    text = (f"predicted: {len(p.pgs_remapped)} PGs remapped, {p.copies_to_create} copies, "
            f"{human(p.bytes_to_move)}, {len(p.pgs_inactive)} inactive, {eta}")
    if not isinstance(observed, Mapping):
        return text
    text += (f" | seen right after: {observed.get('pgs_remapped')} PGs remapped, "
             f"{observed.get('misplaced_objects')} objects misplaced, "
             f"{observed.get('pgs_inactive')} PGs not active")
    if not isinstance(settled, Mapping):
        return text + "; active+clean not seen yet"
    most = (f"at most {settled.get('pgs_remapped_max')} PGs remapped, "
            f"{settled.get('misplaced_objects_max')} objects misplaced (about "
            f"{human(float(settled.get('misplaced_bytes_max') or 0))}), "
            f"{settled.get('degraded_objects_max')} degraded, "
            f"{settled.get('pgs_inactive_max')} PGs not active")
    seconds = settled.get("seconds")
    if settled.get("clean_at") and isinstance(seconds, int | float):
        low = settled.get("seconds_at_least")
        when = f"active+clean after {_duration(float(seconds))}"
        if isinstance(low, int | float) and seconds - low > 10:
            # Seen by a later read: it became clean somewhere between two reads.
            when = (f"active+clean between {_duration(float(low))} and "
                    f"{_duration(float(seconds))} after")
        return f"{text}; {when} ({settled.get('by')}); {most}"
    so_far = settled.get("seconds_so_far")
    return (f"{text}; not active+clean after {_duration(float(so_far or 0))} "
            f"({settled.get('by')}); {most}")


def as_dict(p: Prediction | None) -> dict[str, Any] | None:
    return p.to_dict() if p is not None else None


__all__ = ["Prediction", "Tools", "crush_hash32_2", "find_tools", "mask_of",
           "plan_prediction", "pps", "predict_changes", "predict_crush_weight",
           "predict_down", "predict_down_now", "predict_out", "predict_pg_num",
           "predict_reweight", "seed", "stable_mod"]


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
