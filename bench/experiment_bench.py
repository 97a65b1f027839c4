"""Benchmark: what an experiment costs the host it runs on.

With --conf (a cluster under load; a lab: `stormdeck lab up`, `stormdeck lab load --round
150`): one real experiment, the whole path a user runs (the review, the baseline, every
apply and undo through the journal, a read of every measured OSD's `perf dump` and of
`status` each second, the judging), with this process's CPU measured over it. Reported: CPU
as % of one core over the run, and per read of the OSDs.

With --conf and --console: the console's own cost of a run. The real console (its Ceph and
host sources, the rules, drawing at 160x48, headless) runs on the cluster for --idle
seconds, then starts the same experiment the way `e` on a finding does (the offer, then the
run on its screen, in the console's worker thread): its CPU over the run against its CPU
over as long before, both as % of one core; the difference is what the experiment costs.

Without --conf (and with --smoke, as CI runs it): the reading and judging path on the
counters of a recorded Pacific dump, planted for --osds OSDs (at most the 32 a run reads)
and 8 windows: the parse of every OSD's dump each second and the verdicts' bootstrap.

    .venv/bin/python bench/experiment_bench.py --conf /var/tmp/stormdeck-lab/ceph.conf
    .venv/bin/python bench/experiment_bench.py --conf /var/tmp/stormdeck-lab/ceph.conf --console
    .venv/bin/python bench/experiment_bench.py --osds 32
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from stormdeck.advisors.experiment import stats  # noqa: E402
from stormdeck.advisors.experiment.counters import (  # noqa: E402
    Harms,
    Sample,
    parse_perf_dump,
)
from stormdeck.advisors.experiment.figures import FIGURES, LOAD, MIX, seconds_of  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def on_cluster(conf: str, window: float, rounds: int) -> dict[str, float]:
    from stormdeck.advisors.apply import CephAdmin, Executor
    from stormdeck.advisors.experiment.record import beside
    from stormdeck.advisors.experiment.runner import Experiment, Settings
    from stormdeck.advisors.journal import Journal
    from stormdeck.cli_experiment import plan_of

    state = Path(tempfile.mkdtemp(prefix="stormdeck-bench-"))
    journal = Journal(state / "journal.jsonl")
    with Executor(journal, ceph=CephAdmin(conf)) as ex:
        plan = plan_of(["set", "osd", "osd_scrub_sleep", "0.1"], ex)
        exp = Experiment(ex, plan, Settings(window=window, rounds=rounds, settle=1),
                         beside(journal))
        rv = exp.review()
        exp.baseline()
        assert exp.reader is not None
        reads = 20
        c0, t0 = cpu(), time.monotonic()
        for _ in range(reads):
            exp.reader.read()
        per_read = (cpu() - c0) / reads
        read_wall = (time.monotonic() - t0) / reads
        c0, t0 = cpu(), time.monotonic()
        result = exp.run(rv)
        used, wall = cpu() - c0, time.monotonic() - t0
    return {"osds": len(exp.reader.osds), "seconds": wall, "cpu_pct": 100 * used / wall,
            "read_cpu_ms": 1000 * per_read, "read_wall_ms": 1000 * read_wall,
            "figures": len(result.effects)}


def in_console(conf: str, window: float, rounds: int, idle: float,
               profile: Path | None = None) -> dict[str, float]:
    """See the module's docstring. With `profile`, the console's thread (the event loop,
    the drawing) and the run's worker are profiled over the run, each to a file there
    (`python -m pstats`): where the experiment's cost goes."""
    import asyncio
    import cProfile

    from stormdeck.advisors.apply import CephAdmin, Executor
    from stormdeck.advisors.engine import Engine
    from stormdeck.advisors.experiment.runner import Settings
    from stormdeck.advisors.journal import Journal
    from stormdeck.cli_experiment import plan_of
    from stormdeck.collectors.ceph.source import CephSource
    from stormdeck.collectors.host.source import HostSource
    from stormdeck.tui.app import StormdeckApp
    from stormdeck.tui.feed import Feed
    from stormdeck.tui.views.experiment import ExperimentScreen, offer
    from stormdeck.tui.views.findings import FindingsView

    state = Path(tempfile.mkdtemp(prefix="stormdeck-bench-"))
    journal = Journal(state / "journal.jsonl")
    feed = Feed([CephSource(conffile=conf), HostSource(ceph_conf=conf)], Engine(),
                interval=1.0)
    app = StormdeckApp(feed, journal=journal,
                       executor_factory=lambda: Executor(journal, ceph=CephAdmin(conf)))
    settings = Settings(window=window, rounds=rounds, settle=1)

    async def run() -> dict[str, float]:
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.press("6")
            await pilot.pause(5.0)  # the first frames, the rules' warm-up
            c0, t0 = cpu(), time.monotonic()
            await pilot.pause(idle)
            before = (cpu() - c0) / (time.monotonic() - t0)
            view = app.query_one(FindingsView)

            def offered():
                # The offer's executor is closed by the run's end, as the console's is.
                ex = Executor(journal, ceph=CephAdmin(conf))
                return offer(ex, plan_of(["set", "osd", "osd_scrub_sleep", "0.1"], ex),
                             view.journal_moved, settings)

            o = await asyncio.to_thread(offered)
            loop_prof = cProfile.Profile() if profile else None
            if profile:
                run_once = o.experiment.run

                def profiled(*a, **kw):
                    prof = cProfile.Profile()
                    prof.enable()
                    try:
                        return run_once(*a, **kw)
                    finally:
                        prof.disable()
                        prof.dump_stats(str(profile / "worker.prof"))
                o.experiment.run = profiled
                loop_prof.enable()
            c0, t0 = cpu(), time.monotonic()
            view.start_experiment(o)
            screen = app.screen
            assert isinstance(screen, ExperimentScreen)
            while screen.result is None and screen.ended is None:
                await pilot.pause(0.5)
            during = (cpu() - c0) / (time.monotonic() - t0)
            if loop_prof is not None and profile is not None:
                loop_prof.disable()
                loop_prof.dump_stats(str(profile / "console.prof"))
            if screen.result is None:
                raise SystemExit(f"the experiment was cut: {screen.ended}")
            return {"idle_pct": 100 * before, "during_pct": 100 * during,
                    "experiment_pct": 100 * (during - before),
                    "seconds": time.monotonic() - t0}

    return asyncio.run(run())


def recorded(osds: int, windows: int, seconds: int) -> dict[str, float]:
    raw = (ROOT / "tests" / "data" / "pacific" / "perf_dump_osd_load.json").read_text()
    doc = json.loads(raw)
    calm = Harms(0, osds, 0, "HEALTH_OK")
    order = stats.schedule(windows // 2)
    c0, t0 = cpu(), time.monotonic()
    runs = []
    parses = 0
    for k, arm in enumerate(order):
        samples = []
        for s in range(seconds + 1):
            step = (k * (seconds + 1) + s) * (1.6 if arm == stats.B else 1.0)
            per = {}
            for i in range(osds):
                o = dict(doc["osd"])
                o["op_w"] = doc["osd"]["op_w"] + int(step * 900) + i
                o["op_in_bytes"] = doc["osd"]["op_in_bytes"] + int(step * 900) * 4096
                lat = dict(doc["osd"]["op_w_latency"])
                lat["avgcount"] = o["op_w"]
                lat["sum"] = lat["sum"] + step * 900 * (0.008 if arm == stats.B else 0.005)
                o["op_w_latency"] = lat
                per[f"osd.{i}"] = parse_perf_dump(json.dumps({"osd": o}))
                parses += 1
            samples.append(Sample(float(k * (seconds + 1) + s), per, calm))
        runs.append((arm, seconds_of(samples, (*FIGURES, LOAD, *MIX))))
    read_cpu = cpu() - c0
    c1 = cpu()
    judged = []
    for f in FIGURES:
        w = [stats.Window(arm, tuple(secs[f.name])) for arm, secs in runs]
        if all(len(x.samples) >= 3 and sum(x.samples) > 0 for x in w):
            judged.append(stats.compare(f.name, w, f.higher_is_better))
    judge_cpu = cpu() - c1
    span = windows * (seconds + 1)
    return {"osds": osds, "reads_per_s_cpu_ms": 1000 * read_cpu / span,
            "judge_cpu_s": judge_cpu, "cpu_pct_of_run": 100 * (read_cpu + judge_cpu) / span,
            "figures": len(judged), "wall_s": time.monotonic() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conf", help="a cluster under load to run one real experiment on")
    ap.add_argument("--osds", type=int, default=32, help="OSDs planted without --conf")
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--console", action="store_true",
                    help="with --conf: the console's cost of a run, beside its own")
    ap.add_argument("--idle", type=float, default=60.0,
                    help="with --console: seconds measured before the run")
    ap.add_argument("--profile", type=Path, metavar="DIR",
                    help="with --console: profile the console's thread and the run's worker "
                         "over the run into DIR")
    ap.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.conf and args.console:
        out = in_console(args.conf, args.window, args.rounds, args.idle, args.profile)
        line = (f"the console: {out['idle_pct']:.2f}% of a core on its own, "
                f"{out['during_pct']:.2f}% during a {out['seconds']:.0f} s experiment: "
                f"the experiment {out['experiment_pct']:+.2f}%")
    elif args.conf:
        out = on_cluster(args.conf, args.window, args.rounds)
        line = (f"experiment on {out['osds']} OSDs: {out['cpu_pct']:.2f}% of a core over "
                f"{out['seconds']:.0f} s; a read of them {out['read_cpu_ms']:.1f} ms of CPU "
                f"({out['read_wall_ms']:.1f} ms wall)")
    else:
        osds, seconds = (4, 3) if args.smoke else (args.osds, int(args.window))
        out = recorded(osds, 2 * args.rounds, seconds)
        line = (f"recorded counters, {out['osds']} OSDs: reading {out['reads_per_s_cpu_ms']:.1f} "
                f"ms of CPU a second, judging {out['judge_cpu_s']:.2f} s once; "
                f"{out['cpu_pct_of_run']:.2f}% of a core over the run")
    print(json.dumps(out) if args.json else line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
