"""The only mgr killed and started again, on each release's lab: the console and the recorder
live through it, name the dead mgr, keep the mons' view live; `check` and `snapshot` run.

Before docs/mgr-failure.md's fix the console died with SIGSEGV 5-7 s after the mgr's
return: a mgr command librados had given up on was resent and answered into freed memory.
That needs a command unanswered while the mgr is dead (the console sends one within a
poll of the kill) and the mgr back while it is still pending (the lab restarts it 25 s
later). STORMDECK_MGR_ROUNDS (default 1) repeats the cycle; STORMDECK_MGR_AFTER (default
10: the crash came 4-7 s after the return) is how long each round watches after it (the
issue's soak: 5 rounds, 60 s, run by hand on all three releases: docs/measured.md).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from stormdeck.lab import procs
from stormdeck.lab.cluster import Lab
from tests.conftest import LabCluster, eventually, free_ports, run_cli
from tests.integration.test_console_tmux import Tmux

pytestmark = pytest.mark.integration

# The mgr's outage each round: past the beacon grace set below, so the mons raise
# MGR_DOWN, and many of the console's mgr waits long (the operator saw 45 s with
# the default 30 s grace; the crash needed only a command timed out and then a mgr back).
DOWN_SECONDS = 25.0
BEACON_GRACE = 10  # mon_mgr_beacon_grace for the test (30 s by default): 20 s less a round
NAMED_WITHIN = 35.0  # the screen names the dead mgr this soon after the kill
ROUNDS = int(os.environ.get("STORMDECK_MGR_ROUNDS", "1"))
AFTER = float(os.environ.get("STORMDECK_MGR_AFTER", "10"))


def mgr_pid(lab: LabCluster) -> int:
    state = json.loads((lab.dir / "lab.json").read_text())
    pid = int(state["procs"]["mgr.x"]["pid"])
    # The lab's pid is the daemon itself (sh, unshare and chroot exec it).
    assert procs.is_ours(pid, str(lab.dir) + "/") and psutil.Process(pid).name() == "ceph-mgr"
    return pid


def mgr_line(screen: list[str]) -> str:
    """The overview's line naming the dead mgr, with its wrapped rest."""
    text = re.sub(r"\s+", " ", " ".join(screen))
    found = re.search(r"\bdown mgr\.x since .*? are from \d\d:\d\d:\d\d", text)
    return found.group(0) if found else ""


def alive(tmux: Tmux) -> bool:
    out = subprocess.run([*tmux.cmd, "list-panes", "-t", "sd", "-F", "#{pane_dead}"],
                         capture_output=True, text=True).stdout.strip()
    return out == "0"


# The client is this host's Pacific librados on every release; what differs is the mons'
# side (mgr stat, MGR_DOWN, their log), the same code in Reef as in Pacific and Tentacle.
# The suite's time is bounded (40 min on 2 cores): Reef's 5-round soak is run by hand.
@pytest.mark.releases("pacific", "tentacle")
def test_the_console_lives_through_the_only_mgr_dying_and_coming_back(
        release_cluster: LabCluster, tmp_path: Path) -> None:
    lab = release_cluster
    control = Lab(lab.dir, progress=lambda _msg: None)
    control.read_state()
    conf = ["-c", str(lab.conf)]
    # A cluster whose monmap is younger than mon_mgr_mkfs_grace (120 s) never raises
    # MGR_DOWN (MgrMonitor::should_warn_about_mgr_down), and a test lab may be that young.
    lab.command("config set", who="mon", name="mon_mgr_mkfs_grace", value="0")
    lab.command("config set", who="mon", name="mon_mgr_beacon_grace", value=str(BEACON_GRACE))
    tmux = Tmux(["watch", *conf], (100, 40), tmp_path / "state")
    # A pane whose program died stays, so its death is seen rather than a closed session.
    subprocess.run([*tmux.cmd, "set-option", "-t", "sd", "remain-on-exit", "on"], check=True)
    recording = tmp_path / "mgr.sdrec"
    recorder = subprocess.Popen(
        [sys.executable, "-m", "stormdeck", "record", str(recording), *conf, "--no-host"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
        cwd=Path(__file__).parents[2])
    try:
        eventually(lambda: any("health" in ln for ln in tmux.screen()), 60)
        for n in range(ROUNDS):
            os.kill(mgr_pid(lab), signal.SIGKILL)
            killed = time.monotonic()
            line = eventually(lambda: mgr_line(tmux.screen()), NAMED_WITHIN, interval=0.5)
            named = time.monotonic() - killed
            # Dated, not shown as current.
            assert "PGs, latency and fill below are from" in line, "\n".join(tmux.screen())

            # The mons' view stays live: a flag set now is on screen while the mgr is down.
            lab.command("osd set", key="noout")
            try:
                eventually(lambda: any(re.match(r"\s*flags\s+.*noout", ln)
                                       for ln in tmux.screen()), 15)
            finally:
                lab.command("osd unset", key="noout")
            # The mons give up on the mgr after mon_mgr_beacon_grace (BEACON_GRACE): MGR_DOWN.
            try:
                eventually(lambda: "MGR_DOWN" in " ".join(tmux.screen()), DOWN_SECONDS)
            except AssertionError:
                raise AssertionError("\n".join(tmux.screen())) from None

            check = run_cli("check", *conf, "--no-host", timeout=120)
            assert check.rc in (1, 2), (check.rc, check.out, check.err)
            assert "ceph.mgr.down" in check.out and "mgr.x" in check.out, check.out
            snap = run_cli("snapshot", *conf, "--no-host", timeout=120)
            assert snap.rc == 0, (snap.out, snap.err)
            assert "mgr parts not read" in snap.out and "MGR_DOWN" in snap.out, snap.out
            assert "3 up, 3 in" in snap.out, snap.out

            time.sleep(max(0.0, DOWN_SECONDS - (time.monotonic() - killed)))
            assert alive(tmux) and recorder.poll() is None, f"round {n}: died while down"
            control.start_daemon("mgr.x")
            back = time.monotonic()
            # Serving again: the line goes once a mgr answers (the pending command first).
            eventually(lambda: not mgr_line(tmux.screen()), 60, interval=0.5)
            time.sleep(max(0.0, AFTER - (time.monotonic() - back)))
            assert alive(tmux), f"round {n}: the console died after the mgr came back:\n" + \
                "\n".join(tmux.screen()[-10:])
            assert recorder.poll() is None, recorder.communicate()
            assert named <= NAMED_WITHIN
        screen = "\n".join(tmux.screen())
        assert "Segmentation" not in screen and "Traceback" not in screen, screen
    finally:
        tmux.close()
        if recorder.poll() is None:
            recorder.send_signal(signal.SIGINT)
        out, err = recorder.communicate(timeout=60)
        if not control.alive(control.read_state().procs["mgr.x"]):  # type: ignore[union-attr]
            control.start_daemon("mgr.x")
        lab.command("config rm", who="mon", name="mon_mgr_mkfs_grace")
        lab.command("config rm", who="mon", name="mon_mgr_beacon_grace")
    assert recorder.returncode == 0, (out, err)
    # The recording tells the story: the mgr stopping and serving again.
    report = run_cli("report", str(recording), timeout=120)
    assert report.rc == 0, report.err
    assert "mgr.x stopped serving" in report.out and "mgr.x serving again" in report.out, \
        report.out


def pg_stats_reported(lab: LabCluster) -> bool:
    """The active mgr's own `pg stat` has every PG in a known state (the OSDs reported)."""
    cluster = lab.rados()
    try:
        # No rados_mon_op_timeout on this handle: the call waits for an answer, so it
        # leaves librados nothing pending (docs/mgr-failure.md).
        ret, out, _ = cluster.mgr_command(json.dumps({"prefix": "pg stat",
                                                      "format": "json"}), b"")
    finally:
        cluster.shutdown()
    if ret != 0:
        return False
    raw = json.loads(out)
    summary = raw.get("pg_summary", raw)
    states = {s["name"]: s["num"] for s in summary["num_pg_by_state"]}
    return bool(states) and "unknown" not in states


@pytest.mark.releases("pacific")  # the hand-over is the mons' and the client's, not a
# release's own code path beyond what the test above runs on each release
def test_a_failover_to_a_standby_is_seen_and_pg_states_resume_within_a_poll(
        release_cluster: LabCluster, tmp_path: Path) -> None:
    from stormdeck.collectors.ceph.source import CephSource
    from stormdeck.collectors.hub import Hub

    lab = release_cluster
    control = Lab(lab.dir, progress=lambda _msg: None)
    control.read_state()
    (port,) = free_ports(1)
    standby = control.add_standby_mgr("y", port)
    try:
        eventually(lambda: lab.command("mgr stat").get("num_standby") == 1, 60)  # type: ignore[union-attr]
        tmux = Tmux(["watch", "-c", str(lab.conf)], (100, 40), tmp_path / "state")
        subprocess.run([*tmux.cmd, "set-option", "-t", "sd", "remain-on-exit", "on"],
                       check=True)
        hub = Hub([CephSource(str(lab.conf))], interval=1.0)
        hub.start()
        seen: list[tuple[float, object]] = []
        try:
            assert hub.wait_polls(1, 30)
            eventually(lambda: any("health" in ln for ln in tmux.screen()), 60)
            lab.command("mgr fail", who="x")
            failed = time.monotonic()

            def watch(until: float) -> None:
                while time.monotonic() < until:
                    snap = hub.snapshot()
                    seen.append((time.monotonic(), snap.cluster))
                    time.sleep(0.2)

            reported = None
            while time.monotonic() - failed < 90:
                watch(time.monotonic() + 1.0)
                c = seen[-1][1]
                if reported is None and getattr(getattr(c, "mgr", None), "active", None) == "y" \
                        and pg_stats_reported(lab):
                    reported = time.monotonic()
                if reported is not None and time.monotonic() - reported > 5:
                    break
            assert reported is not None, "mgr.y never reported PG stats"
            # Within one poll (1 s, and the poll's own time) the source has them too.
            resumed = next((t for t, c in seen if t >= reported and c is not None
                            and c.mgr is not None and c.mgr.active == "y" and c.mgr.serving
                            and c.pg_states and "unknown" not in c.pg_states), None)
            assert resumed is not None and resumed - reported <= 2.5, (resumed, reported)
            assert alive(tmux), "\n".join(tmux.screen())
        finally:
            hub.stop()
            tmux.close()
    finally:
        # Back as the lab was: x active, no standby.
        if lab.command("mgr stat").get("active_name") == "y":  # type: ignore[union-attr]
            lab.command("mgr fail", who="y")
            eventually(lambda: lab.command("mgr stat").get("active_name") == "x", 60)  # type: ignore[union-attr]
        control.stop_daemon(standby.name)
        lab.command("config rm", who="mgr.y", name="mgr/prometheus/server_port")
