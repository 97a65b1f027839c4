"""The overview names the incident (down OSD and host, stale PGs in red, a client IO stall,
recovery with its ETA) and marks figures from a source that missed its poll as stale, on the
recorded lab storm (assets/demo.sdrec: osd.1 restarted under client load)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.session import Session
from stormdeck.collectors.model import Cluster, Snapshot, SourceHealth
from stormdeck.collectors.recording import Recording
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import Frame, StaticFeed, stale_part, stale_sources
from stormdeck.tui.views.overview import Overview, io_stall, recovery
from tests.clock import zone

DEMO = Path(__file__).resolve().parents[2] / "assets" / "demo.sdrec"


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    # Times on screen are local: the snapshots are drawn in UTC wherever the suite runs.
    with zone("UTC"):
        yield


def replayed(seconds: float) -> Frame:
    """The demo recording judged up to `seconds` after its start, as the replay shows it."""
    rec = Recording(DEMO)
    session = Session(Engine())
    snaps: list[Snapshot] = []
    step = None
    for s in rec.snapshots():
        if s.time > rec.start + seconds:
            break
        snaps.append(s)
        step = session.step(s, snaps)
    rec.close()
    assert step is not None
    return Frame(step.snapshot, step.findings, tuple(snaps[-120:]), events=step.events)


def text_of(frame: Frame) -> str:
    view = Overview()
    view.settings = None
    return view.render_frame(frame).plain


def test_the_headline_counts_stale_pgs_and_names_the_down_osd() -> None:
    frame = replayed(70)
    c = frame.snapshot.cluster
    assert c is not None and c.pg_states.get("stale+active+clean") == 98
    text = text_of(frame)
    assert "not active+clean 98" in text
    assert "98 stale+active+clean" in text
    assert "down  osd.1 on vm since" in text


def test_the_stale_pg_line_is_red_and_the_down_osd_too() -> None:
    rendered = Overview().render_frame(replayed(70))
    styles = {rendered.plain[span.start:span.end].strip(): str(span.style)
              for span in rendered.spans}
    assert styles["98 stale+active+clean"] == "bold red"
    assert any(k.startswith("down  osd.1 on vm") and v == "bold red" for k, v in styles.items())


def test_a_drop_of_client_io_to_zero_is_named_a_stall() -> None:
    frame = replayed(79)
    stall = io_stall(frame.history)
    assert stall is not None
    since, was = stall
    assert frame.snapshot.time - since < 3 and was > 500
    assert "STALLED since" in text_of(frame) and "idle:" not in text_of(frame)
    # Idle from the start is no stall.
    assert io_stall(replayed(20).history) is None


def cluster_at(t: float, degraded: int, per_sec: float | None) -> Snapshot:
    return Snapshot(time=t, cluster=Cluster(num_pgs=10, degraded_objects=degraded,
                                            recovering_objects_per_sec=per_sec),
                    daemons={}, disks={}, sources={})


def test_recovery_eta_from_the_last_minute() -> None:
    hist = [cluster_at(float(t), 1000 - 10 * t, 10.0) for t in range(0, 61)]
    left, per_sec, eta = recovery(hist)  # type: ignore[misc]
    assert left == 400 and per_sec == 10.0 and eta == pytest.approx(40.0)
    # Ceph says nothing of its rate: how fast what is left fell.
    hist = [cluster_at(float(t), 1000 - 5 * t, None) for t in range(0, 121)]
    left, per_sec, eta = recovery(hist)  # type: ignore[misc]
    assert left == 400 and per_sec == pytest.approx(5.0) and eta == pytest.approx(80.0)
    # No progress: no ETA, and it says so.
    hist = [cluster_at(float(t), 500, 0.0) for t in range(0, 61)]
    assert recovery(hist) == (500, 0.0, None)
    assert recovery([cluster_at(0.0, 0, 0.0)]) is None


def missed_polls(frame: Frame, source: str, seconds: float) -> Frame:
    """The same frame, `source` last heard from `seconds` before it (its poll hangs; the
    hub's own timeout has not called it stale yet)."""
    s = frame.snapshot
    sources = dict(s.sources)
    sources[source] = replace(sources[source], last_success=s.time - seconds, stale=False)
    return replace(frame, snapshot=replace(s, sources=sources))


def test_a_source_that_missed_one_poll_is_stale_at_once() -> None:
    frame = replayed(70)
    assert stale_sources(frame) == {}
    late = missed_polls(frame, "ceph", 4.0)
    assert set(stale_sources(late)) == {"ceph"}
    assert stale_part(late, "cluster") == pytest.approx(4.0)
    assert stale_part(late, "disks") is None
    # The hub's verdict counts too, however young the last answer.
    sources = {**frame.snapshot.sources,
               "host": SourceHealth("host", False, frame.snapshot.time, "boom", stale=True)}
    failed = replace(frame, snapshot=replace(frame.snapshot, sources=sources))
    assert set(stale_sources(failed)) == {"host"}


def test_the_body_marks_the_stale_source_figures() -> None:
    frame = missed_polls(replayed(70), "ceph", 12)
    rendered = Overview().render_frame(frame)
    text = rendered.plain
    assert "STALE: ceph last answered 12 s ago" in text
    health = text.index("health")
    assert any(span.start <= health < span.end and "strike" in str(span.style)
               for span in rendered.spans)
    assert "STALE" not in text_of(replayed(70))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("case", ["osd_down_stale_pgs", "io_stall", "ceph_stale"])
def test_overview_snapshot(snap_compare, case: str, size: tuple[int, int]) -> None:
    frame = {"osd_down_stale_pgs": lambda: replayed(70), "io_stall": lambda: replayed(79),
             "ceph_stale": lambda: missed_polls(replayed(70), "ceph", 12)}[case]()
    app = StormdeckApp(StaticFeed([frame]), cluster_name="lab")
    assert snap_compare(app, press=["1"], terminal_size=size)


@pytest.mark.asyncio
async def test_the_tables_strike_a_late_sources_figures() -> None:
    from stormdeck.tui.views import DaemonTable, DiskTable, LatencyTable

    fresh = replayed(70)
    late = missed_polls(missed_polls(fresh, "ceph", 12), "host", 5)
    app = StormdeckApp(StaticFeed([fresh, late]), cluster_name="lab")
    async with app.run_test(size=(160, 48)) as pilot:
        for key, kind in (("2", DaemonTable), ("4", LatencyTable), ("5", DiskTable)):
            await pilot.press(key)
            await pilot.pause()
            table = app.query_one(kind)
            row = table.keys[0]
            cells = table.row_cells(row)
            # On the cell's own style, which is what the table draws.
            assert all("strike" in str(c.style) for c in cells), kind
        daemons = app.query_one(DaemonTable)
        assert "STALE: ceph last answered 12 s ago" in str(daemons.border_title)
        assert "host last answered 5 s ago" in str(daemons.border_title)
        # The frame before, all current: nothing struck, no note.
        await pilot.press("2")
        app.feed.step(-1)
        await pilot.pause()
        assert app.frame.snapshot.time == fresh.snapshot.time
        row = daemons.keys[0]
        assert not any("strike" in str(c.style) for c in daemons.row_cells(row))
        assert not daemons.border_title


@pytest.mark.asyncio
async def test_in_replay_the_headline_counts_the_stale_pgs() -> None:
    from stormdeck.advisors.session import RecordedJournal
    from stormdeck.tui.feed import ReplayFeed

    rec = Recording(DEMO)
    feed = ReplayFeed(Recording(DEMO), Engine, speed=1, start=rec.start + 70)
    feed.paused = True  # held from the start: no frame plays on, however slow the host
    app = StormdeckApp(feed, journal=RecordedJournal(DEMO), read_only=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert app.frame.snapshot.time == pytest.approx(rec.start + 70, abs=1.5)
        text = app.query_one(Overview).text.plain
        assert "not active+clean 98" in text and "98 stale+active+clean" in text
        assert "down  osd.1 on vm since" in text
    rec.close()


def test_the_report_of_the_demo_starts_when_the_first_pg_went_stale() -> None:
    import json

    from tests.conftest import run_cli

    rec = Recording(DEMO)
    first_stale = next(s.time for s in rec.snapshots() if s.cluster is not None
                       and any("stale" in k for k in s.cluster.pg_states))
    rec.close()
    # From +60 s: the storm pool's 256 PGs were unknown for 4 s at +44 s, an incident of its own.
    res = run_cli("report", str(DEMO), "--json", "--from", "+60")
    assert res.rc == 0, res.err
    r = json.loads(res.out)
    assert r["not_clean_from"] == pytest.approx(first_stale, abs=0.01)
    assert r["peaks"]["stale"]["count"] == 98


def test_with_prometheus_counts_only_the_harmful_parts_are_listed() -> None:
    frame = replayed(70)
    c = Cluster(num_pgs=289, pg_flags={"active": 289, "clean": 289, "stale": 98,
                                       "scrubbing": 4})
    frame = replace(frame, snapshot=replace(frame.snapshot, cluster=c))
    text = text_of(frame)
    assert "not active+clean 98" in text and "98 stale" in text and "scrubbing" not in text


def test_triage_counts_the_stale_pgs_in_red_and_marks_a_late_source() -> None:
    from stormdeck.tui.views import Triage

    rendered = Triage().render_frame(replayed(70))
    line = next(x for x in rendered.plain.splitlines() if x.strip().startswith("unhealthy"))
    assert line.split()[1] == "98"
    stale = next(x for x in rendered.plain.splitlines() if x.strip().startswith("stale"))
    assert stale.split()[1] == "98"
    start = rendered.plain.index(stale)
    assert any(s.start <= start < s.end and str(s.style) == "bold red" for s in rendered.spans)
    late = Triage().render_frame(missed_polls(replayed(70), "ceph", 12))
    assert "STALE: the cluster's figures are 12 s old" in late.plain
    start = late.plain.index("unhealthy")
    assert any(s.start <= start < s.end and "strike" in str(s.style) for s in late.spans)


def test_every_bad_state_is_red_and_bold_where_it_serves_no_io() -> None:
    frame = replayed(70)
    states = {"active+clean": 200, "active+undersized+degraded": 60, "peering": 29}
    c = replace(frame.snapshot.cluster, pg_states=states, num_pgs=289)
    rendered = Overview().render_frame(replace(frame, snapshot=replace(frame.snapshot,
                                                                       cluster=c)))
    styles = {rendered.plain[span.start:span.end].strip(): str(span.style)
              for span in rendered.spans}
    assert styles["60 active+undersized+degraded"] == "red"
    assert styles["29 peering"] == "bold red"
    assert "active+clean\n" not in rendered.plain.split("not active+clean")[1]


def test_cluster_text_in_the_incident_lines_is_inert() -> None:
    from tests.unit.test_tui import EVIL

    frame = replayed(70)
    s = frame.snapshot
    daemons = {**s.daemons, "osd.1": replace(s.daemons["osd.1"], host=EVIL)}
    c = replace(s.cluster, pg_states={"active+clean": 191, EVIL: 98}, slow_ops=1,
                slow_ops_daemons=("osd.1",))
    rendered = Overview().render_frame(replace(frame, snapshot=replace(
        s, daemons=daemons, cluster=c)))
    # Shown as the characters they are: no markup parsed, control characters escaped.
    assert "down  osd.1 on [bold red]x[/] \\x1b[31mred\\x1b[0m since" in rendered.plain
    assert "98 [bold red]x[/]" in rendered.plain
    assert "\x1b" not in rendered.plain


def test_the_header_and_the_body_call_a_source_stale_at_the_same_moment() -> None:
    from stormdeck.tui.app import source_state
    from stormdeck.tui.feed import poll_interval

    frame = replayed(70)
    for tenths in range(0, 80):
        late = missed_polls(frame, "ceph", tenths / 10)
        header = source_state(late.snapshot.sources["ceph"], late.snapshot.time,
                              poll_interval(late))[1]
        assert header.startswith("STALE") == ("ceph" in stale_sources(late)), tenths


def test_a_down_osd_is_never_named_slowest() -> None:
    """Its commit latency is the last the mgr had from it, from before it died."""
    frame = replayed(70)
    s = frame.snapshot
    down = [d for d in s.daemons.values() if d.up is False]
    assert [d.id for d in down] == ["osd.1"]
    slowest = max(d.commit_latency or 0 for d in s.daemons.values() if d.up is not False)
    daemons = {k: replace(d, commit_latency=slowest + 1.0) if d.up is False else d
               for k, d in s.daemons.items()}
    text = text_of(replace(frame, snapshot=replace(s, daemons=daemons)))
    line = next(ln for ln in text.splitlines() if ln.startswith("slowest "))
    assert "osd.1" not in line, line


def test_an_hour_old_down_stamp_is_not_believed_over_a_tick_that_saw_the_osd_up() -> None:
    """Pacific keeps an earlier `ceph osd down`'s down_stamp when the mons mark an OSD
    down on failure reports: the screen said "since 21:12:11 (60 min)" for a kill seconds
    old. The tick that saw it go down wins; a stamp the timeline allows stands."""
    frame = replayed(70)
    s = frame.snapshot
    seen = next(e.time for e in reversed(frame.events) if e.text.startswith("osd.1 down"))

    def with_stamp(stamp: float) -> str:
        daemons = {k: replace(d, down_since=stamp) if d.id == "osd.1" else d
                   for k, d in s.daemons.items()}
        text = text_of(replace(frame, snapshot=replace(s, daemons=daemons)))
        return next(ln for ln in text.splitlines() if "down  osd.1" in ln)

    assert f"since {time.strftime('%H:%M:%S', time.gmtime(seen))}" in with_stamp(seen - 3600)
    assert f"since {time.strftime('%H:%M:%S', time.gmtime(seen - 1))}" in with_stamp(seen - 1)


def test_an_osd_down_since_before_the_history_says_so() -> None:
    frame = replayed(70)
    s = frame.snapshot
    daemons = {k: replace(d, down_since=None) if d.id == "osd.1" else d
               for k, d in s.daemons.items()}
    hist = tuple(x for x in frame.history
                 if x.daemons.get("osd.1") is None or x.daemons["osd.1"].up is False)
    text = text_of(Frame(replace(s, daemons=daemons), frame.findings, hist, events=()))
    line = next(ln for ln in text.splitlines() if "down  osd.1" in ln)
    first = time.strftime("%H:%M:%S", time.gmtime(hist[0].time))
    assert f"since before {first}" in line, line
