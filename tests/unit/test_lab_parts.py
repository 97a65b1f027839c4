"""The lab's pieces that need no cluster: sizes, config text, state files, PG counts, PIDs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stormdeck.collectors.prometheus.queries import RECORDING_RULES
from stormdeck.lab import procs
from stormdeck.lab.cluster import Lab
from stormdeck.lab.state import (
    LabError,
    Ports,
    Proc,
    State,
    _pg_counts,
    ceph_conf,
    parse_size,
    prometheus_yml,
    write_prometheus_config,
)
from tests.conftest import DATA


@pytest.mark.parametrize(("text", "value"), [
    ("4096", 4096), ("4K", 4096), ("4k", 4096), ("64KiB", 65536), ("4M", 4 << 20),
    ("2G", 2 << 30), (" 1g ", 1 << 30),
])
def test_parse_size(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "K", "four", "-4K", "0", "4T", "4.5K"])
def test_parse_size_rejects_with_a_sentence(text: str) -> None:
    with pytest.raises(LabError, match="size"):
        parse_size(text)


def test_ceph_conf_keeps_everything_in_the_lab_dir(tmp_path: Path) -> None:
    text = ceph_conf(tmp_path, "f-s-i-d", Ports(mon=4321), "bluestore")
    assert "mon host = [v2:127.0.0.1:4321]" in text
    assert "osd objectstore = bluestore" in text
    assert "auth client required = none" in text
    for key in ("mon data", "mgr data", "osd data", "log file", "run dir"):
        for line in text.splitlines():
            if line.startswith(f"{key} ="):
                assert line.split("=", 1)[1].strip().startswith(str(tmp_path)), line
    # Concurrent clients must not share one admin socket.
    assert "$pid" in text.split("[client]")[1]


def test_prometheus_yml_scrapes_mgr_node_exporter_and_ours() -> None:
    text = prometheus_yml(Ports(mgr_prometheus=19283, node_exporter=19100, exporter=19567))
    assert '"127.0.0.1:19283"' in text and '"127.0.0.1:19100"' in text
    assert "job_name: stormdeck" in text and '"127.0.0.1:19567"' in text


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed")
def test_the_labs_prometheus_loads_stormdecks_recording_rules(tmp_path: Path) -> None:
    yml = write_prometheus_config(tmp_path, Ports(mgr_prometheus=19283, node_exporter=19100,
                                                  exporter=19567))
    # promtool checks the config and every rule file it names.
    res = subprocess.run(["promtool", "check", "config", str(yml)], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(RECORDING_RULES)} rules found" in res.stdout, res.stdout
    rules = (tmp_path / "stormdeck-recording.yml").read_text()
    # Rates over four of the lab's 5 s scrapes, as the raw queries take them there.
    assert "[20s]" in rules and "[2m]" not in rules and "record: stormdeck:disk_util" in rules


def test_state_round_trip() -> None:
    state = State(fsid="x", objectstore="bluestore", ports=Ports(mon=1), created=1.0,
                  procs={"osd.0": Proc("osd.0", ["ceph-osd"], 42, "/dev/loop0", "/a.img")})
    again = State.from_json(state.to_json())
    assert again == state


def test_unknown_state_version_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "lab.json").write_text(json.dumps({"version": 99}))
    with pytest.raises(LabError, match="not a lab state file"):
        Lab(tmp_path).read_state()
    (tmp_path / "lab.json").write_text("{torn")
    with pytest.raises(LabError, match="not a lab state file"):
        Lab(tmp_path).read_state()


def test_pg_counts_from_captured_pacific_output() -> None:
    clean = json.loads((DATA / "pacific" / "pg_stat_clean.json").read_text())
    assert _pg_counts(clean) == (1, {"active+clean": 1})
    storm = json.loads((DATA / "pacific" / "pg_stat_storm.json").read_text())
    assert _pg_counts(storm) == (65, {"unknown": 64, "active+clean": 1})
    # A cluster with no PGs yet.
    assert _pg_counts({"pg_ready": True, "pg_summary": {"num_pg_by_state": [], "num_pgs": 0}}) \
        == (0, {})


def test_stop_only_touches_processes_that_name_the_marker(tmp_path: Path) -> None:
    marker = str(tmp_path) + "/"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                              f"{tmp_path}/x"])
    try:
        assert procs.is_ours(child.pid, marker)
        assert not procs.is_ours(child.pid, "/somewhere/else/")
        assert procs.stop(child.pid, "/somewhere/else/") is False
        assert child.poll() is None, "a process that is not ours must not be signalled"
        assert procs.stop(child.pid, marker, timeout=5) is True
        assert not procs.is_ours(child.pid, marker)
        assert not Path(f"/proc/{child.pid}").exists(), "stopped and reaped"
        assert procs.stop(child.pid, marker) is False
    finally:
        child.kill()
        child.wait()


def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
           "print('ready', flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", code, f"{tmp_path}/x"],
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    start = time.monotonic()
    assert procs.stop(child.pid, str(tmp_path) + "/", timeout=0.5)
    # It ignores SIGTERM, so only the SIGKILL after the grace period ended it.
    assert time.monotonic() - start >= 0.5
    assert not procs.is_ours(child.pid, str(tmp_path) + "/")


def test_spawned_process_outlives_its_session_and_logs(tmp_path: Path) -> None:
    log = tmp_path / "log" / "x.out"
    code = "print('hello lab', flush=True); import time; time.sleep(30)"
    pid = procs.spawn([sys.executable, "-c", code, f"{tmp_path}/marker"], log)
    marker = str(tmp_path) + "/"
    try:
        assert procs.is_ours(pid, marker)
        assert os.getsid(pid) == pid, "spawned processes lead their own session"
        deadline = time.monotonic() + 10
        while "hello lab" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "hello lab" in log.read_text()
    finally:
        assert procs.stop(pid, marker, timeout=5)


def test_port_free_sees_a_listener() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert not procs.port_free(port)
    assert procs.port_free(port)
