"""Two lab clusters side by side, named in a config file: two tabs in one console, a
change made in one tab reaches that cluster only, and a mute made on one silences that
one only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from stormdeck.base.errors import UserError
from stormdeck.cli import build_parser
from stormdeck.tui.views import FindingTable, JournalTable
from tests.conftest import LabCluster, ceph_json, eventually, free_ports, lab_port_args, run_cli
from tests.unit.test_tui import confirm_with_phrase, open_review, until

pytestmark = pytest.mark.integration


def rados(conf: Path):
    import rados as librados

    cluster = librados.Rados(conffile=str(conf))
    cluster.connect(timeout=15)
    return cluster


def pg_target(conf: Path, pool: str) -> int:
    cluster = rados(conf)
    try:
        rows = ceph_json(cluster, "osd pool ls", detail="detail")
    finally:
        cluster.shutdown()
    (row,) = [r for r in rows if r["pool_name"] == pool]  # type: ignore[union-attr]
    return int(row.get("pg_num_target", row["pg_num"]))


def twin(conf: Path, create: bool) -> None:
    cluster = rados(conf)
    try:
        if create:
            ceph_json(cluster, "osd pool create", pool="twin", pg_num=100, pgp_num=100)
        else:
            ceph_json(cluster, "osd pool rm", pool="twin", pool2="twin",
                      yes_i_really_really_mean_it=True)
    finally:
        cluster.shutdown()


@pytest.mark.asyncio
async def test_two_labs_two_tabs_and_a_change_in_one_stays_there(
        lab_cluster: LabCluster, lab_dir: Path, tmp_path: Path, monkeypatch) -> None:
    up = run_cli("lab", "up", "--osds", "1", "--dir", str(lab_dir),
                 *lab_port_args(free_ports(5)))
    assert up.rc == 0, up.err
    conf_a, conf_b = lab_cluster.conf, lab_dir / "ceph.conf"
    try:
        twin(conf_a, True)
        twin(conf_b, True)
        config = tmp_path / "config.toml"
        config.write_text(f'[clusters.alpha]\nconf = "{conf_a}"\n\n'
                          f'[clusters.beta]\nconf = "{conf_b}"\n')
        monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
        monkeypatch.delenv("STORMDECK_READ_ONLY", raising=False)
        from stormdeck.cli_watch import build_app

        app = build_app(build_parser().parse_args(["watch", "--config", str(config)]))
        assert [t.name for t in app.tabs] == ["alpha", "beta"]
        key = "ceph.pool.pg_not_power_of_two|pool twin"
        async with app.run_test(size=(160, 48)) as pilot:
            await until(pilot, lambda: all(t.frame for t in app.tabs), 60)
            fsid_a = app.tabs[0].frame.snapshot.cluster.fsid
            fsid_b = app.tabs[1].frame.snapshot.cluster.fsid
            assert fsid_a != fsid_b
            await pilot.press("greater_than_sign")
            await until(pilot, lambda: app.cluster_name == "beta", 10)
            assert app.frame.snapshot.cluster.fsid == fsid_b
            await pilot.press("6")
            table = app.query_one(FindingTable)
            await until(pilot, lambda: key in table.keys, 60)
            review = await open_review(app, pilot, key)
            assert review.plan.fsid == fsid_b
            await confirm_with_phrase(app, pilot, review)
            (entry,) = app.journal.entries()
            assert entry.cluster == fsid_b and entry.status in ("applied", "pending restart")
            # Beta's journal shows it; alpha's tab does not, and alpha cannot undo it.
            await pilot.press("7")
            assert app.query_one(JournalTable).keys == [entry.id]
            await pilot.press("less_than_sign")
            await until(pilot, lambda: app.cluster_name == "alpha", 10)
            assert app.query_one(JournalTable).keys == []
            with pytest.raises(UserError, match="made on cluster"):
                app.executor_factory().undo(entry)
        assert pg_target(conf_b, "twin") == 128
        assert pg_target(conf_a, "twin") == 100
        mutes_stay_on_their_cluster(conf_a, conf_b, tmp_path / "mutes")
    finally:
        twin(conf_a, False)
        down = run_cli("lab", "down", "--dir", str(lab_dir))
        assert down.rc == 0, down.err


RULE = "ceph.release.advisory"  # fires on an idle Pacific lab: past its end of life


def advisory(conf: Path, env: dict[str, str]) -> dict:
    res = run_cli("check", "-c", str(conf), "--json", "--for", "2", env=env)
    assert res.rc in (0, 1, 2), res.err
    found = [f for f in json.loads(res.out)["findings"] if f["rule"] == RULE]
    assert len(found) == 1, found
    return found[0]


def mutes_stay_on_their_cluster(conf_a: Path, conf_b: Path, state: Path) -> None:
    """A mute names the fsid of the cluster it was made on: the other lab's same finding
    stays loud, and it cannot be unmuted as the other's."""
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    eventually(lambda: advisory(conf_a, env)["state"] == "firing", 60)
    res = run_cli("mute", RULE, "--for", "1h", "--reason", "known", "-c", str(conf_a),
                  env=env, timeout=120)
    assert res.rc == 0, res.err
    mutes_file = state / "stormdeck" / "mutes.json"
    (entry,) = json.loads(mutes_file.read_text())["mutes"]
    fsid_a, fsid_b = (fsid_of(c) for c in (conf_a, conf_b))
    assert entry["fsid"] == fsid_a and fsid_a in res.out
    assert advisory(conf_a, env)["muted"]
    other = advisory(conf_b, env)
    assert other["state"] == "firing" and not other["muted"], other
    listed = run_cli("mute", "--list", env=env)
    assert fsid_a in listed.out and RULE in listed.out
    res = run_cli("unmute", RULE, entry["target"], "--fsid", fsid_b, env=env)
    assert res.rc == 3 and f"held on cluster {fsid_a}" in res.err, res.err
    res = run_cli("unmute", RULE, entry["target"], "--fsid", fsid_a, env=env)
    assert res.rc == 0, res.err
    assert json.loads(mutes_file.read_text())["mutes"] == []
    assert not advisory(conf_a, env)["muted"]


def fsid_of(conf: Path) -> str:
    cluster = rados(conf)
    try:
        return ceph_json(cluster, "fsid")["fsid"]  # type: ignore[index]
    finally:
        cluster.shutdown()
