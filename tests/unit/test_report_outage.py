"""A source that stopped answering is on the timeline and in the report: start, end, length."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from stormdeck.advisors import report
from stormdeck.advisors.timeline import Timeline
from stormdeck.collectors.model import Snapshot, SourceHealth
from stormdeck.collectors.recording import Recorder
from tests.captured import history
from tests.conftest import run_cli

FROZEN = range(10, 22)  # snapshots in which the mon did not answer


def with_outage(s: Snapshot, i: int) -> Snapshot:
    """ceph answers every second but in FROZEN: there its values are those of second 9,
    marked stale, as the hub marks a source whose poll hangs."""
    t0 = s.time - i
    host = SourceHealth("host", ok=True, last_success=s.time)
    if i in FROZEN:
        ceph = SourceHealth("ceph", ok=False, last_success=t0 + 9, stale=True,
                            error=f"no answer for {i - 9} s")
    else:
        ceph = SourceHealth("ceph", ok=True, last_success=s.time)
    return replace(s, sources={"ceph": ceph, "host": host})


def snaps() -> list[Snapshot]:
    return history(30, step=1.0, edit=with_outage)


def test_an_outage_is_two_events_with_its_length() -> None:
    tl = Timeline()
    ss = snaps()
    for s in ss:
        tl.add(s)
    t0 = ss[0].time
    out = [e for e in tl.events if e.kind == "source"]
    assert [(e.time - t0, e.target) for e in out] == [(9, "ceph"), (22, "ceph")]
    assert "stopped answering (no answer for 1 s)" in out[0].text
    assert out[1].text.endswith("(13 s)") and "answering again" in out[1].text


def test_the_report_names_the_gap_in_its_summary_and_its_table() -> None:
    ss = snaps()
    tl = Timeline()
    for s in ss:
        tl.add(s)
    r = report.build(((s, ()) for s in ss), list(tl.events))
    t0 = ss[0].time
    assert r.outages == [{"source": "ceph", "start": t0 + 9, "end": t0 + 22,
                          "seconds": 13.0, "error": "no answer for 12 s"}]
    md = report.to_markdown(r)
    assert "**Data gap**: ceph did not answer from" in md and "(13 s)" in md
    assert "| no data from |" in md
    gap_rows = [line for line in md.splitlines() if line.endswith("| ceph |")]
    assert len(gap_rows) == len(FROZEN)
    assert "ceph answering again" in md  # in "What happened" too


def test_an_outage_still_open_at_the_end_says_so() -> None:
    ss = snaps()[:15]
    r = report.build(((s, ()) for s in ss), [])
    assert r.outages[0]["end"] is None and r.outages[0]["seconds"] == 5.0
    assert "to the end of the window, at least" in report.to_markdown(r)


def test_no_outage_no_gap() -> None:
    ss = history(5, step=1.0)
    md = report.to_markdown(report.build(((s, ()) for s in ss), []))
    assert "Data gap" not in md and "no data from" not in md


def test_stormdeck_report_on_a_recording_shows_the_outage(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r")
    for s in snaps():
        rec.add_snapshot(s)
    rec.close()
    md = run_cli("report", str(tmp_path / "r"))
    assert md.rc == 0, md.err
    assert "**Data gap**: ceph did not answer" in md.out and "(13 s)" in md.out
    js = run_cli("report", str(tmp_path / "r"), "--json")
    doc = json.loads(js.out)
    assert [(o["source"], o["seconds"]) for o in doc["outages"]] == [("ceph", 13.0)]
