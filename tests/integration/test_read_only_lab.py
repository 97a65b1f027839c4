"""Read-only holds wherever it is set, against the real lab: a config file's read_only
cluster named by its conf (-c) or reached by its fsid refuses apply, undo and the console's
changes; validate under read-only creates no pool."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from stormdeck.advisors.actuators.table import change as make_change
from stormdeck.advisors.apply import ReadOnlyError
from stormdeck.advisors.plan import Plan
from tests.conftest import LabCluster, ceph_json, run_cli

pytestmark = pytest.mark.integration

KEY = "osd_scrub_sleep"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    # A config file that marks nothing read-only, until a test writes one that does.
    (tmp_path / "config.toml").write_text("")
    out = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
           "STORMDECK_CONFIG": str(tmp_path / "config.toml")}
    for k in ("STORMDECK_READ_ONLY", "CEPH_CONF", "CEPH_ARGS"):
        out.pop(k, None)
    return out


def fsid_of(lab: LabCluster) -> str:
    cluster = lab.rados()
    try:
        return str(cluster.get_fsid())
    finally:
        cluster.shutdown()


def stored(lab: LabCluster) -> str | None:
    """osd_scrub_sleep as stored for `osd` in the config database (None: unset)."""
    cluster = lab.rados()
    try:
        rows = ceph_json(cluster, "config dump")
    finally:
        cluster.shutdown()
    return next((r["value"] for r in rows  # type: ignore[union-attr]
                 if r["section"] == "osd" and r["name"] == KEY and not r.get("mask")), None)


def effective(lab: LabCluster) -> str:
    cluster = lab.rados()
    try:
        return str(ceph_json(cluster, "config get", who="osd", key=KEY))
    finally:
        cluster.shutdown()


def put_back(lab: LabCluster, value: str | None) -> None:
    cluster = lab.rados()
    try:
        if value is None:
            ceph_json(cluster, "config rm", who="osd", name=KEY)
        else:
            ceph_json(cluster, "config set", who="osd", name=KEY, value=value)
    finally:
        cluster.shutdown()


def osd_map(lab: LabCluster) -> tuple[list[str], int]:
    """The pools, and the highest pool id ever given: a pool made and removed since still
    raised it."""
    cluster = lab.rados()
    try:
        dump = ceph_json(cluster, "osd dump")
        return sorted(cluster.list_pools()), int(dump["pool_max"])  # type: ignore[index]
    finally:
        cluster.shutdown()


def write_plan(lab: LabCluster, path: Path) -> Path:
    now = effective(lab)
    proposed = "0.1" if float(now) != 0.1 else "0.2"
    change = make_change("ceph_config", "osd", KEY, now, proposed, runtime=True)
    plan = Plan(id="ro1", created=time.time(), rule="ceph.scrub.during_load", target="osd",
                summary="test", source="K3.6", fsid=fsid_of(lab), changes=(change,))
    path.write_text(json.dumps(asdict(plan)))
    return path


def config(tmp_path: Path, body: str) -> None:
    (tmp_path / "config.toml").write_text(f"[clusters.prod]\n{body}read_only = true\n")


def ways_to_name(lab: LabCluster, tmp_path: Path) -> dict[str, str]:
    """The config file's read_only cluster, named each way the command line can meet it."""
    link = tmp_path / "link.conf"
    link.symlink_to(lab.conf)
    copy = tmp_path / "copy.conf"
    copy.write_text(lab.conf.read_text())  # another file, the same cluster (its fsid)
    bare = tmp_path / "bare.conf"  # no fsid in it: the table's fsid key says which cluster
    bare.write_text("\n".join(ln for ln in lab.conf.read_text().splitlines()
                              if not ln.strip().startswith("fsid")) + "\n")
    assert "fsid" not in bare.read_text()
    return {
        "the same conf": f'conf = "{lab.conf}"\n',
        "a symlink to it": f'conf = "{link}"\n',
        "a copy of it (its fsid)": f'conf = "{copy}"\n',
        "the fsid key": f'conf = "{bare}"\nfsid = "{fsid_of(lab)}"\n',
    }


def test_a_read_only_cluster_refuses_apply_whichever_option_names_it(
        lab_cluster: LabCluster, env, tmp_path: Path) -> None:
    plan = write_plan(lab_cluster, tmp_path / "plan.json")
    before = stored(lab_cluster)
    try:
        for how, body in ways_to_name(lab_cluster, tmp_path).items():
            config(tmp_path, body)
            res = run_cli("apply", "--yes", "-c", str(lab_cluster.conf), str(plan), env=env)
            assert res.rc == 3, f"{how}: {res.rc} {res.out} {res.err}"
            assert "read-only mode" in res.err and "Traceback" not in res.err, how
            assert len(res.err.strip().splitlines()) == 1, how
            assert stored(lab_cluster) == before, f"{how}: the cluster changed"
        # Chosen from the file (no source option given), as before.
        config(tmp_path, f'conf = "{lab_cluster.conf}"\n')
        res = run_cli("apply", "--yes", str(plan), env=env)
        assert res.rc == 3 and "read-only mode" in res.err
        assert stored(lab_cluster) == before
    finally:
        if stored(lab_cluster) != before:
            put_back(lab_cluster, before)


def test_a_read_only_cluster_refuses_undo_by_its_conf_and_its_fsid(
        lab_cluster: LabCluster, env, tmp_path: Path) -> None:
    plan = write_plan(lab_cluster, tmp_path / "plan.json")
    before = stored(lab_cluster)
    ways = ways_to_name(lab_cluster, tmp_path)
    res = run_cli("apply", "--yes", "-c", str(lab_cluster.conf), str(plan), env=env)
    assert res.rc == 0, res.err
    applied = stored(lab_cluster)
    try:
        assert applied != before
        for how in ("the same conf", "the fsid key"):
            config(tmp_path, ways[how])
            res = run_cli("undo", "--yes", "-c", str(lab_cluster.conf), env=env)
            assert res.rc == 3 and "read-only mode" in res.err, f"{how}: {res.err}"
            assert stored(lab_cluster) == applied, f"{how}: undone all the same"
        (tmp_path / "config.toml").write_text("")
        assert run_cli("undo", "--yes", "-c", str(lab_cluster.conf), env=env).rc == 0
        assert stored(lab_cluster) == before
    finally:
        if stored(lab_cluster) != before:
            put_back(lab_cluster, before)


def test_the_console_holds_a_read_only_cluster_named_by_conf_or_reached_by_fsid(
        lab_cluster: LabCluster, env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stormdeck.cli import build_parser
    from stormdeck.cli_watch import build_app

    for k in ("STORMDECK_READ_ONLY", "CEPH_CONF", "CEPH_ARGS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
    monkeypatch.setenv("STORMDECK_CONFIG", env["STORMDECK_CONFIG"])
    plan = Plan.load(write_plan(lab_cluster, tmp_path / "plan.json"))
    before = stored(lab_cluster)
    ways = ways_to_name(lab_cluster, tmp_path)
    try:
        for how, header in (("the same conf", True), ("the fsid key", False)):
            config(tmp_path, ways[how])
            app = build_app(build_parser().parse_args(
                ["watch", "-c", str(lab_cluster.conf), "--no-host"]))
            (tab,) = app.tabs
            try:
                # Named by its conf: [RO] from the start. Reached by its fsid: known once
                # a change connects, and refused there.
                assert tab.read_only is header, how
                with tab.executor_factory() as ex:
                    assert ex.read_only, how
                    with pytest.raises(ReadOnlyError, match="read-only mode"):
                        ex.apply(plan)
            finally:
                tab.feed.hub.stop(wait=0)
            assert stored(lab_cluster) == before, how
    finally:
        if stored(lab_cluster) != before:
            put_back(lab_cluster, before)


@pytest.mark.parametrize("how", ["STORMDECK_READ_ONLY=1", "--read-only",
                                 "the config file's read_only"])
def test_validate_in_read_only_creates_no_pool_and_says_what_it_skipped(
        lab_cluster: LabCluster, env, tmp_path: Path, how: str) -> None:
    extra: list[str] = []
    run_env = dict(env)
    if how == "STORMDECK_READ_ONLY=1":
        run_env["STORMDECK_READ_ONLY"] = "1"
    elif how == "--read-only":
        extra = ["--read-only"]
    else:
        config(tmp_path, f'conf = "{lab_cluster.conf}"\n')
    pools_before, max_before = osd_map(lab_cluster)
    res = run_cli("validate", "--headless", "--quick", "--json", "-c", str(lab_cluster.conf),
                  "--scratch-dir", str(tmp_path), "--peering-pgs", "8", *extra, env=run_env,
                  timeout=300)
    assert res.rc in (0, 1, 2), res.err
    pools_after, max_after = osd_map(lab_cluster)
    assert pools_after == pools_before
    assert max_after == max_before, "a pool was created (and removed) in read-only mode"
    assert "read-only mode" in res.err and "are skipped" in res.err
    report = json.loads(res.out)
    steps = {s["id"]: s for s in report["steps"]}
    for step in ("curve", "peering", "cpu"):
        assert steps[step]["status"] == "skipped", step
        assert "read-only mode" in steps[step]["verdicts"][0]["summary"], step
    assert steps["settings"]["status"] == "done" and steps["hosts"]["status"] == "done"
    cache = [v for v in steps["hosts"]["verdicts"] if v["check"].startswith("write cache")]
    assert cache and cache[0]["verdict"] == "skip" and "read-only" in cache[0]["summary"]
