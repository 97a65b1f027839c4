"""Ceph's placement-seed arithmetic: the rjenkins hash, ceph_stable_mod and a PG's pps.

As src/crush/hash.c, src/include/rados.h and src/osd/osd_types.cc
(pg_pool_t::raw_pg_to_pps) compute them, in 32-bit unsigned arithmetic.
"""

from __future__ import annotations

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
