"""The fullness view's parts: bars against the ratios, Ceph's checks, pools' days to full."""

from __future__ import annotations

from dataclasses import replace

from stormdeck.collectors.ceph.parse import parse_health
from stormdeck.tui.views.fullness import OsdFullTable, PoolFullTable, health_lines, ratio_bar
from tests.captured import history, with_cluster, with_daemon

RATIOS = {"nearfull_ratio": 0.5, "backfillfull_ratio": 0.6, "full_ratio": 0.7}


def test_the_bar_marks_the_monitors_ratios() -> None:
    c = with_cluster(history(1)[0], **RATIOS).cluster
    bar = ratio_bar(0.2, c, width=10, ascii_only=True).plain
    assert bar == "##...nbf..", bar
    assert ratio_bar(None, c).plain == "-"
    # Past the full ratio: the bar covers the marks.
    assert ratio_bar(0.8, c, width=10, ascii_only=True).plain == "########.."


def test_osd_rows_say_which_ratio_they_are_past() -> None:
    s = with_daemon(with_cluster(history(1)[0], **RATIOS), "osd.1", utilization=0.65)
    cells = OsdFullTable.cells(s.daemons["osd.1"], s.cluster)
    assert cells[1].plain == "65%" and cells[3].plain == "backfillfull"
    assert OsdFullTable.cells(s.daemons["osd.0"], s.cluster)[3].plain == "-"


def test_health_lines_list_every_check_with_its_detail_and_mutes() -> None:
    checks = parse_health({"checks": {
        "OSD_DOWN": {"severity": "HEALTH_WARN", "summary": {"message": "1 osds down"},
                     "detail": [{"message": "osd.2 is down"}]},
        "POOL_NO_REDUNDANCY": {"severity": "HEALTH_WARN", "muted": True,
                               "summary": {"message": "1 pool(s) have no replicas"},
                               "detail": [{"message": f"pool 'p{i}' has no replicas"}
                                          for i in range(7)]}}})[0]
    c = with_cluster(history(1)[0], health="HEALTH_WARN", checks=checks, nearfull_ratio=None,
                     backfillfull_ratio=None, full_ratio=None).cluster
    text = health_lines(c).plain
    assert "OSD_DOWN: 1 osds down\n    osd.2 is down" in text
    assert "POOL_NO_REDUNDANCY: 1 pool(s) have no replicas (muted)" in text
    assert "... 2 more (ceph health detail)" in text
    assert "(Ceph's defaults" in text, "no ratios read: said so"
    read = with_cluster(history(1)[0]).cluster
    assert "(Ceph's defaults" not in health_lines(read).plain, "the capture's osd dump has them"


def test_pool_rows_show_fill_and_days_to_full_at_their_growth() -> None:
    def edit(s, i):
        pools = tuple(replace(p, used_ratio=0.5 + 0.001 * i, stored_bytes=2 ** 30,
                              max_avail_bytes=2 ** 31) if p.name == "lab-bench" else p
                      for p in s.cluster.pools)
        return with_cluster(s, pools=pools)
    snaps = history(40, step=10.0, edit=edit)  # 0.0001 a second
    pool = next(p for p in snaps[-1].cluster.pools if p.name == "lab-bench")
    cells = PoolFullTable.cells(pool, snaps[-1].cluster, snaps, min_span=300)
    assert cells[1].plain == "54%" and cells[3].plain == "1 GiB"
    # (1 - 0.539) / 0.0001 per second = 4,610 s
    assert cells[5].plain == f"{0.461 / 0.0001 / 86400:.1f}"
    assert cells[6].plain == "+864.00%"
    short = PoolFullTable.cells(pool, snaps[-1].cluster, snaps[-5:], min_span=300)
    assert short[5].plain == "-", "no forecast from 40 s of points"
