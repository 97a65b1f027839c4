"""OSD memory: targets summed against a host's RAM, and RSS against the target."""

from __future__ import annotations

from dataclasses import replace

from stormdeck.advisors.findings import Severity
from stormdeck.advisors.rules.memory import size
from stormdeck.collectors.model import Snapshot
from tests.captured import firing, history, run, with_config, with_daemon

GIB = 1 << 30


def ram(gib: float):
    def edit(s: Snapshot, i: int) -> Snapshot:
        host = next(iter(s.hosts))
        return replace(s, hosts={**s.hosts, host: replace(s.hosts[host],
                                                          mem_total=int(gib * GIB))})
    return edit


def test_sizes_as_ceph_takes_them() -> None:
    assert size("4294967296") == 4 * GIB and size("4G") == 4 * GIB and size("512M") == GIB / 2
    assert size("x") is None and size(None) is None


def test_targets_beyond_the_autotune_share_of_ram() -> None:
    (f,) = firing(run(history(35, step=10.0, edit=ram(16))), "ceph.osd.memory")
    # Three OSDs x 4 GiB = 12 GiB of 16: 75%, past cephadm's 70%, below the RAM itself.
    assert f.target.startswith("host ") and f.severity == Severity.WARNING
    assert "12.0 GiB, 75% of its 16.0 GiB" in f.summary
    assert "osd_memory_target 4008636142" in f.procedure[0]  # 0.7 x 16 GiB / 3
    assert not firing(run(history(35, step=10.0, edit=ram(32))), "ceph.osd.memory")


def test_a_host_mask_target_counts() -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        host = next(iter(s.hosts))
        return with_config(ram(16)(s, i), "osd_memory_target", f"osd/host:{host}", "2G")
    assert not firing(run(history(35, step=10.0, edit=edit)), "ceph.osd.memory"), "6 GiB"


def test_rss_far_past_its_target_for_five_minutes() -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        return with_daemon(s, "osd.1", rss_bytes=7 * GIB)
    (f,) = firing(run(history(35, step=10.0, edit=edit)), "ceph.osd.memory")
    assert f.target == "osd.1" and "1.8 x its osd_memory_target 4.0 GiB" in f.summary
    assert not firing(run(history(20, step=10.0, edit=edit)), "ceph.osd.memory"), "for 5 min"
