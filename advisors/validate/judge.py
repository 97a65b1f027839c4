"""Pass, warn or fail: each validation step's verdict on its measurements, with the evidence
and the KNOWLEDGE.md section it rests on. Pure functions, tested on recorded measurements."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from stormdeck.advisors import overrides
from stormdeck.advisors.rules.cpu import OP_THREADS_PER_CORE

PASS, WARN, FAIL, SKIP = "pass", "warn", "fail", "skip"
ORDER = {PASS: 0, SKIP: 0, WARN: 1, FAIL: 2}

# The docs/knowledge.md sections each verdict cites (`stormdeck explain SECTION` shows one).
CORES = "osd-cpu-single-osd-scaling, osd-cpu-recommendation"
BURSTS = "osd-cpu-used-vs-allocated"
BURSTS_KNEE = "osd-cpu-used-vs-allocated, osd-cpu-cluster-knee"
THREADS = "osd-op-threads"
CORES_THREADS = "osd-cpu-recommendation, osd-op-threads"
TUNED = "host-tuned-latency-profile"
SECURE = "msgr-secure-mode-cost"
WCACHE = "write-cache-raid-ssd-verify"
WCACHE_FIO = "write-cache-raid-ssd-verify, write-cache-check"
PG_POW2 = "pg-num-power-of-two"
FASTEC_OFF = "fast-ec-irreversible, fast-ec-tentacle-release"
FASTEC_ALL = "fast-ec-stripe-unit, fast-ec-results, fast-ec-tentacle-release"
STRIPE = "fast-ec-stripe-unit"
FASTEC_REQ = "fast-ec-requirements"
FASTEC_RELEASE = "fast-ec-tentacle-release"
FASTEC_ON = "fast-ec-irreversible, fast-ec-stripe-unit"
SCRUB_SLEEP = "scrub-load-and-sleep"
MCLOCK = "mclock-recovery-limits-profiles"
SCRUB_LOAD = "scrub-load-threshold-per-cpu"
MCLOCK_OVERRIDES = "mclock-forces-sleeps-zero, mclock-recovery-limits-profiles"
RESPONSE = "response-curve-headroom"
PEERING = "peering-tuning-measurements"
CITES = (CORES, BURSTS, BURSTS_KNEE, THREADS, CORES_THREADS, TUNED, SECURE, WCACHE, WCACHE_FIO,
         PG_POW2, FASTEC_OFF, FASTEC_ALL, STRIPE, FASTEC_REQ, FASTEC_RELEASE, FASTEC_ON,
         SCRUB_SLEEP, MCLOCK, SCRUB_LOAD, MCLOCK_OVERRIDES, RESPONSE, PEERING)
GOOD_PROFILES = ("latency-performance", "network-latency")


@dataclass(frozen=True, slots=True)
class Verdict:
    check: str  # "tuned profile on vm", "pool rbd pg_num"
    verdict: str  # PASS | WARN | FAIL | SKIP
    summary: str
    source: str  # docs/knowledge.md section id(s), comma-separated
    evidence: tuple[str, ...] = ()
    data: Mapping[str, Any] = field(default_factory=dict)


def worst(verdicts: Iterable[Verdict]) -> str:
    out = PASS
    for v in verdicts:
        if ORDER[v.verdict] > ORDER[out]:
            out = v.verdict
    return out


# ---- hosts --------------------------------------------------------------------------


def tuned(host: str, profile: str | None) -> Verdict:
    if profile is None:
        return Verdict(f"tuned profile on {host}", SKIP, "not readable from here", TUNED)
    if profile in GOOD_PROFILES:
        return Verdict(f"tuned profile on {host}", PASS, f"{profile}", TUNED)
    return Verdict(f"tuned profile on {host}", WARN,
                   f"{profile or 'none'}: use latency-performance or network-latency to avoid "
                   "latency spikes from CPU power-state changes", TUNED,
                   (f"/etc/tuned/active_profile: {profile or '(none)'}",))


def cores(daemon: str, allowed: float | None, used: float | None,
          explicit: bool | None = True) -> Verdict:
    """2-4 cores per OSD is the minimum that lets it use them all; the knee is ~8-12 (K1.2-K1.5).
    Only a limit someone set (`explicit`) can be beyond the knee: an unpinned OSD shares
    its host's CPUs, and may burst above 16 as it does best (K1.3)."""
    name = f"cores allowed to {daemon}"
    if allowed is None:
        return Verdict(name, SKIP, "not measurable from here (not on this host)", CORES)
    ev = (f"allowed {allowed:g} cores (affinity and cgroup quota)",
          f"used {used:.2f} cores" if used is not None else "used: unknown")
    if allowed < 2:
        return Verdict(name, FAIL, f"{allowed:g} core(s): below the 2-4 an OSD needs for small "
                       "random IO", CORES, ev, {"allowed": allowed})
    if allowed > 16 and explicit is not False:
        return Verdict(name, WARN, f"{allowed:g} cores: beyond the knee (~8-12): an OSD rarely "
                       "uses more than 16 (K1.3); fewer per OSD leaves cores for others",
                       BURSTS_KNEE, ev, {"allowed": allowed})
    return Verdict(name, PASS, f"{allowed:g} cores", CORES, ev, {"allowed": allowed})


def op_threads(daemon: str, threads: int | None, allowed: float | None,
               per_core: float = OP_THREADS_PER_CORE) -> Verdict:
    """Op worker threads (shards x threads per shard) against the cores the OSD may use: the
    same threshold as the ceph.osd.op_threads_vs_cores rule (K1.2, K1.5, K1.6)."""
    name = f"op threads of {daemon}"
    if threads is None or allowed is None:
        return Verdict(name, SKIP, "shards, threads or cores unknown", THREADS)
    ev = (f"{threads} op worker threads", f"{allowed:g} cores allowed",
          f"measured to work: up to {per_core:g} per core (16 on 2 cores, K1.2, K1.5)")
    if threads > per_core * allowed:
        return Verdict(name, WARN, f"{threads} op threads on {allowed:g} cores: they contend; "
                       f"give the OSD at least {math.ceil(threads / per_core)} cores (do not "
                       "cut the threads: the op scheduler sizes them)", CORES_THREADS, ev)
    return Verdict(name, PASS, f"{threads} op threads on {allowed:g} cores",
                   CORES_THREADS, ev)


def write_cache(device: str, fio_iops: float | None, device_wps: float | None,
                kernel_view: str | None, flushes_ps: float | None = None,
                flush_ms: float | None = None) -> Verdict:
    """K2.5: with the volatile cache off the device sees one request per fio fdatasync
    write; with it on, a write and a cache flush, so fio does about half of what the device
    does. Kernels before 5.5 counted a flush as a write; since 5.5 /proc/diskstats counts
    flushes apart (fields 19-20) and w/s alone matches fio even with the cache on: the
    device's requests are its writes plus its flushes."""
    name = f"write cache of {device}"
    if fio_iops is None or not device_wps:
        return Verdict(name, SKIP, "no fio measurement", WCACHE_FIO)
    requests = device_wps + (flushes_ps or 0.0)
    ratio = fio_iops / requests
    per_write = flushes_ps / fio_iops if flushes_ps is not None and fio_iops else None
    ev = [f"fio 4K fdatasync writes: {fio_iops:.0f} IOPS",
          f"{device} over the same seconds (/proc/diskstats): {device_wps:.0f} writes/s"]
    if flushes_ps is None:
        ev.append("flushes: not counted by this kernel (before 5.5: they count as writes)")
    else:
        ev.append(f"{flushes_ps:.0f} flushes/s ({per_write:.2f} per fio write)"
                  + (f", {flush_ms:.2f} ms each" if flush_ms is not None else ""))
    ev.append(f"ratio {ratio:.2f}; kernel's view: {kernel_view or 'unknown'}")
    data = {"device": device, "fio_iops": fio_iops, "device_wps": device_wps,
            "flushes_ps": flushes_ps, "flushes_per_write": per_write,
            "flush_ms": flush_ms, "ratio": ratio}
    if ratio < 0.7:
        why = (f"{per_write:.0%} of fio's writes sent the device a cache flush"
               if per_write is not None and per_write >= 0.3 else
               f"fio does {ratio:.0%} of the device's requests")
        return Verdict(name, FAIL, f"{why}: the volatile write cache is on (or the host was "
                       "not rebooted since it was turned off)", WCACHE_FIO, tuple(ev), data)
    return Verdict(name, PASS, f"fio IOPS matches the device's requests ({ratio:.0%})"
                   + ("; no flushes reach it" if per_write is not None and per_write < 0.3
                      else ""), WCACHE_FIO, tuple(ev), data)


# ---- cluster settings ------------------------------------------------------------------


def pg_num(pool: str, pgs: int) -> Verdict:
    ok = pgs > 0 and pgs & (pgs - 1) == 0
    return Verdict(f"pool {pool} pg_num", PASS if ok else WARN,
                   f"{pgs}" if ok else f"{pgs} is not a power of two: PGs split unevenly, "
                   f"so data spreads unevenly; use {1 << (max(1, pgs) - 1).bit_length()} "
                   "(rounding up splits PGs; rounding down would merge them and move data)",
                   PG_POW2, (f"pg_num {pgs}",))


def ec_pool(pool: str, k: int | None, m: int | None, release: str | None,
            flags: Sequence[str], stripe_unit: int | None, *, capable: bool | None = True,
            version: str | None = None, bulk: bool = False) -> Verdict:
    """An EC pool's fast EC. Warned only where it could be turned on and be worth it:
    `capable` is whether the monitor takes the flag for its profile's code (None: profile
    unknown), `bulk` an RGW bucket-data pool, and 20.2.0 crashes OSDs with the flag set
    (tracker 74813), so there it is not a fault to be without it."""
    name = f"EC pool {pool}"
    ev = (f"k={k} m={m}", f"release {release}", f"stripe_unit {stripe_unit}")
    fast = release in ("tentacle", "umbrella") or (release or "") > "tentacle"
    if not fast:
        return Verdict(name, PASS, f"{k}+{m}; fast EC needs Tentacle (20.2) or later",
                       FASTEC_OFF, ev)
    if "ec_optimizations" not in flags:
        if capable is False:
            return Verdict(name, PASS, "fast EC off: its profile's code cannot have it (only "
                           "jerasure or isa with reed_sol_van)", FASTEC_REQ, ev)
        if bulk:
            return Verdict(name, PASS, "fast EC off: an RGW bucket-data pool gains little "
                           "from it", FASTEC_REQ, ev)
        if version is not None and _version(version) < (20, 2, 1):
            return Verdict(name, PASS, f"fast EC off, as it should be on {version}: 20.2.0 "
                           "crashes OSDs with it (tracker 74813); upgrade first",
                           FASTEC_RELEASE, (*ev, f"version {version}"))
        return Verdict(name, WARN, "fast EC is off: small reads 2-3x and writes 2x slower "
                       "than they could be (allow_ec_optimizations; it cannot be undone: "
                       "try it on a test pool with the same profile first)",
                       FASTEC_ALL, ev)
    if stripe_unit is not None and stripe_unit < 16384:
        return Verdict(name, WARN, f"fast EC on, stripe_unit {stripe_unit}: new pools "
                       "should use 16K", STRIPE, ev)
    return Verdict(name, PASS, "fast EC on", FASTEC_ON, ev)


def _version(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(".")[:3])
    except ValueError:
        return (0,)


def scrub(values: Mapping[str, str | None], scheduler: str | None = None) -> list[Verdict]:
    """What decides how scrubs meet client IO under the running scheduler (K3.6, K8.1-K8.4).

    Ceph's defaults pass on every release: under wpq osd_scrub_sleep is the lever
    (K3.6) and its default 0 is advice, not a fault; under mClock the sleep is forced to
    0 and the profile is what counts (a value set anyway: overridden_settings).
    osd_scrub_load_threshold is load per CPU since Luminous: only a value below Ceph's
    own default makes scrubs wait (K8.4).
    """
    out = []
    mclock = scheduler in ("mclock_scheduler", "debug_random")
    sleep = _num(values.get("osd_scrub_sleep"))
    if sleep is not None and not mclock:
        out.append(Verdict("osd_scrub_sleep", PASS,
                           f"{sleep:g} s between scrub chunks under {scheduler or 'wpq'}" +
                           ("" if sleep > 0 else " (Ceph's default): if scrubs crowd out "
                            "clients under load, 0.1 s leaves them gaps"), SCRUB_SLEEP,
                           (f"osd_scrub_sleep = {values.get('osd_scrub_sleep')}",)))
    profile = (values.get("osd_mclock_profile") or "").strip().lower()
    if mclock and profile:
        recovery = profile == "high_recovery_ops"
        out.append(Verdict("osd_mclock_profile", WARN if recovery else PASS, profile + (
            ": background work gets the larger share and clients wait; it is meant for a "
            "recovery, set balanced or high_client_ops after" if recovery else
            ": reservations as you set them" if profile == "custom" else
            " (scrub and recovery share with clients as the profile says)"), MCLOCK,
            (f"osd_op_queue = {scheduler}", f"osd_mclock_profile = {profile}")))
    load = _num(values.get("osd_scrub_load_threshold"))
    if load is not None:
        out.append(Verdict("osd_scrub_load_threshold", PASS if load >= 0.5 else WARN,
                           f"{load:g} (load per CPU)" + ("" if load >= 0.5 else
                                                         ": below Ceph's own default, "
                                                         "periodic scrubs wait and may fall "
                                                         "behind"), SCRUB_LOAD))
    for opt, floor in (("osd_scrub_min_interval", 86400.0),
                       ("osd_deep_scrub_interval", 604800.0)):
        v = _num(values.get(opt))
        if v is not None:
            out.append(Verdict(opt, PASS if v >= floor else WARN,
                               f"{v / 86400:g} days" + ("" if v >= floor else
                                                        ": more often than the defaults"),
                               SCRUB_SLEEP))
    return out


def overridden_settings(set_values: Mapping[str, tuple[str, str]]) -> list[Verdict]:
    """Options set in the config database that the scheduler overrides: option -> (value,
    why, from advisors/overrides.py).

    Two kinds (src/osd/OSD.cc): the sleeps are forced to 0 at boot and on every change
    (maybe_override_sleep_options_for_qos): a stored one does nothing. The recovery
    limits are different (maybe_override_options_for_qos): at boot the OSD applies
    mClock's values with set_val_default, which yields to a value already stored, so an
    OSD (re)started after it was stored RUNS with it; only a change made while the OSD
    runs is removed again. Telling the operator to remove such a value would change
    what every OSD does at its next restart (K9.5).
    """
    out = []
    for name, (value, why) in sorted(set_values.items()):
        o = overrides.TABLE.get(name)
        if o is not None and o.source == overrides.RECOVERY_SOURCE:
            out.append(Verdict(
                f"{name} set but overridden", WARN,
                f"{value} is stored: OSDs started after it was stored run with it (the "
                "boot path applies mClock's value with set_val_default, which keeps a "
                "stored one), but a change made while they run is removed again "
                f"unless {o.unless} is true, so OSDs may differ. Decide which you want: "
                f"keep it and set {o.unless} true, or remove it (ceph config rm osd "
                f"{name}) and let osd_mclock_profile govern it from the next restart",
                MCLOCK, (f"{name} = {value}", why)))
        else:
            out.append(Verdict(
                f"{name} set but overridden", WARN,
                f"{value} is stored, but {why}: it does nothing; remove it "
                f"(ceph config rm osd {name})", MCLOCK_OVERRIDES, (f"{name} = {value}",)))
    return out


def secure_mode(modes: Mapping[str, str | None]) -> Verdict:
    on = [k for k, v in modes.items() if v and v.split(" ")[0] == "secure"]
    if on:
        return Verdict("messenger secure mode", WARN, f"{', '.join(on)} prefer secure: "
                       "on-wire encryption costs 30-40% of performance; use it where the "
                       "network needs it", SECURE, tuple(f"{k} = {modes[k]}" for k in on))
    return Verdict("messenger secure mode", PASS, "crc (no on-wire encryption)", SECURE)


def _num(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


# ---- curves --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Point:
    x: float  # concurrency, or cores
    iops: float
    latency: float  # seconds, average
    extra: Mapping[str, float] = field(default_factory=dict)


def knee(points: Sequence[Point]) -> int | None:
    """The saturation point of a response curve (K5.5's hockey stick): with latency against
    IOPS, both scaled to 0..1, the point furthest below the straight line from the first
    point to the last (the Kneedle method). Before it IOPS grows faster than latency,
    after it latency grows faster than IOPS. None if the curve does not bend that way."""
    pts = sorted((p for p in points if p.iops > 0 and p.latency > 0), key=lambda p: p.x)
    if len(pts) < 3:
        return None
    x0, x1 = min(p.iops for p in pts), max(p.iops for p in pts)
    y0, y1 = min(p.latency for p in pts), max(p.latency for p in pts)
    if x1 == x0:
        return None

    def bend(p: Point) -> float:
        y = (p.latency - y0) / (y1 - y0) if y1 > y0 else 0.0
        return (p.iops - x0) / (x1 - x0) - y

    best = max(pts, key=bend)
    return list(points).index(best) if bend(best) > 0.02 else None


def headroom(points: Sequence[Point], fraction: float = 0.7) -> Point | None:
    """Where the curve reaches `fraction` of its most IOPS (K5.5: keep production below
    ~70%), interpolated between the points either side."""
    if not points:
        return None
    top = max(p.iops for p in points)
    want = fraction * top
    prev = None
    for p in sorted(points, key=lambda p: p.x):
        if p.iops >= want:
            if prev is None or p.iops == prev.iops:
                return Point(p.x, want, p.latency)
            f = (want - prev.iops) / (p.iops - prev.iops)
            return Point(prev.x + f * (p.x - prev.x), want,
                         prev.latency + f * (p.latency - prev.latency))
        prev = p
    return None


def response_curve(kind: str, points: Sequence[Point]) -> Verdict:
    name = f"{kind} response curve"
    if len(points) < 3:
        return Verdict(name, SKIP, "too few points", RESPONSE)
    k = knee(points)
    top = max(points, key=lambda p: p.iops)
    h = headroom(points)
    ev = tuple(f"{p.x:g} in flight: {p.iops:.0f} IOPS at {p.latency * 1000:.2f} ms"
               for p in points)
    data: dict[str, Any] = {"max_iops": top.iops, "knee": None, "headroom": None}
    if h is not None:
        data["headroom"] = {"iops": h.iops, "in_flight": h.x, "latency": h.latency}
    if k is None:
        return Verdict(name, WARN, "no knee found: the curve is not a hockey stick (too "
                       "short a run, or the load generator is the limit)", RESPONSE, ev, data)
    data["knee"] = {"in_flight": points[k].x, "iops": points[k].iops,
                    "latency": points[k].latency}
    last = points[-1]
    summary = (f"knee at {points[k].x:g} in flight: {points[k].iops:.0f} IOPS at "
               f"{points[k].latency * 1000:.2f} ms; most {top.iops:.0f} IOPS")
    if h is not None:
        summary += (f"; 70% headroom point {h.iops:.0f} IOPS (~{h.x:.1f} in flight, "
                    f"{h.latency * 1000:.2f} ms)")
    if k == len(points) - 1 and last.iops >= top.iops:
        return Verdict(name, WARN, summary + "; still rising at the last point: the knee "
                       "may lie beyond it", RESPONSE, ev, data)
    return Verdict(name, PASS, summary, RESPONSE, ev, data)


def peering(seconds: float | None, pgs: int, previous: Sequence[float] = ()) -> Verdict:
    name = f"peering time of {pgs} new PGs"
    if seconds is None:
        return Verdict(name, FAIL, "not active+clean within the time allowed", PEERING)
    ev = [f"{seconds:.1f} s to active+clean"]
    data = {"seconds": seconds, "pgs": pgs}
    if previous:
        best = min(previous)
        ev.append(f"earlier runs: {', '.join(f'{p:.1f} s' for p in previous[-5:])}")
        if seconds > 1.5 * best and seconds - best > 5:
            return Verdict(name, WARN, f"{seconds:.1f} s, slower than the best earlier run "
                           f"({best:.1f} s): something changed", PEERING, tuple(ev), data)
    return Verdict(name, PASS, f"{seconds:.1f} s", PEERING, tuple(ev), data)


# Adding a core "pays" while it brings this much more IOPS (the step's ratio).
PAYS = 1.10


@dataclass(frozen=True)
class CoreStep:
    """One step of the CPU sweep measured as an experiment: `to` cores (B) against
    `frm` (A) in alternated windows, the effect on the OSD's write IOPS with its
    interval (advisors/experiment/stats.py)."""

    frm: float
    to: float
    ratio: float
    ci_low: float
    ci_high: float


def cpu_scaling(daemon: str, points: Sequence[Point],
                steps: Sequence[CoreStep] = ()) -> Verdict:
    """K1: IOPS at each core limit; per allocated and per used core; where adding a core
    stops paying (less than 10% more IOPS). With `steps` (the sweep's alternated rounds)
    the knee comes with its interval: from the first step that may pay less than 10% (its
    interval reaches below) to the first that surely does (its interval is all below)."""
    name = f"CPU scaling of {daemon}"
    if len(points) < 2:
        return Verdict(name, SKIP, "fewer than two core limits measured", CORES)
    ev = []
    for p in points:
        used = p.extra.get("cores_used")
        per_used = f", {p.iops / used:.0f} per used core" if used else ""
        ev.append(f"{p.x:g} cores: {p.iops:.0f} IOPS, {p.iops / p.x:.0f} per allocated core"
                  + per_used)
    data: dict[str, Any] = {"points": [(p.x, p.iops) for p in points]}
    gain = points[-1].iops / points[0].iops if points[0].iops else 0.0
    if steps:
        last = steps[-1].to
        knee_at = next((st.frm for st in steps if st.ratio < PAYS), last)
        low = next((st.frm for st in steps if st.ci_low < PAYS), last)
        high = next((st.frm for st in steps if st.ci_high < PAYS), None)
        for st in steps:
            ev.append(f"{st.frm:g} -> {st.to:g} cores: {st.ratio - 1:+.1%} IOPS (95%: "
                      f"{st.ci_low - 1:+.1%} to {st.ci_high - 1:+.1%})")
        data.update(knee_low=low, knee_high=high, steps=[
            {"from": st.frm, "to": st.to, "ratio": st.ratio, "ci_low": st.ci_low,
             "ci_high": st.ci_high} for st in steps])
        upper = f"{high:g}" if high is not None else f"beyond {last:g}, the last measured"
        between = f"{knee_at:g} (95%: from {low:g} to {upper})"
    else:
        knee_at = points[-1].x
        for a, b in itertools.pairwise(points):
            if b.iops < a.iops * PAYS:
                knee_at = a.x
                break
        between = f"{knee_at:g}"
    data["knee_cores"] = knee_at
    summary = (f"{points[0].x:g} -> {points[-1].x:g} cores: x{gain:.2f} IOPS; adding cores "
               f"stops paying at {between}")
    verdict = WARN if knee_at <= 1 else PASS
    return Verdict(name, verdict, summary, CORES, tuple(ev), data)
