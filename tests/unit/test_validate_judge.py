"""Each validation step's pass/warn/fail on recorded measurements (tests/data/validate: the
lab's own rados bench and fio outputs), and the parts around them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stormdeck.advisors.validate import judge
from stormdeck.advisors.validate.checks import flush_rates, parse_flushes
from stormdeck.advisors.validate.context import Cleanup
from stormdeck.advisors.validate.judge import FAIL, PASS, SKIP, WARN, Point
from stormdeck.advisors.validate.measure import bench_clients, combine, levels, parse_bench, split
from stormdeck.advisors.validate.plot import curve_plot
from stormdeck.base.errors import UserError
from tests.conftest import DATA

VAL = DATA / "validate"


def recorded_curve(kind: str) -> list[Point]:
    """The lab's response curve: rados bench summaries at 1..32 in flight."""
    out = []
    for t in levels(quick=True):
        iops, lat = parse_bench((VAL / f"bench_{kind}_t{t}.txt").read_text())
        out.append(Point(float(t), iops, lat))
    return out


def test_rados_bench_summaries_parse() -> None:
    iops, lat = parse_bench((VAL / "bench_write_t4.txt").read_text())
    assert iops > 0 and 0 < lat < 1
    with pytest.raises(UserError, match="no summary"):
        parse_bench("hints = 1\nMaintaining 16 concurrent writes\n")


@pytest.mark.parametrize("kind", ["write", "read"])
def test_the_labs_curves_have_a_knee_and_a_headroom_point(kind: str) -> None:
    pts = recorded_curve(kind)
    v = judge.response_curve(kind, pts)
    assert v.verdict in (PASS, WARN) and v.data["knee"] is not None
    k = judge.knee(pts)
    assert k is not None and 0 < k < len(pts)
    h = judge.headroom(pts)
    assert h is not None and h.iops == pytest.approx(0.7 * max(p.iops for p in pts))
    plot = curve_plot(pts, k, h)
    *grid, caption = plot
    # The marks are drawn on the curve itself, and named below it.
    assert any("K" in line for line in grid) and any("H" in line for line in grid)
    assert f"K knee: {pts[k].x:g} in flight" in caption and "H 70% of the maximum" in caption
    assert any("IOPS" in line for line in grid) and "\x1b" not in "".join(plot)
    # The curve rises: latency at the top row is the largest, its tick the highest.
    ticks = [float(line.split("┤")[0]) for line in grid if "┤" in line]
    assert ticks == sorted(ticks, reverse=True)
    assert ticks[0] == pytest.approx(max(p.latency for p in pts) * 1000, abs=0.06)
    assert "K knee" not in "".join(curve_plot(pts, None, None))


def test_a_curve_still_rising_warns_that_the_knee_lies_beyond() -> None:
    rising = [Point(t, 1000.0 * t, 0.001) for t in (1, 2, 4, 8)]
    v = judge.response_curve("write", rising)
    assert v.verdict == WARN and "beyond" in v.summary
    hockey = [Point(1, 1000, 0.001), Point(2, 1900, 0.00105), Point(4, 3000, 0.0013),
              Point(8, 3300, 0.0024), Point(16, 3350, 0.0048)]
    v = judge.response_curve("write", hockey)
    assert v.verdict == PASS and v.data["knee"]["in_flight"] == 4
    assert judge.response_curve("write", hockey[:2]).verdict == SKIP


def test_write_cache_verdict_from_fio_against_the_devices_writes() -> None:
    fio = json.loads((VAL / "fio_fdatasync.json").read_text())
    iops = fio["jobs"][0]["write"]["iops"]
    assert judge.write_cache("vda", iops, iops * 1.05, "write back").verdict == PASS
    # K2.5: cache still on: fio gets about half the device's writes.
    off = judge.write_cache("sdb", iops, iops * 2.0, "write back")
    assert off.verdict == FAIL and "cache is on" in off.summary
    assert judge.write_cache("sdb", None, None, None).verdict == SKIP


def test_write_cache_counts_flushes_on_kernels_since_5_5() -> None:
    """Since 5.5 a flush is no write in /proc/diskstats: w/s equals fio's IOPS with the cache
    on, and only the flush count (columns 19-20) shows the device was asked to flush."""
    fio = json.loads((VAL / "fio_fdatasync.json").read_text())
    iops = fio["jobs"][0]["write"]["iops"]
    on = judge.write_cache("vda", iops, iops, "write back", flushes_ps=iops, flush_ms=1.9)
    assert on.verdict == FAIL and "flush" in on.summary
    assert on.data["flushes_per_write"] == pytest.approx(1.0)
    assert any("1.90 ms each" in e for e in on.evidence)
    off = judge.write_cache("vda", iops, iops, "write through", flushes_ps=0.0)
    assert off.verdict == PASS and "no flushes" in off.summary
    old_kernel = judge.write_cache("vda", iops, iops, "write back", flushes_ps=None)
    assert old_kernel.verdict == PASS and old_kernel.data["flushes_per_write"] is None
    assert any("not counted" in e for e in old_kernel.evidence)


def test_flushes_from_proc_diskstats() -> None:
    """The lab's /proc/diskstats (Linux 6.x, 20 columns) and a 4.x line of 14 columns, as
    Documentation/admin-guide/iostats.rst lists them."""
    text = (DATA / "diskstats_sample.txt").read_text()
    counts = parse_flushes(text)
    assert counts["loop0"] == (194943, 138785)
    assert parse_flushes("   8       0 sda 4 0 8 1 2 0 16 3 0 4 4\n") == {}
    before, after = {"sda": (100, 50)}, {"sda": (300, 450)}
    assert flush_rates(before, after, "sda", 2.0) == (100.0, 2.0)
    assert flush_rates(before, {}, "sda", 2.0) == (None, None)


def test_bench_clients_split_the_load_and_add_up() -> None:
    assert split(1, 4) == [1] and split(8, 4) == [2, 2, 2, 2] and split(6, 4) == [2, 2, 1, 1]
    assert sum(split(128, 4)) == 128 and bench_clients(quick=True) < bench_clients(False)
    iops, lat = combine([(1000.0, 0.004), (3000.0, 0.002)])
    assert iops == 4000.0 and lat == pytest.approx(0.0025)



def test_host_verdicts() -> None:
    assert judge.cores("osd.0", 1.0, 0.9).verdict == FAIL  # pinned to one core
    assert judge.cores("osd.0", 4.0, 1.2).verdict == PASS
    assert judge.cores("osd.0", 32.0, 6.0).verdict == WARN  # beyond the knee
    # Unpinned on a 32-CPU host: nothing was given to it, nothing is beyond the knee.
    assert judge.cores("osd.0", 32.0, 6.0, explicit=False).verdict == PASS
    assert judge.cores("osd.0", None, None).verdict == SKIP
    assert judge.tuned("vm", "").verdict == WARN
    assert judge.tuned("vm", "latency-performance").verdict == PASS
    # The rule's threshold (8 per core): 16 op threads on 2 cores is what K1.2/K1.5 measured.
    assert judge.op_threads("osd.0", 24, 2.0).verdict == WARN
    assert "at least 3 cores" in judge.op_threads("osd.0", 24, 2.0).summary
    assert judge.op_threads("osd.0", 16, 2.0).verdict == PASS
    assert judge.op_threads("osd.0", 16, 8.0).verdict == PASS


def test_cluster_setting_verdicts() -> None:
    assert judge.pg_num("rbd", 100).verdict == WARN and "128" in judge.pg_num("rbd", 100).summary
    assert judge.pg_num("rbd", 128).verdict == PASS
    # Ceph's defaults pass under each scheduler (Pacific's wpq, Reef's and Tentacle's mClock).
    scrub = {v.check: v.verdict for v in judge.scrub({"osd_scrub_sleep": "0",
                                                       "osd_scrub_load_threshold": "0.5"},
                                                      "wpq")}
    assert scrub == {"osd_scrub_sleep": PASS, "osd_scrub_load_threshold": PASS}
    mclock = judge.scrub({"osd_scrub_sleep": "0", "osd_scrub_load_threshold": "10",
                          "osd_mclock_profile": "balanced"}, "mclock_scheduler")
    assert {v.check: v.verdict for v in mclock} == {"osd_mclock_profile": PASS,
                                                     "osd_scrub_load_threshold": PASS}
    # What matters: a profile that starves clients, a threshold that starves scrubs.
    (busy,) = judge.scrub({"osd_mclock_profile": "high_recovery_ops"}, "mclock_scheduler")
    assert busy.verdict == WARN and "clients wait" in busy.summary
    assert judge.scrub({"osd_scrub_load_threshold": "0.1"}, "wpq")[0].verdict == WARN
    (stored,) = judge.overridden_settings({"osd_scrub_sleep": ("0.1", "the OSD forces it")})
    assert stored.verdict == WARN and "ceph config rm osd osd_scrub_sleep" in stored.summary
    assert judge.secure_mode({"ms_cluster_mode": "secure crc"}).verdict == WARN
    assert judge.secure_mode({"ms_cluster_mode": "crc secure"}).verdict == PASS
    assert judge.ec_pool("ec", 4, 2, "tentacle", (), 4096).verdict == WARN
    assert judge.ec_pool("ec", 4, 2, "tentacle", ("ec_optimizations",), 16384).verdict == PASS
    assert judge.ec_pool("ec", 4, 2, "pacific", (), 4096).verdict == PASS


def test_peering_compares_with_earlier_runs() -> None:
    assert judge.peering(12.0, 64).verdict == PASS
    assert judge.peering(12.0, 64, [11.0, 13.0]).verdict == PASS
    assert judge.peering(40.0, 64, [11.0, 13.0]).verdict == WARN
    assert judge.peering(None, 64).verdict == FAIL


def test_cpu_scaling_finds_where_cores_stop_paying() -> None:
    # K1.2's shape: near linear to 4 cores, flat past 10.
    pts = [Point(c, i, 0.002, {"cores_used": u}) for c, i, u in
           ((1, 3000, 0.98), (2, 5900, 1.9), (4, 11000, 3.7), (8, 15000, 6.5),
            (10, 15800, 7.0), (12, 16000, 7.1))]
    v = judge.cpu_scaling("osd.0", pts)
    assert v.data["knee_cores"] == 8 and v.verdict == PASS  # 8 -> 10 cores: +5%
    assert "per used core" in v.evidence[0]
    assert judge.cpu_scaling("osd.0", pts[:1]).verdict == SKIP


def test_the_sweeps_rounds_give_the_knee_its_interval() -> None:
    """K1.2's shape measured in alternated rounds: 4 -> 8 cores gains 8% but its interval
    reaches 19%, so the knee is at 4 cores or may be as late as 8; 8 -> 10 surely pays less
    than 10%."""
    pts = [Point(c, i, 0.002, {"cores_used": c * 0.9}) for c, i in
           ((2, 5900), (4, 11000), (8, 11900), (10, 12100))]
    steps = [judge.CoreStep(2, 4, 1.86, 1.70, 2.03), judge.CoreStep(4, 8, 1.08, 0.98, 1.19),
             judge.CoreStep(8, 10, 1.02, 0.97, 1.06)]
    v = judge.cpu_scaling("osd.0", pts, steps)
    assert (v.data["knee_cores"], v.data["knee_low"], v.data["knee_high"]) == (4, 4, 8)
    assert "stops paying at 4 (95%: from 4 to 8)" in v.summary, v.summary
    assert "4 -> 8 cores: +8.0% IOPS (95%: -2.0% to +19.0%)" in v.evidence
    # Every step still pays, or may: the knee is past the last count measured.
    paying = [judge.CoreStep(1, 2, 1.9, 1.5, 2.3), judge.CoreStep(2, 3, 1.3, 1.05, 1.6)]
    v = judge.cpu_scaling("osd.0", pts[:3], paying)
    assert v.data["knee_low"] == 2 and v.data["knee_high"] is None
    assert "from 2 to beyond 3, the last measured" in v.summary, v.summary


def test_cleanup_tries_everything_and_reports_what_failed() -> None:
    done: list[str] = []
    c = Cleanup()
    c.push("a", lambda: done.append("a"))
    c.push("b", lambda: (_ for _ in ()).throw(OSError("busy")))
    c.push("c", lambda: done.append("c"))
    c.pop("c")
    c.run_all()
    assert done == ["c", "a"]
    assert c.done == ["c", "a"] and c.failed == ["b: busy"]


def test_worst_of_verdicts() -> None:
    mk = lambda v: judge.Verdict("x", v, "", "")  # noqa: E731
    assert judge.worst([mk(PASS), mk(SKIP)]) == PASS
    assert judge.worst([mk(PASS), mk(WARN), mk(SKIP)]) == WARN
    assert judge.worst([mk(WARN), mk(FAIL)]) == FAIL



def test_a_report_says_what_changed_since_the_last(tmp_path: Path) -> None:
    from stormdeck.advisors.validate.runner import Report, StepReport, save, to_markdown

    def report(sleep_verdict: str) -> Report:
        step = StepReport("settings", "Cluster settings", status="done", verdicts=[
            judge.Verdict("osd_scrub_sleep", sleep_verdict, "0 s", "K3.6"),
            judge.Verdict("pool rbd pg_num", PASS, "128", "K4.2")])
        return Report(started=1_800_000_000.0, ended=1_800_000_060.0, cluster="f1",
                      quick=True, steps=[step])

    first = report(WARN)
    assert first.exit_code() == 1
    save(first, tmp_path)
    second = report(PASS)
    save(second, tmp_path)
    assert second.changes == ["osd_scrub_sleep warn -> pass"]
    assert "Since the last report: osd_scrub_sleep warn -> pass" in to_markdown(second)
    assert second.exit_code() == 0
    cancelled = report(PASS)
    cancelled.cancelled = True
    assert cancelled.exit_code() == 130


def test_bad_input_gets_one_sentence(tmp_path: Path) -> None:
    import os

    from tests.conftest import run_cli

    env = {k: v for k, v in os.environ.items() if k not in ("CEPH_CONF", "CEPH_ARGS")}
    conf = tmp_path / "ceph.conf"
    conf.write_text("[global]\n")
    for args, rc, words in (
            (("validate", "--headless"), 3, "needs the cluster"),
            (("validate", "--headless", "-c", str(tmp_path / "none.conf")), 3,
             "no such ceph.conf"),
            (("validate", "--headless", "-c", str(conf), "--scratch-dir",
              str(tmp_path / "no")), 3, "is not a directory"),
            (("validate", "--skip", "bogus"), 3, "invalid choice")):
        res = run_cli(*args, env=env)
        assert res.rc == rc and words in res.err, (args, res)
        assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
