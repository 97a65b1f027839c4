"""Ceph's own CRUSH mapper (crush_do_rule in libceph-common), called in-process for a few PGs.

osdmaptool and crushtool map every PG of a pool, which at a million PGs takes tens of
seconds per run. A prediction that knows which PGs can change (see advisors/blast/mapping.py)
needs the mapping of only those, so this builds the CRUSH map from crushtool's JSON dump
with libcrush's own builder (crush_create, crush_make_bucket, crush_make_rule, ...) and
asks crush_do_rule, the code OSDMap itself runs, for the seeds it is given.

Only what the builder reproduces exactly is accepted: straw2 buckets (their draw is a
function of the item weights alone), the rule steps libcrush has always had, no
choose_args (weight-sets). Anything else raises Unsupported, and the caller maps with the
tools as before. The struct layout written here (struct crush_map's tunables) is the one
of src/crush/crush.h since Luminous; the caller checks the result against Ceph's own
current mapping before trusting it.
"""

from __future__ import annotations

import ctypes
import glob
from collections.abc import Mapping, Sequence
from typing import Any

LIBRARIES = ("/usr/lib/x86_64-linux-gnu/ceph/libceph-common.so.2",
             "/usr/lib/aarch64-linux-gnu/ceph/libceph-common.so.2",
             "/usr/lib64/ceph/libceph-common.so.2", "/usr/lib/ceph/libceph-common.so.2")

ALG_STRAW2 = 5
HASH_RJENKINS1 = 0
OPS = {"noop": 0, "take": 1, "choose_firstn": 2, "choose_indep": 3, "emit": 4,
       "chooseleaf_firstn": 6, "chooseleaf_indep": 7, "set_choose_tries": 8,
       "set_chooseleaf_tries": 9, "set_choose_local_tries": 10,
       "set_choose_local_fallback_tries": 11, "set_chooseleaf_vary_r": 12,
       "set_chooseleaf_stable": 13}
TUNABLES = ("choose_local_tries", "choose_local_fallback_tries", "choose_total_tries",
            "chooseleaf_descend_once", "chooseleaf_vary_r", "chooseleaf_stable",
            "straw_calc_version", "allowed_bucket_algs")


class Unsupported(Exception):
    """The map uses something this in-process mapper does not reproduce exactly."""


class _CrushMap(ctypes.Structure):
    # struct crush_map (src/crush/crush.h, userspace build)
    _fields_ = [("buckets", ctypes.c_void_p), ("rules", ctypes.c_void_p),
                ("max_buckets", ctypes.c_int32), ("max_rules", ctypes.c_uint32),
                ("max_devices", ctypes.c_int32), ("choose_local_tries", ctypes.c_uint32),
                ("choose_local_fallback_tries", ctypes.c_uint32),
                ("choose_total_tries", ctypes.c_uint32),
                ("chooseleaf_descend_once", ctypes.c_uint32),
                ("chooseleaf_vary_r", ctypes.c_uint8), ("chooseleaf_stable", ctypes.c_uint8),
                ("working_size", ctypes.c_size_t), ("straw_calc_version", ctypes.c_uint8),
                ("allowed_bucket_algs", ctypes.c_uint32), ("choose_tries", ctypes.c_void_p)]


_lib: Any = None


def library() -> Any:
    """libceph-common, loaded once (it is already in a process that imported rados)."""
    global _lib
    if _lib is None:
        for path in [*LIBRARIES, *glob.glob("/usr/lib*/*/ceph/libceph-common.so.2")]:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            lib.crush_create.restype = ctypes.POINTER(_CrushMap)
            lib.crush_make_bucket.restype = ctypes.c_void_p
            lib.crush_make_bucket.argtypes = [ctypes.POINTER(_CrushMap), ctypes.c_int,
                                              ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                              ctypes.POINTER(ctypes.c_int),
                                              ctypes.POINTER(ctypes.c_int)]
            lib.crush_add_bucket.argtypes = [ctypes.POINTER(_CrushMap), ctypes.c_int,
                                             ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            lib.crush_make_rule.restype = ctypes.c_void_p
            lib.crush_make_rule.argtypes = [ctypes.c_int] * 5
            lib.crush_rule_set_step.argtypes = [ctypes.c_void_p] + [ctypes.c_int] * 4
            lib.crush_add_rule.argtypes = [ctypes.POINTER(_CrushMap), ctypes.c_void_p,
                                           ctypes.c_int]
            lib.crush_finalize.argtypes = [ctypes.POINTER(_CrushMap)]
            lib.crush_init_workspace.argtypes = [ctypes.POINTER(_CrushMap), ctypes.c_void_p]
            lib.crush_do_rule.argtypes = [ctypes.POINTER(_CrushMap), ctypes.c_int,
                                          ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                          ctypes.c_int, ctypes.POINTER(ctypes.c_uint32),
                                          ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
            lib.crush_destroy.argtypes = [ctypes.POINTER(_CrushMap)]
            _lib = lib
            break
        else:
            raise Unsupported("libceph-common is not installed here")
    return _lib


class Mapper:
    """A CRUSH map built from `crushtool --dump` JSON, mapping seeds as crush_do_rule does."""

    def __init__(self, dump: Mapping[str, Any]) -> None:
        if dump.get("choose_args"):
            raise Unsupported("the map has choose_args (weight-sets)")
        lib = library()
        self.lib = lib
        types = {str(t["name"]): int(t["type_id"]) for t in dump.get("types", ())}
        m = lib.crush_create()
        if not m:
            raise Unsupported("crush_create failed")
        self.map = m
        tun = dump.get("tunables") or {}
        for name in TUNABLES:
            if name in tun:
                setattr(m.contents, name, int(tun[name]))
        self.rules: set[int] = set()
        for b in dump.get("buckets", ()):
            if b.get("alg") != "straw2" or b.get("hash") != "rjenkins1":
                self.close()
                raise Unsupported(f"bucket {b.get('name')} is {b.get('alg')}, not straw2")
            items = [int(i["id"]) for i in b.get("items", ())]
            weights = [int(i["weight"]) for i in b.get("items", ())]
            n = len(items)
            bucket = lib.crush_make_bucket(m, ALG_STRAW2, HASH_RJENKINS1, int(b["type_id"]),
                                           n, (ctypes.c_int * n)(*items),
                                           (ctypes.c_int * n)(*weights))
            out = ctypes.c_int()
            if not bucket or lib.crush_add_bucket(m, int(b["id"]), bucket,
                                                  ctypes.byref(out)) < 0:
                self.close()
                raise Unsupported(f"bucket {b.get('name')} could not be built")
        for r in dump.get("rules", ()):
            steps = r.get("steps", ())
            rule = lib.crush_make_rule(len(steps), int(r.get("ruleset", r["rule_id"])),
                                       int(r.get("type", 1)), int(r.get("min_size", 1)),
                                       int(r.get("max_size", 10)))
            for pos, s in enumerate(steps):
                op = OPS.get(str(s.get("op")))
                if op is None:
                    self.close()
                    raise Unsupported(f"rule {r.get('rule_name')} has step {s.get('op')}")
                if op == 1:
                    a1, a2 = int(s["item"]), 0
                elif op in (2, 3, 6, 7):
                    a1, a2 = int(s["num"]), types[str(s["type"])]
                else:
                    a1, a2 = int(s.get("num", 0)), 0
                lib.crush_rule_set_step(rule, pos, op, a1, a2)
            if lib.crush_add_rule(m, rule, int(r["rule_id"])) < 0:
                self.close()
                raise Unsupported(f"rule {r.get('rule_name')} could not be added")
            self.rules.add(int(r["rule_id"]))
        lib.crush_finalize(m)
        self.result_max = 0
        self.work: Any = None

    def close(self) -> None:
        if self.map:
            self.lib.crush_destroy(self.map)
            self.map = None

    def __enter__(self) -> Mapper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def weights(w: Mapping[int, int], max_osd: int) -> Any:
        """The device weight vector OSDMap passes: 16.16 fixed point (0x10000 in, 0 out)."""
        vec = (ctypes.c_uint32 * max_osd)()
        for osd, value in w.items():
            if 0 <= osd < max_osd:
                vec[osd] = max(0, min(0x10000, int(value)))
        return vec

    def do_rule(self, rule: int, x: int, size: int, weights: Any) -> tuple[int, ...]:
        """crush_do_rule(rule, x) for `size` results under `weights`."""
        if rule not in self.rules:
            raise Unsupported(f"there is no CRUSH rule {rule}")
        if size > self.result_max:
            self.result_max = size
            self.work = ctypes.create_string_buffer(
                self.map.contents.working_size + size * 3 * 4)
        self.lib.crush_init_workspace(self.map, self.work)
        result = (ctypes.c_int * size)()
        n = self.lib.crush_do_rule(self.map, rule, ctypes.c_int(x & 0xFFFFFFFF).value, result,
                                   size, weights, len(weights), self.work, None)
        return tuple(result[:max(n, 0)])

    def map_many(self, rule: int, xs: Sequence[int], size: int, weights: Any
                 ) -> list[tuple[int, ...]]:
        return [self.do_rule(rule, x, size, weights) for x in xs]
