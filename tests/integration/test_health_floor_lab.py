"""Ceph's own health as check's floor, on the real lab: bad states made, judged, restored."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LabCluster, eventually, run_cli

pytestmark = pytest.mark.integration

POOL = "healthfloor"
MINE = ("ceph.health.check", "ceph.pgs.inactive", "ceph.pgs.unfound", "ceph.osd.fullness",
        "ceph.pool.fullness", "ceph.flags.left_set")


def check(lab: LabCluster, env: dict[str, str], seconds: str = "2") -> tuple[int, dict]:
    res = run_cli("check", "-c", str(lab.conf), "--json", "--for", seconds,
                  "--interval", "1", env=env)
    assert res.rc in (0, 1, 2), res.err
    out = json.loads(res.out)
    assert out["exit"] == res.rc
    return res.rc, out


def firing(out: dict, rule: str) -> dict[str, dict]:
    return {f["target"]: f for f in out["findings"] if f["rule"] == rule
            and f["state"] == "firing"}


def health(lab: LabCluster) -> dict[str, Any]:
    return lab.command("health", detail="detail")  # type: ignore[return-value]


def raised(lab: LabCluster, code: str) -> bool:
    return code in health(lab).get("checks", {})


def healthy(lab: LabCluster) -> bool:
    h = health(lab)
    if h.get("status") != "HEALTH_OK":
        return False
    stat = lab.command("pg stat", target="mgr")
    states = stat.get("pg_summary", stat).get("num_pg_by_state", [])  # type: ignore[union-attr]
    return all(s["name"] in ("active+clean", "active+clean+scrubbing",
                             "active+clean+scrubbing+deep") for s in states)


@pytest.fixture
def restored(lab_cluster: LabCluster) -> Iterator[LabCluster]:
    """Whatever the test changed is put back, and the lab is healthy again, on the way out."""
    lab = lab_cluster
    try:
        yield lab
    finally:
        errors = []
        for prefix, args in (("osd unset", {"key": "noout"}),
                             ("osd set-nearfull-ratio", {"ratio": 0.85})):
            try:
                lab.command(prefix, **args)
            except AssertionError as exc:
                errors.append(str(exc))
        lab.cli("lab", "start", "osd.2")  # refused (rc != 0) when it runs: fine
        if POOL in (lab.command("osd pool ls") or []):  # type: ignore[operator]
            lab.command("osd pool rm", pool=POOL, pool2=POOL,
                        yes_i_really_really_mean_it=True)
        eventually(lambda: healthy(lab), 180, interval=1.0)
        assert not errors, errors


def test_check_says_at_least_what_ceph_says(restored: LabCluster, tmp_path: Path) -> None:
    lab = restored
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}  # no mutes from elsewhere
    eventually(lambda: healthy(lab), 120, interval=1.0)

    # The healthy lab: none of these rules says anything, and check exits 0.
    rc, out = check(lab, env)
    assert not [f for f in out["findings"] if f["rule"] in MINE], out["findings"]
    assert rc == 0, out["findings"]

    # noout left set: the flag rule says what it stops and who set it (the audit log);
    # Ceph's OSDMAP_FLAGS is folded into it, not a second finding.
    lab.command("osd set", key="noout")
    eventually(lambda: raised(lab, "OSDMAP_FLAGS"), 30)
    rc, out = check(lab, env)
    (f,) = firing(out, "ceph.flags.left_set").values()
    assert f["target"] == "cluster:noout" and "client.admin" in f["summary"], f
    assert "OSDMAP_FLAGS" not in firing(out, "ceph.health.check")
    assert any("OSDMAP_FLAGS" in n for n in f["notes"]), f["notes"]
    assert rc == 1
    lab.command("osd unset", key="noout")

    # A nearfull ratio below what the OSDs already use: each OSD is past it, as Ceph says.
    lab.command("osd set-nearfull-ratio", ratio=0.05)
    eventually(lambda: raised(lab, "OSD_NEARFULL"), 60)
    rc, out = check(lab, env)
    full = firing(out, "ceph.osd.fullness")
    assert set(full) == {"osd.0", "osd.1", "osd.2"}, out["findings"]
    assert all("nearfull ratio 5%" in f["summary"] for f in full.values())
    assert any("is near full" in line for f in full.values() for line in f["detail"])
    assert "OSD_NEARFULL" not in firing(out, "ceph.health.check")
    assert rc == 1
    lab.command("osd set-nearfull-ratio", ratio=0.85)
    eventually(lambda: not raised(lab, "OSD_NEARFULL"), 60)

    # The case: an OSD stopped and marked down, a size-2 pool degraded and the
    # size-1 pools' PGs on it stale. Ceph says HEALTH_WARN; check may not say less.
    lab.command("osd pool create", pool=POOL, pg_num=16, pgp_num=16)
    lab.command("osd pool set", pool=POOL, var="size", val="2")
    lab.command("osd pool application enable", pool=POOL, app="rbd")
    eventually(lambda: healthy(lab), 120, interval=1.0)
    assert lab.cli("lab", "stop", "osd.2").rc == 0
    lab.command("osd down", ids=["2"])
    # Writes while osd.2 is down: the PGs that had a copy on it are degraded, not only
    # undersized (an empty PG has no object to be degraded).
    cluster = lab.rados()
    try:
        io = cluster.open_ioctx(POOL)
        for i in range(32):
            io.write_full(f"obj{i}", b"x" * 4096)
        io.close()
    finally:
        cluster.shutdown()
    eventually(lambda: raised(lab, "OSD_DOWN") and raised(lab, "PG_DEGRADED"), 60)
    rc, out = check(lab, env, "5")
    floor = firing(out, "ceph.health.check")
    assert "OSD_DOWN" in floor and "PG_DEGRADED" in floor, out["findings"]
    assert any("osd.2" in line for line in floor["OSD_DOWN"]["detail"])
    assert floor["OSD_DOWN"]["severity"] == "warning"
    inactive = firing(out, "ceph.pgs.inactive")
    if inactive:  # the size-1 pools' PGs on osd.2: stale, critical at once
        assert inactive["cluster"]["severity"] == "critical" and rc == 2
    assert rc >= 1
