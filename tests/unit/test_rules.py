"""Every rule fires on a bad case and stays silent on a healthy one.

Ceph cases are the lab's captured snapshot (tests/captured.py) edited into the
bad shape; Curve cases come from the real Curve source polling tests/curve_wire.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.evidence import EvidenceStore
from stormdeck.advisors.model import Finding, Severity
from stormdeck.advisors.rules import ALL
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.curve import CurveSource
from stormdeck.collectors.hub import merge
from stormdeck.collectors.model import Disk, Host, Pool, Snapshot, SourceHealth

from tests.captured import history, with_cluster, with_config, with_daemon
from tests.curve_wire import CurveWire
from tests.evidence import CEPHADM_UNIT, fio_found, recorded_curves

History = list[Snapshot]


def run(snaps: History, rules: tuple | None = None,
        evidence: EvidenceStore | None = None) -> list[Finding]:
    """Feed snapshots one at a time, as the console does, and return the last findings."""
    engine = Engine(settings=load_settings(), rules=rules or ALL, evidence=evidence)
    findings: list[Finding] = []
    for i in range(1, len(snaps) + 1):
        findings = engine.evaluate(snaps[:i])
    assert not engine.errors, engine.errors
    return findings


def firing(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.rule == rule and f.state == "firing"]


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
    for osd, n in (("osd.0", 60), ("osd.1", 20), ("osd.2", 17)):
        s = with_daemon(s, osd, primary_pgs=n)
    return s


def read_balance(s: Snapshot, i: int) -> Snapshot:
    assert s.cluster is not None
    pools = tuple(replace(p, read_balance_score=2.0) if p.name == "lab-bench" else p
                  for p in s.cluster.pools)
    return with_cluster(s, pools=pools)


def storm(s: Snapshot, i: int) -> Snapshot:
    # The PG counts `ceph pg stat` gave during a real `lab storm` (tests/data).
    states = {"unknown": 64, "active+clean": 1, "active+clean+scrubbing": 0}
    return with_cluster(s, num_pgs=65, pg_states=states,
                        pg_flags={"unknown": 64, "active": 1, "clean": 1, "scrubbing": 3})


def flapping(s: Snapshot, i: int) -> Snapshot:
    return with_daemon(s, "osd.1", up=i not in (34, 38)) if i > 30 else s


def slow_ops(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, slow_ops=12, slow_ops_daemons=("osd.1",))


def scrub_sleep_set(s: Snapshot, i: int) -> Snapshot:
    return with_config(s, "osd_scrub_sleep", "osd", "0.1")


def many_osds(s: Snapshot, i: int) -> Snapshot:
    return with_cluster(s, num_osds=600)


def pool_edit(**changes: object) -> Callable[[Snapshot, int], Snapshot]:
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        pools = tuple(replace(p, **changes) if p.name == "lab-bench" else p
                      for p in s.cluster.pools)
        return with_cluster(s, pools=pools)
    return edit


def tentacle_ec(version: str, flags: tuple[str, ...], stripe: int = 4096):
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        ec = Pool(id=9, name="ecpool", type="erasure", size=6, min_size=5, pg_num=32,
                  ec_profile="k4m2", ec_k=4, ec_m=2, stripe_unit=stripe,
                  flags=("hashpspool", "ec_overwrites", *flags))
        return with_cluster(s, version=version, release="tentacle",
                            pools=(*s.cluster.pools, ec))
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
    disks = {k: replace(d, util=0.99) if d.daemons else d for k, d in s.disks.items()}
    return replace(s, disks=disks, hosts={"vm": replace(s.hosts["vm"], cpu_busy=0.97)})


def tuned(profile: str) -> Callable[[Snapshot, int], Snapshot]:
    def edit(s: Snapshot, i: int) -> Snapshot:
        return replace(s, hosts={"vm": replace(s.hosts["vm"], tuned_profile=profile)})
    return edit


def secure(s: Snapshot, i: int) -> Snapshot:
    return with_config(s, "ms_cluster_mode", "global", "secure crc")


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


CASES: dict[str, tuple[Callable[[], History], Callable[[], History], Severity]] = {
    "ceph.osd.cores_beyond_knee": (lambda: long(beyond_knee), long, Severity.INFO),
    "ceph.osd.cores_starved": (lambda: long(starved), long, Severity.WARNING),
    "ceph.osd.cpu_throttled": (lambda: long(throttled), lambda: long(not_throttled),
                               Severity.WARNING),
    "ceph.osd.iops_per_core": (lambda: long(busy_reads), lambda: long(lambda s, i: pinned(s)),
                               Severity.INFO),
    "ceph.cluster.load_vs_validated": (lambda: long(beyond_validated), long, Severity.WARNING),
    "ceph.osd.op_threads_vs_cores": (lambda: long(ssd_one_core), long, Severity.INFO),
    "ceph.osd.slowest": (lambda: long(slow_osd), long, Severity.WARNING),
    "ceph.primary.spread": (lambda: long(primaries_skewed), long, Severity.WARNING),
    "ceph.peering.storm": (lambda: long(storm), long, Severity.CRITICAL),
    "ceph.osd.flapping": (lambda: long(flapping), long, Severity.WARNING),
    "ceph.slow_ops": (lambda: long(slow_ops), long, Severity.WARNING),
    "ceph.scrub.during_load": (long, lambda: long(scrub_sleep_set), Severity.INFO),
    "ceph.osdmap.cache": (lambda: long(many_osds), long, Severity.INFO),
    "ceph.pool.pg_not_power_of_two": (lambda: long(pool_edit(pg_num=100)), long,
                                      Severity.INFO),
    "ceph.ec.fast_ec_off": (lambda: long(tentacle_ec("20.2.1", ())),
                            lambda: long(tentacle_ec("20.2.1", ("ec_optimizations",), 16384)),
                            Severity.INFO),
    "ceph.ec.stripe_unit_small": (lambda: long(tentacle_ec("20.2.1", ("ec_optimizations",))),
                                  lambda: long(tentacle_ec("20.2.1", ("ec_optimizations",),
                                                           16384)), Severity.INFO),
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


# What `stormdeck validate` measured, for the rules that act on it only.
EVIDENCE: dict[str, Callable[[Path], EvidenceStore]] = {
    "ceph.cluster.load_vs_validated": lambda tmp: recorded_curves(tmp),
    "disk.write_cache_on": lambda tmp: fio_found(tmp, "vm:/dev/sdb", "fail"),
}


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fires_on_the_bad_case(rule_id: str, tmp_path: Path) -> None:
    bad, _, severity = CASES[rule_id]
    store = EVIDENCE[rule_id](tmp_path) if rule_id in EVIDENCE else None
    found = firing(run(bad(), evidence=store), rule_id)
    assert found, f"{rule_id} did not fire"
    f = found[0]
    assert f.severity == severity and f.summary and f.evidence
    assert f.source and f.explanation


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_is_silent_on_the_healthy_case(rule_id: str, tmp_path: Path) -> None:
    _, good, _ = CASES[rule_id]
    store = EVIDENCE[rule_id](tmp_path) if rule_id in EVIDENCE else None
    assert not [f for f in run(good(), evidence=store) if f.rule == rule_id]


def test_every_rule_has_a_source_an_explanation_and_tests() -> None:
    ids = {r.id for r in ALL}
    assert ids == set(CASES), f"rules without cases: {ids - set(CASES)}"
    assert len(ids) == len(ALL), "rule ids are unique"
    settings = load_settings()
    for r in ALL:
        assert re.match(r"^[a-z]+(\.[a-z_]+)+$", r.id), r.id
        assert re.search(r"\bK\d+(\.\d+)?", r.source), f"{r.id}: no KNOWLEDGE.md section"
        assert len(r.explanation) > 80, f"{r.id}: explanation too thin"
        assert r.title and r.id in settings


def test_the_healthy_lab_capture_raises_nothing_above_info() -> None:
    findings = run(long())
    assert not [f for f in findings if f.severity > Severity.INFO], findings
    # What is true of the lab under load: no tuned profile, and scrubs unthrottled
    # (osd_scrub_sleep 0) while clients write.
    assert {f.rule for f in findings} <= {"host.tuned_profile", "ceph.scrub.during_load"}


# ---- what the findings propose -----------------------------------------------------------

def test_pg_count_change_is_the_nearest_power_of_two() -> None:
    (f,) = firing(run(long(pool_edit(pg_num=100))), "ceph.pool.pg_not_power_of_two")
    (ch,) = f.changes
    assert (ch.proposed, ch.command) == ("128", "ceph osd pool set lab-bench pg_num 128")
    (f,) = firing(run(long(pool_edit(pg_num=90))), "ceph.pool.pg_not_power_of_two")
    assert f.changes[0].proposed == "64"


def test_fast_ec_is_irreversible_and_not_offered_on_20_2_0() -> None:
    (f,) = firing(run(long(tentacle_ec("20.2.1", ()))), "ceph.ec.fast_ec_off")
    (ch,) = f.changes
    assert not ch.reversible and "IRREVERSIBLE" in ch.note
    assert ch.command == "ceph osd pool set ecpool allow_ec_optimizations true"
    (old,) = firing(run(long(tentacle_ec("20.2.0", ()))), "ceph.ec.fast_ec_off")
    assert old.changes == () and "74813" in old.summary
    assert not firing(run(long()), "ceph.ec.fast_ec_off"), "not on Pacific"


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
    (f,) = firing(run(history(2, edit=edit), evidence=store), "disk.write_cache_on")
    assert f.changes[0].command == command
    assert "/sys/block" not in f.changes[0].command
    assert any("fio" in step for step in f.procedure)


def test_write_cache_on_a_virtual_disk_is_never_a_target() -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        disks = {k: replace(d, write_cache="write back") for k, d in s.disks.items()}
        return replace(s, disks=disks)

    assert not firing(run(history(2, edit=edit)), "disk.write_cache_on")


def test_scrub_change_proposes_the_report_values() -> None:
    (f,) = firing(run(long()), "ceph.scrub.during_load")
    assert [(c.key, c.current, c.proposed) for c in f.changes] == \
        [("osd_scrub_sleep", "0", "0.1")]
    assert f.changes[0].command == "ceph config set osd osd_scrub_sleep 0.1"
    assert f.changes[0].runtime is True

    def many_core(s: Snapshot, i: int) -> Snapshot:
        return replace(s, hosts={"vm": replace(s.hosts["vm"], cpus=32)})

    (f,) = firing(run(long(many_core)), "ceph.scrub.during_load")
    assert ("osd_scrub_load_threshold", "5.0") in {(c.key, c.proposed) for c in f.changes}


def test_osdmap_cache_proposes_only_options_this_release_has() -> None:
    (f,) = firing(run(long(many_osds)), "ceph.osdmap.cache")
    keys = {c.key: c.proposed for c in f.changes}
    assert keys["mon_osd_cache_size"] == "300" and keys["osd_map_cache_size"] == "30"
    # Pacific has no osd_map_max_advance (its config help says ENOENT).
    assert "osd_map_max_advance" not in keys


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
