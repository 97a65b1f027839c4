"""Every rule fires on a bad case and stays silent on a healthy one.

Ceph cases are the lab's captured snapshot (tests/captured.py) edited into the
bad shape; Curve cases come from the real Curve source polling tests/curve_wire.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.advisors.findings import Severity
from stormdeck.advisors.knowledge import cited
from stormdeck.advisors.rules import ALL
from stormdeck.advisors.settings import load_settings
from stormdeck.advisors.validated import ValidatedStore
from stormdeck.collectors.curve.source import CurveSource
from stormdeck.collectors.hub import merge
from stormdeck.collectors.model import (
    ConfigOption,
    Disk,
    Host,
    MgrState,
    Pool,
    RunningValue,
    Snapshot,
    SourceHealth,
)
from tests.capture_release import STATIC
from tests.captured import (
    CannedCeph,
    firing,
    history,
    lab_snapshot,
    run,
    with_cluster,
    with_config,
    with_daemon,
)
from tests.conftest import DATA
from tests.curve_wire import CurveWire
from tests.unit.test_mclock import recovery_hurts
from tests.unit.test_rules2 import CASES as RULES2_CASES
from tests.validated_cases import CEPHADM_UNIT, fio_found, recorded_curves

History = list[Snapshot]


# ---- Ceph cases from the lab capture --------------------------------------------------

def long(edit: Callable[[Snapshot, int], Snapshot] | None = None) -> History:
    # 400 s: past the longest warm-up plus for_seconds (5 samples + 300 s).
    return history(41, step=10.0, edit=edit)


def beyond_knee(s: Snapshot, i: int) -> Snapshot:
    # A cpuset of 16 someone gave it; its peak (2.5-4.5) stays under half, never throttled.
    return with_daemon(s, "osd.0", cores_allowed=16.0, cores_used=2.5 + (i % 3),
                       cpu_limit_explicit=True, cpu_throttled=0.0)


def throttled(s: Snapshot, i: int) -> Snapshot:
    return with_daemon(s, "osd.0", cores_allowed=1.5, cores_used=1.45, cpu_limit_explicit=True,
                       cpu_throttled=0.4, cpu_throttled_time=0.3, unit=CEPHADM_UNIT)


def not_throttled(s: Snapshot, i: int) -> Snapshot:
    return with_daemon(s, "osd.0", cores_allowed=1.5, cores_used=0.4, cpu_limit_explicit=True,
                       cpu_throttled=0.0, cpu_throttled_time=0.0, unit=CEPHADM_UNIT)


def pinned(s: Snapshot, cores: float = 2.0) -> Snapshot:
    for osd in ("osd.0", "osd.1", "osd.2"):
        s = with_daemon(s, osd, cores_allowed=cores, cpu_limit_explicit=True)
    return s


def busy_reads(s: Snapshot, i: int) -> Snapshot:
    # 60,000 4K reads on 3 x 2 pinned cores: 10,000 per core, beyond K1.4's 8,500.
    return with_cluster(pinned(s), client_read_iops=60000.0, client_read_bps=60000.0 * 4096)


def beyond_validated(s: Snapshot, i: int) -> Snapshot:
    # 3,500 4K writes against the 4,142 the recorded write curve reached: 85%.
    return with_cluster(s, client_write_iops=3500.0, client_write_bps=3500.0 * 4096)


def starved(s: Snapshot, i: int) -> Snapshot:
    return with_daemon(s, "osd.0", cores_allowed=1.0, cores_used=0.97)


def busy_cluster(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, client_write_iops=30000.0, client_write_bps=30000.0 * 4096)


def ssd_one_core(s: Snapshot, i: int) -> Snapshot:
    return with_daemon(s, "osd.0", device_class="ssd", cores_allowed=1.0)


def slow_osd(s: Snapshot, i: int) -> Snapshot:
    return with_daemon(s, "osd.1", commit_latency=0.060, apply_latency=0.060)


def primaries_skewed(s: Snapshot, i: int) -> Snapshot:
    # lab-bench as a 3-replica pool: every OSD holds all 32 PGs, so each should lead ~10.7;
    # osd.0 leads 24.
    return pool_edit(size=3, pgs_by_osd={"osd.0": 32, "osd.1": 32, "osd.2": 32},
                     primaries={"osd.0": 24, "osd.1": 4, "osd.2": 4})(s, i)


def primaries_by_affinity(s: Snapshot, i: int) -> Snapshot:
    # The same pool with osd.1 and osd.2 at primary affinity 0.2: leading 24 of 32 is
    # osd.0's fair share now (Ceph's calc_desired_primary_distribution: 32 x 1/1.4 = 22.9).
    s = primaries_skewed(s, i)
    return with_cluster(s, primary_affinity={"osd.1": 0.2, "osd.2": 0.2})


def storm(s: Snapshot, i: int) -> Snapshot:
    # The PG counts `ceph pg stat` gave during a real `lab storm` (tests/data).
    states = {"unknown": 64, "active+clean": 1, "active+clean+scrubbing": 0}
    return with_cluster(s, num_pgs=65, pg_states=states,
                        pg_flags={"unknown": 64, "active": 1, "clean": 1, "scrubbing": 3})


def mgr_blind(s: Snapshot, i: int) -> Snapshot:
    # From the 20th sample on, every PG unknown: what `ceph status` showed on each
    # release's lab after a mgr failover no OSD reported to (tests/data/*/mgr_failover).
    if i < 20:
        return s
    n = s.cluster.num_pgs if s.cluster is not None and s.cluster.num_pgs else 33
    return with_cluster(s, num_pgs=n, pg_states={"unknown": n}, pg_flags={"unknown": n})


def mgr_down(s: Snapshot, i: int) -> Snapshot:
    # From the 30th sample on, the mgr map has no active mgr (tests/data/pacific/mgr_down):
    # the only mgr, x, dropped by the mons at sample 30; its last answer the sample before.
    if i < 30:
        return s
    return with_cluster(s, mgr=MgrState(active="x", available=False, standbys=0,
                                        down_since=s.time - (i - 30) * 10.0,
                                        answered_at=s.time - (i - 29) * 10.0))


def flapping(s: Snapshot, i: int) -> Snapshot:
    return with_daemon(s, "osd.1", up=i not in (34, 38)) if i > 30 else s


def three_copies(s: Snapshot, i: int) -> Snapshot:
    """Every pool at size 3, min_size 2: one OSD down leaves every PG active."""
    assert s.cluster is not None
    return with_cluster(s, pools=tuple(replace(p, size=3, min_size=2) for p in s.cluster.pools))


def slow_ops(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, slow_ops=12, slow_ops_daemons=("osd.1",))


def scrubs(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, pg_states={"active+clean": 30, "active+clean+scrubbing+deep": 3})


def scrub_sleep_set(s: Snapshot, i: int) -> Snapshot:
    return with_config(s, "osd_scrub_sleep", "osd", "0.1")


def tentacle(edit: Callable[[Snapshot, int], Snapshot]) -> History:
    return history(41, step=10.0, edit=edit, base=lab_snapshot(release="tentacle"))


def many_osds(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, num_osds=600)


def pool_edit(**changes: object) -> Callable[[Snapshot, int], Snapshot]:
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        pools = tuple(replace(p, **changes) if p.name == "lab-bench" else p
                      for p in s.cluster.pools)
        return with_cluster(s, pools=pools)
    return edit


def tentacle_ec(version: str, flags: tuple[str, ...], stripe: int = 4096, **pool: object):
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        fields: dict = {"ec_plugin": "isa", "ec_technique": "reed_sol_van",
                        "ec_failure_domain": "osd", "applications": ("rbd",), **pool}
        ec = Pool(id=9, name=str(fields.pop("name", "ecpool")), type="erasure", size=6,
                  min_size=5, pg_num=32, ec_profile="k4m2", ec_k=4,
                  ec_m=int(fields.pop("m", 2)), stripe_unit=stripe,
                  flags=("hashpspool", "ec_overwrites", *flags), **fields)
        return with_cluster(s, version=version, release="tentacle",
                            pools=(*s.cluster.pools, ec))
    return edit


def with_option(name: str, default: str, values: dict[str, str] | None = None
                ) -> Callable[[Snapshot, int], Snapshot]:
    """An option as Tentacle's `config help` describes it, set as `values` say."""
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        opt = ConfigOption(name=name, exists=True, runtime=True, default=default,
                           values=values or {})
        return with_cluster(s, config={**s.cluster.config, name: opt})
    return edit


def both(*edits: Callable[[Snapshot, int], Snapshot]) -> Callable[[Snapshot, int], Snapshot]:
    def edit(s: Snapshot, i: int) -> Snapshot:
        for e in edits:
            s = e(s, i)
        return s
    return edit


def sata_disk(cache: str, rotational: bool = False) -> Callable[[Snapshot, int], Snapshot]:
    def edit(s: Snapshot, i: int) -> Snapshot:
        disk = Disk(host="vm", name="sdb", util=0.3, rotational=rotational, write_cache=cache,
                    model="ATA Micron_5300" if not rotational else "ATA ST14000NM001G",
                    transport="sata", daemons=("osd.0",))
        return replace(s, disks={**s.disks, disk.key: disk})
    return edit


def ssd_saturated(s: Snapshot, i: int) -> Snapshot:
    """An SSD with 40 requests queued, each waiting 12 ms, its host's CPUs full."""
    disk = Disk(host="vm", name="sdc", util=1.0, rotational=False, read_iops=1000.0,
                write_iops=3000.0, read_await=0.008, write_await=0.0133, queue_depth=40.0,
                transport="sata", daemons=("osd.0",))
    return replace(s, disks={**s.disks, disk.key: disk},
                   hosts={"vm": replace(s.hosts["vm"], cpu_busy=0.97)})


def ssd_busy_not_saturated(s: Snapshot, i: int) -> Snapshot:
    """%util 100% on an SSD that serves many requests at once, each in 0.3 ms: not its
    limit (iostat's %util says nothing of a device that works in parallel)."""
    disk = Disk(host="vm", name="sdc", util=1.0, rotational=False, read_iops=20000.0,
                write_iops=5000.0, read_await=0.0003, write_await=0.0003, queue_depth=7.5,
                transport="sata", daemons=("osd.0",))
    return replace(s, disks={**s.disks, disk.key: disk},
                   hosts={"vm": replace(s.hosts["vm"], cpu_busy=0.97)})


def at_limit(s: Snapshot, i: int) -> Snapshot:
    """Each disk with daemons 99% busy with 8 requests queued, each waiting 80 ms."""
    disks = {k: replace(d, util=0.99, queue_depth=8.0, read_await=0.080, write_await=0.080)
             if d.daemons else d for k, d in s.disks.items()}
    return replace(s, disks=disks)


def tuned(profile: str) -> Callable[[Snapshot, int], Snapshot]:
    def edit(s: Snapshot, i: int) -> Snapshot:
        return replace(s, hosts={"vm": replace(s.hosts["vm"], tuned_profile=profile)})
    return edit


def secure(s: Snapshot, i: int) -> Snapshot:
    return with_config(s, "ms_cluster_mode", "global", "secure crc")


def small_map_cache(s: Snapshot, i: int) -> Snapshot:
    return with_config(s, "osd_map_cache_size", "osd", "40")


def at(version: str, release: str) -> Callable[[Snapshot, int], Snapshot]:
    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(s, version=version, release=release)
    return edit


# ---- Curve cases from the wire ---------------------------------------------------------

def curve_history(polls: int = 6, step: float = 10.0, **wire: object) -> History:
    flapping = bool(wire.pop("flapping", False))
    cs_edit = wire.pop("cs_edit", None)
    with CurveWire(**wire) as w:  # type: ignore[arg-type]
        if cs_edit:
            cs_edit(w.chunkservers[0])  # type: ignore[operator]
        src = CurveSource(mds=[m.addr for m in w.mds], chunkservers=list(w.addrs()))
        src.RAFT_EVERY = 0
        w.flapping = flapping
        out = []
        for i in range(polls):
            part = src.poll()
            t = 1_800_000_000.0 + i * step
            out.append(merge([part], {"curve": SourceHealth("curve", True, t)}, now=t))
    return out


def slow_append(cs) -> None:
    cs.append_lat_us = 9000


def slow_send(cs) -> None:
    cs.send_lat_us = 9500


def saturated(cs) -> None:
    cs.bthread_usage = 17.5


def ceph_warns(s: Snapshot, i: int) -> Snapshot:
    # Ceph's own check (tests/data/pacific/health_detail_storm.json: osd.2 down).
    from stormdeck.collectors.ceph.parse import parse_health
    checks = parse_health(json.loads((DATA / "pacific" / "health_detail_storm.json")
                                     .read_text()))[0]
    return with_cluster(s, health="HEALTH_WARN", checks=checks)


def stale_pgs(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, num_pgs=65, pg_states={"active+clean": 56, "stale+active+clean": 9})


def unfound(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, num_pgs=65, pg_states={"active+clean": 64,
                                                  "active+recovery_unfound+degraded": 1})


def nearfull(s: Snapshot, i: int) -> Snapshot:
    s = with_cluster(s, nearfull_ratio=0.85, backfillfull_ratio=0.90, full_ratio=0.95)
    return with_daemon(s, "osd.0", utilization=0.87)


def pool_growing(s: Snapshot, i: int) -> Snapshot:
    # 0.01 points a minute: 95% within 5 days many times over.
    return pool_edit(used_ratio=0.40 + 0.0001 * 10 * i, stored_bytes=10 ** 9)(s, i)


def noout(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, osd_flags=("noout",))


def many_pgs(s: Snapshot, i: int) -> Snapshot:
    return with_daemon(s, "osd.1", pgs=240)


def oom_prone(s: Snapshot, i: int) -> Snapshot:
    # Three OSDs of the default 4 GiB target on a host of 8 GiB.
    host = next(iter(s.hosts))
    return replace(s, hosts={**s.hosts, host: replace(s.hosts[host], mem_total=8 << 30)})


def running(value: str, source: str, *overrides: tuple[str, str]) -> Callable[
        [Snapshot, int], Snapshot]:
    """Every OSD reported (`config show`) running osd_memory_target `value` from `source`."""
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        opt = s.cluster.config["osd_memory_target"]
        ran = {d: RunningValue(value, source, tuple(overrides), read_at=0.0)
               for d in s.daemons if d.startswith("osd.")}
        return with_cluster(s, running_read=frozenset(ran), config={
            **s.cluster.config, "osd_memory_target": replace(opt, running=ran)})
    return edit


def bench_forgotten(s: Snapshot, i: int) -> Snapshot:
    # The Tentacle lab's cluster log, its boot bench lines gone from the tail.
    assert s.cluster is not None
    return with_cluster(s, log=tuple(e for e in s.cluster.log if "OSD bench" not in e.message))


def nic_errors(rate: int):
    def edit(s: Snapshot, i: int) -> Snapshot:
        from stormdeck.collectors.model import Nic
        host = next(iter(s.hosts))
        nic = Nic("eth0", errin=rate * i, dropin=1000 + i, mtu=9000, up=True)
        return replace(s, hosts={**s.hosts, host: replace(s.hosts[host], nics={"eth0": nic})})
    return edit


CASES: dict[str, tuple[Callable[[], History], Callable[[], History], Severity]] = {
    "host.nic_errors": (lambda: long(nic_errors(3)), lambda: long(nic_errors(0)),
                        Severity.WARNING),
    "ceph.mclock.capacity": (lambda: tentacle(lambda s, i: s),
                             lambda: tentacle(bench_forgotten), Severity.INFO),
    "ceph.osd.memory": (lambda: long(oom_prone), long, Severity.CRITICAL),
    "ceph.config.running_differs": (
        lambda: long(running("10737418240", "override", ("file", "939524096"))),
        lambda: long(running("939524096", "file")), Severity.INFO),
    "ceph.pool.min_size": (lambda: long(pool_edit(size=2, min_size=1)),
                           lambda: long(pool_edit(size=2, min_size=2)), Severity.WARNING),
    "ceph.osd.pgs_per_osd": (lambda: long(many_pgs),
                             lambda: long(lambda s, i: with_daemon(s, "osd.1", pgs=200)),
                             Severity.WARNING),
    "ceph.osd.fullness": (lambda: long(nearfull),
                          lambda: long(lambda s, i: with_daemon(s, "osd.0", utilization=0.80)),
                          Severity.WARNING),
    "ceph.pool.fullness": (lambda: long(pool_growing), lambda: long(pool_edit(used_ratio=0.4)),
                           Severity.WARNING),
    "ceph.flags.left_set": (lambda: long(noout), long, Severity.WARNING),
    "ceph.health.check": (lambda: long(ceph_warns), long, Severity.WARNING),
    "ceph.pgs.inactive": (lambda: long(stale_pgs), long, Severity.CRITICAL),
    "ceph.pgs.unfound": (lambda: long(unfound), long, Severity.CRITICAL),
    "ceph.osd.cores_beyond_knee": (lambda: long(beyond_knee), long, Severity.INFO),
    "ceph.osd.cores_starved": (lambda: long(starved), long, Severity.WARNING),
    "ceph.osd.cpu_throttled": (lambda: long(throttled), lambda: long(not_throttled),
                               Severity.WARNING),
    "ceph.osd.iops_per_core": (lambda: long(busy_reads), lambda: long(lambda s, i: pinned(s)),
                               Severity.INFO),
    "ceph.cluster.load_vs_validated": (lambda: long(beyond_validated), long, Severity.WARNING),
    "ceph.osd.op_threads_vs_cores": (lambda: long(ssd_one_core), long, Severity.INFO),
    "ceph.osd.slowest": (lambda: long(slow_osd), long, Severity.WARNING),
    "ceph.primary.spread": (lambda: long(primaries_skewed),
                            lambda: long(primaries_by_affinity), Severity.WARNING),
    "ceph.peering.storm": (lambda: long(storm), long, Severity.CRITICAL),
    "ceph.mgr.no_pg_stats": (lambda: long(mgr_blind), lambda: long(storm), Severity.WARNING),
    "ceph.mgr.down": (lambda: long(mgr_down), long, Severity.WARNING),
    "ceph.osd.flapping": (lambda: long(both(flapping, three_copies)), long, Severity.WARNING),
    "ceph.slow_ops": (lambda: long(slow_ops), long, Severity.WARNING),
    "ceph.scrub.during_load": (lambda: long(scrubs), lambda: long(both(scrubs, scrub_sleep_set)),
                               Severity.INFO),
    "ceph.osdmap.cache": (lambda: long(small_map_cache), long, Severity.WARNING),
    "ceph.mclock.background_vs_clients": (  # Tentacle's capture: more in test_mclock.py
        lambda: tentacle(recovery_hurts(0.025)), lambda: tentacle(recovery_hurts(0.0025)),
        Severity.WARNING),
    "ceph.pool.pg_not_power_of_two": (lambda: long(pool_edit(pg_num=100, pg_num_target=100)),
                                      lambda: long(pool_edit(pg_num=100, pg_num_target=100,
                                                             autoscale_mode="on")),
                                      Severity.WARNING),
    "ceph.ec.fast_ec_off": (lambda: long(tentacle_ec("20.2.1", ())),
                            lambda: long(tentacle_ec("20.2.1", (), ec_technique="cauchy_good")),
                            Severity.INFO),
    "ceph.ec.fast_ec_default": (
        lambda: long(both(tentacle_ec("20.2.4", ()), with_option(
            "osd_pool_default_flag_ec_optimizations", "false"))),
        lambda: long(both(tentacle_ec("20.2.4", ()), with_option(
            "osd_pool_default_flag_ec_optimizations", "false", {"global": "true"}))),
        Severity.INFO),
    "ceph.ec.stripe_unit_small": (lambda: long(tentacle_ec("20.2.1", ("ec_optimizations",))),
                                  lambda: long(both(
                                      tentacle_ec("20.2.1", ("ec_optimizations",)),
                                      with_option("osd_pool_erasure_code_stripe_unit", "4096",
                                                  {"mon": "16384"}))), Severity.INFO),
    "ceph.ec.single_parity": (lambda: long(tentacle_ec("20.2.4", (), m=1)),
                              lambda: long(tentacle_ec("20.2.4", ())), Severity.WARNING),
    "ceph.release.advisory": (long, lambda: long(at("20.2.4", "tentacle")), Severity.INFO),
    # A rotational disk fio found paying for its cache: a warning, with the change.
    "disk.write_cache_on": (lambda: long(sata_disk("write back", rotational=True)),
                            lambda: long(sata_disk("write through", rotational=True)),
                            Severity.WARNING),
    "disk.at_hardware_limit": (lambda: long(at_limit), long, Severity.INFO),
    "host.tuned_profile": (lambda: long(tuned("balanced")),
                           lambda: long(tuned("latency-performance")), Severity.INFO),
    "ceph.msgr.secure_mode": (lambda: long(secure), long, Severity.INFO),
    "curve.leaders.spread": (lambda: curve_history(leaders=[24, 18, 16, 16, 14, 12]),
                             curve_history, Severity.WARNING),
    "curve.leaders.flapping": (lambda: curve_history(polls=8, flapping=True), curve_history,
                               Severity.WARNING),
    "curve.bthread.saturated": (lambda: curve_history(cs_edit=saturated), curve_history,
                                Severity.WARNING),
    "curve.raft.append_latency": (lambda: curve_history(cs_edit=slow_append), curve_history,
                                  Severity.WARNING),
    "curve.raft.network": (lambda: curve_history(cs_edit=slow_send), curve_history,
                           Severity.WARNING),
}


CASES.update(RULES2_CASES)  # the slow-heartbeat and failing-disk rules


# What `stormdeck validate` measured, for the rules that act on it only.
EVIDENCE: dict[str, Callable[[Path], ValidatedStore]] = {
    "ceph.cluster.load_vs_validated": lambda tmp: recorded_curves(tmp),
    "disk.write_cache_on": lambda tmp: fio_found(tmp, "vm:/dev/sdb", "fail"),
}


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires_on_the_bad_case(rule_id: str, tmp_path: Path) -> None:
    bad, _, severity = CASES[rule_id]
    store = EVIDENCE[rule_id](tmp_path) if rule_id in EVIDENCE else None
    found = firing(run(bad(), validated=store), rule_id)
    assert found, f"{rule_id} did not fire"
    f = found[0]
    assert f.severity == severity and f.summary and f.evidence
    assert f.source and f.explanation


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_is_silent_on_the_healthy_case(rule_id: str, tmp_path: Path) -> None:
    _, good, _ = CASES[rule_id]
    store = EVIDENCE[rule_id](tmp_path) if rule_id in EVIDENCE else None
    assert not [f for f in run(good(), validated=store) if f.rule == rule_id]


def test_every_rule_has_a_source_an_explanation_and_tests() -> None:
    ids = {r.id for r in ALL}
    assert ids == set(CASES), f"rules without cases: {ids - set(CASES)}"
    assert len(ids) == len(ALL), "rule ids are unique"
    settings = load_settings()
    for r in ALL:
        assert re.match(r"^[a-z]+(\.[a-z_]+)+$", r.id), r.id
        # Which sections, and that they exist with links: tests/unit/test_knowledge.py.
        assert cited(r.source), f"{r.id}: cites no docs/knowledge.md section"
        assert len(r.explanation) > 80, f"{r.id}: explanation too thin"
        assert r.title and r.id in settings


def test_the_healthy_lab_capture_raises_nothing_above_info() -> None:
    findings = run(long())
    assert not [f for f in findings if f.severity > Severity.INFO], findings
    # What is true of the lab under load: no tuned profile, scrubs unthrottled
    # (osd_scrub_sleep 0) while clients write, and Pacific past its end of life.
    assert {f.rule for f in findings} <= {"host.tuned_profile", "ceph.scrub.during_load",
                                          "ceph.release.advisory"}
    (eol,) = [f for f in findings if f.rule == "ceph.release.advisory"]
    assert "16.2.15 (pacific) is past its end of life (2024-03-04)" in eol.summary


# ---- what the findings propose -----------------------------------------------------------

def pg(**changes: object) -> History:
    return long(pool_edit(**changes))


def test_pg_count_rounds_up_to_the_next_power_of_two_from_the_target() -> None:
    (f,) = firing(run(pg(pg_num=100, pg_num_target=100)), "ceph.pool.pg_not_power_of_two")
    (ch,) = f.changes
    assert (ch.proposed, ch.command) == ("128", "ceph osd pool set lab-bench pg_num 128")
    # 90 is nearer 64, but going there would merge PGs: always up.
    (f,) = firing(run(pg(pg_num=90, pg_num_target=90)), "ceph.pool.pg_not_power_of_two")
    assert f.changes[0].proposed == "128" and f.severity == Severity.WARNING
    # Mid-split, pg_num_target is what the pool heads for: 64 -> 100 is judged as 100.
    (f,) = firing(run(pg(pg_num=64, pg_num_target=100)), "ceph.pool.pg_not_power_of_two")
    assert "heading for 100" in f.summary and f.changes[0].proposed == "128"
    # Before is where the pool heads, as apply reads it back (pg_num_target): a plan made
    # mid-split is not stale at once, and the review says where pg_num is now.
    assert f.changes[0].current == "100"
    assert "pg_num is 64 now, on its way to 100" in f.changes[0].note
    # A merge under way toward 96: rounding up to 128 would undo it. Named, not proposed.
    (f,) = firing(run(pg(pg_num=112, pg_num_target=96)), "ceph.pool.pg_not_power_of_two")
    assert not f.changes and any("merging from pg_num 112 toward 96" in p
                                 for p in f.procedure), f
    # Splitting toward a power of two is fine even while pg_num is not one yet.
    assert not firing(run(pg(pg_num=100, pg_num_target=128)), "ceph.pool.pg_not_power_of_two")
    for mode in ("on",):
        assert not firing(run(pg(pg_num=100, pg_num_target=100, autoscale_mode=mode)),
                          "ceph.pool.pg_not_power_of_two")
    assert firing(run(pg(pg_num=100, pg_num_target=100, autoscale_mode="warn")),
                  "ceph.pool.pg_not_power_of_two"), "warn mode leaves pg_num to the operator"


def test_fast_ec_is_a_procedure_with_a_test_pool_first_and_not_offered_on_20_2_0() -> None:
    (f,) = firing(run(long(tentacle_ec("20.2.1", ()))), "ceph.ec.fast_ec_off")
    assert f.changes == (), "an irreversible flag on an existing pool is the operator's step"
    test, real, default = f.procedure
    assert "test pool first" in test and "ecpool-fastec-test" in test and "k4m2" in test
    assert "ceph osd pool set ecpool allow_ec_optimizations true` (IRREVERSIBLE)" in real
    assert "osd_pool_default_flag_ec_optimizations" in default
    (old,) = firing(run(long(tentacle_ec("20.2.0", ()))), "ceph.ec.fast_ec_off")
    assert old.changes == () and "74813" in old.summary
    assert not firing(run(long()), "ceph.ec.fast_ec_off"), "not on Pacific"


@pytest.mark.parametrize(("plugin", "technique", "offered"), [
    ("jerasure", "reed_sol_van", True), ("isa", "reed_sol_van", True), ("isa", None, True),
    ("jerasure", "cauchy_good", False), ("jerasure", "liberation", False),
    ("isa", "cauchy", False), ("clay", None, False), ("lrc", None, False), ("shec", None, False),
])
def test_fast_ec_only_where_the_plugin_supports_it(plugin: str, technique: str | None,
                                                   offered: bool) -> None:
    """FLAG_EC_PLUGIN_OPTIMIZED_SUPPORTED: jerasure and isa with reed_sol_van alone."""
    found = firing(run(long(tentacle_ec("20.2.4", (), ec_plugin=plugin,
                                        ec_technique=technique))), "ceph.ec.fast_ec_off")
    assert bool(found) == offered


def test_fast_ec_leaves_rgw_bucket_data_alone() -> None:
    data = tentacle_ec("20.2.4", (), name="default.rgw.buckets.data", applications=("rgw",))
    assert not firing(run(long(data)), "ceph.ec.fast_ec_off")
    meta = tentacle_ec("20.2.4", (), name="cephfs.data", applications=("cephfs",))
    assert firing(run(long(meta)), "ceph.ec.fast_ec_off")


def test_fast_ec_default_proposes_the_mon_option_and_not_on_20_2_0() -> None:
    opt = with_option("osd_pool_default_flag_ec_optimizations", "false")
    (f,) = firing(run(long(both(tentacle_ec("20.2.4", ()), opt))), "ceph.ec.fast_ec_default")
    (ch,) = f.changes
    assert ch.command == "ceph config set mon osd_pool_default_flag_ec_optimizations true"
    assert ch.reversible
    assert not firing(run(long(both(tentacle_ec("20.2.0", ()), opt))),
                      "ceph.ec.fast_ec_default")
    assert not firing(run(long(both(at("20.2.4", "tentacle"), opt))),
                      "ceph.ec.fast_ec_default"), "no EC pool: nothing to say"


def test_stripe_unit_is_said_once_per_cluster_with_the_old_profile_kept() -> None:
    def two(s: Snapshot, i: int) -> Snapshot:
        s = tentacle_ec("20.2.4", (), ec_plugin="jerasure", ec_technique="reed_sol_van",
                        ec_failure_domain="host", ec_device_class="ssd")(s, i)
        assert s.cluster is not None
        other = replace(s.cluster.pools[-1], id=10, name="ecpool2")
        return with_cluster(s, pools=(*s.cluster.pools, other))

    found = [f for f in run(long(two)) if f.rule == "ceph.ec.stripe_unit_small"]
    (f,) = found
    assert f.target == "cluster" and "ecpool (4 KiB), ecpool2 (4 KiB)" in f.summary
    assert ("ceph osd erasure-code-profile set k4m2-su16k k=4 m=2 plugin=jerasure "
            "technique=reed_sol_van crush-failure-domain=host crush-device-class=ssd "
            "stripe_unit=16K") in f.procedure[0]


def test_osdmap_cache_is_advice_only() -> None:
    (f,) = firing(run(long(many_osds)), "ceph.osdmap.cache")
    assert f.changes == () and f.severity == Severity.INFO
    (step,) = f.procedure
    assert "`ceph config set mon mon_osd_cache_size 300`" in step
    assert "`ceph config set osd osd_map_cache_size 30`" in step
    assert "`ceph config set global osd_map_message_max 20`" in step
    # Pacific has no osd_map_max_advance (its config help says ENOENT).
    assert "osd_map_max_advance" not in step
    (small,) = firing(run(long(small_map_cache)), "ceph.osdmap.cache")
    assert small.target == "osd_map_cache_size" and small.changes == ()
    assert "osd_map_cache_size 40 is not above osd_pg_epoch_persisted_max_stale 40" in \
        small.summary


def test_storm_is_not_judged_while_the_mgr_knows_no_pg() -> None:
    def failover(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(s, num_pgs=97, pg_states={"unknown": 97},
                            pg_flags={"unknown": 97})

    assert not [f for f in run(long(failover)) if f.rule == "ceph.peering.storm"]
    assert len(firing(run(long(storm)), "ceph.peering.storm")) == 1  # 64 unknown + 1 active


def test_flapping_proposes_noup_for_that_osd_alone() -> None:
    # 3 copies, min_size 2: held down, osd.1 leaves every PG active.
    (f,) = firing(run(long(both(flapping, three_copies))), "ceph.osd.flapping")
    ch, noout = f.changes
    assert (ch.kind, ch.target, ch.key, ch.proposed) == ("osd_flag", "osd.1", "noup", "set")
    assert noout.command == "ceph osd set-group noout osd.1"
    assert ch.command == "ceph osd set-group noup osd.1"
    assert "ceph osd unset-group noup osd.1" in ch.note
    from stormdeck.advisors.actuators.table import actuator
    assert actuator("osd_flag").inverse_command(ch, "unset") == \
        "ceph osd unset-group noup osd.1"
    assert actuator("osd_flag").inverse_command(
        replace(ch, target="cluster", key="noscrub"), "unset") == "ceph osd unset noscrub"


def test_secure_mode_is_judged_where_each_mode_is_read() -> None:
    def client_only(s: Snapshot, i: int) -> Snapshot:
        return with_config(s, "ms_client_mode", "client", "secure")

    (f,) = firing(run(long(client_only)), "ceph.msgr.secure_mode")
    assert f.target == "ms_client_mode client"
    # ms_client_mode set for osds is not what clients read: nothing to say.
    def misplaced(s: Snapshot, i: int) -> Snapshot:
        return with_config(s, "ms_client_mode", "osd", "secure")

    assert not firing(run(long(misplaced)), "ceph.msgr.secure_mode")
    def one_osd(s: Snapshot, i: int) -> Snapshot:
        return with_config(s, "ms_cluster_mode", "osd.2", "secure crc")

    (f,) = firing(run(long(one_osd)), "ceph.msgr.secure_mode")
    assert f.target == "ms_cluster_mode osd.2"
    targets = {f.target for f in firing(run(long(secure)), "ceph.msgr.secure_mode")}
    assert targets == {"ms_cluster_mode osd", "ms_cluster_mode mon"}


def test_primary_spread_judges_each_pool_and_skips_small_ones() -> None:
    (f,) = firing(run(long(primaries_skewed)), "ceph.primary.spread")
    assert f.target == "pool lab-bench" and "osd.0 is primary for 24" in f.summary
    assert "fair share of 10.7" in f.summary
    # Pacific: no read balancer, and nothing about require_min_compat_client.
    assert "no read balancer" in f.procedure[0]

    def reef(required: str, clients: dict[str, int] | None = None
             ) -> Callable[[Snapshot, int], Snapshot]:
        return both(primaries_skewed, at("18.2.7", "reef"),
                    lambda s, i: with_cluster(s, require_min_compat_client=required,
                                              client_releases=clients or {}))

    # Clients connected now unknown: no raise proposed (more in test_rule_harms.py).
    (f,) = firing(run(long(reef("luminous"))), "ceph.primary.spread")
    assert "set-require-min-compat-client" not in " ".join(f.procedure)
    (f,) = firing(run(long(reef("luminous", {"reef": 2}))), "ceph.primary.spread")
    assert "set-require-min-compat-client reef" in f.procedure[0]
    assert "osdmaptool om --read out.txt --read-pool lab-bench" in f.procedure[1]
    (f,) = firing(run(long(reef("squid"))), "ceph.primary.spread")
    assert "already squid" in f.procedure[0] and "set-require" not in f.procedure[0]


@pytest.mark.parametrize(("name", "transport", "command"), [
    ("sdb", "sata", "hdparm -W 0 /dev/sdb"),
    ("sdc", "sas", "sdparm --clear WCE --save /dev/sdc"),
    ("nvme1n1", "nvme", "nvme set-feature /dev/nvme1 -f 6 -v 0 -s"),
])
def test_write_cache_change_fits_the_transport(name: str, transport: str, command: str,
                                               tmp_path: Path) -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        disk = Disk(host="vm", name=name, write_cache="write back", transport=transport,
                    daemons=("osd.0",))
        return replace(s, disks={**s.disks, disk.key: disk})

    store = fio_found(tmp_path, f"vm:/dev/{name}", "fail")
    (f,) = firing(run(history(2, edit=edit), validated=store), "disk.write_cache_on")
    assert f.changes[0].command == command
    assert "/sys/block" not in f.changes[0].command
    assert any("fio" in step for step in f.procedure)


def test_write_cache_on_a_virtual_disk_is_never_a_target() -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        disks = {k: replace(d, write_cache="write back") for k, d in s.disks.items()}
        return replace(s, disks=disks)

    assert not firing(run(history(2, edit=edit)), "disk.write_cache_on")


def test_scrub_change_proposes_the_report_values() -> None:
    assert not firing(run(long()), "ceph.scrub.during_load"), "no scrub runs: nothing to say"
    (f,) = firing(run(long(scrubs)), "ceph.scrub.during_load")
    assert [(c.key, c.current, c.proposed) for c in f.changes] == \
        [("osd_scrub_sleep", "0", "0.1")]
    assert f.changes[0].command == "ceph config set osd osd_scrub_sleep 0.1"
    assert f.changes[0].runtime is True
    # Under mClock, and osd_scrub_load_threshold at all: tests/unit/test_mclock.py.


def test_storm_triage_pauses_scrubs_with_a_reminder() -> None:
    (f,) = firing(run(long(storm)), "ceph.peering.storm")
    flags = {c.key: c for c in f.changes}
    assert set(flags) == {"noscrub", "nodeep-scrub"}
    assert "ceph osd unset noscrub" in flags["noscrub"].note
    assert "64 of 65 PGs not active" in f.summary


def test_leader_spread_proposes_the_leader_schedule() -> None:
    (f,) = firing(run(curve_history(leaders=[24, 18, 16, 16, 14, 12])), "curve.leaders.spread")
    (ch,) = f.changes
    assert ch.kind == "curve_leader_schedule" and ch.command.startswith(
        "curve_ops_tool rapid-leader-schedule")
    assert "leadernum range 12" in f.summary


def test_flapping_advice_marks_the_timeout_change_not_for_production() -> None:
    (f,) = firing(run(curve_history(polls=8, flapping=True)), "curve.leaders.flapping")
    assert f.changes == ()
    assert any("NOT FOR PRODUCTION" in step for step in f.procedure)


def test_tuned_without_tuned_installed_says_how() -> None:
    (f,) = firing(run(long()), "host.tuned_profile")
    assert f.changes == () and "apt-get install tuned" in f.procedure[0]
    (f,) = firing(run(long(tuned("balanced"))), "host.tuned_profile")
    assert f.changes[0].command == "tuned-adm profile latency-performance"
    assert "tuned-adm profile balanced" in f.changes[0].note


def test_host_unknown_disk_missing_and_no_cluster_are_not_errors() -> None:
    def strip(s: Snapshot, i: int) -> Snapshot:
        return replace(s, cluster=None, disks={}, hosts={"vm": Host(name="vm")})

    run(history(3, edit=strip))  # run() asserts no rule raised


# ---- on the captures of the newer releases --------------------------------------------


def release_history(release: str) -> History:
    """The release's lab capture (tests/data/<release>, quiet) through the real CephSource."""
    names = {"status": "status.json", "health": "health_detail.json",
             "osd perf": "osd_perf.json", "osd status": "osd_status_table.txt",
             "osd df": "osd_df.json", "osd dump": "osd_dump.json",
             "pg dump": "pg_dump_pgs_brief.json", "osd pool ls": "osd_pool_ls_detail.json",
             "config dump": "config_dump.json", "osd metadata": "osd_metadata.json",
             "versions": "versions.json", "log last": "log_last.json",
             "config log": "config_log.json", "mgr dump": "mgr_dump.json", "df": "df.json",
             **STATIC}
    outputs = {k: (DATA / release / v).read_bytes() for k, v in names.items()}
    helps = json.loads((DATA / release / "config_help_watched.json").read_text())
    part = CannedCeph(outputs, helps).poll()
    assert not part.errors, part.errors
    snap = merge([part], {"ceph": SourceHealth("ceph", True, 1_800_000_000.0)},
                 now=1_800_000_000.0)
    return history(41, step=10.0, base=snap)


@pytest.mark.parametrize("release", ["reef", "tentacle"])
def test_the_one_pg_mgr_pool_is_not_a_primary_imbalance(release: str) -> None:
    """Reef and Tentacle score the 1-PG .mgr pool 3.03 on three OSDs: it cannot do better."""
    snaps = release_history(release)
    assert snaps[-1].cluster is not None
    mgr = next(p for p in snaps[-1].cluster.pools if p.name == ".mgr")
    assert mgr.read_balance_score is not None and mgr.read_balance_score > 3
    assert snaps[-1].cluster.require_min_compat_client == "luminous"
    found = run(snaps)
    assert not [f for f in found if f.rule == "ceph.primary.spread"]
    # The same capture with lab-bench made a skewed 3-replica pool does fire, and on
    # these releases the procedure raises require_min_compat_client first.
    (f,) = firing(run([primaries_skewed(s, i) for i, s in enumerate(snaps)]),
                  "ceph.primary.spread")
    assert "require_min_compat_client is luminous" in f.procedure[0]
    rules = {f.rule for f in found if f.state == "firing"}
    if release == "reef":
        assert "ceph.release.advisory" in rules  # archived since 2026-03-20
    else:
        assert "ceph.release.advisory" not in rules


def test_tentacle_capture_reads_its_ec_profile_and_pool_targets() -> None:
    snaps = release_history("tentacle")
    c = snaps[-1].cluster
    assert c is not None and c.version == "20.2.4"
    bench = next(p for p in c.pools if p.name == "lab-bench")
    assert (bench.pg_num_target, bench.autoscale_mode) == (32, "off")
    assert bench.pgs_by_osd == {"osd.0": 12, "osd.1": 11, "osd.2": 9} == dict(bench.primaries)


@pytest.mark.parametrize("release", ["pacific", "reef", "tentacle"])
def test_storm_is_not_judged_on_a_real_mgr_failover_capture(release: str) -> None:
    # What CephSource read on each release's lab after a mgr failover no OSD had
    # reported to (tests/data/<release>/mgr_failover, made by test_mgr_failover_lab).
    from stormdeck.advisors.rules.peering import mgr_blind
    from stormdeck.collectors.model import pg_flags_from_states
    from tests.captured import host_partial, lab_outputs

    helps = json.loads((DATA / release / "config_help_watched.json").read_text())
    partial = CannedCeph(lab_outputs(False, DATA / release / "mgr_failover"), helps).poll()
    assert not partial.errors, partial.errors
    t = 1_800_000_000.0
    snap = merge([partial, host_partial()],
                 {n: SourceHealth(n, True, t) for n in ("ceph", "host")}, now=t)
    c = snap.cluster
    assert c is not None and c.num_pgs is not None and c.num_pgs >= 32
    assert c.pg_states == {"unknown": c.num_pgs} and mgr_blind(c)
    assert c.num_up_osds == c.num_osds == 3 and c.health == "HEALTH_OK"
    blind = run(history(41, step=10.0, base=snap))
    assert not [f for f in blind if f.rule == "ceph.peering.storm"]
    # What it is instead: a mgr that no OSD reports to, said once the failover's 20 s
    # hold is long past, as a warning to look, with nothing to change.
    (mgr,) = firing(blind, "ceph.mgr.no_pg_stats")
    assert mgr.severity == Severity.WARNING and not mgr.changes
    assert f"all {c.num_pgs} PGs unknown with 3 of 3 OSDs up and HEALTH_OK" in mgr.summary
    assert not firing(run(history(5, step=10.0, base=snap)), "ceph.mgr.no_pg_stats"), \
        "a failover's first seconds are not a finding"
    # The blind mgr's zeros (osd df, osd perf, osd status) make no other rule speak either:
    # nothing fires that the same release's quiet capture does not fire.
    quiet = CannedCeph(lab_outputs(False, DATA / release), helps).poll()
    healthy = merge([quiet, host_partial()],
                    {n: SourceHealth(n, True, t) for n in ("ceph", "host")}, now=t)
    said = {f.rule for f in run(history(41, step=10.0, base=healthy)) if f.state == "firing"}
    # (The failover capture's cluster log still holds the OSDs' boot-bench lines, which the
    # quiet capture's tail had lost: what ceph.mclock.capacity says of them is true of both.)
    assert {f.rule for f in blind if f.state == "firing"} <= said | {"ceph.mgr.no_pg_stats",
                                                                    "ceph.mclock.capacity"}
    assert "ceph.mgr.no_pg_stats" not in said
    # One PG known: the mgr has stats, the other unknown PGs count as not active, and the
    # same capture is a storm (as in a real `lab storm`).
    n = c.num_pgs
    states = {"unknown": n - 1, "active+clean": 1}
    known = with_cluster(snap, pg_states=states, pg_flags=pg_flags_from_states(states))
    assert firing(run(history(41, step=10.0, base=known)), "ceph.peering.storm")


def test_a_down_osd_is_never_the_slowest_now() -> None:
    """Its commit latency is the mgr's last figure from before it died (issue 42): the
    slowest-OSD finding clears once Ceph says it is down, and does not fire for it."""
    def dies(s: Snapshot, i: int) -> Snapshot:
        s = slow_osd(s, i)
        return with_daemon(s, "osd.1", up=False) if i >= 20 else s

    assert firing(run(long(slow_osd)), "ceph.osd.slowest")
    assert not firing(run(long(dies)), "ceph.osd.slowest")
    assert not firing(run(long(lambda s, i: with_daemon(slow_osd(s, i), "osd.1", up=False))),
                      "ceph.osd.slowest")
