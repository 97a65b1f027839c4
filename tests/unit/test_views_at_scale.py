"""The views' shortcuts at scale say what the full computation said."""

from __future__ import annotations

from dataclasses import replace

from stormdeck.collectors.hub import History
from stormdeck.collectors.model import Disk, disk_key
from stormdeck.tui.format import spark
from stormdeck.tui.views import latency, overview
from stormdeck.tui.views.daemons import DaemonTable
from tests.captured import history, lab_snapshot


def test_daemon_records_are_kept_while_their_daemon_and_disks_are() -> None:
    snap = lab_snapshot()
    d = next(iter(snap.daemons.values()))
    dev = (d.devices or ("sdb",))[0]
    d = replace(d, devices=(dev,))
    disks = {disk_key(d.host, dev): Disk(host=d.host or "h", name=dev, util=0.5)}
    first = DaemonTable._records_of({d.id: d}, disks, {}, False)
    again = DaemonTable._records_of({d.id: d}, dict(disks), first, True)
    assert again[d.id] is first[d.id]  # the same record object: the table compares by identity
    moved = replace(d, commit_latency=(d.commit_latency or 0) + 1)
    after = DaemonTable._records_of({d.id: moved}, disks, first, True)
    assert after[d.id] is not first[d.id] and after[d.id][0] is moved
    hotter = {disk_key(d.host, dev): Disk(host=d.host or "h", name=dev, util=0.9)}
    busy = DaemonTable._records_of({d.id: d}, hotter, first, False)
    assert busy[d.id] is not first[d.id] and busy[d.id][1][0].util == 0.9
    same_disks = DaemonTable._records_of({d.id: d}, dict(disks), first, False)
    assert same_disks[d.id] is first[d.id]


def test_daemon_rows_are_not_built_again_while_the_merge_holds_its_mapping() -> None:
    """Every Snapshot wraps its daemons anew; while the merge hands the same mapping (a
    fleet source's scrape held for its interval) the view's rows stay the same dict, so
    the table has nothing to do; new data builds them again."""
    snap = lab_snapshot()
    table = DaemonTable()
    first = table.rows_of(snap)
    later = replace(snap, time=snap.time + 1)
    assert later.daemons is not snap.daemons
    assert table.rows_of(later) is first
    d = next(iter(snap.daemons.values()))
    moved = replace(later, daemons={**later.daemons, d.id: replace(d, up=not d.up)})
    again = table.rows_of(moved)
    assert again is not first and again[d.id][0].up is not d.up


def test_sparklines_read_back_only_what_they_show() -> None:
    """The latency view's and the overview's sparklines over the newest values, read
    from the newest snapshot back, are those drawn from the whole history before;
    packed snapshots (older than the History's whole ones) read the same."""
    snaps = history(150, step=1.0)
    kept = History(600, whole=5)
    for i, s in enumerate(snaps):
        daemons = {k: replace(d, commit_latency=None if (i + n) % 7 == 0 else 0.001 * (i % 9),
                              cores_used=None if i % 11 == 0 else 0.1 * (i % 5))
                   for n, (k, d) in enumerate(s.daemons.items())}
        kept.append(replace(s, daemons=daemons))
    hist = kept.last(120)
    for daemon_id in hist[-1].daemons:
        whole = [x.daemons[daemon_id].commit_latency for x in hist
                 if daemon_id in x.daemons
                 and x.daemons[daemon_id].commit_latency is not None]
        got = latency.newest(hist, daemon_id, "commit_latency", latency.SPARK)
        assert got == whole[-latency.SPARK:]
        assert spark(got, latency.SPARK) == spark(whole, latency.SPARK)
    cores = lambda x: sum(d.cores_used or 0 for d in x.daemons.values())  # noqa: E731
    view = overview.Overview()
    whole = [cores(x) for x in kept]
    assert overview.newest(list(kept), view._cores_used, overview.SPARK) == \
        whole[-overview.SPARK:]
    assert [view._cores_used(x) for x in kept] == whole
