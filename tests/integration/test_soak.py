"""Soak (opt-in: STORMDECK_SOAK=1, minutes in STORMDECK_SOAK_MINUTES, default 10): the console
headless against the lab while the mon restarts, OSDs crash and come back, Prometheus stops
and starts, and load runs. No crash, every source recovers, memory flat, journal intact."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from stormdeck.advisors.apply import CephAdmin, Executor
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Change
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.plan import Plan
from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.host.source import HostSource
from stormdeck.collectors.prometheus.source import PrometheusSource
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import Feed
from tests.conftest import SOAK_OPT_IN, LabCluster
from tests.unit.test_tui import until

MINUTES = float(os.environ.get("STORMDECK_SOAK_MINUTES", "10"))
pytestmark = [pytest.mark.integration, pytest.mark.skipif(
    os.environ.get("STORMDECK_SOAK") != "1", reason=SOAK_OPT_IN),
    pytest.mark.timeout(int(MINUTES * 60) + 900)]

VIEWS = "12345678"


def chaos(lab: LabCluster, stop: threading.Event, log: list[str]) -> None:
    """One fault a minute, in turn, each undone before the next."""
    faults = [
        ("mon restart", [("lab", "stop", "mon.a"), ("lab", "start", "mon.a")]),
        ("osd.1 crash", [("lab", "storm", "--restart-osd", "1", "--no-wait")]),
        ("prometheus stop", [("lab", "stop", "prometheus"), ("lab", "start", "prometheus")]),
        ("osd.2 crash", [("lab", "storm", "--restart-osd", "2", "--no-wait")]),
    ]
    i = 0
    while not stop.wait(45):
        name, steps = faults[i % len(faults)]
        for n, args in enumerate(steps):
            res = lab.cli(*args, timeout=300)
            log.append(f"{time.strftime('%H:%M:%S')} {name}: {' '.join(args)} rc {res.rc}")
            if n + 1 < len(steps) and stop.wait(15):
                lab.cli(*steps[-1], timeout=300)  # never leave a fault behind
                return
        i += 1


@pytest.mark.asyncio
async def test_the_console_survives_a_storm_of_faults(lab_cluster: LabCluster,
                                                      tmp_path: Path) -> None:
    lab = lab_cluster
    minutes = MINUTES
    conf = str(lab.conf)
    journal = Journal(tmp_path / "journal.jsonl")
    feed = Feed([CephSource(conf, timeout=5), HostSource(ceph_conf=conf),
                 PrometheusSource(f"http://127.0.0.1:{lab.prometheus_port}", timeout=5)],
                Engine(), interval=1.0, timeout=5)
    app = StormdeckApp(feed, journal=journal,
                       executor_factory=lambda: Executor(journal, ceph=CephAdmin(conf)))
    me = psutil.Process()
    rss: list[tuple[float, int]] = []
    log: list[str] = []
    stop = threading.Event()
    assert lab.cli("lab", "load", "--threads", "8").rc == 0
    change = Change(kind="ceph_config", target="osd", key="osd_scrub_sleep", current=None,
                    proposed="0.1", command="ceph config set osd osd_scrub_sleep 0.1")
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: app.frame is not None, 60)
            executor = app.executor_factory()
            change = replace(change, current=executor.current(change))
            (applied,) = executor.apply(Plan(
                id="soak", created=time.time(), rule="soak", target="osd", summary="soak",
                source="test", fsid=None, changes=(change,)))
            worker = threading.Thread(target=chaos, args=(lab, stop, log), daemon=True)
            worker.start()
            started = time.monotonic()
            k = 0
            while time.monotonic() - started < minutes * 60:
                await pilot.press(VIEWS[k % len(VIEWS)])
                k += 1
                await pilot.pause(5)
                rss.append((time.monotonic() - started, me.memory_info().rss))
                assert app.is_running
            stop.set()
            worker.join(timeout=400)
            # Faults over: every source must come back.
            await until(pilot, lambda: app.frame is not None and all(
                s.ok for s in app.frame.snapshot.sources.values()), 180)
            app.executor_factory().undo(journal.find(applied.entry))
    finally:
        stop.set()
        lab.cli("lab", "load", "--stop")
        for name in ("mon.a", "prometheus"):
            lab.cli("lab", "start", name)  # "already running" is fine
    entries = journal.entries()
    assert len(entries) == 2 and all(e.outcome for e in entries), entries
    early = max(r for t, r in rss if t < 120)
    late = max(r for t, r in rss[-12:])
    print(f"\nsoak {minutes:g} min, {len(log)} fault steps: RSS {early / 2**20:.0f} MiB in the "
          f"first 2 min, {late / 2**20:.0f} MiB in the last minute, peak "
          f"{max(r for _, r in rss) / 2**20:.0f} MiB")
    print("\n".join(log))
    assert late < early + 64 * 2**20, "memory grows"
