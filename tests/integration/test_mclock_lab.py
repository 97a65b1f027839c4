"""Advice under the mClock scheduler against the release labs: Reef and Tentacle run
mclock_scheduler, Pacific wpq (run with STORMDECK_RELEASES=tentacle or reef,tentacle)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from stormdeck.advisors import overrides

from tests.conftest import LabCluster, ceph_json

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
        pytest.skip("Pacific runs wpq, where the sleeps work: test_changes_lab applies one")
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
    # It judged the scrub it saw, and pointed to the lever mClock has.
    (scrub,) = [f for f in findings if f["rule"] == "ceph.scrub.during_load"]
    assert "mclock_scheduler" in scrub["summary"], scrub
    assert [(c["key"], c["proposed"]) for c in scrub["changes"]] == \
        [("osd_mclock_profile", "high_client_ops")]
    assert any("osd_scrub_begin_hour" in p for p in scrub["procedure"])
