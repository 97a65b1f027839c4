"""Ceph's own health as check's floor, on the real lab: bad states made, judged, restored."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import LabCluster, eventually, run_cli, unsettled

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


def unhealthy(lab: LabCluster) -> str:
    """Why the lab is not healthy, or "" when Ceph says HEALTH_OK and every PG is clean."""
    h = health(lab)
    if h.get("status") != "HEALTH_OK":
        return f"{h.get('status')}: " + "; ".join(
            f"{code}: {c.get('summary', {}).get('message', '')}"
            for code, c in h.get("checks", {}).items())
    cluster = lab.rados()
    try:
        return unsettled(cluster)
    finally:
        cluster.shutdown()


def healthy(lab: LabCluster) -> bool:
    return not unhealthy(lab)


def osd_up(lab: LabCluster, osd: int) -> bool:
    dump = lab.command("osd dump")
    return any(o["osd"] == osd and o["up"] for o in dump["osds"])  # type: ignore[index]


@pytest.fixture
def restored(lab_cluster: LabCluster) -> Iterator[LabCluster]:
    """Whatever the test changed is put back, and the lab is healthy again, on the way out."""
    lab = lab_cluster
    nearfull = lab.command("osd dump")["nearfull_ratio"]  # type: ignore[index]
    try:
        yield lab
    finally:
        errors = []
        for prefix, args in (("osd unset", {"key": "noout"}),
                             ("osd set-nearfull-ratio", {"ratio": nearfull})):
            try:
                lab.command(prefix, **args)
            except AssertionError as exc:
                errors.append(str(exc))
        # A start refused or lost (the stop still finishing) is tried again once.
        if not osd_up(lab, 2) and (lab.cli("lab", "start", "osd.2").rc != 0
                                   or not wait_for(lambda: osd_up(lab, 2), 60)):
            lab.cli("lab", "start", "osd.2")
        if POOL in (lab.command("osd pool ls") or []):  # type: ignore[operator]
            lab.command("osd pool rm", pool=POOL, pool2=POOL,
                        yes_i_really_really_mean_it=True)
        if not wait_for(lambda: healthy(lab), 180):
            errors.append(f"the lab is not healthy 180 s after the restore: {unhealthy(lab)}")
        assert not errors, errors


def wait_for(check: Callable[[], bool], timeout: float) -> bool:
    try:
        eventually(check, timeout, interval=1.0)
    except AssertionError:
        return False
    return True


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
