"""Blast radius without a cluster: Ceph's seed arithmetic against what its tools print, and the
counting, the guard and the records built on it.

Provenance of tests/data/blast/: captured 2026-11-25 from a Pacific 16.2.15 lab (`stormdeck
lab up`, 3 BlueStore OSDs, one host, chooseleaf type 0) with pool 2 'bt' replicated size 2,
pg_num = pgp_num = 64, flags hashpspool: `ceph osd getmap -o om`, `osdmaptool om
--export-crush crushmap.bin`, `osdmaptool om --test-map-pgs-dump-all --clear-temp --pool 2 >
dump_all_pool2.txt` (the host's osdmaptool 16.2.15).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from stormdeck.advisors import blast
from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.blast import Prediction, Tools
from stormdeck.advisors.blast import tools as blast_tools
from stormdeck.advisors.findings import Finding, Severity
from stormdeck.advisors.journal import Journal
from stormdeck.advisors.plan import Plan, Refused, plan_from_finding, review
from stormdeck.base.errors import UserError
from stormdeck.collectors.placement import (
    NONE_OSD,
    ClusterState,
    OsdInfo,
    PgInfo,
    PoolInfo,
    parse_pgs,
    parse_pools,
    parse_version,
)

DATA = Path(__file__).parent.parent / "data" / "blast"
CRUSHMAP = DATA / "crushmap.bin"
POOL = 2


def raw_sets() -> dict[str, tuple[int, ...]]:
    """The raw (CRUSH) set of every PG of pool 2 as osdmaptool printed it."""
    out = {}
    for line in (DATA / "dump_all_pool2.txt").read_text().splitlines():
        if line.startswith("2."):
            pgid, rest = line.split(" raw ([", 1)
            out[pgid] = tuple(int(x) for x in rest.split("]")[0].split(","))
    return out


# ---- the arithmetic -------------------------------------------------------------------


def test_stable_mod_and_masks_are_cephs() -> None:
    # ceph_stable_mod(x, b, bmask): x & bmask when below b, else x & (bmask >> 1).
    assert blast.mask_of(64) == 63 and blast.mask_of(12) == 15 and blast.mask_of(1) == 0
    assert blast.stable_mod(13, 12, 15) == 5  # 13 & 15 = 13 >= 12: folded to 13 & 7
    assert blast.stable_mod(11, 12, 15) == 11
    # A split from 32 to 64 before pgp_num moves: every child seeds as its parent.
    assert all(blast.seed(ps, 32) == ps % 32 for ps in range(64))
    # Values of crush_hash32_2(seed, pool 2) as this port computes them; the next test shows
    # that CRUSH maps each of them exactly where osdmaptool put the PG.
    assert [blast.pps(POOL, ps, 64) for ps in range(4)] == \
        [4181067522, 3079532188, 3462048992, 3999291244]
    assert blast.pps(POOL, 5, 64, hashpspool=False) == 5 + POOL


@pytest.mark.skipif(shutil.which("crushtool") is None, reason="crushtool (ceph-base) missing")
def test_the_seed_maps_where_osdmaptool_puts_each_pg() -> None:
    """crushtool --x takes a signed int: every PG whose seed fits is mapped by it, and its
    set must be the one osdmaptool printed for that PG (3 OSDs, size 2: six possible sets,
    so 30-odd agreements do not happen by chance)."""
    raw = raw_sets()
    checked = 0
    for ps in range(64):
        x = blast.pps(POOL, ps, 64)
        if x >= 1 << 31:
            continue
        out = subprocess.run(["crushtool", "-i", str(CRUSHMAP), "--test", "--rule", "0",
                              "--num-rep", "2", "--x", str(x), "--show-mappings"],
                             capture_output=True, text=True, check=True).stdout
        assert blast.parse_mappings(out)[x] == raw[f"2.{ps:x}"], ps
        checked += 1
    assert checked >= 20


@pytest.mark.skipif(shutil.which("crushtool") is None, reason="crushtool (ceph-base) missing")
def test_crushtool_pool_id_hashes_the_seed_as_raw_pg_to_pps() -> None:
    """What predict_pg_num relies on: crushtool --pool-id P maps seed x as the PG P.x."""
    tools = Tools(None, "16.2.15", "pacific")
    pool = PoolInfo(POOL, "bt", 2, 1, 0, 64, 64, False, 1, True, 64, 64)
    mapped = blast.crush_map(tools, str(CRUSHMAP), pool, 64, {})
    assert {f"2.{x:x}": v for x, v in mapped.items()} == raw_sets()


def test_osdmaptool_and_crushtool_outputs_are_parsed() -> None:
    text = (DATA / "dump_all_pool2.txt").read_text()
    up = blast.parse_dump_all(text)
    assert len(up) == 64 and up["2.0"] == (2, 1)
    # -dump-all's acting is pg_temp: the up set is what is read, never the acting one.
    line = "3.1f raw ([4,2,0], p4) up ([4,2], p4) acting ([4,2,1], p4)"
    assert blast.parse_dump_all(line) == {"3.1f": (4, 2)}
    assert blast.parse_mappings("CRUSH rule 1 x 7 [3,2147483647,1]\n") == \
        {7: (3, NONE_OSD, 1)}


# ---- counting -------------------------------------------------------------------------


def state(pools: list[PoolInfo], pgs: list[PgInfo], used: dict[int, float] | None = None,
          rate: float | None = None) -> ClusterState:
    kb = 1024 * 1024  # 1 GiB each
    osds = {i: OsdInfo(i, True, True, 1.0, kb, int(kb * (used or {}).get(i, 0.1)))
            for i in range(6)}
    return ClusterState(osdmap=b"", epoch=7, version="16.2.15", release="pacific",
                        pools={p.id: p for p in pools}, pgs={g.pgid: g for g in pgs},
                        osds=osds, full_ratio=0.95, backfillfull_ratio=0.90,
                        nearfull_ratio=0.85, flags=frozenset(),
                        recovery_bytes_per_sec=rate)


REP = PoolInfo(1, "rbd", 3, 2, 0, 4, 4, False, 1, True, 4, 4)
EC = PoolInfo(2, "ec", 4, 3, 1, 4, 4, True, 2, True, 4, 4)
MIB = 1 << 20


def pg(pgid: str, up: tuple[int, ...], size: int) -> PgInfo:
    pool, ps = pgid.split(".")
    return PgInfo(pgid, int(pool), int(ps, 16), size, up, up, "active+clean")


def test_replicated_copies_ec_shards_and_fill() -> None:
    s = state([REP, EC], [pg("1.0", (0, 1, 2), 90 * MIB), pg("1.1", (1, 2, 3), 30 * MIB),
                          pg("2.0", (0, 1, 2, 3), 200 * MIB)], rate=10 * MIB)
    before = {"1.0": (0, 1, 2), "1.1": (1, 2, 3), "2.0": (0, 1, 2, 3)}
    after = {"1.0": (4, 1, 2), "1.1": (2, 1, 3), "2.0": (0, 5, 2, 4)}
    p = blast.compare(s, "test", before, after)
    # 1.0 gains osd.4 (a whole 90 MiB copy); 1.1 only reorders (no copy, yet its up set
    # changed); 2.0's positions 1 and 3 move: two shards of 200/k = 100 MiB.
    assert p.pgs_remapped == ["1.0", "1.1", "2.0"]
    assert p.copies_to_create == 3
    assert p.bytes_to_move == 90 * MIB + 2 * 100 * MIB
    assert p.largest_per_osd == 190 * MIB  # osd.4: 90 + 100
    fill = {f.osd: f for f in p.per_osd}
    assert fill[4].bytes_in == 190 * MIB and fill[0].bytes_out == 90 * MIB
    assert fill[4].used_ratio_after == pytest.approx(0.1 + 190 / 1024, abs=1e-3)
    assert p.eta_seconds == pytest.approx(29.0)
    assert not p.pgs_inactive and p.refusal() is None


def test_inactive_and_backfillfull_are_refused_nearfull_asks_the_phrase() -> None:
    s = state([REP], [pg("1.0", (0, 1, 2), 100 * MIB), pg("1.1", (3, 4, 5), 10 * MIB)],
              used={4: 0.80, 5: 0.86})
    down = blast.compare(s, "down osd.0 osd.1", {"1.0": (0, 1, 2)}, {"1.0": (2,)})
    assert down.pgs_inactive == ["1.0"]  # 1 copy left, min_size 2
    assert "1 PG(s) inactive" in (down.refusal() or "")
    # 100 MiB into osd.4 (80% of 1 GiB) passes nearfull (0.85) but not backfillfull; 60 MiB
    # into osd.5 (86%) passes backfillfull (0.90).
    near = blast.compare(s, "near", {"1.0": (0, 1, 2)}, {"1.0": (4, 1, 2)})
    assert near.osds_past_nearfull == [4] and near.refusal() is None
    assert "osd.4 past nearfull" in (near.phrase_reason() or "")
    s.pgs["1.1"] = pg("1.1", (0, 1, 2), 60 * MIB)
    full = blast.compare(s, "full", {"1.1": (0, 1, 2)}, {"1.1": (5, 1, 2)})
    assert full.osds_past_backfillfull == [5]
    assert "past backfillfull" in (full.refusal() or "")
    # The guard reads a whole chain: a stage after the first refuses too.
    ok = blast.compare(s, "ok", {}, {})
    ok.then = full
    assert ok.refusal() is not None


def test_the_eta_is_honest_without_a_rate() -> None:
    s = state([REP], [pg("1.0", (0, 1, 2), 10 * MIB)])
    p = blast.compare(s, "x", {"1.0": (0, 1, 2)}, {"1.0": (3, 1, 2)})
    assert p.eta_seconds is None and p.eta_note == "no recovery running to measure a rate from"
    assert "no recovery running" in p.text()


def test_down_counts_what_ok_to_stop_counts() -> None:
    s = state([REP], [pg("1.0", (0, 1, 2), 10 * MIB), pg("1.1", (0, 3, 4), 10 * MIB),
                      pg("1.2", (3, 4, 5), 10 * MIB)])
    p = blast.predict_down(s, None, [0, 1],
                           verdict={"ok_to_stop": False, "bad_become_inactive": ["1.0"],
                                    "ok_become_degraded": ["1.1"]})
    assert p.pgs_inactive == ["1.0"] and p.pgs_undersized == ["1.1"]
    assert p.bytes_to_move == 0 and p.refusal()
    assert "ok_to_stop=False" in p.notes[0]
    s.flags = frozenset({"noout"})
    held = blast.predict_down(s, None, [3])
    assert held.then is None and "noout" in held.notes[-1]


def test_json_has_exactly_the_issues_keys_and_reads_back() -> None:
    s = state([REP], [pg("1.0", (0, 1, 2), 10 * MIB)])
    p = blast.compare(s, "x", {"1.0": (0, 1, 2)}, {"1.0": (3, 1, 2)}, method="m", tool="t")
    d = p.to_dict()
    for key in ("pgs_remapped", "copies_to_create", "bytes_to_move", "pgs_inactive",
                "pgs_undersized", "osds_past_nearfull", "osds_past_backfillfull",
                "osds_past_full", "eta_seconds", "per_osd", "method"):
        assert key in d, key
    assert set(d["per_osd"][0]) == {"osd", "bytes_in", "bytes_out", "used_ratio_after"}
    assert d["eta_seconds"] is None and d["pgs_remapped"] == 1
    again = Prediction.from_dict(json.loads(json.dumps(d)))
    assert again.to_dict() == {**d, "made": again.made}


# ---- plans and the journal ----------------------------------------------------------


def noup_finding(osds: list[int]) -> Finding:
    changes = tuple(change("osd_flag", f"osd.{i}", "noup", "unset", "set") for i in osds)
    return Finding(rule="ceph.osd.flapping", title="flapping", severity=Severity.WARNING,
                   target="osd.0", summary="flapping", explanation="", source="K7.5",
                   state="firing", first_seen=0.0, last_seen=0.0, changes=changes)


def test_a_refused_prediction_refuses_the_plan_and_keeps_its_command() -> None:
    s = state([REP], [pg("1.0", (0, 1, 2), 10 * MIB)])

    def predict(changes: tuple) -> Prediction:
        return blast.predict_down(s, None, [0, 1])

    with pytest.raises(Refused) as err:
        plan_from_finding(noup_finding([0, 1]), "fsid-1", predict=predict)
    assert "inactive" in str(err.value)
    shown = review(err.value.plan)
    assert "ceph osd set-group noup osd.0" in shown and "1 inactive" in shown
    # Without a predictor (nothing read yet) the plan is made, and says it is unpredicted.
    plan = plan_from_finding(noup_finding([0]), "fsid-1")
    assert "not predicted here" in review(plan)


def test_a_plans_prediction_round_trips_and_asks_the_phrase_past_nearfull(
        tmp_path: Path) -> None:
    s = state([REP], [pg("1.0", (0, 1, 2), 100 * MIB)], used={4: 0.80})
    near = blast.compare(s, "near", {"1.0": (0, 1, 2)}, {"1.0": (4, 1, 2)})
    plan = plan_from_finding(noup_finding([0]), "fsid-1", predict=lambda _: near)
    assert plan.prediction is not None
    path = tmp_path / "plan.json"
    plan.save(path)
    back = Plan.load(path)
    assert back.prediction == plan.prediction
    assert any("past nearfull" in r for r in back.phrase_reasons())
    assert "predicted: near" in review(back)
    # A plan file without a prediction (made before this feature) still loads.
    raw = json.loads(path.read_text())
    del raw["prediction"]
    path.write_text(json.dumps(raw))
    assert Plan.load(path).prediction is None


def test_the_journal_keeps_prediction_and_outcome_and_reads_old_records(
        tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.jsonl")
    c = change("pool_set", "rbd", "pg_num", "32", "64")
    old = j.intent(c, "32")  # as before this feature: no prediction
    j.end(old, "applied", after="64")
    new = j.intent(c, "32", prediction={"what": "pg_num", "copies_to_create": 16})
    j.end(new, "applied", after="64", observed={"pgs_remapped": 12})
    by_id = {e.id: e for e in Journal(tmp_path / "journal.jsonl").entries()}
    assert by_id[old].prediction is None and by_id[old].observed is None
    assert by_id[new].prediction == {"what": "pg_num", "copies_to_create": 16}
    assert by_id[new].observed == {"pgs_remapped": 12}


def test_collectors_parse_pools_pgs_and_versions() -> None:
    dump = {"pools": [{"pool": 2, "pool_name": "bt", "type": 1, "size": 2, "min_size": 1,
                       "crush_rule": 0, "pg_num": 32, "pg_placement_num": 32,
                       "pg_num_target": 64, "pg_placement_num_target": 64,
                       "flags_names": "hashpspool", "erasure_code_profile": ""},
                      {"pool": 3, "pool_name": "ec", "type": 3, "size": 4, "min_size": 3,
                       "crush_rule": 1, "pg_num": 8, "pg_placement_num": 8,
                       "flags_names": "hashpspool,ec_overwrites",
                       "erasure_code_profile": "p42"}]}
    pools = parse_pools(dump, {"p42": 2})
    assert pools[2].pgp_num == 32 and pools[2].pg_num_target == 64 and pools[2].k == 1
    assert pools[3].erasure and pools[3].k == 2
    pgs = parse_pgs({"pg_stats": [{"pgid": "2.1f", "state": "active+clean", "up": [0, 1],
                                   "acting": [0, 1], "stat_sum": {"num_bytes": 2097152,
                                                                  "num_omap_bytes": 10}}]})
    assert pgs["2.1f"].bytes == 2097162 and pgs["2.1f"].ps == 31
    assert parse_pgs({"pg_map": {"pg_stats": []}}) == {}
    assert parse_version({"mon": {"ceph version 18.2.7 (abc) reef (stable)": 1}}) == \
        ("18.2.7", "reef")


def test_a_tampered_prediction_in_a_plan_file_is_one_sentence(tmp_path: Path) -> None:
    plan = plan_from_finding(noup_finding([0]), "fsid-1")
    raw = json.loads(plan.to_json())
    nested: dict = {"what": "x"}
    for _ in range(5000):
        nested = {"what": "x", "then": nested}
    raw["prediction"] = {"what": "x", "copies_to_create": "many"}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(UserError, match="not a plan file"):
        Plan.load(path)
    raw["prediction"] = nested
    with pytest.raises(UserError, match="nested too deep"):
        Plan.from_dict(raw)


def test_a_cephadm_host_runs_the_tools_in_the_clusters_image(monkeypatch, tmp_path: Path) -> None:
    """No Ceph packages on the host (cephadm's way): the tools come from `cephadm shell`,
    the image's release said, the work directory mounted where stormdeck wrote it."""
    monkeypatch.setattr(blast_tools, "_host_version", lambda: None)
    monkeypatch.setattr(blast_tools, "_cephadm_version", lambda cephadm: ("19.2.3", "squid"))
    monkeypatch.setattr(blast_tools.shutil, "which",
                        lambda name: "/usr/sbin/cephadm" if name == "cephadm" else None)
    monkeypatch.setattr(blast_tools.os, "geteuid", lambda: 0)
    monkeypatch.setenv("STORMDECK_ROOTS_DIR", str(tmp_path))  # no release root there
    tools = blast.find_tools("19.2.3", "squid")
    assert tools.cephadm == "/usr/sbin/cephadm" and tools.root is None
    assert "19.2.3 squid (cephadm shell)" in tools.describe("19.2.3")
    tmp = blast_tools.tempfile.gettempdir()
    assert tools.argv("osdmaptool", ["/x/osdmap", "--print"]) == [
        "/usr/sbin/cephadm", "shell", "--mount", f"{tmp}:{tmp}", "--", "osdmaptool",
        "/x/osdmap", "--print"]
    # Without root, cephadm is not asked (it needs root): one sentence saying so.
    monkeypatch.setattr(blast_tools.os, "geteuid", lambda: 1000)
    with pytest.raises(UserError, match="cephadm host"):
        blast.find_tools("19.2.3", "squid")
