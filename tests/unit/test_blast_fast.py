"""The prediction at scale: only the PGs that can change are mapped (Ceph's own crush_do_rule,
in-process), and the result must be the one osdmaptool gives mapping every PG.

The canned clusters are made by bench/blast_bench.py with the host's osdmaptool and crushtool
(straw2 hosts of 20 in racks of 25, one size-3 pool), their pg dump holding each PG's up set
as osdmaptool maps it; one also carries 40 pg_upmap_items from osdmaptool's own balancer.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from stormdeck.advisors import blast
from stormdeck.advisors.blast import Prediction
from stormdeck.collectors.placement import PgInfo

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import blast_bench  # noqa: E402

needs_tools = pytest.mark.skipif(shutil.which("osdmaptool") is None,
                                 reason="needs osdmaptool and crushtool (ceph-base)")


@pytest.fixture(scope="module")
def canned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("canned")
    blast_bench.build(120, d, pg_bits=5, upmaps=40)
    return d


def state_of(d: Path) -> blast.ClusterState:
    return blast.state_of(blast_bench.Canned(d))


def full_diff(d: Path, osd: int) -> list[str]:
    before = blast_bench.full_up_sets(str(d / "osdmap"))
    after = blast_bench.full_up_sets(str(d / "osdmap"), ("--mark-out", str(osd)))
    return sorted((pg for pg in after if after[pg] != before[pg]), key=blast._pg_order)


@needs_tools
def test_out_maps_only_what_can_change_and_matches_every_pg_mapped(canned: Path) -> None:
    state = state_of(canned)
    assert state.upmap_items, "the canned map should carry upmaps"
    tools = blast.find_tools(state.version, state.release)
    upmapped = {o for items in state.upmap_items.values() for pair in items for o in pair}
    # an OSD named in an upmap (from or to), and two others
    for osd in (sorted(upmapped)[0], sorted(upmapped)[-1], 57):
        p = blast.predict_out(state, tools, [osd])
        assert "crush_do_rule" in p.method, p.notes
        assert p.pgs_remapped == full_diff(canned, osd), osd
        assert p.copies_to_create == len(p.pgs_remapped)
        assert p.bytes_to_move == sum(state.pgs[pg].bytes for pg in p.pgs_remapped)


@needs_tools
def test_two_osds_out_match_crushtool_mapping_every_pg(canned: Path) -> None:
    state = state_of(canned)
    tools = blast.find_tools(state.version, state.release)
    p = blast.predict_out(state, tools, [3, 64])
    assert "crush_do_rule" in p.method
    with tools.workdir() as tmp:
        mapfile, crush = f"{tmp}/osdmap", f"{tmp}/crush"
        Path(mapfile).write_bytes(state.osdmap)
        tools.run("osdmaptool", [mapfile, "--export-crush", crush])
        before = blast.crush_up_sets(state, tools, crush, blast._weights(state))
        after = blast.crush_up_sets(state, tools, crush, blast._weights(state, {3: 0, 64: 0}))
    full = blast.compare(state, "out", before, after)
    assert p.pgs_remapped == full.pgs_remapped and len(full.pgs_remapped) > 100
    assert p.bytes_to_move == full.bytes_to_move
    assert [(f.osd, f.bytes_in, f.bytes_out) for f in p.per_osd] == \
        [(f.osd, f.bytes_in, f.bytes_out) for f in full.per_osd]


@needs_tools
def test_a_pg_dump_that_disagrees_with_the_map_is_not_trusted(canned: Path) -> None:
    state = state_of(canned)
    tools = blast.find_tools(state.version, state.release)
    pgid = next(pg for pg, info in state.pgs.items() if 57 in info.up)
    info = state.pgs[pgid]
    state.pgs[pgid] = info._replace(up=tuple(reversed(info.up)))
    p = blast.predict_out(state, tools, [57])
    assert "crush_do_rule" not in p.method
    assert any(pgid in n and "pg dump" in n for n in p.notes), p.notes
    assert p.pgs_remapped == full_diff(canned, 57)


def test_dump_all_lines_parse_by_split_as_by_the_regex() -> None:
    text = ("pool 1 pg_num 3\n"
            "1.0 raw ([6962,3166,719], p6962) up ([6962,3166,719], p6962) acting ([6962], p6962)\n"
            "2.1f raw ([1,2147483647,3], p1) up ([], p-1) acting ([1,3], p1)\n"
            "1.2 raw ([1,2], p1) up ([2], p2) acting ([2], p2)\n"
            " min osd.5932 311\n")
    fast = blast.parse_dump_all(text)
    slow = {m.group(1): blast._ids(m.group(3)) for line in text.splitlines()
            if (m := blast.PG_LINE.match(line))}
    assert fast == slow == {"1.0": (6962, 3166, 719), "2.1f": (), "1.2": (2,)}


def test_a_prediction_is_reused_only_on_the_epoch_it_was_made_on() -> None:
    p = Prediction(what="out osd.1", epoch=41)
    assert blast.reusable(p, 41)
    assert not blast.reusable(p, 42)
    assert not blast.reusable(p, None) and not blast.reusable(None, 41)
    assert not blast.reusable(Prediction(what="x"), 0)


def test_pg_dump_rows_become_tuples_of_ints() -> None:
    from stormdeck.collectors.placement import parse_pgs_of

    raw = (b'{"pg_ready":true,"pg_stats":[{"pgid":"3.1a","state":"active+clean",'
           b'"stat_sum":{"num_bytes":10,"num_omap_bytes":5},"up":[1,2],"acting":[2,1]}]}')
    assert parse_pgs_of(raw) == {"3.1a": PgInfo("3.1a", 3, 26, 15, (1, 2), (2, 1),
                                                "active+clean")}


@needs_tools
def test_a_lowered_reweight_maps_only_what_can_change_and_matches_crushtool(
        canned: Path) -> None:
    state = state_of(canned)
    tools = blast.find_tools(state.version, state.release)
    p = blast.predict_reweight(state, tools, {11: 0.5, 90: 0.8})
    assert "crush_do_rule" in p.method
    with tools.workdir() as tmp:
        mapfile, crush = f"{tmp}/osdmap", f"{tmp}/crush"
        Path(mapfile).write_bytes(state.osdmap)
        tools.run("osdmaptool", [mapfile, "--export-crush", crush])
        before = blast.crush_up_sets(state, tools, crush, blast._weights(state))
        after = blast.crush_up_sets(state, tools, crush,
                                    blast._weights(state, {11: 0.5, 90: 0.8}))
    full = blast.compare(state, "reweight", before, after)
    assert p.pgs_remapped == full.pgs_remapped and full.pgs_remapped
    # a reweight going up can move PGs onto the OSD from anywhere: not mapped alone
    from dataclasses import replace

    state.osds[11] = replace(state.osds[11], reweight=0.5)
    with pytest.raises(blast.crushlib.Unsupported, match="goes up"):
        blast.lowered_up_sets(state, tools, "unused", "unused", {11: 0.9})


@needs_tools
def test_the_in_process_mapper_places_the_labs_pgs_where_osdmaptool_did(tmp_path: Path) -> None:
    """The lab's own CRUSH map (device-class shadow buckets, choose_firstn type osd), pool 2
    of 64 PGs: crush_do_rule through crushlib gives osdmaptool's raw set for every PG."""
    import json
    import subprocess

    from stormdeck.advisors import crushlib

    data = Path(__file__).parent.parent / "data" / "blast"
    dump = json.loads(subprocess.run(["crushtool", "-i", str(data / "crushmap.bin"),
                                      "--dump"], capture_output=True, text=True,
                                     check=True).stdout)
    raw = {}
    for line in (data / "dump_all_pool2.txt").read_text().splitlines():
        if line.startswith("2."):
            pgid, rest = line.split(" raw ([", 1)
            raw[pgid] = tuple(int(x) for x in rest.split("]")[0].split(","))
    assert len(raw) == 64
    with crushlib.Mapper(dump) as m:
        w = m.weights({0: 0x10000, 1: 0x10000, 2: 0x10000}, 3)
        got = {f"2.{ps:x}": m.do_rule(0, blast.pps(2, ps, 64), 2, w) for ps in range(64)}
    assert got == raw
