"""Advice that does no harm (issue 31): each rule's harm, on the captured lab snapshots
edited into the moment it fires. Each test fails on the rule as it was before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from stormdeck.advisors.rules import BY_ID
from stormdeck.advisors.validate import judge
from stormdeck.collectors.model import LogEntry, Snapshot
from tests.captured import (
    firing,
    history,
    lab_snapshot,
    run,
    with_cluster,
    with_config,
    with_daemon,
)
from tests.unit.test_mclock import recovery_hurts, scrub_hurts
from tests.unit.test_rules import both

MCLOCK = "ceph.mclock.background_vs_clients"
SCRUB = "ceph.scrub.during_load"


def long(release: str = "pacific", edit=None) -> list[Snapshot]:
    return history(41, step=10.0, edit=edit, base=lab_snapshot(release=release))


def rule(rule_id: str) -> tuple:
    return (BY_ID[rule_id],)


# ---- 2. mClock: never high_client_ops over degraded PGs or the operator's choice -------


def degraded(edit):  # -> edit
    """The same moment, with 10 PGs degraded and undersized (an OSD down, copies missing)."""
    def out(s: Snapshot, i: int) -> Snapshot:
        s = edit(s, i)
        assert s.cluster is not None
        states = dict(s.cluster.pg_states)
        states["active+undersized+degraded"] = 10
        return with_cluster(s, pg_states=states)
    return out


@pytest.mark.parametrize(("rule_id", "hurts"), [(MCLOCK, recovery_hurts(0.025)),
                                                (SCRUB, scrub_hurts(0.025))])
def test_high_client_ops_is_never_proposed_while_pgs_are_degraded(rule_id: str, hurts) -> None:
    (f,) = firing(run(long("tentacle", hurts), rule(rule_id)), rule_id)
    assert [c.proposed for c in f.changes] == ["high_client_ops"]
    for f in run(long("tentacle", degraded(hurts)), rule(rule_id)):
        assert f.changes == (), f.changes
        assert any("degraded or undersized" in p for p in f.procedure)


@pytest.mark.parametrize(("rule_id", "hurts"), [(MCLOCK, recovery_hurts(0.025)),
                                                (SCRUB, scrub_hurts(0.025))])
def test_high_recovery_ops_the_operator_chose_is_not_overturned(rule_id: str, hurts) -> None:
    def chosen(s: Snapshot, i: int) -> Snapshot:
        return with_config(hurts(s, i), "osd_mclock_profile", "osd", "high_recovery_ops")

    found = run(long("tentacle", chosen), rule(rule_id))
    assert all(f.changes == () for f in found)
    assert any("high_recovery_ops" in p for f in found for p in f.procedure)


# ---- 9. validate: a stored recovery limit is not "nothing" ---------------------------------


def test_a_stored_osd_max_backfills_is_said_to_be_kept_at_boot() -> None:
    snap = with_config(lab_snapshot(release="tentacle"), "osd_max_backfills", "osd", "4")
    from types import SimpleNamespace

    from stormdeck.advisors.validate import checks
    found = {v.check: v for v in checks.cluster_settings(SimpleNamespace(snapshot=snap))}
    v = found["osd_max_backfills set but overridden"]
    assert "does nothing" not in v.summary and "remove it" not in v.summary.split(":")[0]
    assert "set_val_default" in v.summary and "osd_mclock_override_recovery_settings" in v.summary
    # A sleep is forced to 0 whatever is stored: that one does nothing.
    (sleep,) = judge.overridden_settings({"osd_scrub_sleep": ("0.1", "the OSD forces it")})
    assert "does nothing" in sleep.summary



# ---- 4. fast EC: information and a procedure; validate quiet where it cannot apply -------


def settings(snap: Snapshot) -> dict[str, judge.Verdict]:
    from types import SimpleNamespace

    from stormdeck.advisors.validate import checks
    return {v.check: v for v in checks.cluster_settings(SimpleNamespace(snapshot=snap))}


@pytest.mark.parametrize(("version", "pool", "verdict"), [
    ("20.2.1", {}, judge.WARN),
    ("20.2.0", {}, judge.PASS),  # crashes OSDs with the flag (tracker 74813)
    ("20.2.4", {"ec_technique": "cauchy_good"}, judge.PASS),  # the mon refuses it
    ("20.2.4", {"ec_plugin": "clay", "ec_technique": None}, judge.PASS),
    ("20.2.4", {"name": "default.rgw.buckets.data", "applications": ("rgw",)}, judge.PASS),
])
def test_validate_warns_of_fast_ec_only_where_it_could_be_turned_on(
        version: str, pool: dict, verdict: str) -> None:
    from tests.unit.test_rules import tentacle_ec
    snap = tentacle_ec(version, (), **pool)(lab_snapshot(release="tentacle"), 0)
    name = pool.get("name", "ecpool")
    v = settings(snap)[f"EC pool {name}"]
    assert v.verdict == verdict, v.summary
    if verdict == judge.WARN:
        assert "test pool" in v.summary


# ---- 1. flapping: one OSD at a time, only where PGs stay active; storms; clean stops -----

FLAP = "ceph.osd.flapping"
T0 = 1_800_000_000.0


def copies(size: int, min_size: int):  # -> edit
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        return with_cluster(s, pools=tuple(replace(p, size=size, min_size=min_size)
                                           for p in s.cluster.pools))
    return edit


def flaps(*osds: str, at: tuple[int, ...] = (34, 38), log=None):  # -> edit
    """Each of `osds` down at the samples `at`, up otherwise; `log(osd, i)` the cluster
    log lines the mon wrote at each down."""
    def edit(s: Snapshot, i: int) -> Snapshot:
        for n, osd in enumerate(osds):
            # The first OSD flaps one time more than the next: a worst one to pick.
            downs = (*at, 30) if n == 0 else at
            s = with_daemon(s, osd, up=i not in downs)
        if log is not None:
            assert s.cluster is not None
            lines = tuple(e for j in range(i + 1) for osd in osds
                          if j in ((*at, 30) if osd == osds[0] else at)
                          for e in log(osd, j))
            s = with_cluster(s, log=(*s.cluster.log, *lines)[-30:])
        return s
    return edit


def line(osd: str, i: int, message: str, who: str = "mon.a", seq: int = 0) -> LogEntry:
    return LogEntry(stamp=T0 + i * 10.0, seq=1000 + i * 10 + seq + int(osd[4:]) * 1000,
                    who=who, priority="[INF]", message=message)


def test_flapping_holds_no_osd_down_where_its_pgs_would_go_inactive() -> None:
    # The lab's pools have one copy: holding osd.1 down stops its PGs.
    (f,) = firing(run(long(edit=flaps("osd.1")), rule(FLAP)), FLAP)
    assert f.changes == ()
    assert any("size 1 and min_size 1" in p and "ok-to-stop" in p for p in f.procedure)


def test_flapping_holds_one_osd_down_and_in_where_pgs_stay_active() -> None:
    three = both(copies(3, 2), flaps("osd.1"))
    (f,) = firing(run(long(edit=three), rule(FLAP)), FLAP)
    noup, noout = f.changes
    assert (noup.key, noup.target, noup.command) == ("noup", "osd.1",
                                                     "ceph osd set-group noup osd.1")
    assert (noout.key, noout.target) == ("noout", "osd.1")
    assert "mon_osd_down_out_interval" in noout.note and "add-noout osd.1" in noout.note
    assert "rm-noout osd.1" in noout.note
    assert any("ceph osd ok-to-stop osd.1" in p for p in f.procedure)


def test_two_flapping_osds_are_held_one_at_a_time() -> None:
    found = firing(run(long(edit=both(copies(3, 2), flaps("osd.1", "osd.2"))), rule(FLAP)),
                   FLAP)
    by = {f.target: f for f in found}
    assert set(by) == {"osd.1", "osd.2"}
    assert [c.key for c in by["osd.1"].changes] == ["noup", "noout"]
    assert by["osd.2"].changes == ()
    assert any("One OSD at a time: osd.1" in p for p in by["osd.2"].procedure)


def test_many_osds_flapping_is_a_network_procedure_not_noup_on_each() -> None:
    def heartbeat(osd: str, i: int) -> tuple[LogEntry, ...]:
        return (line(osd, i, f"{osd} failed (root=default,host=vm) (2 reporters from "
                             "different host after 23.1 >= grace 20.0)"),)

    edit = both(copies(3, 2), flaps("osd.0", "osd.1", "osd.2", log=heartbeat))
    found = firing(run(long(edit=edit), rule(FLAP)), FLAP)
    assert all(f.changes == () for f in found)
    (storm,) = [f for f in found if f.target == "cluster"]
    assert storm.severity.name == "CRITICAL" and "heartbeat failure reports" in storm.summary
    text = " ".join(storm.procedure)
    assert "ceph osd set nodown" in text and "ceph osd set noout" in text
    assert "dump_osd_network" in text and "ceph osd unset nodown" in text


def test_clean_stops_are_not_flaps() -> None:
    def stopped(osd: str, i: int) -> tuple[LogEntry, ...]:
        return (line(osd, i, f"{osd} marked itself down and dead"),)

    edit = both(copies(3, 2), flaps("osd.1", log=stopped))
    assert not firing(run(long(edit=edit), rule(FLAP)), FLAP)

    def wrongly(osd: str, i: int) -> tuple[LogEntry, ...]:
        # Frozen, marked down by its peers, then "dead": a flap, whatever it says after.
        return (line(osd, i, f"Monitor daemon marked {osd} down, but it is still running",
                     who=osd), line(osd, i, f"{osd} marked itself dead as of e81", seq=1))

    assert firing(run(long(edit=both(copies(3, 2), flaps("osd.1", log=wrongly))), rule(FLAP)),
                  FLAP)


@pytest.mark.parametrize("quiet", [
    lambda s, i: with_cluster(s, osd_flags=("noout",)),  # maintenance
    lambda s, i: with_cluster(s, versions_mixed=True),  # an upgrade restarts them
])
def test_flapping_is_quiet_during_maintenance_and_upgrades(quiet) -> None:
    assert not firing(run(long(edit=both(copies(3, 2), flaps("osd.1"), quiet)), rule(FLAP)),
                      FLAP)


# ---- 3. primary spread: judged against chance; the compat raise names the clients -------

SPREAD = "ceph.primary.spread"


def primaries(counts: dict[str, int], pg_num: int = 32, size: int = 3,
              version: str = "16.2.15", release: str = "pacific", required: str = "luminous",
              clients: dict[str, int] | None = None):  # -> edit
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        pools = tuple(replace(p, size=size, pg_num=pg_num,
                              pgs_by_osd={o: pg_num for o in counts}, primaries=counts)
                      if p.name == "lab-bench" else p for p in s.cluster.pools)
        return with_cluster(s, pools=pools, version=version, release=release,
                            require_min_compat_client=required,
                            client_releases=clients or {})
    return edit


def test_a_spread_chance_gives_is_not_a_finding() -> None:
    # 32 PGs, 3 copies on 3 OSDs: each leads 10.7 on average. 14 is 31% over, yet one
    # OSD of three leads 14 or more in about 1 pool in 2: chance, not a fault.
    assert not firing(run(long(edit=primaries({"osd.0": 14, "osd.1": 10, "osd.2": 8})),
                          rule(SPREAD)), SPREAD)
    # 24 of 32 happens by chance about once in 190,000 pools: that is a finding.
    (f,) = firing(run(long(edit=primaries({"osd.0": 24, "osd.1": 4, "osd.2": 4})),
                      rule(SPREAD)), SPREAD)
    assert "chance alone does that in 1 pool in" in f.summary


def test_the_compat_raise_lists_the_clients_and_warns_of_later_kernel_clients() -> None:
    skew = {"osd.0": 24, "osd.1": 4, "osd.2": 4}
    reef = {"version": "18.2.7", "release": "reef"}
    # Unknown clients: no raise at all, and how to find them.
    (f,) = firing(run(long(edit=primaries(skew, **reef)), rule(SPREAD)), SPREAD)
    text = " ".join(f.procedure)
    assert "set-require-min-compat-client" not in text and "ceph features" in text
    # A luminous client (kernel clients report so) connected: do not raise.
    (f,) = firing(run(long(edit=primaries(skew, clients={"luminous": 2, "reef": 3}, **reef)),
                      rule(SPREAD)), SPREAD)
    assert "2 x luminous, 3 x reef" in f.procedure[0] and "do NOT raise" in f.procedure[0]
    assert "set-require-min-compat-client" not in f.procedure[0]
    # Only Reef clients now: the raise, with the warning about later kernel clients.
    (f,) = firing(run(long(edit=primaries(skew, clients={"reef": 3}, **reef)), rule(SPREAD)),
                  SPREAD)
    assert "3 x reef" in f.procedure[0] and "connect LATER will be refused" in f.procedure[0]
    assert "set-require-min-compat-client reef" in f.procedure[0]


def test_reef_before_18_2_4_balances_no_primaries() -> None:
    (f,) = firing(run(long(edit=primaries({"osd.0": 24, "osd.1": 4, "osd.2": 4},
                                          version="18.2.2", release="reef",
                                          clients={"reef": 3})), rule(SPREAD)), SPREAD)
    (step,) = f.procedure
    assert "55712" in step and "18.2.4" in step and "set-require" not in step


# ---- 6. stripe unit: 0 is automatic where the release says so; fast-EC pools only --------

STRIPE = "ceph.ec.stripe_unit_small"


def stripe_option(default: str, mon: str | None = None):  # -> edit
    from stormdeck.collectors.model import ConfigOption

    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        opt = ConfigOption(name="osd_pool_erasure_code_stripe_unit", exists=True, runtime=True,
                           default=default, values={"mon": mon} if mon is not None else {})
        return with_cluster(s, config={**s.cluster.config, opt.name: opt})
    return edit


def test_a_stripe_unit_default_of_0_is_automatic_where_the_release_says_so() -> None:
    from tests.unit.test_rules import tentacle_ec
    ec = tentacle_ec("20.2.4", ())
    # PR 64908's release: the option defaults to 0, which gives fast-EC pools 16K.
    assert not firing(run(long("tentacle", both(ec, stripe_option("0"))), rule(STRIPE)),
                      STRIPE)
    # A release whose default is 4096: still small, and no 16K forced as the default.
    (f,) = firing(run(long("tentacle", both(ec, stripe_option("4096"))), rule(STRIPE)),
                  STRIPE)
    assert "osd_pool_erasure_code_stripe_unit 16384" not in " ".join(f.procedure)
    assert "every new EC pool, fast EC or not" in f.procedure[1]


def test_no_16k_for_pools_that_will_not_run_fast_ec() -> None:
    from tests.unit.test_rules import tentacle_ec
    for pool in ({"ec_technique": "cauchy_good"}, {"ec_plugin": "clay", "ec_technique": None},
                 {"name": "default.rgw.buckets.data", "applications": ("rgw",)}):
        edit = both(tentacle_ec("20.2.4", (), **pool), stripe_option("4096"))
        assert not firing(run(long("tentacle", edit), rule(STRIPE)), STRIPE), pool


def test_the_copied_profile_keeps_crush_root_and_every_other_key() -> None:
    from tests.unit.test_rules import tentacle_ec
    profile = {"k": "4", "m": "2", "plugin": "jerasure", "technique": "reed_sol_van",
               "crush-root": "ssd-root", "crush-failure-domain": "host",
               "crush-device-class": "", "crush-num-failure-domains": "3",
               "jerasure-per-chunk-alignment": "false", "w": "8", "stripe_unit": "4096"}
    edit = both(tentacle_ec("20.2.4", (), ec_profile_settings=profile), stripe_option("4096"))
    (f,) = firing(run(long("tentacle", edit), rule(STRIPE)), STRIPE)
    assert ("ceph osd erasure-code-profile set k4m2-su16k k=4 m=2 plugin=jerasure "
            "technique=reed_sol_van crush-failure-domain=host crush-num-failure-domains=3 "
            "crush-root=ssd-root jerasure-per-chunk-alignment=false w=8 stripe_unit=16K"
            ) in f.procedure[0]


# ---- 5. pg_num: PGs per OSD under the limit, the autoscaler's target, validate rounds up --

PG = "ceph.pool.pg_not_power_of_two"


def bench_pool(**changes: object):  # -> edit
    from tests.unit.test_rules import pool_edit
    return pool_edit(**changes)


def test_no_split_beyond_mon_max_pg_per_osd() -> None:
    from tests.unit.test_rules import with_option
    # lab-bench 100 -> 128 on 3 OSDs, one copy: (1 + 64 + 128) / 3 = 64 PGs per OSD.
    split = bench_pool(pg_num=100, pg_num_target=100)
    (f,) = firing(run(long(edit=split), rule(PG)), PG)
    assert [c.proposed for c in f.changes] == ["128"]
    tight = both(split, with_option("mon_max_pg_per_osd", "250", {"global": "60"}))
    (f,) = firing(run(long(edit=tight), rule(PG)), PG)
    assert f.changes == ()
    assert any("64 PG copies on the average OSD, beyond mon_max_pg_per_osd 60" in p
               for p in f.procedure)


def test_the_autoscalers_target_is_read() -> None:
    # The autoscaler (warn mode) wants 64: rounding up to 128 would fight it.
    low = bench_pool(pg_num=100, pg_num_target=100, autoscale_mode="warn", autoscale_target=64)
    (f,) = firing(run(long(edit=low), rule(PG)), PG)
    assert f.changes == () and any("autoscaler's target" in p and "64" in p
                                   for p in f.procedure)
    high = bench_pool(pg_num=100, pg_num_target=100, autoscale_mode="warn",
                      autoscale_target=256)
    (f,) = firing(run(long(edit=high), rule(PG)), PG)
    assert [c.proposed for c in f.changes] == ["256"]
    # With the autoscaler off, the operator chose the count: its figure is not pressed.
    off = bench_pool(pg_num=100, pg_num_target=100, autoscale_mode="off", autoscale_target=64)
    (f,) = firing(run(long(edit=off), rule(PG)), PG)
    assert [c.proposed for c in f.changes] == ["128"]


def test_validate_rounds_pg_num_up_never_to_a_merge() -> None:
    # 90 is nearer 64, but going there merges PGs: validate says 128, as the rule does.
    v = judge.pg_num("rbd", 90)
    assert v.verdict == judge.WARN and "use 128" in v.summary and "use 64" not in v.summary
