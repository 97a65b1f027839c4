"""Blast radius against the real lab: what `whatif` predicts, then what really happens.

On every release's lab, an OSD marked out: the PGs whose up set changes (exact) and the bytes
(within 10%), with that release's own osdmaptool; then two OSDs held down under min_size 2
(inactive PGs predicted; the plan to set noup on both refused by `stormdeck apply`) and pg_num
doubled through `stormdeck apply` (copies moved once pgp_num reaches the target: within 10%;
the journal keeps prediction and outcome). On Pacific's, one pool of its own (size 2, 40 MiB
of objects) for those two acts, each plan also asked of `whatif plan` (the prediction of the
file an operator is about to apply), the split followed to active+clean. Each test leaves
the lab as it found it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.plan import Plan
from tests.conftest import CLEAN, LabCluster, ceph_json, eventually, run_cli

pytestmark = pytest.mark.integration

POOL = "blastlab"
OBJECTS = 40
MIB = 1 << 20


def pg_ids(cluster, pool: str | None = None) -> list[str]:
    """Every PG the monitors' map has (from `osd dump`, not the mgr's possibly older pgmap)."""
    return [f"{p['pool']}.{ps:x}" for p in ceph_json(cluster, "osd dump")["pools"]
            if pool in (None, p["pool_name"]) for ps in range(p["pg_num"])]


def up_sets(cluster, ids: list[str]) -> dict[str, tuple[int, ...]]:
    return {pg: tuple(ceph_json(cluster, "pg map", pgid=pg)["up"]) for pg in ids}


def sizes(cluster) -> dict[str, int]:
    rows = ceph_json(cluster, "pg dump", "mgr", dumpcontents=["pgs"])
    rows = rows.get("pg_stats") or rows.get("pg_map", {}).get("pg_stats", [])
    return {r["pgid"]: int(r["stat_sum"]["num_bytes"]) + int(r["stat_sum"].get(
        "num_omap_bytes", 0)) for r in rows}


def clean(cluster) -> bool:
    pgmap = ceph_json(cluster, "status")["pgmap"]
    states = pgmap.get("pgs_by_state", [])
    # Scrubbing is clean (a split's children are often scrubbed at once, as stormdeck's
    # journal --refresh counts them): exact active+clean alone failed once right after.
    return bool(states) and all(s["state_name"] in CLEAN for s in states) and \
        sum(s["count"] for s in states) == pgmap["num_pgs"]


def unclean(cluster) -> str:
    """What `clean` saw, for its failure message."""
    pgmap = ceph_json(cluster, "status")["pgmap"]
    return f"{pgmap.get('pgs_by_state')} of {pgmap.get('num_pgs')} PGs"


def settle_clean(cluster, timeout: float) -> None:
    """Wait for every PG to be clean; fail with what was seen and the cluster's log."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if clean(cluster):
            return
        if not seen or seen[-1] != unclean(cluster):
            seen.append(unclean(cluster))
        time.sleep(2)
    log = [f"{e.get('stamp')} {e.get('name')} {e.get('message')}"
           for e in ceph_json(cluster, "log last", num=15)]
    raise AssertionError(f"not clean within {timeout:.0f} s: {seen}; log: {log}")


def whatif(lab: LabCluster, *args: str) -> dict:
    res = run_cli("whatif", *args, "-f", "json", "-c", str(lab.conf), timeout=300)
    assert res.rc == 0, res.err
    return json.loads(res.out)


def assert_same_prediction(planned: dict, direct: dict) -> None:
    """`whatif plan FILE` predicts what the plan's changes move as the maintenance form
    (`whatif pg_num`, `whatif down`) does for the same act: its title aside, the same PGs,
    copies and bytes."""
    keys = ("pgs_remapped_ids", "copies_to_create", "bytes_to_move", "pgs_inactive_ids",
            "pgs_undersized_ids")
    assert {k: planned[k] for k in keys} == {k: direct[k] for k in keys}, (planned, direct)


def write_plan(path: Path, fsid: str, rule: str, *changes) -> Path:
    plan = Plan(id="blast1", created=time.time(), rule=rule, target="lab", summary="test",
                source="K0", fsid=fsid, changes=changes)
    plan.save(path)
    return path


def make_pool(cluster, name: str, objects: int) -> int:
    """A size-2 pool of 32 PGs holding `objects` MiB, written with write_full (not rados
    bench, whose page-cache speed fills loop-device OSDs): bytes the prediction must weigh."""
    ceph_json(cluster, "osd pool create", pool=name, pg_num=32, pgp_num=32)
    ceph_json(cluster, "osd pool set", pool=name, var="size", val="2")
    ceph_json(cluster, "osd pool application enable", pool=name, app="rbd")
    io = cluster.open_ioctx(name)
    try:
        blob = os.urandom(MIB)
        for i in range(objects):
            io.write_full(f"obj{i}", blob)
    finally:
        io.close()
    pool_id = next(p["pool"] for p in ceph_json(cluster, "osd dump")["pools"]
                   if p["pool_name"] == name)
    eventually(lambda: clean(cluster) and sum(
        v for k, v in sizes(cluster).items() if k.startswith(f"{pool_id}.")) >= objects * MIB,
        120)
    return pool_id


@contextmanager
def balancer_off(cluster) -> Iterator[None]:
    """The mgr's balancer held off while a split is measured: left on (Pacific's default,
    upmap mode) it may add pg-upmap-items to the new PGs once the split lands, and the up
    sets then show the balancer's moves beside the split's (23 predicted, 27 seen in one
    CI run). The prediction is of the split alone."""
    was = bool(ceph_json(cluster, "balancer status", "mgr").get("active"))
    ceph_json(cluster, "balancer off", "mgr")
    try:
        yield
    finally:
        if was:
            ceph_json(cluster, "balancer on", "mgr")


def upmaps(cluster, pool_id: int) -> list:
    """The pool's pg-upmap-items, shown beside a failed count: the balancer's trace."""
    return [u for u in ceph_json(cluster, "osd dump").get("pg_upmap_items", [])
            if u["pgid"].startswith(f"{pool_id}.")]


def drop_pool(cluster, name: str) -> None:
    ceph_json(cluster, "osd pool rm", pool=name, pool2=name, yes_i_really_really_mean_it=True)


def down_and_split(lab: LabCluster, cluster, pool: str, pool_id: int, tmp_path: Path) -> None:
    """Reef and Tentacle (Pacific's lab does both in its own test, below): two OSDs down
    under min_size 2 report their shared PGs inactive and a noup plan is refused; pg_num 2x
    through `stormdeck apply` moves the predicted copies once pgp_num reaches the target,
    within 10%, and the journal keeps what apply predicted."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    ceph_json(cluster, "osd pool set", pool=pool, var="min_size", val="2")
    down = whatif(lab, "down", "osd.0", "osd.1")
    ups = up_sets(cluster, pg_ids(cluster, pool))
    shared = sorted(pg for pg, up in ups.items() if {0, 1} & set(up))
    assert shared and set(shared) <= set(down["pgs_inactive_ids"]), (shared, down)
    fsid = ceph_json(cluster, "status")["fsid"]
    plan = write_plan(tmp_path / "noup.json", fsid, "ceph.osd.flapping",
                      change("osd_flag", "osd.0", "noup", "unset", "set"),
                      change("osd_flag", "osd.1", "noup", "unset", "set"))
    res = run_cli("apply", str(plan), "--yes", "-c", str(lab.conf), env=env)
    assert res.rc == 3 and "inactive" in res.err and "refused" in res.err, (res.out, res.err)
    states = {o["osd"]: o["state"] for o in ceph_json(cluster, "osd dump")["osds"]}
    assert "noup" not in states[0] and "noup" not in states[1]
    ceph_json(cluster, "osd pool set", pool=pool, var="min_size", val="1")

    with balancer_off(cluster):
        predicted = whatif(lab, "pg_num", pool, "2x")
        parents = up_sets(cluster, pg_ids(cluster, pool))
        parent_size = {pg: v for pg, v in sizes(cluster).items()
                       if pg.startswith(f"{pool_id}.")}
        ceph_json(cluster, "config set", who="mgr", name="target_max_misplaced_ratio",
                  value="1")
        # The split as an operator makes it, so the pool_set path (review, guard, send,
        # pg_num followed to its target, journal) runs on this release's mons and mgr too.
        plan = write_plan(tmp_path / "pg.json", fsid, "ceph.pool.pg_not_power_of_two",
                          change("pool_set", pool, "pg_num", "32", "64"))
        res = run_cli("apply", str(plan), "--yes", "-c", str(lab.conf), env=env, timeout=400)
        assert res.rc == 0, res.err
        assert f"predicted: pg_num of {pool} 32 -> 64" in res.out, res.out
        eventually(lambda: ceph_json(cluster, "osd pool get", pool=pool,
                                     var="pgp_num")["pgp_num"] == 64, 240, interval=1)
        children = up_sets(cluster, pg_ids(cluster, pool))
    copies = 0
    for ps in range(64):
        copies += len(set(children[f"{pool_id}.{ps:x}"]) - set(parents[f"{pool_id}.{ps % 32:x}"]))
    assert copies > 0
    assert abs(predicted["copies_to_create"] - copies) <= 0.1 * copies, \
        (predicted, copies, upmaps(cluster, pool_id))
    assert parent_size  # the bytes are checked on Pacific's lab, through apply
    (entry,) = Journal(tmp_path / "state" / "stormdeck" / "journal.jsonl").entries()
    assert entry.status == "applied" and entry.change.kind == "pool_set", entry
    assert entry.prediction is not None and entry.prediction["copies_to_create"] == \
        predicted["copies_to_create"]
    assert entry.observed is not None and "misplaced_objects" in entry.observed


def read_as_whatif_does(lab: LabCluster, predicted: dict) -> None:
    """This release's mgr answers in the shapes the fetch reads: pgs_brief rows in
    dump_brief's order (read from the bytes, not by the JSON fallback), and the moving PGs'
    bytes from pg ls-by-osd / ls-by-pool, never the whole pg dump."""
    from stormdeck.advisors import blast
    from stormdeck.collectors import placement
    from stormdeck.collectors.ceph.connection import CephConnection

    conn = CephConnection(conffile=str(lab.conf))
    try:
        raw = conn.command("mgr", {"prefix": "pg dump", "dumpcontents": ["pgs_brief"]})
        brief = placement.parse_brief(raw)
        assert brief is not None and brief == placement.parse_pgs(json.loads(raw))
        state = placement.fetch(conn)
        p = blast.predict_out(state, blast.find_tools(state.version, state.release), [1])
        assert p.pgs_remapped == predicted["pgs_remapped_ids"]
        assert state.sizer is not None and state.sizer.sent and not state.sizer.complete
        assert all(s.startswith("pg ls-by-") for s in state.sizer.sent), state.sizer.sent
        assert p.bytes_to_move == pytest.approx(predicted["bytes_to_move"], rel=0.01)
    finally:
        conn.close()


@pytest.mark.releases("pacific", "tentacle")
def test_whatif_out_predicts_exactly_the_pgs_that_move(release_cluster: LabCluster,
                                                       tmp_path: Path) -> None:
    """Every PG of every pool: the predicted set must be the one that changes. On Tentacle,
    down and pg_num too (down_and_split). Not on Reef: its CRUSH mapping and osdmaptool
    are Tentacle's for this question, and the suite's 40 minutes could not hold the 31 s
    once the console's flag test came in (issue 42)."""
    lab = release_cluster
    cluster = lab.rados()
    ratio = [r["value"] for r in ceph_json(cluster, "config dump")
             if r["name"] == "target_max_misplaced_ratio" and r["section"] == "mgr"]
    try:
        pool_id = make_pool(cluster, "blastout", 24)
        predicted = whatif(lab, "out", "osd.1")
        assert "osdmaptool" in predicted["method"]
        read_as_whatif_does(lab, predicted)
        # The release's own tool: the host's Pacific one only for Pacific's lab.
        version = ceph_json(cluster, "versions")["mon"]
        assert any(predicted["tool"].split()[1] in v for v in version), (predicted, version)
        ids = pg_ids(cluster)
        size = sizes(cluster)
        before = up_sets(cluster, ids)
        ceph_json(cluster, "osd out", ids=["1"])
        try:
            after = up_sets(cluster, ids)
        finally:
            ceph_json(cluster, "osd in", ids=["1"])
        changed = sorted(pg for pg in ids if after[pg] != before[pg])
        assert changed and sorted(predicted["pgs_remapped_ids"]) == changed
        moved = sum(size.get(pg, 0) * len(set(after[pg]) - set(before[pg])) for pg in changed)
        assert moved > 5 * MIB
        assert abs(predicted["bytes_to_move"] - moved) <= 0.1 * moved, (predicted, moved)
        assert predicted["pgs_inactive"] == 0
        if lab.release != "pacific":
            eventually(lambda: clean(cluster), 180)
            down_and_split(lab, cluster, "blastout", pool_id, tmp_path)
    finally:
        ceph_json(cluster, "osd in", ids=["1"])
        if lab.release != "pacific":
            if ratio:
                ceph_json(cluster, "config set", who="mgr", name="target_max_misplaced_ratio",
                          value=ratio[0])
            else:
                ceph_json(cluster, "config rm", who="mgr", name="target_max_misplaced_ratio")
        drop_pool(cluster, "blastout")
        eventually(lambda: clean(cluster), 180)
        cluster.shutdown()


def test_pg_num_and_down_predictions_and_the_guard_refuses_inactive_pgs(
        lab_cluster: LabCluster, tmp_path: Path) -> None:
    lab = lab_cluster
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    cluster = lab.rados()
    ratio = [r["value"] for r in ceph_json(cluster, "config dump")
             if r["name"] == "target_max_misplaced_ratio" and r["section"] == "mgr"]
    held = ExitStack()
    try:
        pool_id = make_pool(cluster, POOL, OBJECTS)
        held.enter_context(balancer_off(cluster))

        # -- act 2: pg_num 32 -> 64 (2x) through stormdeck apply, misplaced limit lifted so
        # the mgr takes pgp_num to 64 at once.
        predicted = whatif(lab, "pg_num", POOL, "2x")
        assert predicted["what"] == f"pg_num of {POOL} 32 -> 64"
        parents = up_sets(cluster, pg_ids(cluster, POOL))
        parent_size = {pg: v for pg, v in sizes(cluster).items() if pg.startswith(f"{pool_id}.")}
        ceph_json(cluster, "config set", who="mgr", name="target_max_misplaced_ratio",
                  value="1")
        fsid = ceph_json(cluster, "status")["fsid"]
        plan = write_plan(tmp_path / "pg.json", fsid, "ceph.pool.pg_not_power_of_two",
                          change("pool_set", POOL, "pg_num", "32", "64"))
        assert_same_prediction(whatif(lab, "plan", str(plan)), predicted)
        # --follow 2: too short for the mgr to step pgp_num and the PGs to backfill, so the
        # watch gives up and journals what it saw; a later `journal --refresh` finds the
        # cluster clean and says between which reads it became so. Both paths, one split.
        started = time.monotonic()
        res = run_cli("apply", str(plan), "--yes", "--follow", "2", "-c", str(lab.conf),
                      env=env, timeout=400)
        assert res.rc == 0, res.err
        assert "predicted: pg_num of" in res.out  # the review shows the prediction
        assert "(apply --follow)" in res.out, res.out
        path = tmp_path / "state" / "stormdeck" / "journal.jsonl"
        (entry,) = Journal(path).entries()
        assert entry.settled is not None and entry.settled["by"] == "apply --follow"

        def refreshed() -> bool:
            out = run_cli("journal", "--refresh", "-c", str(lab.conf), env=env).out
            return "active+clean" in out and "not active+clean" not in out
        eventually(refreshed, 240, interval=2)
        assert ceph_json(cluster, "osd pool get", pool=POOL, var="pgp_num")["pgp_num"] == 64
        children = up_sets(cluster, pg_ids(cluster, POOL))
        copies = moved = 0
        for ps in range(64):
            parent = f"{pool_id}.{ps % 32:x}"
            new = set(children[f"{pool_id}.{ps:x}"]) - set(parents[parent])
            copies += len(new)
            moved += len(new) * parent_size.get(parent, 0) // 2
        assert copies > 0
        assert abs(predicted["copies_to_create"] - copies) <= 0.1 * copies, \
            (predicted, copies, upmaps(cluster, pool_id))
        assert abs(predicted["bytes_to_move"] - moved) <= 0.1 * moved + MIB
        (entry,) = Journal(path).entries()
        assert entry.prediction is not None and entry.prediction["copies_to_create"] == \
            predicted["copies_to_create"]
        assert entry.observed is not None and "misplaced_objects" in entry.observed
        assert entry.status == "applied" and entry.settled is not None
        took = time.monotonic() - started
        assert entry.settled["clean_at"] and 0 < entry.settled["seconds"] < took + 5
        # Clean after the last read that still saw movement (the watch's, at the least).
        assert entry.settled["seconds_at_least"] <= entry.settled["seconds"]
        assert {"pgs_remapped_max", "misplaced_objects_max", "busy_at"} <= set(entry.settled)
        journal = run_cli("journal", env=env)
        assert "predicted:" in journal.out and "seen right after" in journal.out
        assert "active+clean" in journal.out and "after" in journal.out
        # What journal --refresh said was true at its read; the cluster can still leave
        # active+clean after it (CI once saw 3 PGs active+recovery_wait+degraded on the
        # next read), which is not the journal's to foresee. The undo below wants it clean.
        settle_clean(cluster, 120)
        # Undo (pg_num 64 -> 32, a merge) is predicted before it asks; with no terminal to
        # confirm on, nothing is sent.
        res = run_cli("undo", entry.id, "-c", str(lab.conf), env=env, timeout=300)
        assert res.rc == 3 and "no terminal" in res.err, (res.out, res.err)
        assert f"predicted: pg_num of {POOL} 64 -> 32" in res.out, res.out
        assert ceph_json(cluster, "osd pool get", pool=POOL, var="pg_num")["pg_num"] == 64

        # -- act 2b: pg-upmap-items on one PG: the up set predicted is the one Ceph then
        # maps, the bytes its own; removed again at once.
        size = sizes(cluster)
        pg = max((p for p in pg_ids(cluster, POOL)), key=lambda p: size.get(p, 0))
        a, b = up_sets(cluster, [pg])[pg]
        (c,) = {0, 1, 2} - {a, b}
        upmap = whatif(lab, "upmap", pg, f"osd.{a}", f"osd.{c}")
        try:
            ceph_json(cluster, "osd pg-upmap-items", pgid=pg, id=[a, c])
            eventually(lambda: up_sets(cluster, [pg])[pg] == (c, b), 30)
        finally:
            ceph_json(cluster, "osd rm-pg-upmap-items", pgid=pg)
        assert upmap["pgs_remapped_ids"] == [pg] and upmap["copies_to_create"] == 1
        into = {f["osd"]: f["bytes_in"] for f in upmap["per_osd"]}
        assert into[c] == upmap["bytes_to_move"] and \
            abs(upmap["bytes_to_move"] - size[pg]) <= 0.1 * size[pg] + MIB, (upmap, size[pg])
        eventually(lambda: up_sets(cluster, [pg])[pg] == (a, b) and clean(cluster), 120)

        # -- act 3: min_size 2; osd.0 and osd.1 share PGs of this pool, so both down makes
        # those PGs inactive (one copy left, or none).
        ceph_json(cluster, "osd pool set", pool=POOL, var="min_size", val="2")
        down = whatif(lab, "down", "osd.0", "osd.1")
        ups = up_sets(cluster, pg_ids(cluster, POOL))
        shared = sorted(pg for pg, up in ups.items() if {0, 1} & set(up))
        assert shared and set(shared) <= set(down["pgs_inactive_ids"])
        assert down["pgs_inactive"] == len(down["pgs_inactive_ids"])
        assert any("ok-to-stop" in n for n in down["notes"])
        plan = write_plan(tmp_path / "noup.json", fsid, "ceph.osd.flapping",
                          change("osd_flag", "osd.0", "noup", "unset", "set"),
                          change("osd_flag", "osd.1", "noup", "unset", "set"))
        held_down = whatif(lab, "plan", str(plan))
        assert_same_prediction(held_down, down)
        assert held_down["refused"] and "inactive" in held_down["refused"], held_down
        res = run_cli("apply", str(plan), "--yes", "-c", str(lab.conf), env=env)
        assert res.rc == 3, (res.out, res.err)
        assert "inactive" in res.err and "refused" in res.err
        assert "ceph osd set-group noup osd.0" in res.out  # the command is still shown
        states = {o["osd"]: o["state"] for o in ceph_json(cluster, "osd dump")["osds"]}
        assert "noup" not in states[0] and "noup" not in states[1]
    finally:
        held.close()
        if ratio:
            ceph_json(cluster, "config set", who="mgr", name="target_max_misplaced_ratio",
                      value=ratio[0])
        else:
            ceph_json(cluster, "config rm", who="mgr", name="target_max_misplaced_ratio")
        drop_pool(cluster, POOL)
        eventually(lambda: clean(cluster), 180)
        cluster.shutdown()


@pytest.mark.asyncio
async def test_o_in_an_osds_detail_predicts_it_going_out(lab_cluster: LabCluster,
                                                         tmp_path: Path) -> None:
    """The console's `o` on a daemon's detail: the same prediction, read in a worker."""
    from textual.widgets import Static

    from stormdeck.advisors.apply import CephAdmin, Executor
    from stormdeck.advisors.engine import Engine
    from stormdeck.collectors.ceph.source import CephSource
    from stormdeck.tui.app import StormdeckApp
    from stormdeck.tui.feed import Feed
    from stormdeck.tui.views import DaemonDetail, DaemonTable
    from tests.unit.test_tui import until

    conf = str(lab_cluster.conf)
    journal = Journal(tmp_path / "journal.jsonl")
    app = StormdeckApp(Feed([CephSource(conffile=conf)], Engine(), interval=1.0),
                       journal=journal,
                       executor_factory=lambda: Executor(journal, ceph=CephAdmin(conf)))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("2")
        table = app.query_one(DaemonTable)
        await until(pilot, lambda: "osd.1" in table.keys, 60)
        table.move_cursor(row=table.keys.index("osd.1"))
        await pilot.press("enter")
        assert isinstance(app.screen, DaemonDetail)
        await pilot.press("o")
        box = app.screen.query_one("#detail-whatif", Static)
        await until(pilot, lambda: "predicted: out osd.1" in str(box.render()), 60)
        assert "osdmaptool" in str(box.render())
    assert journal.entries() == []  # a prediction changes nothing
