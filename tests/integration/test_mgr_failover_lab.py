"""A mgr failover that the OSDs have not reported to yet, on each release's lab: every PG
unknown while every OSD is up, which ceph.peering.storm must not call a storm."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

from stormdeck.advisors.rules.peering import mgr_blind
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.hub import merge
from stormdeck.collectors.model import SourceHealth
from stormdeck.lab import procs
from stormdeck.lab.cluster import Lab
from tests.capture_release import EXTRA, FILES, Recording
from tests.conftest import LabCluster, ceph_json, eventually

pytestmark = pytest.mark.integration

RULE = "ceph.peering.storm"
# Judged at once: one poll that called the blind mgr's unknown PGs a storm would fire.
BLIND = "ceph.mgr.no_pg_stats"
RULES = f"""
["{RULE}"]
for_seconds = 0
warmup_samples = 1
window_seconds = 30

# What it is instead, said after 5 s of it here (60 s as shipped).
["{BLIND}"]
for_seconds = 5
warmup_samples = 1
window_seconds = 30
"""
POOL = "lab-failover"
PGS = 32  # above the rule's min_pgs (10) on its own, so a misjudged poll would fire
CHECK_SECONDS = 8
# Set to a directory (tests/data) to keep the blind mgr's replies as
# <dir>/<release>/mgr_failover/, the unit tests' capture of this state.
CAPTURE_ENV = "STORMDECK_CAPTURE_DIR"


def osd_pids(lab: LabCluster) -> dict[str, int]:
    state = json.loads((lab.dir / "lab.json").read_text())
    return {name: p["pid"] for name, p in state["procs"].items() if name.startswith("osd.")}


@contextmanager
def paused(lab: LabCluster) -> Iterator[list[int]]:
    """Every OSD of this lab stopped (SIGSTOP) and continued again on the way out, whatever
    happens in between: a stopped OSD left behind would hang the next test's IO."""
    marker = str(lab.dir) + "/"
    pids = osd_pids(lab)
    assert pids and all(procs.is_ours(pid, marker) for pid in pids.values()), pids
    stopped: list[int] = []
    try:
        for pid in pids.values():
            os.kill(pid, signal.SIGSTOP)
            stopped.append(pid)
        # The lab's pid is the ceph-osd itself (sh, unshare and chroot exec it).
        eventually(lambda: all(psutil.Process(p).status() == psutil.STATUS_STOPPED
                               for p in stopped), 10, interval=0.1)
        assert all(psutil.Process(p).name() == "ceph-osd" for p in stopped)
        yield stopped
    finally:
        for pid in stopped:
            if procs.is_ours(pid, marker):
                os.kill(pid, signal.SIGCONT)


def pg_stat(cluster) -> tuple[int, dict[str, int]]:
    raw = ceph_json(cluster, "pg stat", target="mgr")
    summary = raw.get("pg_summary", raw)  # Pacific on wraps it; older releases did not
    states = {s["name"]: s["num"] for s in summary["num_pg_by_state"]}
    return summary["num_pgs"], states


def blind_with_all_up(lab: LabCluster, total: int) -> bool:
    """The mon's `ceph status` (what CephSource reads) and the mgr's `pg stat` both say
    every PG unknown, and the osdmap says every OSD up."""
    cluster = lab.rados()
    try:
        try:
            num, states = pg_stat(cluster)
        except AssertionError:  # no active mgr yet: it is taking over
            return False
        status = ceph_json(cluster, "status")
    finally:
        cluster.shutdown()
    pgmap, osdmap = status["pgmap"], status["osdmap"]
    osdmap = osdmap.get("osdmap", osdmap)  # Nautilus and older nest it once more
    by_state = {s["state_name"]: s["count"] for s in pgmap.get("pgs_by_state", [])}
    return num == total and states == {"unknown": total} and \
        pgmap["num_pgs"] == total and by_state == {"unknown": total} and \
        osdmap["num_up_osds"] == osdmap["num_osds"] > 0


# The mgr's blind window after a failover is the same code (DaemonServer::send_report) on
# every tested release; Pacific stands for them (the suite's time is bounded: 100 s a
# release lab). The captured Reef and Tentacle failovers stay in the unit tests.
@pytest.mark.releases('pacific')
def test_a_mgr_failover_before_any_pg_stats_is_not_a_storm(
        release_cluster: LabCluster, tmp_path: Path) -> None:
    lab = release_cluster
    t0 = time.monotonic()
    control = Lab(lab.dir, progress=lambda _msg: None)
    control.read_state()  # which root its `ceph` runs from
    cluster = lab.rados()
    try:
        ceph_json(cluster, "osd pool create", pool=POOL, pg_num=PGS, pgp_num=PGS)
        ceph_json(cluster, "osd pool application enable", pool=POOL, app="rbd")
        active = ceph_json(cluster, "mgr dump")["active_name"]
    finally:
        cluster.shutdown()
    try:
        control.wait_clean(120)
        total, _ = control.pg_counts()
        assert total >= PGS
        rules = tmp_path / "rules.toml"
        rules.write_text(RULES)
        env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
        with paused(lab):
            cluster = lab.rados()
            try:
                ceph_json(cluster, "mgr fail", who=active)
            finally:
                cluster.shutdown()
            failed_at = time.monotonic()
            # The mgr that takes over (here the same one, respawned as a standby) starts
            # from an empty PG map: every PG of the osdmap unknown until its primary
            # reports, and no OSD can; none is marked down (mon_osd_report_timeout 900 s).
            # It keeps that map from the mon until every up OSD has reported or
            # 4 x mgr_stats_period (20 s) have passed (DaemonServer::send_report): only
            # then does `ceph status` say unknown; until then it gives the old mgr's map.
            eventually(lambda: blind_with_all_up(lab, total), 90, interval=1.0)
            blind_at = time.monotonic()

            # What the real CephSource reads now: the state the rule has to judge.
            source = Recording(str(lab.conf))
            try:
                partial = source.poll()
                for target, cmd in EXTRA.values():
                    source.replies[cmd["prefix"]] = source._send(target, cmd, 30)
            finally:
                source.close()
            assert not partial.errors, partial.errors
            snap = merge([partial], {"ceph": SourceHealth("ceph", True, partial.time)},
                         now=partial.time)
            c = snap.cluster
            assert c is not None and c.num_pgs == total
            assert c.pgs_in("unknown") == total and mgr_blind(c)
            # Were it judged, this would be a storm: every PG not active, far above the
            # rule's thresholds, with every OSD up.
            params = load_settings()[RULE].params
            assert total >= max(float(params["min_pgs"]), float(params["min_fraction"]) * total)
            assert not c.pg_flags.get("active")
            osds = [d for d in snap.daemons.values() if d.kind == "osd"]
            assert osds and all(d.up for d in osds), osds
            if out := os.environ.get(CAPTURE_ENV):
                keep(source, Path(out) / lab.release / "mgr_failover")

            started = time.monotonic()
            res = subprocess.run(
                [sys.executable, "-m", "stormdeck", "check", "-c", str(lab.conf), "--json",
                 "--for", str(CHECK_SECONDS), "--rules", str(rules)], env=env,
                capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])
            took = time.monotonic() - started
            # Still blind at the end: the check judged that state all along.
            assert blind_with_all_up(lab, total)
            blind_for = time.monotonic() - blind_at
        assert res.returncode in (0, 1, 2), res.stderr
        out = json.loads(res.stdout)
        ceph = out["sources"]["ceph"]
        # Nothing the source asks goes to an OSD: it stayed connected and quick.
        assert ceph["ok"] and not ceph["stale"] and ceph["error"] is None, ceph
        assert ceph["poll_seconds"] < 5 and took < CHECK_SECONDS + 30, (ceph, took)
        # The rule does not judge a mgr that knows no PG (not even pending).
        assert not [f for f in out["findings"] if f["rule"] == RULE], out["findings"]
        # Nor does any other rule read the blind mgr's zeros as a fault of the cluster.
        cluster_said = {f["rule"] for f in out["findings"] if f["rule"].startswith("ceph.")}
        assert cluster_said <= {"ceph.release.advisory", BLIND}, out["findings"]
        # What it is: a mgr no OSD reports to, a warning to look, with nothing to change.
        (mgr,) = [f for f in out["findings"] if f["rule"] == BLIND]
        assert (mgr["state"], mgr["severity"], mgr["changes"]) == ("firing", "warning", []), mgr
        assert f"all {total} PGs unknown with 3 of 3 OSDs up" in mgr["summary"], mgr
        assert res.returncode >= 1, "a warning is check's exit 1"
        print(f"\n{lab.release}: `ceph status` blind {blind_at - failed_at:.1f} s after the "
              f"failover; {total} PGs unknown for {blind_for:.1f} s with every OSD up; "
              f"check took {took:.1f} s; health {c.health} {[h.code for h in c.checks]}; findings "
              f"{sorted((f['rule'], f['state']) for f in out['findings'])}")
    finally:
        # Continued by `paused`: the OSDs report, peer if they must, and go clean again.
        clean_in = control.wait_clean(180)
        # The respawned mgr serves its metrics again, as the next test on this lab expects.
        eventually(lambda: metrics_served(lab), 60)
        cluster = lab.rados()
        try:
            ceph_json(cluster, "osd pool rm", pool=POOL, pool2=POOL,
                      yes_i_really_really_mean_it=True)
        finally:
            cluster.shutdown()
        print(f"{lab.release}: active+clean {clean_in:.1f} s after the OSDs went on; "
              f"test {time.monotonic() - t0:.1f} s")


def metrics_served(lab: LabCluster) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{lab.mgr_port}/metrics", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def keep(source: Recording, out: Path) -> None:
    """The blind mgr's replies under the file names tests/data/<release>/ uses."""
    out.mkdir(parents=True, exist_ok=True)
    for prefix, (name, _) in FILES.items():
        (out / name).write_bytes(source.replies[prefix])
    for name, (_, cmd) in EXTRA.items():
        if name in ("osd_stat.json", "pg_stat_clean.json"):
            (out / name.replace("_clean", "")).write_bytes(source.replies[cmd["prefix"]])
    (out / "mgr_dump.json").write_bytes(source.replies["mgr dump"])
