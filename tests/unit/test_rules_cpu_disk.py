"""The CPU and disk rules beyond their bad and healthy case: what they judge by (explicit
limits, peaks, throttling, reads and writes apart, queue and await on SSDs, fio's
evidence) and what they propose (the unit the OSD runs in, a change that lasts)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.advisors import validated
from stormdeck.advisors.findings import Severity
from stormdeck.advisors.rules import BY_ID
from stormdeck.advisors.rules.cpu import OP_THREADS_PER_CORE
from stormdeck.advisors.settings import load_settings
from stormdeck.advisors.validate import judge
from stormdeck.collectors.model import Disk, Snapshot
from tests.captured import firing, history, run, with_cluster, with_daemon
from tests.unit.test_rules import (
    at_limit,
    beyond_knee,
    busy_reads,
    long,
    pinned,
    sata_disk,
    ssd_busy_not_saturated,
    ssd_saturated,
    throttled,
)
from tests.validated_cases import CEPHADM_UNIT, LAB_FSID, fio_found, recorded_curves


def rule(rule_id: str) -> tuple:
    return (BY_ID[rule_id],)


# ---- ceph.osd.cores_beyond_knee ------------------------------------------------------------

KNEE = "ceph.osd.cores_beyond_knee"


def test_an_unpinned_osd_is_never_beyond_the_knee() -> None:
    """16 cores of affinity that nobody set (the host's CPUs): nothing was given to it."""
    snaps = long(lambda s, i: with_daemon(beyond_knee(s, i), "osd.0",
                                          cpu_limit_explicit=False))
    assert not firing(run(snaps, rule(KNEE)), KNEE)


def test_the_knee_is_judged_by_the_peak_not_the_mean() -> None:
    """Averaging 3 cores of 16 but bursting to 12 (K1.3): it uses what it is given."""
    def bursty(s: Snapshot, i: int) -> Snapshot:
        return with_daemon(beyond_knee(s, i), "osd.0", cores_used=12.0 if i == 20 else 2.5)
    assert not firing(run(long(bursty), rule(KNEE)), KNEE)


def test_a_throttled_osd_is_not_beyond_the_knee() -> None:
    def held(s: Snapshot, i: int) -> Snapshot:
        return with_daemon(beyond_knee(s, i), "osd.0", cpu_throttled=0.02 if i == 30 else 0.0)
    assert not firing(run(long(held), rule(KNEE)), KNEE)


@pytest.mark.parametrize(("unit", "words"), [
    (CEPHADM_UNIT, [f"systemctl set-property {CEPHADM_UNIT} CPUQuota=1200%",
                    'extra_container_args: ["--cpus=12"]']),
    ("ceph-osd@0.service", ["systemctl set-property ceph-osd@0.service CPUQuota=1200%"]),
    (None, ["taskset -a -p -c", "--cpus=12"]),
])
def test_the_proposal_names_the_unit_the_osd_runs_in(unit: str | None,
                                                     words: list[str]) -> None:
    snaps = long(lambda s, i: with_daemon(beyond_knee(s, i), "osd.0", unit=unit))
    (f,) = firing(run(snaps, rule(KNEE)), KNEE)
    text = " ".join(f.procedure)
    assert all(w in text for w in words), text
    assert "ceph-osd@0.service" not in text or unit == "ceph-osd@0.service"


# ---- ceph.osd.cpu_throttled ------------------------------------------------------------------

def test_throttling_names_the_cephadm_unit_and_what_to_raise_to() -> None:
    (f,) = firing(run(long(throttled), rule("ceph.osd.cpu_throttled")),
                  "ceph.osd.cpu_throttled")
    assert f.severity == Severity.WARNING and "40%" in f.summary
    assert f"systemctl set-property {CEPHADM_UNIT} CPUQuota=400%" in f.procedure[0]


# ---- ceph.osd.iops_per_core ------------------------------------------------------------------

IPC = "ceph.osd.iops_per_core"


def replicated(size: int):  # -> edit
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        return with_cluster(pinned(s), pools=tuple(replace(p, size=size)
                                                   for p in s.cluster.pools))
    return edit


def test_reads_are_judged_apart_from_writes() -> None:
    (f,) = firing(run(long(busy_reads), rule(IPC)), IPC)
    assert "10000 reads per core" in f.summary and "8500" in f.summary


def test_writes_count_once_per_replica() -> None:
    """K1.4's 1,600-3,900 writes per allocated core are OSD writes, replicas included
    (K9.1): 6,000 4K client writes on 6 pinned cores at 3 replicas are 18,000 OSD writes,
    3,000 per core: under 3,900. 9,000 client writes are 4,500 per core: beyond. The old
    limit (3,900 x 3 = 11,700) counted the copies twice and passed both."""
    def writes(size: int, iops: float = 6000.0):  # -> edit
        def edit(s: Snapshot, i: int) -> Snapshot:
            return with_cluster(replicated(size)(s, i), client_write_iops=iops,
                                client_write_bps=iops * 4096, client_read_iops=0.0)
        return edit
    assert not firing(run(long(writes(3)), rule(IPC)), IPC)
    (f,) = firing(run(long(writes(3, 9000.0)), rule(IPC)), IPC)
    assert "4500 write copies per core" in f.summary and "3900" in f.summary
    (f,) = firing(run(long(writes(14)), rule(IPC)), IPC)
    assert "14000 write copies per core" in f.summary


def test_unpinned_osds_have_no_cores_of_their_own_to_count() -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        s = busy_reads(s, i)
        for osd in ("osd.0", "osd.1", "osd.2"):
            s = with_daemon(s, osd, cpu_limit_explicit=False)
        return s
    assert not [f for f in run(long(edit), rule(IPC)) if f.rule == IPC]


# ---- ceph.osd.op_threads_vs_cores --------------------------------------------------------------

def test_op_threads_advice_never_cuts_threads_and_agrees_with_validate() -> None:
    snaps = long(lambda s, i: with_daemon(s, "osd.0", device_class="ssd", cores_allowed=1.0))
    (f,) = firing(run(snaps, rule("ceph.osd.op_threads_vs_cores")),
                  "ceph.osd.op_threads_vs_cores")
    assert f.changes == ()
    text = " ".join(f.procedure)
    assert "at least 2" in text and "Do not lower" in text and "_per_shard" not in text
    # One threshold, in the rule's settings and in validate's judge.
    params = load_settings()["ceph.osd.op_threads_vs_cores"].params
    assert params["threads_per_core"] == OP_THREADS_PER_CORE == 8
    assert judge.op_threads("osd.0", 16, 2.0).verdict == judge.PASS
    assert judge.op_threads("osd.0", 17, 2.0).verdict == judge.WARN
    # 16 SSD op threads on 2 cores: the rule is silent too.
    snaps = long(lambda s, i: with_daemon(s, "osd.0", device_class="ssd", cores_allowed=2.0))
    assert not firing(run(snaps, rule("ceph.osd.op_threads_vs_cores")),
                      "ceph.osd.op_threads_vs_cores")


# ---- disk.write_cache_on ---------------------------------------------------------------------

WC = "disk.write_cache_on"


def test_without_fio_evidence_the_cache_is_information_and_nothing_is_changed() -> None:
    (f,) = firing(run(long(sata_disk("write back", rotational=True)), rule(WC)), WC)
    assert f.severity == Severity.INFO and f.changes == ()
    assert "not measured yet" in f.summary and "stormdeck validate" in f.procedure[0]


def test_fio_finding_no_cost_silences_it(tmp_path: Path) -> None:
    store = fio_found(tmp_path, "vm:/dev/sdb", "pass")
    assert not firing(run(long(sata_disk("write back", rotational=True)), rule(WC), store), WC)


def test_on_an_ssd_the_measured_cost_is_information(tmp_path: Path) -> None:
    store = fio_found(tmp_path, "vm:/dev/sdb", "fail")
    (f,) = firing(run(long(sata_disk("write back")), rule(WC), store), WC)
    assert f.severity == Severity.INFO and f.changes[0].command == "hdparm -W 0 /dev/sdb"
    assert "udev rule" in f.changes[0].note and "power-loss" in f.procedure[-1]


def on_vda(s: Snapshot, i: int) -> Snapshot:
    """The captured lab as the host source reports it since it reads a loop's backing file:
    loop0-2 land on vda (their files are on the root filesystem), which carries osd.0-2."""
    disks = {k: replace(d, backing=("vda",)) if d.name.startswith("loop") else d
             for k, d in s.disks.items()}
    vda = replace(disks["vm:/dev/vda"], daemons=("osd.0", "osd.1", "osd.2"))
    return replace(s, disks={**disks, vda.key: vda})


def test_a_virtio_disk_under_loop_osds_unmeasured_is_information() -> None:
    (f,) = firing(run(long(on_vda), rule(WC)), WC)
    assert f.target == "vm:/dev/vda" and f.severity == Severity.INFO and f.changes == ()
    assert "(through loop0, loop1, loop2)" in f.summary and "not measured yet" in f.summary
    assert "stormdeck validate" in f.procedure[0]


def test_a_virtio_disk_with_a_measured_cost_is_changed_at_the_hypervisor(
        tmp_path: Path) -> None:
    """No tool in the guest changes a virtio disk's cache (Firecracker offers no
    VIRTIO_BLK_F_CONFIG_WCE): a warning on a rotational disk, a procedure, no change."""
    store = fio_found(tmp_path, "vm:/dev/vda", "fail")
    (f,) = firing(run(long(on_vda), rule(WC), store), WC)
    assert f.severity == Severity.WARNING and f.changes == ()
    assert "hypervisor" in f.procedure[0] and "VIRTIO_BLK_F_CONFIG_WCE" in f.procedure[0]
    assert "cache_type" in f.procedure[0] and "/sys/block" in f.procedure[0]
    # fio finding no cost there: nothing to say.
    assert not firing(run(long(on_vda), rule(WC), fio_found(tmp_path / "ok", "vm:/dev/vda",
                                                           "pass")), WC)


# ---- disk.at_hardware_limit ------------------------------------------------------------------

LIMIT = "disk.at_hardware_limit"


def test_a_busy_ssd_is_judged_by_queue_and_await_not_util() -> None:
    assert not firing(run(long(ssd_busy_not_saturated), rule(LIMIT)), LIMIT)
    found = firing(run(long(ssd_saturated), rule(LIMIT)), LIMIT)
    (f,) = [f for f in found if f.target == "vm:/dev/sdc"]
    assert "40.0 requests queued" in f.summary and "12.0 ms" in f.summary


def test_an_nvme_disk_is_solid_state_whatever_rotational_says() -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        s = ssd_busy_not_saturated(s, i)
        d = replace(s.disks["vm:/dev/sdc"], rotational=None, transport="nvme")
        return replace(s, disks={**s.disks, d.key: d})
    assert not [f for f in firing(run(long(edit), rule(LIMIT)), LIMIT)
                if f.target == "vm:/dev/sdc"]


def test_a_limit_under_loop_devices_is_found_once_on_the_disk_under_them() -> None:
    """Loops and the disk under their files all 99% busy: one limit, judged where it is.
    A loop whose file is on no disk (tmpfs) is still judged itself."""
    def edit(s: Snapshot, i: int) -> Snapshot:
        return at_limit(on_vda(s, i), i)
    found = firing(run(long(edit), rule(LIMIT)), LIMIT)
    assert [f.target for f in found] == ["vm:/dev/vda"]
    assert "(HDD) keeps 8.0 requests queued, each waiting 80.0 ms" in found[0].summary

    def on_tmpfs(s: Snapshot, i: int) -> Snapshot:
        s = edit(s, i)
        loop0 = replace(s.disks["vm:/dev/loop0"], backing=())
        return replace(s, disks={**s.disks, loop0.key: loop0})
    found = firing(run(long(on_tmpfs), rule(LIMIT)), LIMIT)
    assert sorted(f.target for f in found) == ["vm:/dev/loop0", "vm:/dev/vda"]


def test_a_disk_is_judged_by_its_own_queue_and_await_not_the_cpus() -> None:
    """An OSD's libaio/io_uring I/O is not iowait: vda with 12 requests queued, each
    waiting 90 ms, beside CPUs 60% truly idle, is at its limit (the old judge, %util plus
    CPUs not idle, missed it). vda 100% busy with CPUs all in iowait but one request at
    a time served in 2 ms is not."""
    def disk(queue: float, wait: float, util: float, busy: float, iowait: float
             ) -> Callable[[Snapshot, int], Snapshot]:
        def edit(s: Snapshot, i: int) -> Snapshot:
            s = on_vda(s, i)
            vda = replace(s.disks["vm:/dev/vda"], util=util, queue_depth=queue,
                          write_await=wait, write_iops=400.0, read_iops=0.0)
            return replace(s, disks={**s.disks, vda.key: vda}, hosts={"vm": replace(
                s.hosts["vm"], cpu_busy=busy, iowait=iowait)})
        return edit
    (f,) = firing(run(long(disk(12.0, 0.090, 0.9, 0.40, 0.0)), rule(LIMIT)), LIMIT)
    assert f.target == "vm:/dev/vda" and f.severity == Severity.INFO
    assert "12.0 requests queued, each waiting 90.0 ms" in f.summary
    assert not firing(run(long(disk(1.0, 0.002, 1.0, 0.30, 0.69)), rule(LIMIT)), LIMIT)


def test_the_disk_under_loops_below_its_limit_is_quiet() -> None:
    """The captured lab under load: vda 57% busy, a short queue: nothing to say."""
    assert not firing(run(long(on_vda), rule(LIMIT)), LIMIT)


# ---- ceph.cluster.load_vs_validated -------------------------------------------------------------

LOAD = "ceph.cluster.load_vs_validated"


def test_load_is_judged_only_against_this_clusters_validation(tmp_path: Path) -> None:
    def busy(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(s, client_write_iops=3500.0)
    other = recorded_curves(tmp_path, fsid="00000000-0000-0000-0000-000000000000")
    assert not firing(run(long(busy), rule(LOAD), other), LOAD)
    assert not firing(run(long(busy), rule(LOAD)), LOAD), "no validation: nothing to judge"
    (f,) = firing(run(long(busy), rule(LOAD), recorded_curves(tmp_path / "mine")), LOAD)
    assert "3500 write IOPS of 4142" in f.summary and "85%" in f.summary


def test_reads_and_writes_add_up_as_shares_of_their_curves(tmp_path: Path) -> None:
    """50% of the write curve's most and 30% of the read curve's: 80% in all."""
    def mixed(s: Snapshot, i: int) -> Snapshot:
        return with_cluster(s, client_write_iops=0.5 * 4142, client_read_iops=0.3 * 13139)
    (f,) = firing(run(long(mixed), rule(LOAD), recorded_curves(tmp_path)), LOAD)
    assert "80%" in f.summary


# ---- the evidence file ---------------------------------------------------------------------

def test_evidence_keeps_the_newest_per_cluster_and_disk_and_survives_damage(
        tmp_path: Path) -> None:
    store = recorded_curves(tmp_path)
    fio_found(tmp_path, "vm:/dev/sdb", "fail")  # a second run: the curve stays
    got = store.get()
    assert got.capacity_of(LAB_FSID)["write"].max_iops == 4142
    assert got.capacity_of(LAB_FSID)["read"].headroom_iops == pytest.approx(0.7 * 13139)
    assert got.cache_of("vm:/dev/sdb").verdict == judge.FAIL  # type: ignore[union-attr]
    assert got.cache_of("vm:/dev/sdb").flushes_per_write == 1.0  # type: ignore[union-attr]
    (tmp_path / validated.FILE).write_text("{not json")
    assert store.get().capacity == {} and store.get().caches == {}


def test_a_disk_row_is_kept_for_rules_with_its_host() -> None:
    d = Disk(host="vm", name="sdb")
    assert d.key == "vm:/dev/sdb"
    assert history(1)[0].cluster.fsid == LAB_FSID  # type: ignore[union-attr]
