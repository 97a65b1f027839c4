"""Events read off consecutive snapshots: each kind, once, in order; PG classes; flapping."""

from __future__ import annotations

from dataclasses import replace

from stormdeck.advisors.timeline import Timeline, events_of, flapping, pg_classes
from stormdeck.collectors.model import ConfigChange
from tests.captured import history, with_cluster, with_daemon


def test_each_change_is_one_event() -> None:
    snaps = history(6, step=1.0)
    t0 = snaps[0].time
    old = ConfigChange(1, t0 - 7200, "osd/osd_max_backfills", None, "1")  # too old to show
    recent = ConfigChange(2, t0 - 600, "osd/osd_scrub_sleep", None, "0.1")
    snaps[0] = with_cluster(snaps[0], config_log=(old, recent))
    snaps[1] = with_cluster(snaps[1], osd_flags=("noout",), config_log=(old, recent))
    snaps[2] = with_daemon(with_cluster(snaps[2], osd_flags=("noout",)), "osd.2", in_=False)
    pool = snaps[3].cluster.pools[0]
    snaps[3] = with_cluster(snaps[3], pools=(replace(pool, pg_num=pool.pg_num * 2),
                                             *snaps[3].cluster.pools[1:]))
    change = ConfigChange(3, t0 + 4.5, "osd/osd_scrub_sleep", "0.1", None)
    snaps[4] = with_cluster(snaps[4], config_log=(old, recent, change))
    snaps[5] = with_cluster(snaps[5], config_log=(old, recent, change))
    texts = [e.text for e in events_of(snaps)]
    assert texts == [
        "config set osd/osd_scrub_sleep = 0.1",
        "flag noout set",
        "osd.2 marked out",
        "osd.2 marked in",  # snapshot 3 is the capture again: back in, flag gone
        "flag noout unset",
        f"pool {pool.name} pg_num {pool.pg_num} -> {pool.pg_num * 2}",
        f"pool {pool.name} pg_num {pool.pg_num * 2} -> {pool.pg_num}",
        "config rm osd/osd_scrub_sleep (was 0.1)",
    ]  # in the order of the snapshots


def test_flapping_counts_downs_in_the_window() -> None:
    tl = Timeline()
    snaps = history(8, step=30.0, edit=lambda s, i: with_daemon(s, "osd.1", up=i % 2 == 0))
    for s in snaps:
        tl.add(s)
    downs = [e for e in tl.events if e.text.startswith("osd.1 down")]
    assert len(downs) == 4
    now = snaps[-1].time
    assert flapping(tl.events, now, window=300) == {"osd.1": 4}
    assert flapping(tl.events, now, window=59) == {}  # one down in the last minute


def test_pg_classes_read_the_states() -> None:
    s = with_cluster(history(1)[0], num_pgs=100, pg_states={
        "active+clean": 60, "peering": 10, "activating+undersized+degraded": 5,
        "active+recovery_wait+degraded": 20, "active+remapped+backfilling": 5})
    c = pg_classes(s.cluster)
    assert c["inactive"] == 15 and c["peering"] == 10 and c["activating"] == 5
    assert c["degraded"] == 25 and c["recovering"] == 20 and c["backfilling"] == 5
    assert pg_classes(None) == {}
