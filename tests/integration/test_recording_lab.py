"""A recording made on the real lab during load, a PG storm and an OSD restart replays as it
was seen live: the same PG-state timeline, the same findings, the restart as down/up events."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.session import Session, replay
from stormdeck.advisors.timeline import pg_classes
from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.host.source import HostSource
from stormdeck.collectors.hub import History, Hub
from stormdeck.collectors.recording import Recorder, Recording
from tests.conftest import LabCluster, run_cli

pytestmark = pytest.mark.integration


# A recording replays the same Snapshot whatever the release collected it (the suite's
# time is bounded).
@pytest.mark.releases('pacific')
def test_a_storm_replays_as_it_was_seen_live(release_cluster: LabCluster, tmp_path: Path) -> None:
    lab_cluster = release_cluster
    lab = lab_cluster
    tape = Recorder(tmp_path / "storm.sdrec")
    session = Session(Engine(), recorder=tape)
    hub = Hub([CephSource(str(lab.conf), timeout=10), HostSource()], interval=1.0)
    history = History()
    live: list[tuple[float, dict[str, int], set[tuple[str, str, str]]]] = []
    results: dict[str, object] = {}

    def incident() -> None:
        results["load"] = lab.cli("lab", "load", "--seconds", "50", "--threads", "8")
        time.sleep(5)
        results["storm"] = lab.cli("lab", "storm", "--pgs", "128", "--timeout", "240", timeout=300)
        results["restart"] = lab.cli("lab", "storm", "--restart-osd", "1", "--timeout", "240",
                                    timeout=300)
        time.sleep(4)

    storm = threading.Thread(target=incident)
    hub.start()
    try:
        hub.wait_polls(1, timeout=30)
        storm.start()
        while storm.is_alive() or len(live) < 5:
            tick = time.monotonic()
            snap = hub.snapshot()
            history.append(snap)
            step = session.step(snap, history)
            live.append((snap.time, pg_classes(snap.cluster),
                         {(f.rule, f.target, f.state) for f in step.findings}))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
            assert len(live) < 400, "the incident did not end"
    finally:
        hub.stop()
        session.close()
        storm.join(timeout=600)
        lab.cli("lab", "load", "--stop")
    for name in ("load", "storm", "restart"):
        assert results[name].rc == 0, (name, results[name].err)  # type: ignore[attr-defined]

    rec = Recording(tmp_path / "storm.sdrec")
    assert rec.torn is None and len(rec) == len(live)
    again = []
    events = []
    for _, step, _ in replay(rec, Engine()):
        again.append((step.snapshot.time, pg_classes(step.snapshot.cluster),
                      {(f.rule, f.target, f.state) for f in step.findings}))
        events = step.events
    assert [a[0] for a in again] == pytest.approx([x[0] for x in live], abs=0.002)
    assert [a[1] for a in again] == [x[1] for x in live]  # the PG-state timeline
    assert [a[2] for a in again] == [x[2] for x in live]  # the findings
    # The storm was seen: PGs peering or inactive at some point, and the restart's events.
    assert any(c.get("peering", 0) or c.get("inactive", 0) for _, c, _ in live)
    texts = [e.text for e in events]
    assert any(t.startswith("osd.1 down") for t in texts), texts
    down = next(i for i, t in enumerate(texts) if t.startswith("osd.1 down"))
    assert any(t.startswith("osd.1 up") for t in texts[down:]), texts
    assert any(t.startswith("raised ") for t in texts), texts

    # The report of the recording tells the same story.
    md = run_cli("report", str(tmp_path / "storm.sdrec"))
    assert md.rc == 0, md.err
    assert "osd.1 down" in md.out and "osd.1 up" in md.out
    assert "Went down: osd.1" in md.out


def test_record_ends_cleanly_on_sigterm_and_on_for(lab_cluster: LabCluster,
                                                   tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    timed = run_cli("record", str(tmp_path / "a.sdrec"), "--for", "3", "-c",
                    str(lab_cluster.conf))
    assert timed.rc == 0 and "recorded" in timed.err, timed.err
    assert 3 <= len(Recording(tmp_path / "a.sdrec")) <= 6
    for sig in (signal.SIGTERM, signal.SIGINT):  # how services and operators end it
        path = tmp_path / f"{sig.name}.sdrec"
        proc = subprocess.Popen([sys.executable, "-m", "stormdeck", "record", str(path),
                                 "-c", str(lab_cluster.conf)], stderr=subprocess.PIPE,
                                text=True)
        time.sleep(4)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "recorded" in err, (sig, err)
        rec = Recording(path)
        assert rec.torn is None and len(rec) >= 2
    report = run_cli("report", str(path), "--json")
    assert report.rc == 0 and '"health_end": "HEALTH_' in report.out
