"""Advice under the mClock scheduler against the release labs: Reef and Tentacle run
mclock_scheduler, Pacific wpq (run with STORMDECK_RELEASES=tentacle or reef,tentacle)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.advisors import overrides
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.hub import History, Hub
from stormdeck.collectors.prometheus.source import PrometheusSource
from stormdeck.lab.state import SCRAPE_INTERVAL
from tests.conftest import (
    LabCluster,
    ceph_json,
    eventually,
    lab_home,
    not_required,
    selected_releases,
    started_lab,
)

pytestmark = pytest.mark.integration

# The rules a scrub under load and a slowed client wake, judged at once (the shipped
# for-windows are minutes long; what they propose is the same).
RULES = """
["ceph.scrub.during_load"]
for_seconds = 0
warmup_samples = 1
window_seconds = 30

["ceph.mclock.background_vs_clients"]
for_seconds = 0
warmup_samples = 1
window_seconds = 60
"""
MCLOCK_OVERRIDES = {k for k, o in overrides.TABLE.items() if o.scheduler == overrides.MCLOCK}


# mClock's overrides are the same table on Reef and Tentacle (osd.yaml.in); Tentacle stands
# for both (the suite's time is bounded).
@pytest.mark.releases('pacific', 'tentacle')
def test_under_load_no_finding_proposes_an_option_mclock_overrides(
        release_cluster: LabCluster, tmp_path: Path) -> None:
    lab = release_cluster
    cluster = lab.rados()
    try:
        # With a key, `config get` answers the bare value, not JSON, in any format.
        ret, out, err = cluster.mon_command(json.dumps(
            {"prefix": "config get", "who": "osd", "key": "osd_op_queue"}), b"", timeout=30)
    finally:
        cluster.shutdown()
    assert ret == 0, err
    queue = out.decode().strip()
    if lab.release == "pacific":
        assert queue == "wpq"
        not_required("Pacific runs wpq, where the sleeps work: test_changes_lab applies one")
    assert queue == "mclock_scheduler"
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    assert lab.cli("lab", "load", "--threads", "8").rc == 0
    try:
        time.sleep(6)  # the mgr's client IO rates need a few seconds of load
        check = subprocess.Popen(
            [sys.executable, "-m", "stormdeck", "check", "-c", str(lab.conf), "--json",
             "--for", "25", "--rules", str(rules)], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        # Scrubs under client load: what made the old advice propose osd_scrub_sleep.
        cluster = lab.rados()
        try:
            # A mgr command; through the mon with `who` a string it never answers, and
            # librados' mon_command has no timeout of its own.
            ceph_json(cluster, "osd pool deep-scrub", target="mgr", who=["lab-bench"])
        finally:
            cluster.shutdown()
        out, err = check.communicate(timeout=180)
    finally:
        lab.cli("lab", "load", "--stop")
    assert check.returncode in (0, 1, 2), err
    findings = json.loads(out)["findings"]
    proposed = {(f["rule"], c["key"]) for f in findings for c in f["changes"]}
    assert not {key for _, key in proposed} & MCLOCK_OVERRIDES, proposed
    # Where it judged the scrub it saw hurting clients (under mClock only with their
    # latency up, issue 31), it pointed to the lever mClock has.
    for scrub in [f for f in findings if f["rule"] == "ceph.scrub.during_load"]:
        assert "mclock_scheduler" in scrub["summary"], scrub
        assert [(c["key"], c["proposed"]) for c in scrub["changes"]] in \
            ([("osd_mclock_profile", "high_client_ops")], [])
        assert any("osd_scrub_begin_hour" in p for p in scrub["procedure"])


RULE = "ceph.mclock.background_vs_clients"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "mclock_lab" in metafunc.fixturenames:
        # Reef and Tentacle run the same mClock; this test's own lab and 75 s of load are paid
        # once, on the newest (the suite's time is bounded).
        wanted = [r for r in selected_releases(metafunc.config) if r == "tentacle"] or ["pacific"]
        metafunc.parametrize("mclock_lab", wanted, indirect=True)


@pytest.fixture
def mclock_lab(request: pytest.FixtureRequest) -> Iterator[LabCluster]:
    """A lab of the test's own: an OSD marked out moves data for minutes after it is
    marked in again, which the shared lab's next test would wait on."""
    if request.param == "pacific":
        not_required("Pacific runs wpq: the rule is for mclock_scheduler")
    with lab_home() as home:
        yield from started_lab(home / "cluster", request.param)


def test_recovery_that_slows_clients_is_seen_in_op_latency(mclock_lab: LabCluster) -> None:
    """The rule's bad case on the lab: an OSD marked out under client load.

    `osd perf`'s commit latency is BlueStore's and misses mClock's queue: on Tentacle it
    stayed at 2-3 ms while clients fell from ~3,500 to ~900 IOPS (16 in flight). The
    OSDs' own op_w_latency, through Prometheus (the lab's mgr serves the perf counters,
    as ceph-exporter does under cephadm), rose from ~3 to 8-49 ms. high_recovery_ops
    gives recovery the larger share, as an operator in a hurry to recover would set it.
    """
    lab = mclock_lab
    settings = load_settings()
    s = settings[RULE]
    engine = Engine({**settings, RULE: replace(
        s, for_seconds=5, warmup_samples=1,
        params={**s.params, "window_seconds": 300, "min_quiet_samples": 10})}, mutes=None)
    prom = PrometheusSource(f"http://127.0.0.1:{lab.prometheus_port}", timeout=5,
                            scrape_interval=SCRAPE_INTERVAL)
    hub = Hub([CephSource(conffile=str(lab.conf)), prom], interval=1.0)
    history = History()

    def firing() -> list:
        history.append(hub.snapshot())
        return [f for f in engine.evaluate(history) if f.rule == RULE and f.state == "firing"]

    cluster = lab.rados()
    try:
        ceph_json(cluster, "config set", who="osd", name="osd_mclock_profile",
                  value="high_recovery_ops")
        assert lab.cli("lab", "load", "--threads", "16").rc == 0
        hub.start()
        try:
            # Four scrapes make the first rate; then the quiet samples it compares with.
            def op_latency() -> bool:
                osds = [d for d in hub.snapshot().daemons.values() if d.kind == "osd"]
                return bool(osds) and all(d.op_write_latency is not None for d in osds)

            eventually(op_latency, 60, interval=1.0)
            quiet_until = time.monotonic() + 25
            while time.monotonic() < quiet_until:
                # The healthy case: clients under load and no background work.
                assert not firing()
                time.sleep(1.0)
            ceph_json(cluster, "osd out", ids=["0"])
            began = time.monotonic()
            (f,) = eventually(firing, 150, interval=1.0)
            print(f"fired {time.monotonic() - began:.0f} s after the OSD went out: "
                  f"{f.summary}")
        finally:
            hub.stop()
            prom.close()
            lab.cli("lab", "load", "--stop")
    finally:
        cluster.shutdown()
    assert "op write latency" in f.summary, f.summary
    assert "high_recovery_ops" in f.summary, f.summary
    # The operator chose high_recovery_ops (and an OSD out leaves PGs degraded): the rule
    # shows the cost to clients but proposes no high_client_ops (issue 31, harm 2).
    assert not [c for c in f.changes if c.key == "osd_mclock_profile"], f.changes
    assert any("not proposed" in p.lower() for p in f.procedure), f.procedure
    busy, quiet = f.evidence[0], f.evidence[1]
    assert busy.avg > 2 * quiet.avg, (busy, quiet)
