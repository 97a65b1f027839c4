"""Plans that cannot lie, on the lab: a tampered plan is refused and the cluster unchanged."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from stormdeck.advisors.actuators.table import change as make
from stormdeck.advisors.journal import Journal
from tests.conftest import LabCluster, eventually, run_cli

pytestmark = pytest.mark.integration

POOL = "tamperpool"


def ceph(lab: LabCluster, prefix: str, **args: Any) -> Any:
    return lab.command(prefix, **args)


def stored(lab: LabCluster, section: str, key: str) -> str | None:
    for r in ceph(lab, "config dump"):
        if r["section"] == section and r["name"] == key and not r.get("mask"):
            return r["value"]
    return None


def pg_num(lab: LabCluster) -> int:
    return int(ceph(lab, "osd pool get", pool=POOL, var="pg_num")["pg_num"])


def test_a_tampered_plan_is_refused_and_an_untampered_one_applies(
        lab_cluster: LabCluster, tmp_path: Path) -> None:
    lab = lab_cluster
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    journal = Journal(tmp_path / "state" / "stormdeck" / "journal.jsonl")

    def cli(*args: str):
        return run_cli(*args, "-c", str(lab.conf), env=env)

    ceph(lab, "osd pool create", pool=POOL, pg_num=36, pgp_num=36)
    try:
        ceph(lab, "osd pool set", pool=POOL, var="pg_autoscale_mode", val="off")
        plan = tmp_path / "plan.json"
        res = cli("plan", "ceph.pool.pg_not_power_of_two", "--target", f"pool {POOL}",
                  "-o", str(plan))
        assert res.rc == 0, res.err
        assert f"ceph osd pool set {POOL} pg_num 64" in res.out
        assert plan.stat().st_mode & 0o077 == 0, "a plan is its owner's alone"
        raw = json.loads(plan.read_text())
        (change,) = raw["changes"]
        assert raw["fsid"] == ceph(lab, "status")["fsid"]
        assert stored(lab, "mon", "mon_allow_pool_delete") is None
        flags_before = ceph(lab, "osd dump")["flags"]

        tampered = {
            # The review would say pg_num; what runs would set mon_allow_pool_delete.
            "hidden": {**raw, "changes": [{**change, "kind": "ceph_config", "target": "mon",
                                           "key": "mon_allow_pool_delete", "proposed": "true",
                                           "blast_radius": "all monitors"}]},
            # The change is the rule's; the text shown is not what it runs.
            "text": {**raw, "changes": [{**change,
                                         "command": f"ceph osd pool set {POOL} pg_num 32"}]},
            # A cluster-wide pause beside it, with its own honest command.
            "pause": {**raw, "changes": [change, asdict(make("osd_flag", "cluster", "pause",
                                                              "unset", "set"))]},
        }
        for name, doc in tampered.items():
            path = tmp_path / f"{name}.json"
            path.write_text(json.dumps(doc))
            res = cli("apply", str(path), "--yes")
            assert res.rc == 3, (name, res.out, res.err)
            assert len(res.err.strip().splitlines()) == 1, res.err
            assert "refused" in res.err, res.err
            assert "applied" not in res.out
        # Nothing changed on the cluster, and nothing was even journaled.
        assert stored(lab, "mon", "mon_allow_pool_delete") is None
        assert ceph(lab, "osd dump")["flags"] == flags_before
        assert "pause" not in ceph(lab, "osd dump")["flags"]
        assert pg_num(lab) == 36
        assert journal.entries() == []

        # The plan as made applies, and the journal keeps the command it rendered.
        res = cli("apply", str(plan), "--yes", "--verify-seconds", "5")
        assert res.rc == 0, res.err
        assert f"ceph osd pool set {POOL} pg_num 64" in res.out
        (entry,) = journal.entries()
        assert entry.change.command == f"ceph osd pool set {POOL} pg_num 64"
        assert entry.change.key == "pg_num" and entry.change.proposed == "64"
        res = run_cli("journal", env=env)
        assert f"ceph osd pool set {POOL} pg_num 64" in res.out
        assert entry.status in ("applied", "pending"), entry.status
        eventually(lambda: pg_num(lab) == 64, 120)
    finally:
        if POOL in {p["poolname"] for p in ceph(lab, "osd lspools")}:
            ceph(lab, "osd pool rm", pool=POOL, pool2=POOL, yes_i_really_really_mean_it=True)
