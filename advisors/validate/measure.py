"""Validation steps 3 to 5: the cluster loaded in scratch pools and timed (bench, peering, CPU)."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from stormdeck.advisors.validate import judge
from stormdeck.advisors.validate.context import Ctx, pool_clean, scratch_pool
from stormdeck.advisors.validate.judge import Point, Verdict
from stormdeck.base.errors import UserError
from stormdeck.base.secrets import write_private

# ---- step 3: response curve ---------------------------------------------------------------

_AVG_IOPS = re.compile(r"^Average IOPS:\s+([\d.]+)", re.M)
_AVG_LAT = re.compile(r"^Average Latency\(s\):\s+([\d.eE+-]+)", re.M)


def parse_bench(text: str) -> tuple[float, float]:
    """`rados bench` summary: (average IOPS, average latency in seconds)."""
    iops, lat = _AVG_IOPS.search(text), _AVG_LAT.search(text)
    if not iops or not lat:
        raise UserError("rados bench printed no summary (Average IOPS / Average Latency)")
    return float(iops.group(1)), float(lat.group(1))


def levels(quick: bool) -> list[int]:
    return [1, 2, 4, 8, 16, 32] if quick else [1, 2, 4, 8, 16, 32, 64, 128]


def bench_clients(quick: bool) -> int:
    """rados bench processes run side by side: one client process is itself a limit
    (seed 001 ran several), and several keep the curve the cluster's, not the tool's."""
    return 2 if quick else 4


def split(in_flight: int, clients: int) -> list[int]:
    """`in_flight` requests over at most `clients` processes, as evenly as can be."""
    n = max(1, min(clients, in_flight))
    return [in_flight // n + (1 if i < in_flight % n else 0) for i in range(n)]


def combine(results: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Clients' (IOPS, average latency) as one: IOPS add up, latency weighs by IOPS."""
    iops = sum(r[0] for r in results)
    if iops <= 0:
        return 0.0, max((r[1] for r in results), default=0.0)
    return iops, sum(r[0] * r[1] for r in results) / iops


def drop_osd_caches(ctx: Ctx) -> str | None:
    """`ceph tell osd.* cache drop` (K4.4: reads after writes come from memory otherwise);
    None when done, else why not (the run goes on, and the report says so)."""
    ceph = shutil.which("ceph")
    if ceph is None:
        return "the ceph command is not installed here"
    argv = [ceph, *(["-c", ctx.options.conf] if ctx.options.conf else []),
            *ctx.options.client_args, "tell", "osd.*", "cache", "drop"]
    try:
        ctx.run(argv, timeout=120)
    except UserError as exc:
        return str(exc)
    return None


def response_curves(ctx: Ctx) -> tuple[list[Verdict], dict[str, list[Point]]]:
    quick = ctx.options.quick
    seconds = 2 if quick else 180
    warm = 1 if quick else 30
    steps = levels(quick)
    clients = bench_clients(quick)
    # Enough PGs that the benchmark reaches every OSD evenly, not a few of them.
    pgs = 32 if quick else 128
    curves: dict[str, list[Point]] = {"write": [], "read": []}
    dropped: str | None = None
    with scratch_pool(ctx, "bench", pgs) as pool:
        ctx.progress(0.02, f"warm-up: {warm} s of writes")
        ctx.run(ctx.rados("-p", pool, "bench", str(warm), "write", "-t", "16", "-b", "4096",
                          "--run-name", "stormdeck-0", "--no-cleanup"), timeout=warm + 120)
        total = 2 * len(steps)
        done = 0
        for kind, mode in (("write", "write"), ("read", "rand")):
            if kind == "read":
                ctx.progress(done / total, "dropping the OSDs' caches before the reads")
                dropped = drop_osd_caches(ctx)
            for t in steps:
                per = split(t, clients)
                ctx.progress(done / total, f"{kind}: {t} in flight from {len(per)} "
                             f"client(s) for {seconds} s")
                argvs = []
                for i, n in enumerate(per):
                    # Each client its own objects: reads find what that client wrote (the
                    # highest level wrote from every client).
                    args = ["-p", pool, "bench", str(seconds), mode, "-t", str(n),
                            "--run-name", f"stormdeck-{i}"]
                    if mode == "write":
                        args += ["-b", "4096", "--no-cleanup"]
                    argvs.append(ctx.rados(*args))
                iops, lat = combine([parse_bench(out) for out in
                                     ctx.run_many(argvs, timeout=seconds + 120)])
                curves[kind].append(Point(float(t), iops, lat, {"clients": float(len(per))}))
                done += 1
        ctx.progress(1.0, "removing the benchmark's objects")
    verdicts = [judge.response_curve(k, pts) for k, pts in curves.items()]
    note = (f"{clients} rados bench clients side by side on a pool of {pgs} PGs; "
            + ("the OSDs' caches were dropped before the reads (`ceph tell osd.* cache drop`)"
               if dropped is None else f"the OSDs' caches could NOT be dropped before the "
               f"reads ({dropped}): reads may come from memory"))
    verdicts = [replace(v, evidence=(*v.evidence, note),
                        data={**v.data, "caches_dropped": dropped is None, "clients": clients,
                              "pgs": pgs}) for v in verdicts]
    return verdicts, curves


# ---- step 4: peering time ------------------------------------------------------------------


def peering_time(ctx: Ctx) -> list[Verdict]:
    pgs = 64 if ctx.options.quick else ctx.options.peering_pgs
    limit = 180.0 if ctx.options.quick else 1800.0
    history_file = ctx.options.state_dir / "peering.json"
    fsid = ctx.snapshot.cluster.fsid if ctx.snapshot.cluster else None
    runs = _load(history_file)
    previous = [r["seconds"] for r in runs if r.get("fsid") == fsid and r.get("pgs") == pgs
                and r.get("seconds") is not None]
    with scratch_pool(ctx, "peering", pgs) as pool:
        started = time.monotonic()
        took: float | None = None
        while time.monotonic() - started < limit:
            clean, total = pool_clean(ctx.admin, pool)
            ctx.progress(min(0.99, (time.monotonic() - started) / limit),
                         f"{clean} of {pgs} PGs active+clean")
            if total == pgs and clean == total:
                took = time.monotonic() - started
                break
            ctx.sleep(0.5)
    verdict = judge.peering(took, pgs, previous)
    if took is not None:
        runs.append({"fsid": fsid, "pgs": pgs, "seconds": took, "time": time.time()})
        history_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_private(history_file, json.dumps(runs[-50:], indent=1))
    return [verdict]


def _load(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, list) else []
    except (OSError, ValueError):
        return []


# ---- step 5: CPU scaling sweep ------------------------------------------------------------------


def threads_of(pid: int) -> list[int]:
    try:
        return [t.id for t in psutil.Process(pid).threads()]
    except psutil.Error:
        return []


def set_affinity(pid: int, cpus: set[int]) -> None:
    """Every thread of the process: a process's affinity is per thread (taskset -a)."""
    for tid in threads_of(pid):
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:
            continue  # a thread that ended meanwhile


def cpu_seconds(pid: int) -> float:
    """User + system seconds; a process gone is an OSError, as the runner expects of a step."""
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess as exc:
        raise ProcessLookupError(f"pid {pid} is gone") from exc
    except psutil.AccessDenied as exc:
        raise PermissionError(f"pid {pid}: {exc}") from exc
    return t.user + t.system


# The sweep's windows: seconds each, A/B pairs per step (quick: a rehearsal, 2 pairs).
SWEEP_WINDOW = {True: 3.0, False: 15.0}
SWEEP_ROUNDS = {True: 2, False: 4}
SWEEP_SETTLE = 1.0  # seconds after a change of cores before a window is read


def cpu_sweep(ctx: Ctx) -> list[Verdict]:
    osds = [d for d in ctx.snapshot.daemons.values() if d.kind == "osd" and d.pid]
    if ctx.options.cpu_osd:
        osds = [d for d in osds if d.id == ctx.options.cpu_osd]
    if not osds:
        return [Verdict("CPU scaling", judge.SKIP, "no OSD of this cluster runs on this host",
                        judge.CORES)]
    d = osds[0]
    pid = int(d.pid)  # type: ignore[arg-type]
    try:
        original = os.sched_getaffinity(pid)
    except OSError:
        return [Verdict(f"CPU scaling of {d.id}", judge.SKIP,
                        f"{d.id} (pid {pid}) is not running", judge.CORES)]
    phrase = f"sweep {d.id}"
    if not ctx.confirm(f"The sweep limits {d.id}'s cores step by step while writing to it: "
                       f"on a test cluster only. Type {phrase!r} to go on:", phrase):
        return [Verdict(f"CPU scaling of {d.id}", judge.SKIP, "not confirmed", judge.CORES)]
    ctx.cleanup.push(f"cores of {d.id}", lambda: set_affinity(pid, original))
    cpus = sorted(original)
    counts = list(range(1, len(cpus) + 1))
    if len(counts) > 6:
        counts = sorted({1, 2, 4, 8, 12, 16, len(cpus)} & set(counts))
    quick = ctx.options.quick
    window, rounds = SWEEP_WINDOW[quick], SWEEP_ROUNDS[quick]
    per_step = 2 * rounds * (window + SWEEP_SETTLE + 1)
    try:
        with scratch_pool(ctx, "cpu", 32) as pool:
            # One load for the whole sweep, each step's windows alternating the cores under
            # it (A B B A ...): a drift of the load or the disks cancels, as in an
            # experiment, and each step's gain comes with its interval.
            total = int(per_step * max(1, len(counts) - 1) + 60)
            with ctx.background(ctx.rados("-p", pool, "bench", str(total), "write", "-t",
                                          "16", "-b", "4096")) as load:
                # rados bench takes a moment to connect and fill its 16 slots: the first
                # window would otherwise measure a load still rising.
                ctx.progress(0.0, f"{d.id}: starting the load")
                ctx.sleep(3.0)
                points, steps = _sweep_steps(ctx, d.id, pid, cpus, counts, window, rounds,
                                             load)
    finally:
        ctx.cleanup.pop(f"cores of {d.id}")
    return [judge.cpu_scaling(d.id, points, steps)]


def _sweep_steps(ctx: Ctx, osd: str, pid: int, cpus: list[int], counts: list[int],
                 window: float, rounds: int, load: Any
                 ) -> tuple[list[Point], list[judge.CoreStep]]:
    """Each step n -> m cores measured as an experiment's rounds: the OSD's own write
    counters read each second (advisors/experiment), its write IOPS compared between the
    windows with m cores (B) and with n (A) by the experiment's statistics."""
    from stormdeck.advisors.experiment import stats
    from stormdeck.advisors.experiment.counters import Reader, harm_of
    from stormdeck.advisors.experiment.figures import BY_NAME, seconds_of

    iops_f, lat_f = BY_NAME["write IOPS"], BY_NAME["write latency"]
    reader = Reader(ctx.admin, [osd])
    base = reader.read()
    seen: dict[int, dict[str, list[float]]] = {}  # cores -> per-second figures
    steps: list[judge.CoreStep] = []
    pairs = list(itertools.pairwise(counts))
    for k, (n, m) in enumerate(pairs):
        windows: list[stats.Window] = []
        for i, arm in enumerate(stats.schedule(rounds)):
            cores = m if arm == stats.B else n
            ctx.progress((k + i / (2 * rounds)) / len(pairs),
                         f"{osd}: {n} -> {m} core(s), window {i + 1} of {2 * rounds} "
                         f"on {cores}")
            set_affinity(pid, set(cpus[:cores]))
            ctx.sleep(SWEEP_SETTLE)
            samples = []
            used0, t0 = cpu_seconds(pid), time.monotonic()
            for _ in range(int(window) + 1):
                if load.poll() is not None:
                    raise UserError(f"the sweep's rados bench ended early: {load.why()}")
                s = reader.read()
                why = harm_of(s, base)
                if why is not None:
                    raise UserError(f"the CPU sweep stopped: {why}")
                samples.append(s)
                ctx.sleep(max(0.0, s.time + 1.0 - time.monotonic()))
            got = seconds_of(samples, (iops_f, lat_f))
            fig = seen.setdefault(cores, {"iops": [], "lat": [], "used": []})
            fig["iops"] += got[iops_f.name]
            fig["lat"] += got[lat_f.name]
            fig["used"].append((cpu_seconds(pid) - used0) / (time.monotonic() - t0))
            windows.append(stats.Window(arm, tuple(got[iops_f.name])))
        try:
            e = stats.compare("write IOPS", windows, higher_is_better=True)
        except ValueError as exc:
            raise UserError(f"{osd} at {n} and {m} cores: {exc}") from None
        steps.append(judge.CoreStep(float(n), float(m), e.ratio, e.ci_low, e.ci_high))
    points = [Point(float(c), _avg(f["iops"]), _avg(f["lat"]), {"cores_used": _avg(f["used"])})
              for c, f in sorted(seen.items())]
    return points, steps


def _avg(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0
