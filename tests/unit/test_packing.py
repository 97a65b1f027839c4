"""History packs older snapshots' daemons into columns; what they say does not change."""

from __future__ import annotations

import math
from dataclasses import replace

from stormdeck.collectors.hub import History
from stormdeck.collectors.packing import FIGURES, PackedDaemons, Packer
from tests.captured import history, lab_snapshot


def moving(n: int):
    snaps = history(n, step=1.0)
    out = []
    for i, s in enumerate(snaps):
        daemons = dict(s.daemons)
        for k, (key, d) in enumerate(daemons.items()):
            if (i + k) % 3 == 0:
                daemons[key] = replace(d, commit_latency=0.001 * (i % 7), read_iops=None,
                                       up=(i // 5) % 2 == 0, pgs=(d.pgs or 0) + i % 2)
        out.append(replace(s, daemons=daemons if i % 4 else out[-1].daemons if out else daemons))
    return out


def test_packed_daemons_are_equal_to_what_was_packed() -> None:
    packer = Packer()
    for s in moving(12):
        packed = packer.pack(s.daemons)
        assert isinstance(packed, PackedDaemons)
        assert list(packed) == list(s.daemons) and len(packed) == len(s.daemons)
        assert dict(packed.items()) == dict(s.daemons)
        assert "osd.0" in packed and "osd.99" not in packed


def test_generations_share_what_did_not_change() -> None:
    snap = lab_snapshot()
    packer = Packer()
    a = packer.pack(snap.daemons)
    moved = {k: replace(d, commit_latency=0.5) for k, d in snap.daemons.items()}
    b = packer.pack(moved)
    assert isinstance(a, PackedDaemons) and isinstance(b, PackedDaemons)
    assert a._templates is b._templates  # only a figure moved: the same templates
    assert a._figures["read_iops"] is b._figures["read_iops"]
    assert a._figures["commit_latency"] is not b._figures["commit_latency"]
    assert packer.pack(moved) is b  # the same mapping again: the same packing


def test_history_packs_all_but_the_newest_and_keeps_the_snapshots() -> None:
    snaps = moving(40)
    h = History(maxlen=30, whole=5)
    for s in snaps:
        h.append(s)
    kept = list(h)
    assert kept == snaps[-30:]
    assert all(isinstance(s.daemons, PackedDaemons) for s in kept[:-5])
    assert not any(isinstance(s.daemons, PackedDaemons) for s in kept[-5:])
    assert [x is y for x, y in zip(kept, snaps[-30:], strict=True)] == [True] * 30


def test_a_nan_figure_comes_back_unknown() -> None:
    snap = lab_snapshot()
    daemons = {k: replace(d, commit_latency=math.nan) for k, d in snap.daemons.items()}
    packed = Packer().pack(daemons)
    assert all(d.commit_latency is None for d in packed.values())
    assert "commit_latency" in FIGURES and "up" not in FIGURES


def test_values_of_a_packed_mapping_are_those_of_its_daemons() -> None:
    from stormdeck.collectors.packing import values_of

    packer = Packer()
    for s in moving(12):
        packed = packer.pack(s.daemons)
        for attr in (*FIGURES, "up", "pgs", "host", "devices", "no_such_field"):
            want = [getattr(d, attr, None) for d in s.daemons.values()]
            assert values_of(packed, attr) == want
            assert values_of(s.daemons, attr) == want
