"""The validation steps: each measures the real cluster and host, hands the measurements to
judge.py, and registers the undoing of whatever it creates before it creates it.

Over 500 lines on purpose: the steps share Ctx and Cleanup, and one file read from the top
shows the order a run takes and what each step leaves to undo.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import psutil

from stormdeck.advisors import overrides
from stormdeck.advisors.actuators.base import same
from stormdeck.advisors.rules.ec import fast_ec_capable, rgw_bulk_data
from stormdeck.advisors.validate import judge
from stormdeck.advisors.validate.judge import Point, Verdict
from stormdeck.base.errors import UserError
from stormdeck.base.secrets import write_private
from stormdeck.collectors.model import Snapshot

POOL_PREFIX = "stormdeck-validate-"
SCRATCH_NAME = "stormdeck-validate-scratch"


class Cancelled(Exception):
    """The operator cancelled: clean up and stop."""


@dataclass
class Options:
    conf: str | None
    quick: bool = False
    scratch_dir: Path = Path("/var/tmp")
    confirmed_devices: tuple[str, ...] = ()  # typed names of devices that hold data
    peering_pgs: int = 256
    cpu_sweep: bool = False  # on a test cluster only: limits an OSD's cores
    cpu_osd: str | None = None
    state_dir: Path = Path("/var/tmp")
    # The client options the rados tool is run with beyond -c (--name, --keyring,
    # --cluster): the same identity the connection uses.
    client_args: tuple[str, ...] = ()
    # Nothing that writes runs: no pool, no bench, no affinity, no fio scratch file.
    read_only: bool = False


def _stop(procs: Sequence[subprocess.Popen[str]]) -> None:
    """SIGINT to those still running (rados bench cleans up on it), then SIGKILL."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Cleanup:
    """What to undo, registered before it is done; undone in reverse, every item tried."""

    def __init__(self) -> None:
        self._items: list[tuple[str, Callable[[], None]]] = []
        self._lock = threading.Lock()
        self.done: list[str] = []
        self.failed: list[str] = []

    def push(self, what: str, undo: Callable[[], None]) -> None:
        with self._lock:
            self._items.append((what, undo))

    def pop(self, what: str) -> None:
        """Undo one item now (its step is over)."""
        with self._lock:
            found = [i for i in self._items if i[0] == what]
            for item in found:
                self._items.remove(item)
        for w, undo in found:
            self._run(w, undo)

    def run_all(self) -> None:
        with self._lock:
            items, self._items = self._items[::-1], []
        for what, undo in items:
            self._run(what, undo)

    def _run(self, what: str, undo: Callable[[], None]) -> None:
        try:
            undo()
            self.done.append(what)
        except Exception as exc:  # every item is tried; what failed is reported
            self.failed.append(f"{what}: {exc}")


@dataclass
class Ctx:
    """What a step works with: the cluster, the host, cancel, progress, cleanup."""

    options: Options
    admin: Any  # advisors.apply.CephAdmin
    snapshot: Snapshot
    cancel: threading.Event = field(default_factory=threading.Event)
    cleanup: Cleanup = field(default_factory=Cleanup)
    progress: Callable[[float, str], None] = lambda fraction, text: None
    confirm: Callable[[str, str], bool] = lambda prompt, phrase: False

    def check(self) -> None:
        if self.cancel.is_set():
            raise Cancelled()

    def sleep(self, seconds: float) -> None:
        if self.cancel.wait(seconds):
            raise Cancelled()

    def run(self, argv: Sequence[str], timeout: float) -> str:
        """A tool run that a cancel interrupts (SIGINT, then SIGKILL): its stdout."""
        return self.run_many([argv], timeout)[0]

    def run_many(self, argvs: Sequence[Sequence[str]], timeout: float) -> list[str]:
        """Tools run side by side (several bench clients), each as `run` runs one: a cancel,
        the timeout or one failing stops them all. Their stdouts, in order."""
        self.check()
        procs: list[subprocess.Popen[str]] = []
        with ExitStack() as files:
            # Output goes to files, not pipes: a chatty client must not block on a full
            # pipe while we wait for the others.
            outs = [files.enter_context(tempfile.TemporaryFile("w+")) for _ in argvs]
            errs = [files.enter_context(tempfile.TemporaryFile("w+")) for _ in argvs]
            try:
                for argv, out, err in zip(argvs, outs, errs, strict=True):
                    try:
                        procs.append(subprocess.Popen(list(argv), stdout=out, stderr=err,
                                                      text=True, start_new_session=True))
                    except OSError as exc:
                        raise UserError(f"cannot run {argv[0]}: {exc.strerror}") from None
                deadline = time.monotonic() + timeout
                failed: list[int] = []
                while any(p.poll() is None for p in procs) and not failed:
                    if self.cancel.is_set() or time.monotonic() > deadline:
                        _stop(procs)
                        if self.cancel.is_set():
                            raise Cancelled()
                        raise UserError(f"{Path(argvs[0][0]).name} did not finish in "
                                        f"{timeout:.0f} s")
                    failed = [i for i, p in enumerate(procs) if p.returncode not in (None, 0)]
                    time.sleep(0.1)
                _stop(procs)
                failed = failed or [i for i, p in enumerate(procs) if p.returncode != 0]
                texts = []
                for f in (*outs, *errs):
                    f.seek(0)
                for out in outs:
                    texts.append(out.read())
                if failed:
                    i = failed[0]
                    lines = (errs[i].read() or texts[i]).strip().splitlines()
                    why = lines[-1] if lines else f"exit {procs[i].returncode}"
                    raise UserError(f"{Path(argvs[i][0]).name} failed: {why}")
                return texts
            finally:
                _stop(procs)

    def rados(self, *args: str) -> list[str]:
        base = [shutil.which("rados") or "rados"]
        if self.options.conf:
            base += ["-c", self.options.conf]
        base += self.options.client_args
        return [*base, *args]


# ---- pools ---------------------------------------------------------------------------


@contextmanager
def scratch_pool(ctx: Ctx, name: str, pgs: int) -> Iterator[str]:
    """A pool of our own for the step, gone when the step ends, is cancelled, or fails."""
    if ctx.options.read_only:  # the runner skips such steps; this is the last word
        raise UserError("read-only mode: validate creates no pool")
    pool = POOL_PREFIX + name
    ctx.cleanup.push(f"pool {pool}", lambda: delete_pool(ctx.admin, pool))
    ctx.admin.cmd("osd pool create", pool=pool, pg_num=pgs, pgp_num=pgs)
    try:
        yield pool
    finally:
        ctx.cleanup.pop(f"pool {pool}")


def delete_pool(admin: Any, pool: str) -> None:
    if pool not in (admin.cmd("osd pool ls") or []):
        return
    allowed = admin.config_db("mon", "mon_allow_pool_delete")
    if (allowed or "false").lower() != "true":
        # Pool deletion is off on a careful cluster: on for our pool only, then as it was.
        admin.config_set("mon", "mon_allow_pool_delete", "true")
    try:
        admin.cmd("osd pool rm", pool=pool, pool2=pool, yes_i_really_really_mean_it=True)
    finally:
        if (allowed or "false").lower() != "true":
            if allowed is None:
                admin.config_rm("mon", "mon_allow_pool_delete")
            else:
                admin.config_set("mon", "mon_allow_pool_delete", allowed)


def leftover_pools(admin: Any) -> list[str]:
    return [p for p in (admin.cmd("osd pool ls") or []) if p.startswith(POOL_PREFIX)]


def pool_clean(admin: Any, pool: str) -> tuple[int, int]:
    """(PGs of the pool active+clean, its PGs): others' PGs do not time our pool."""
    try:
        out = admin.mgr_cmd("pg ls-by-pool", poolstr=pool)
    except UserError as exc:
        # The mgr answers from its own osdmap, which on Reef and Tentacle lags the
        # mon's by a moment after the pool is made: none of its PGs seen yet.
        if "does not exist" in str(exc):
            return 0, 0
        raise
    stats = out.get("pg_stats", []) if isinstance(out, dict) else (out or [])
    clean = sum(1 for p in stats if p.get("state") == "active+clean")
    return clean, len(stats)


# ---- step 1: hosts -------------------------------------------------------------------


def host_checks(ctx: Ctx) -> list[Verdict]:
    snap = ctx.snapshot
    out = [judge.tuned(h.name, h.tuned_profile) for h in snap.hosts.values()]
    osds = [d for d in snap.daemons.values() if d.kind == "osd"]
    for d in osds:
        if d.cores_allowed is not None:
            out.append(judge.cores(d.id, d.cores_allowed, d.cores_used,
                                   d.cpu_limit_explicit))
            out.append(judge.op_threads(d.id, op_thread_count(snap, d), d.cores_allowed,
                                        op_threads_per_core()))
    if not any(d.cores_allowed is not None for d in osds):
        out.append(Verdict("cores allowed per OSD", judge.SKIP, "no OSD of this cluster runs "
                           "on this host (run the exporter on OSD hosts, or validate there)",
                           "K1.2-K1.5"))
    ctx.progress(0.3, "host settings read; measuring the write cache with fio")
    out.append(write_cache_check(ctx))
    return out


def op_threads_per_core() -> float:
    """The rule's threshold, with the operator's override: validate and check agree."""
    from stormdeck.advisors.settings import load_settings

    try:
        params = load_settings()["ceph.osd.op_threads_vs_cores"].params
    except UserError:
        params = {}
    return float(params.get("threads_per_core", judge.OP_THREADS_PER_CORE))


def op_thread_count(snap: Snapshot, d: Any) -> int | None:
    """Op worker threads an OSD runs: shards x threads per shard, for its device class."""
    c = snap.cluster
    if c is None:
        return None
    kind = "ssd" if d.device_class in ("ssd", "nvme") else "hdd"

    def value(name: str) -> int | None:
        opt = c.config.get(name)
        if opt is None or not opt.exists:
            return None
        for who in (d.id, "osd", "global"):
            if who in opt.values:
                return _int(opt.values[who])
        return _int(opt.default)

    shards = value("osd_op_num_shards") or value(f"osd_op_num_shards_{kind}")
    threads = value("osd_op_num_threads_per_shard") or \
        value(f"osd_op_num_threads_per_shard_{kind}")
    return shards * threads if shards and threads else None


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text is not None else None
    except ValueError:
        return None


def device_of(path: Path) -> str | None:
    """The block device a directory's filesystem sits on ("vda", "sdb1"), if it has one."""
    st = os.stat(path)
    link = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    return Path(os.path.realpath(link)).name if link.exists() else None


def parse_flushes(text: str) -> dict[str, tuple[int, int]]:
    """Per device (flush requests completed, ms spent flushing): /proc/diskstats' 19th and
    20th columns, there since Linux 5.5 (Documentation/admin-guide/iostats.rst, fields 16
    and 17 after the name). Older kernels' shorter lines give nothing: no count, not 0."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 20 and f[18].isdigit() and f[19].isdigit():
            out[f[2]] = (int(f[18]), int(f[19]))
    return out


def flush_rates(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
                dev: str, seconds: float) -> tuple[float | None, float | None]:
    """(flushes per second, ms per flush) of `dev` between two readings; None: not counted."""
    if dev not in before or dev not in after or seconds <= 0:
        return None, None
    n = after[dev][0] - before[dev][0]
    ms = after[dev][1] - before[dev][1]
    return n / seconds, (ms / n if n > 0 else None)


def write_cache_check(ctx: Ctx) -> Verdict:
    """K2.5: fio 4K writes with fdatasync on a pre-filled scratch file, against the w/s the
    device shows in /proc/diskstats over the same seconds."""
    from stormdeck.collectors.host.disks import parse_diskstats, whole_disk

    directory = ctx.options.scratch_dir
    if ctx.options.read_only:
        # fio's fdatasync'd writes load the disk (perhaps an OSD's): the kind of thing
        # read-only mode exists to keep off a production cluster.
        return Verdict(f"write cache under {directory}", judge.SKIP, "read-only mode: not "
                       "measured, as fio writes a scratch file with fdatasync", "K2.5")
    dev = device_of(directory)
    if dev is None:
        return Verdict(f"write cache under {directory}", judge.SKIP,
                       f"{directory} is on no block device (tmpfs, overlay)", "K2.5, K6.4")
    # A partition's flushes go to its disk: the disk's cache is what is judged.
    disk = (whole_disk(dev) or [dev])[0]
    if shutil.which("fio") is None:
        return Verdict(f"write cache of {dev}", judge.SKIP, "fio is not installed", "K2.5")
    holders = [d for k in ctx.snapshot.disks.values() if k.name in (dev, disk)
               for d in k.daemons]
    if holders and dev not in ctx.options.confirmed_devices and not ctx.confirm(
            f"{dev} holds {', '.join(holders)}: writing a scratch file to it competes with "
            "them. Type the device name to go on:", dev):
        return Verdict(f"write cache of {dev}", judge.SKIP,
                       f"{dev} holds {', '.join(holders)}; not confirmed", "K2.5")
    scratch = directory / SCRATCH_NAME
    ctx.cleanup.push(f"file {scratch}", lambda: scratch.unlink(missing_ok=True))
    try:
        size = 64 if ctx.options.quick else 1024
        seconds = 5 if ctx.options.quick else 30
        ctx.run(["dd", "if=/dev/zero", f"of={scratch}", "bs=1M", f"count={size}",
                 "oflag=direct", "status=none"], timeout=300)
        ctx.progress(0.5, f"fio on {scratch} for {seconds} s")
        text = Path("/proc/diskstats").read_text()
        before, flushes_before = parse_diskstats(text).get(dev), parse_flushes(text)
        started = time.monotonic()
        out = ctx.run(["fio", "--name=stormdeck-validate", f"--filename={scratch}",
                       "--rw=randwrite", "--ioengine=psync", "--fdatasync=1", "--bs=4k",
                       "--iodepth=1", f"--numjobs={4 if ctx.options.quick else 32}",
                       f"--size={size}M", f"--runtime={seconds}", "--time_based",
                       "--group_reporting", "--output-format=json"], timeout=seconds + 120)
        elapsed = time.monotonic() - started
        text = Path("/proc/diskstats").read_text()
        after, flushes_after = parse_diskstats(text).get(dev), parse_flushes(text)
    finally:
        ctx.cleanup.pop(f"file {scratch}")
    try:
        iops = float(json.loads(out[out.index("{"):])["jobs"][0]["write"]["iops"])
    except (ValueError, KeyError, IndexError) as exc:
        raise UserError(f"fio's output is not what stormdeck reads ({exc})") from None
    wps = (after.writes - before.writes) / elapsed if before and after else None
    flushes = flush_rates(flushes_before, flushes_after, disk, elapsed)
    kernel = next((k.write_cache for k in ctx.snapshot.disks.values() if k.name == disk), None)
    return judge.write_cache(disk, iops, wps, kernel, *flushes)


# ---- step 2: cluster settings ---------------------------------------------------------------


def cluster_settings(ctx: Ctx) -> list[Verdict]:
    c = ctx.snapshot.cluster
    if c is None:
        return [Verdict("cluster settings", judge.SKIP, "no Ceph cluster", "K4.2")]
    out = [judge.pg_num(p.name, p.pg_num) for p in c.pools
           if not p.name.startswith(POOL_PREFIX)]
    out += [judge.ec_pool(p.name, p.ec_k, p.ec_m, c.release, p.flags, p.stripe_unit,
                          capable=fast_ec_capable(p), version=c.version,
                          bulk=rgw_bulk_data(p))
            for p in c.pools if p.type == "erasure"]

    def effective(name: str) -> str | None:
        opt = c.config.get(name)
        if opt is None or not opt.exists:
            return None
        return opt.values.get("osd", opt.values.get("global", opt.default))

    scheduler = overrides.scheduler(c)
    out += judge.scrub({n: effective(n) for n in (
        "osd_scrub_sleep", "osd_scrub_load_threshold", "osd_scrub_min_interval",
        "osd_deep_scrub_interval", "osd_mclock_profile")}, scheduler)
    stored = {}
    for name, opt in c.config.items():
        over = overrides.override(c, name)
        value = opt.values.get("osd", opt.values.get("global"))
        if over is not None and value is not None and not same(value,
                                                                 over.forced or opt.default):
            stored[name] = (value, over.why())
    out += judge.overridden_settings(stored)
    out.append(judge.secure_mode({n: effective(n) for n in (
        "ms_cluster_mode", "ms_service_mode", "ms_client_mode")}))
    return out


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


def cpu_sweep(ctx: Ctx) -> list[Verdict]:
    osds = [d for d in ctx.snapshot.daemons.values() if d.kind == "osd" and d.pid]
    if ctx.options.cpu_osd:
        osds = [d for d in osds if d.id == ctx.options.cpu_osd]
    if not osds:
        return [Verdict("CPU scaling", judge.SKIP, "no OSD of this cluster runs on this host",
                        "K1.2-K1.5")]
    d = osds[0]
    pid = int(d.pid)  # type: ignore[arg-type]
    try:
        original = os.sched_getaffinity(pid)
    except OSError:
        return [Verdict(f"CPU scaling of {d.id}", judge.SKIP,
                        f"{d.id} (pid {pid}) is not running", "K1.2-K1.5")]
    phrase = f"sweep {d.id}"
    if not ctx.confirm(f"The sweep limits {d.id}'s cores step by step while writing to it: "
                       f"on a test cluster only. Type {phrase!r} to go on:", phrase):
        return [Verdict(f"CPU scaling of {d.id}", judge.SKIP, "not confirmed", "K1.2-K1.5")]
    ctx.cleanup.push(f"cores of {d.id}", lambda: set_affinity(pid, original))
    cpus = sorted(original)
    counts = list(range(1, len(cpus) + 1))
    if len(counts) > 6:
        counts = sorted({1, 2, 4, 8, 12, 16, len(cpus)} & set(counts))
    seconds = 3 if ctx.options.quick else 60
    points: list[Point] = []
    try:
        with scratch_pool(ctx, "cpu", 32) as pool:
            for i, n in enumerate(counts):
                ctx.progress(i / len(counts), f"{d.id} on {n} core(s): {seconds} s of writes")
                set_affinity(pid, set(cpus[:n]))
                before, t0 = cpu_seconds(pid), time.monotonic()
                iops, lat = parse_bench(ctx.run(ctx.rados(
                    "-p", pool, "bench", str(seconds), "write", "-t", "16", "-b", "4096"),
                    timeout=seconds + 120))
                used = (cpu_seconds(pid) - before) / (time.monotonic() - t0)
                points.append(Point(float(n), iops, lat, {"cores_used": used}))
    finally:
        ctx.cleanup.pop(f"cores of {d.id}")
    return [judge.cpu_scaling(d.id, points)]
