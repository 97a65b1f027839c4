"""What a prediction reads: `pgs_brief` for every PG, bytes only for the PGs that move.

The canned cluster is bench/blast_bench.py's (its answers in the shapes Pacific's mgr gives);
a prediction read that way must equal the one read from the whole `pg dump pgs`, PG for PG
and byte for byte, and where `pg ls-by-osd` does not name a PG the whole dump is read.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from stormdeck.advisors import blast
from stormdeck.collectors import placement
from stormdeck.collectors.placement import PgInfo, parse_pgs, pg_rows

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


def summary(p: blast.Prediction) -> tuple[Any, ...]:
    return (p.pgs_remapped, p.copies_to_create, p.bytes_to_move, p.largest_per_osd,
            [(f.osd, f.bytes_in, f.bytes_out, f.used_ratio_after) for f in p.per_osd])


@needs_tools
def test_out_reads_the_bytes_of_the_moving_pgs_only_and_predicts_as_the_full_dump(
        canned: Path) -> None:
    conn = blast_bench.Canned(canned)
    brief = placement.fetch(conn)
    full = placement.fetch(blast_bench.Canned(canned), brief=False)
    assert brief.sizer is not None and full.sizer is None
    assert {k: (v.up, v.acting) for k, v in brief.pgs.items()} == \
        {k: (v.up, v.acting) for k, v in full.pgs.items()}
    tools = blast.find_tools(brief.version, brief.release)
    for osd in (57, 3):
        a, b = blast.predict_out(brief, tools, [osd]), blast.predict_out(full, tools, [osd])
        assert "crush_do_rule" in a.method
        assert summary(a) == summary(b) and a.bytes_to_move > 0
    # one pg dump (the brief), a few ls-by-osd, never the whole dump
    assert conn.sent.count("pg dump") == 1
    assert brief.sizer.sent and all(s.startswith("pg ls-by-osd") for s in brief.sizer.sent)
    assert len(brief.sizer.sent) <= 4, brief.sizer.sent
    assert not brief.sizer.complete


@needs_tools
def test_pg_num_reads_the_pool_and_predicts_as_the_full_dump(canned: Path) -> None:
    brief = placement.fetch(blast_bench.Canned(canned))
    full = placement.fetch(blast_bench.Canned(canned), brief=False)
    tools = blast.find_tools(brief.version, brief.release)
    pool = next(iter(brief.pools.values()))
    a = blast.predict_pg_num(brief, tools, pool.name, pool.pg_num * 2)
    b = blast.predict_pg_num(full, tools, pool.name, pool.pg_num * 2)
    assert summary(a) == summary(b) and a.bytes_to_move > 0
    assert brief.sizer is not None and brief.sizer.sent == [f"pg ls-by-pool {pool.name}"]


class EmptyLists(blast_bench.Canned):
    """A mgr whose `pg ls-by-osd` names no PG (Pacific's answer for an OSD with none:
    {"pg_ready": true}, no pg_stats) and refuses one OSD (EAGAIN for a down OSD)."""

    def command(self, target: str, cmd: dict[str, Any], timeout: float | None = None) -> bytes:
        if cmd["prefix"] == "pg ls-by-osd":
            self.sent.append(cmd["prefix"])
            if cmd["osd"] == 57:
                from stormdeck.collectors.ceph.connection import CommandError

                raise CommandError("pg ls-by-osd: osd 57 is not up")
            return b'{"pg_ready":true}'
        return super().command(target, cmd, timeout)


@needs_tools
def test_pgs_no_list_names_are_read_from_the_whole_dump(canned: Path) -> None:
    conn = EmptyLists(canned)
    brief = placement.fetch(conn)
    full = placement.fetch(blast_bench.Canned(canned), brief=False)
    tools = blast.find_tools(brief.version, brief.release)
    a, b = blast.predict_out(brief, tools, [57]), blast.predict_out(full, tools, [57])
    assert summary(a) == summary(b) and a.bytes_to_move > 0
    assert brief.sizer is not None and brief.sizer.complete
    assert brief.sizer.sent[-1] == "pg dump ['pgs']"
    assert len(brief.sizer.sent) == placement.LS_CALLS_MAX + 1
    assert conn.sent.count("pg dump") == 2


def test_the_shapes_of_pg_lists_by_release() -> None:
    row = {"pgid": "2.1f", "state": "active+clean", "up": [1, 2], "acting": [1, 2],
           "up_primary": 1, "acting_primary": 1}
    stats = {**row, "stat_sum": {"num_bytes": 7, "num_omap_bytes": 3}}
    # Pacific and later: {"pg_ready", "pg_stats"}; no pg_stats when nothing matches;
    # older releases a bare list; a full `pg dump` {"pg_map": {"pg_stats"}}
    assert pg_rows({"pg_ready": True, "pg_stats": [row]}) == [row]
    assert list(pg_rows({"pg_ready": True})) == []
    assert pg_rows([row]) == [row]
    assert pg_rows({"pg_map": {"pg_stats": [row]}}) == [row]
    assert list(pg_rows(None)) == []
    assert parse_pgs({"pg_ready": True, "pg_stats": [row]}) == \
        {"2.1f": PgInfo("2.1f", 2, 31, 0, (1, 2), (1, 2), "active+clean")}
    assert placement.row_bytes([stats, row]) == {"2.1f": 10}


def test_pgs_brief_read_from_its_bytes_equals_the_json_parse(canned: Path) -> None:
    import json

    from stormdeck.collectors.placement import parse_brief

    raw = (canned / "pgbrief").read_bytes()
    fast = parse_brief(raw)
    assert fast is not None and len(fast) == 32 * 120
    assert fast == parse_pgs(json.loads(raw))
    rows = [{"pgid": "1.a", "state": "active+undersized", "up": [3, 2147483647, 1],
             "acting": [3, 1], "up_primary": 3, "acting_primary": 3},
            {"pgid": "10.0", "state": "peering", "up": [], "acting": [], "up_primary": -1,
             "acting_primary": -1}]
    for body in ({"pg_ready": True, "pg_stats": rows}, rows):  # spaced, as json-pretty
        text = json.dumps(body, indent=1).encode()
        assert parse_brief(text) == parse_pgs(body)
    # a row in another shape (fields reordered): not guessed at, the JSON is read instead
    odd = [{"state": "active", "pgid": "1.0", "up": [1], "acting": [1]}, *rows]
    assert parse_brief(json.dumps(odd).encode()) is None
    assert placement.parse_pgs(odd)["1.0"].up == (1,)


@needs_tools
def test_the_fetched_pgs_are_left_out_of_later_collections(canned: Path) -> None:
    import gc

    gc.unfreeze()
    try:
        state = placement.fetch(blast_bench.Canned(canned))
        assert gc.isenabled()
        # frozen: the next full collection does not walk a million PG tuples again
        assert gc.get_freeze_count() >= len(state.pgs) > 0
    finally:
        gc.unfreeze()
