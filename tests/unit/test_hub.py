"""The hub: worker threads, stale values, hung sources, merge priority, History."""

from __future__ import annotations

import threading
import time

import pytest

from stormdeck.collectors.hub import History, Hub, merge
from stormdeck.collectors.model import Cluster, Daemon, Disk, Partial, Snapshot, merge_records


class ScriptedSource:
    """A source whose behaviour the test sets: answer, raise, or block until released."""

    def __init__(self, name: str, daemons: dict[str, Daemon] | None = None) -> None:
        self.name = name
        self.daemons = daemons or {}
        self.fail: str | None = None
        self.block = threading.Event()
        self.block.set()
        self.polls = 0
        self.closed = False

    def poll(self) -> Partial:
        self.block.wait()
        self.polls += 1
        if self.fail:
            raise RuntimeError(self.fail)
        return Partial(source=self.name, time=time.time(), daemons=dict(self.daemons),
                       cluster=Cluster(health="HEALTH_OK"))

    def close(self) -> None:
        self.closed = True


def eventually(check, timeout: float = 30.0) -> bool:
    """Whether `check()` comes true within `timeout` seconds: the hub's threads run when a
    busy host lets them, so a verdict waits for them instead of a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def osd(n: int, **kw: object) -> Daemon:
    return Daemon(id=f"osd.{n}", kind="osd", **kw)  # type: ignore[arg-type]


def test_a_hung_source_delays_nobody_and_shows_stale_then_recovers() -> None:
    fast = ScriptedSource("fast", {"osd.0": osd(0, up=True)})
    slow = ScriptedSource("slow", {"osd.1": osd(1, cores_used=1.5)})
    hub = Hub([fast, slow], interval=0.05, timeout=0.3)
    hub.start()
    try:
        assert hub.wait_polls(2, timeout=5)
        slow.block.clear()  # its next poll hangs
        assert eventually(lambda: not hub.snapshot().sources["slow"].ok)
        before = fast.polls
        assert eventually(lambda: fast.polls > before + 2), "the fast source kept polling"
        snap = hub.snapshot()
        assert snap.sources["fast"].ok
        s = snap.sources["slow"]
        assert not s.ok and s.stale and "no answer" in (s.error or "")
        assert snap.daemons["osd.1"].cores_used == 1.5, "last good values are kept"
        slow.block.set()
        assert eventually(lambda: hub.snapshot().sources["slow"].ok)
        snap = hub.snapshot()
        assert snap.sources["slow"].ok and not snap.sources["slow"].stale
    finally:
        slow.block.set()
        hub.stop()
    assert fast.closed and slow.closed


def test_a_failing_source_keeps_last_values_marked_stale() -> None:
    src = ScriptedSource("ceph", {"osd.0": osd(0, up=True)})
    hub = Hub([src], interval=0.05, timeout=1)
    hub.start()
    try:
        assert hub.wait_polls(1, timeout=5)
        src.fail = "cannot connect to the Ceph cluster: [errno 110] timed out\nsecond line"
        assert eventually(lambda: not hub.snapshot().sources["ceph"].ok)
        snap = hub.snapshot()
        h = snap.sources["ceph"]
        assert not h.ok and h.stale and h.last_success is not None
        assert h.error == "cannot connect to the Ceph cluster: [errno 110] timed out"
        assert snap.daemons["osd.0"].up is True
        src.fail = None
        assert eventually(lambda: hub.snapshot().sources["ceph"].ok)
    finally:
        hub.stop()


def test_a_source_that_never_answered_is_an_error_without_values() -> None:
    src = ScriptedSource("prometheus")
    src.fail = "Prometheus at http://127.0.0.1:1 did not answer: ConnectionError"
    hub = Hub([src], interval=0.05)
    hub.start()
    try:
        assert hub.wait_polls(1, timeout=5)
        snap = hub.snapshot()
        assert not snap.sources["prometheus"].ok
        assert not snap.sources["prometheus"].stale and snap.sources["prometheus"].error
        assert snap.cluster is None and snap.daemons == {}
    finally:
        hub.stop()


def test_merge_priority_first_source_wins_field_by_field() -> None:
    ceph = Partial("ceph", 1.0, daemons={"osd.0": osd(0, host="a", devices=("sdb",),
                                                        commit_latency=0.004)})
    host = Partial("host", 1.0, daemons={"osd.0": osd(0, host="a", cores_used=2.0,
                                                        cores_allowed=4.0, commit_latency=9.0)},
                   disks={"a:/dev/sdb": Disk(host="a", name="sdb", util=0.5)})
    prom = Partial("prometheus", 1.0, daemons={"osd.1": osd(1, host="b", devices=("sdc",))},
                   disks={"b:/dev/sdc": Disk(host="b", name="sdc", util=0.1),
                          "a:/dev/sdb": Disk(host="a", name="sdb", util=0.9, model="X")})
    snap = merge([ceph, host, prom], now=5.0)
    d = snap.daemons["osd.0"]
    assert (d.commit_latency, d.cores_used, d.cores_allowed) == (0.004, 2.0, 4.0)
    sdb = snap.disks["a:/dev/sdb"]
    assert sdb.util == 0.5 and sdb.model == "X" and sdb.daemons == ("osd.0",)
    assert snap.disks["b:/dev/sdc"].daemons == ("osd.1",)
    assert list(snap.daemons) == ["osd.0", "osd.1"]


def test_merge_orders_daemons_numerically() -> None:
    part = Partial("ceph", 1.0, daemons={f"osd.{i}": osd(i) for i in (10, 2, 1)})
    assert list(merge([part]).daemons) == ["osd.1", "osd.2", "osd.10"]


def test_merge_records_keeps_the_first_known() -> None:
    a = Cluster(health="HEALTH_WARN", pg_states={})
    b = Cluster(health="HEALTH_OK", pg_states={"active+clean": 3}, num_pgs=3)
    m = merge_records([a, b])
    assert m.health == "HEALTH_WARN" and m.pg_states == {"active+clean": 3} and m.num_pgs == 3


def test_history_is_bounded_and_gives_series() -> None:
    h = History(maxlen=3)
    for t in range(5):
        c = Cluster(num_pgs=t if t != 3 else None)
        h.append(Snapshot(time=float(t), cluster=c, daemons={}, disks={}, sources={}))
    assert len(h) == 3 and h.latest is not None and h.latest.time == 4.0
    assert h.series(lambda s: s.cluster.num_pgs) == [(2.0, 2), (4.0, 4)]
    assert [s.time for s in h.window(1.0)] == [3.0, 4.0]


def test_hub_needs_a_source() -> None:
    with pytest.raises(ValueError):
        Hub([])


def test_a_scrubbing_pg_is_clean() -> None:
    """A long-lived cluster always has PGs scrubbing; Ceph counts them clean, and so do we."""
    from stormdeck.collectors.model import Cluster

    c = Cluster(num_pgs=10, pg_states={"active+clean": 6, "active+clean+scrubbing": 2,
                                       "active+clean+scrubbing+deep": 1, "peering": 1})
    assert c.pgs_not_clean == 1


def test_polls_are_timed_to_end_before_the_loops_ticks() -> None:
    from stormdeck.collectors.hub import next_poll

    # No loop: every interval from the last start, as before.
    assert next_poll(10.0, 10.2, None, 1.0, 0.2) == 11.0
    assert next_poll(10.0, 10.2, 5.0, 1.0, 0.2) == 11.0  # a loop that stopped ticking
    # Ticks at 10.6, 11.6, ...: a poll that ended at 10.2 served the tick at 10.6; the
    # next starts 0.35 s (1.5 x 0.2 + 0.05) before the one at 11.6.
    assert next_poll(10.0, 10.2, 10.6, 1.0, 0.2) == pytest.approx(11.25)
    # A poll that ended after the tick it aimed at serves the next one.
    assert next_poll(10.5, 10.7, 10.6, 1.0, 0.2) == pytest.approx(12.25)
    # A slow source starts at most half an interval early; never before its last end.
    assert next_poll(10.0, 10.9, 11.0, 1.0, 0.9) == pytest.approx(11.5)
    assert next_poll(10.0, 11.9, 11.0, 1.0, 3.0) == pytest.approx(12.5)


def test_a_ticking_loop_gets_polls_that_ended_before_its_ticks() -> None:
    """A source that answers its first poll at once and takes 0.2 s after, under a loop
    ticking every 0.5 s from that first answer: polls every interval from their start
    would run across every tick; timed by the loop, none does once aligned."""
    from stormdeck.advisors.engine import Engine
    from stormdeck.advisors.loop import Loop

    class Slow:
        name = "slow"

        def __init__(self) -> None:
            self.spans: list[tuple[float, float]] = []

        def poll(self) -> Partial:
            t = time.monotonic()
            time.sleep(0.2 if self.spans else 0.01)
            self.spans.append((t, time.monotonic()))
            return Partial(source="slow", time=time.time())

        def close(self) -> None:
            pass

    src = Slow()
    loop = Loop([src], Engine(rules=()), interval=0.5)
    ticks: list[float] = []
    loop.start()
    try:
        loop.run(lambda step: ticks.append(time.monotonic()), duration=4.0)
    finally:
        loop.stop()
    crossed = [t for t in ticks[3:] if any(a < t < b for a, b in src.spans)]
    assert len(ticks) >= 6 and not crossed, (ticks, src.spans)
