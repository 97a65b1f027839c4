"""min_size that leaves no redundancy, and PGs per OSD against mon_max_pg_per_osd."""

from __future__ import annotations

from dataclasses import replace

from stormdeck.advisors.findings import Severity
from stormdeck.collectors.model import Pool, Snapshot
from tests.captured import firing, history, run, with_cluster, with_daemon


def pools(*extra: Pool, mode: str | None = None):
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        kept = tuple(replace(p, autoscale_mode=mode) if mode else p for p in s.cluster.pools)
        return with_cluster(s, pools=(*kept, *extra))
    return edit


def ec(min_size: int) -> Pool:
    return Pool(id=9, name="ecpool", type="erasure", size=6, min_size=min_size, pg_num=32,
                ec_profile="k4m2", ec_k=4, ec_m=2)


def test_ec_min_size_k_writes_without_parity() -> None:
    (f,) = firing(run(history(2, edit=pools(ec(4)))), "ceph.pool.min_size")
    assert f.target == "pool ecpool" and "no parity" in f.summary and "min_size 5 (k+1" in f.summary
    assert f.changes == () and "undersized" in f.procedure[0]
    assert not firing(run(history(2, edit=pools(ec(5)))), "ceph.pool.min_size")


def test_replicated_min_size_one_but_not_size_one() -> None:
    rep = Pool(id=8, name="two", type="replicated", size=2, min_size=1, pg_num=32)
    (f,) = firing(run(history(2, edit=pools(rep))), "ceph.pool.min_size")
    assert "size 2 min_size 1" in f.summary and f.severity == Severity.WARNING
    assert "min_size 2 keeps every write on two OSDs" in f.summary
    three = replace(rep, name="three", size=3, min_size=2)
    one = replace(rep, name="one", size=1, min_size=1)
    assert not firing(run(history(2, edit=pools(three, one))), "ceph.pool.min_size")


def test_pgs_per_osd_against_the_monitors_limit() -> None:
    hot = lambda n: lambda s, i: with_daemon(s, "osd.2", pgs=n)  # noqa: E731
    (f,) = firing(run(history(8, edit=hot(230))), "ceph.osd.pgs_per_osd")
    assert f.target == "cluster" and "osd.2 holds 230 PGs, 92% of it" in f.summary
    assert "1 of 3 OSDs past 90% of mon_max_pg_per_osd 250" in f.summary
    (g,) = firing(run(history(8, edit=hot(800))), "ceph.osd.pgs_per_osd")
    assert g.severity == Severity.CRITICAL and "refuses new PGs" in g.summary
    # The autoscaler on for every pool: pg_num is its business.
    both = lambda s, i: pools(mode="on")(hot(800)(s, i), i)  # noqa: E731
    assert not firing(run(history(8, edit=both)), "ceph.osd.pgs_per_osd")


def test_mclock_capacity_at_the_fallback_from_the_tentacle_labs_own_log() -> None:
    from tests.captured import lab_snapshot

    base = lab_snapshot(release="tentacle")
    found = {f.target: f for f in firing(run(history(2, base=base)), "ceph.mclock.capacity")}
    assert set(found) == {"osd.0", "osd.1", "osd.2"}
    assert "measured 9513 IOPS, out of range" in found["osd.0"].summary
    assert "fallback 315" in found["osd.0"].summary and found["osd.0"].severity == Severity.INFO
    assert any("fio" in step for step in found["osd.0"].procedure)
    # Pacific runs wpq: no mClock, nothing to say.
    assert not firing(run(history(2)), "ceph.mclock.capacity")


def test_mclock_capacity_names_the_one_outlier_of_three_not_its_peers() -> None:
    # The Reef lab: osd.1 and osd.2 at 1000 IOPS, osd.0 set to ten times that. Each healthy
    # OSD's two peers have a median of (1000 + 10000) / 2: judged against that, both
    # healthy OSDs looked like outliers too.
    from tests.captured import lab_snapshot, with_config

    base = lab_snapshot(release="reef")
    option = "osd_mclock_max_capacity_iops_hdd" if all(
        (d.device_class or "hdd") == "hdd" for d in base.daemons.values()
        if d.kind == "osd") else "osd_mclock_max_capacity_iops_ssd"
    for osd, iops in (("osd.0", "10000"), ("osd.1", "1000"), ("osd.2", "1000")):
        base = with_config(base, option, osd, iops)
    found = {f.target: f for f in firing(run(history(2, base=base)), "ceph.mclock.capacity")}
    assert set(found) == {"osd.0"}, {t: f.summary for t, f in found.items()}
    assert "against a median of 1000 over the 3" in found["osd.0"].summary
