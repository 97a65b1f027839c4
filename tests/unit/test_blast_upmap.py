"""`whatif upmap` and `whatif upmap-primary`: pg-upmap-items moves data (the PG's up set with the
items applied to the rule's own set), pg-upmap-primary moves none (only the primary changes).
The map is tests/data/blast's (see tests/unit/test_blast.py for its provenance)."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from stormdeck.advisors import blast
from stormdeck.advisors.blast import Tools
from stormdeck.base.errors import UserError
from stormdeck.collectors.placement import ClusterState, OsdInfo, PgInfo, PoolInfo
from tests.unit.test_blast import CRUSHMAP, raw_sets

MIB = 1 << 20
BT = PoolInfo(2, "bt", 2, 1, 0, 64, 64, False, 1, True, 64, 64)


def lab_state(release: str = "pacific") -> ClusterState:
    """Pool 2 as the lab had it: every PG's up set its raw CRUSH set, 1 MiB each."""
    pgs = {pgid: PgInfo(pgid, 2, int(pgid.split(".")[1], 16), MIB, up, up, "active+clean")
           for pgid, up in raw_sets().items()}
    kb = 1024 * 1024
    osds = {i: OsdInfo(i, True, True, 1.0, kb, kb // 10) for i in range(3)}
    return ClusterState(osdmap=b"", epoch=7, version="16.2.15", release=release,
                        pools={2: BT}, pgs=pgs, osds=osds, full_ratio=0.95,
                        backfillfull_ratio=0.90, nearfull_ratio=0.85, flags=frozenset())


@pytest.mark.skipif(shutil.which("crushtool") is None, reason="crushtool (ceph-base) missing")
def test_upmap_items_move_the_pg_as_ceph_applies_them() -> None:
    s = lab_state()
    tools = Tools(None, "16.2.15", "pacific")
    assert s.pgs["2.0"].up == (2, 1)
    p = blast.predict_upmap_items(s, tools, "2.0", [(1, 0)], crushfile=str(CRUSHMAP))
    assert p.pgs_remapped == ["2.0"] and p.copies_to_create == 1 and p.bytes_to_move == MIB
    assert {(f.osd, f.bytes_in, f.bytes_out) for f in p.per_osd if f.bytes_in or f.bytes_out} \
        == {(0, MIB, 0), (1, 0, MIB)}
    # A pair whose target is in the set already is skipped, as Ceph skips it; one whose
    # source is not in the set moves nothing: both said, nothing counted.
    p = blast.predict_upmap_items(s, tools, "2.0", [(1, 2)], crushfile=str(CRUSHMAP))
    assert p.pgs_remapped == [] and any("skipped" in n for n in p.notes)
    p = blast.predict_upmap_items(s, tools, "2.0", [(0, 1)], crushfile=str(CRUSHMAP))
    assert p.bytes_to_move == 0 and any("moves nothing" in n for n in p.notes)
    # The command replaces the PG's items: existing ones no longer apply after it.
    moved = replace(s, upmap_items={"2.0": ((1, 0),)},
                    pgs={**s.pgs, "2.0": s.pgs["2.0"]._replace(up=(2, 0))})
    p = blast.predict_upmap_items(moved, tools, "2.0", [(2, 1)], crushfile=str(CRUSHMAP))
    assert any("replaces them" in n for n in p.notes)
    # Rule's set (2, 1): 2 -> 1 is skipped (1 is there), and the old 1 -> 0 goes: the PG
    # moves back to osd.1.
    assert any("skipped" in n for n in p.notes)
    assert p.pgs_remapped == ["2.0"] and p.copies_to_create == 1
    assert [(f.osd, f.bytes_in) for f in p.per_osd if f.bytes_in] == [(1, MIB)]
    with pytest.raises(UserError, match=r"no PG 9\.0"):
        blast.predict_upmap_items(s, tools, "9.0", [(1, 0)], crushfile=str(CRUSHMAP))
    with pytest.raises(UserError, match=r"osd\.7"):
        blast.predict_upmap_items(s, tools, "2.0", [(1, 7)], crushfile=str(CRUSHMAP))


def test_upmap_primary_moves_no_data_and_needs_reef() -> None:
    with pytest.raises(UserError, match="Reef"):
        blast.predict_upmap_primary(lab_state(), "2.0", 1)
    s = lab_state("reef")
    p = blast.predict_upmap_primary(s, "2.0", 1)
    assert p.pgs_remapped == ["2.0"] and p.copies_to_create == 0 and p.bytes_to_move == 0
    assert "moves no data: the primary of 2.0 goes from osd.2 to osd.1" in p.notes
    assert p.refusal() is None
    with pytest.raises(UserError, match=r"not in 2\.0.s up set"):
        blast.predict_upmap_primary(s, "2.0", 0)
