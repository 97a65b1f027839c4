"""Mutes on the real lab: a mute names the cluster it was made on and silences that one only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import LabCluster, eventually, run_cli

pytestmark = pytest.mark.integration

RULE = "ceph.release.advisory"  # fires on an idle Pacific lab: past its end of life
OTHER = "1b2c3d4e-0000-4000-8000-00000000000b"


def advisory(lab: LabCluster, env: dict[str, str]) -> dict:
    res = run_cli("check", "-c", str(lab.conf), "--json", "--for", "2", env=env)
    assert res.rc in (0, 1, 2), res.err
    found = [f for f in json.loads(res.out)["findings"] if f["rule"] == RULE]
    assert len(found) == 1, found
    return found[0]


def test_a_mute_on_the_lab_names_its_fsid_and_another_clusters_mute_does_not_reach_it(
        lab_cluster: LabCluster, tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    eventually(lambda: advisory(lab_cluster, env)["state"] == "firing", 60)
    res = run_cli("mute", RULE, "--for", "1h", "--reason", "known", "-c", str(lab_cluster.conf),
                  env=env, timeout=120)
    assert res.rc == 0, res.err
    mutes_file = tmp_path / "stormdeck" / "mutes.json"
    (entry,) = json.loads(mutes_file.read_text())["mutes"]
    lab_fsid = entry["fsid"]
    assert lab_fsid and lab_fsid in res.out
    assert lab_fsid == lab_cluster.command("fsid")["fsid"]
    assert advisory(lab_cluster, env)["muted"]
    listed = run_cli("mute", "--list", env=env)
    assert lab_fsid in listed.out and RULE in listed.out
    # The same mute made on another cluster: the lab's finding is loud again.
    data = json.loads(mutes_file.read_text())
    data["mutes"][0]["fsid"] = OTHER
    mutes_file.write_text(json.dumps(data))
    assert not advisory(lab_cluster, env)["muted"]
    res = run_cli("unmute", RULE, entry["target"], "--fsid", lab_fsid, env=env)
    assert res.rc == 3 and f"held on cluster {OTHER}" in res.err
    res = run_cli("unmute", RULE, entry["target"], "--fsid", OTHER, env=env)
    assert res.rc == 0, res.err
    assert json.loads(mutes_file.read_text())["mutes"] == []
