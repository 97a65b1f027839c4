"""A validation run: the steps in order, each skippable and cancellable, everything they
created removed at the end whatever happens; the report, compared with the last one."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stormdeck.advisors import validated
from stormdeck.advisors.report import md_text as md
from stormdeck.advisors.validate import judge, steps
from stormdeck.advisors.validate.judge import Verdict
from stormdeck.advisors.validate.plot import curve_plot
from stormdeck.advisors.validate.steps import Cancelled, Ctx, Options
from stormdeck.base.errors import UserError
from stormdeck.base.secrets import write_private
from stormdeck.collectors.model import Snapshot
from stormdeck.collectors.registry import validate_sources

STEPS: tuple[tuple[str, str], ...] = (
    ("hosts", "Host checks: tuned, cores per OSD, op threads, write cache (fio)"),
    ("settings", "Cluster settings: pg_num, EC, scrub, messenger mode"),
    ("curve", "Response curve: rados bench at rising concurrency, the knee"),
    ("peering", "Peering time: a pool of new PGs to active+clean"),
    ("cpu", "CPU scaling sweep: one OSD's cores limited step by step (test clusters)"),
)
STEP_IDS = tuple(s for s, _ in STEPS)
# The steps that write to the cluster or limit a daemon, and why: none runs in read-only
# mode (`--read-only`, STORMDECK_READ_ONLY=1, a read_only cluster of the config file).
WRITES: dict[str, str] = {
    "curve": "it creates a pool, writes to it with rados bench and deletes it",
    "peering": "it creates a pool of new PGs and deletes it",
    "cpu": "it limits an OSD's cores and creates a pool",
}


def read_only_note(reason: str) -> str:
    """One sentence for the operator: what read-only mode leaves out of this run."""
    steps = ", ".join(WRITES)
    return (f"read-only mode ({reason}): the steps that write ({steps}) and the fio write-cache "
            "check are skipped; the host and settings checks run")


@dataclass
class StepReport:
    id: str
    title: str
    status: str = "waiting"  # waiting | running | done | skipped | cancelled | error
    verdicts: list[Verdict] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None
    plots: dict[str, list[str]] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        if self.status == "error":
            return judge.FAIL
        return judge.worst(self.verdicts) if self.verdicts else judge.SKIP


@dataclass
class Report:
    started: float
    ended: float
    cluster: str | None
    quick: bool
    steps: list[StepReport]
    cancelled: bool = False
    cleanup_done: list[str] = field(default_factory=list)
    cleanup_failed: list[str] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)  # against the last report

    @property
    def verdict(self) -> str:
        return judge.worst(Verdict("", s.verdict, "", "") for s in self.steps)

    def exit_code(self) -> int:
        if self.cancelled:
            return 130
        return {judge.PASS: 0, judge.SKIP: 0, judge.WARN: 1, judge.FAIL: 2}[self.verdict]


def take_snapshot(sources: list[Any], timeout: float = 10.0) -> Snapshot:
    """What the cluster and this host look like now (the sources the assembly made, those
    declared for validate: Ceph and this host): two polls, so rates are real."""
    from stormdeck.advisors.loop import collect_once

    snap = collect_once(sources, polls=2, timeout=timeout)
    # Every cluster source validate reads must have answered once: its steps judge them.
    needed = [d.name for d in validate_sources() if d.scope == "cluster"]
    seen = [h for n in needed if (h := snap.sources.get(n)) is not None]
    failed = [h for h in seen if not h.ok and h.last_success is None]
    if snap.cluster is None or failed:
        h = (failed or seen or [None])[0]
        if h is None:
            why = "no source"
        elif len(needed) == 1:
            why = str(h.error)  # Ceph's own words, as they always read
        else:
            why = f"{h.name}: {h.error}"
        raise UserError(f"cannot reach the Ceph cluster: {why}", exit_code=3)
    return snap


class Validation:
    def __init__(self, options: Options, admin: Any, snapshot: Snapshot,
                 skip: Iterable[str] = (),
                 progress: Callable[[str, float, str], None] | None = None,
                 confirm: Callable[[str, str], bool] | None = None) -> None:
        self.options = options
        self.skip = set(skip)
        if not options.cpu_sweep:
            self.skip.add("cpu")
        self.progress = progress or (lambda step, fraction, text: None)
        self.ctx = Ctx(options=options, admin=admin, snapshot=snapshot,
                       confirm=confirm or (lambda prompt, phrase: False))
        self.reports = [StepReport(i, t) for i, t in STEPS]

    def cancel(self) -> None:
        self.ctx.cancel.set()

    def run(self) -> Report:
        started = time.time()
        cancelled = False
        try:
            for rep in self.reports:
                if self.options.read_only and rep.id in WRITES:
                    rep.status = "skipped"
                    rep.verdicts = [Verdict(rep.title.split(":")[0], judge.SKIP,
                                            f"read-only mode: not run, as {WRITES[rep.id]}",
                                            "")]
                    continue
                if rep.id in self.skip:
                    rep.status = "skipped"
                    continue
                if cancelled or self.ctx.cancel.is_set():
                    rep.status = "cancelled"
                    cancelled = True
                    continue
                cancelled = self._step(rep)
        finally:
            self.progress("cleanup", 0.0, "removing what the validation created")
            self.ctx.cleanup.run_all()
        c = self.ctx.snapshot.cluster
        return Report(started=started, ended=time.time(), cluster=c.fsid if c else None,
                      quick=self.options.quick, steps=self.reports, cancelled=cancelled,
                      cleanup_done=self.ctx.cleanup.done,
                      cleanup_failed=self.ctx.cleanup.failed)

    def _step(self, rep: StepReport) -> bool:
        """Run one step; True if it was cancelled."""
        rep.status = "running"
        t0 = time.monotonic()
        self.ctx.progress = lambda f, text: self.progress(rep.id, f, text)
        self.progress(rep.id, 0.0, "starting")
        try:
            if rep.id == "hosts":
                rep.verdicts = steps.host_checks(self.ctx)
            elif rep.id == "settings":
                rep.verdicts = steps.cluster_settings(self.ctx)
            elif rep.id == "curve":
                rep.verdicts, curves = steps.response_curves(self.ctx)
                rep.plots = {k: curve_plot(pts, judge.knee(pts), judge.headroom(pts))
                             for k, pts in curves.items() if pts}
            elif rep.id == "peering":
                rep.verdicts = steps.peering_time(self.ctx)
            elif rep.id == "cpu":
                rep.verdicts = steps.cpu_sweep(self.ctx)
            rep.status = "done"
        except Cancelled:
            rep.status = "cancelled"
            return True
        except UserError as exc:
            rep.status, rep.error = "error", str(exc)
        except OSError as exc:  # a daemon gone, a file not writable: the step's fault
            rep.status, rep.error = "error", f"{type(exc).__name__}: {exc}"
        finally:
            rep.seconds = time.monotonic() - t0
            self.progress(rep.id, 1.0, rep.status + (f": {rep.error}" if rep.error else ""))
        return False


# ---- the report ----------------------------------------------------------------------------


MARK = {judge.PASS: "PASS", judge.WARN: "WARN", judge.FAIL: "FAIL", judge.SKIP: "skip"}


def to_dict(r: Report) -> dict[str, Any]:
    d = asdict(r)
    d["verdict"] = r.verdict
    for s, rep in zip(d["steps"], r.steps, strict=True):
        s["verdict"] = rep.verdict
    return {"format": 1, **d}


def to_markdown(r: Report) -> str:
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.started))
    out = [f"# Validation report: {when}", "",
           f"- Cluster: {md(r.cluster or 'unknown')}; {'quick' if r.quick else 'full'} run of "
           f"{r.ended - r.started:.0f} s; overall **{MARK[r.verdict]}**"
           + ("; CANCELLED" if r.cancelled else "")]
    if r.changes:
        out.append("- Since the last report: " + "; ".join(md(c) for c in r.changes))
    out.append(f"- Cleaned up: {md(', '.join(r.cleanup_done) or 'nothing was left', 2000)}"
               + (f"; FAILED to clean: {md('; '.join(r.cleanup_failed), 2000)}"
                  if r.cleanup_failed else ""))
    for s in r.steps:
        out += ["", f"## {s.title}", "",
                f"{s.status}, {s.seconds:.0f} s, verdict {MARK[s.verdict]}"
                + (f": {md(s.error)}" if s.error else ""), ""]
        for v in s.verdicts:
            out.append(f"- **{MARK[v.verdict]}** {md(v.check)}: {md(v.summary, 600)} "
                       f"({v.source})")
            out += [f"  - {md(e)}" for e in v.evidence]
        for kind, lines in s.plots.items():
            out += ["", f"{kind}: latency (ms) against IOPS; K the knee, H the 70% point", "",
                    "```", *lines, "```"]
    return "\n".join(out) + "\n"


def compare(new: Report, last: dict[str, Any] | None) -> list[str]:
    """Verdicts that changed since the last report of the same cluster."""
    if not last or last.get("cluster") != new.cluster:
        return []
    before = {v["check"]: v["verdict"] for s in last.get("steps", [])
              for v in s.get("verdicts", [])}
    out = []
    for s in new.steps:
        for v in s.verdicts:
            old = before.get(v.check)
            if old is not None and old != v.verdict:
                out.append(f"{v.check} {old} -> {v.verdict}")
    return out


def save(r: Report, directory: Path) -> Path:
    """report-TIME.md and .json, and last.json for the next run to compare with."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    last_path = directory / "last.json"
    try:
        last = json.loads(last_path.read_text())
    except (OSError, ValueError):
        last = None
    r.changes = compare(r, last)
    base = directory / time.strftime("report-%Y%m%d-%H%M%S", time.localtime(r.started))
    doc = json.dumps(to_dict(r), indent=1, default=str)
    write_private(base.with_suffix(".md"), to_markdown(r))
    write_private(base.with_suffix(".json"), doc)
    if not r.cancelled:
        write_private(last_path, doc)
    # What finished steps measured, for the rules (even of a cancelled run: a step
    # that finished measured what it says).
    from stormdeck.collectors.host.processes import short_hostname

    validated.record(directory / validated.FILE, r.cluster, short_hostname(),
                    [s for s in r.steps if s.status == "done"], r.quick, r.started)
    return base.with_suffix(".md")

