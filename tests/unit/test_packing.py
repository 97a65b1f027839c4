"""History packs older snapshots' daemons into columns; what they say does not change."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace
from typing import Optional

from stormdeck.collectors.hub import History
from stormdeck.collectors.packing import FIGURES, PackedDaemons, Packer, figures_of
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
    held = [s.daemons for s in snaps]
    h = History(maxlen=30, whole=5)
    for s in snaps:
        h.append(s)
    kept = list(h)
    assert kept == snaps[-30:]
    assert all(isinstance(s.daemons.inner, PackedDaemons) for s in kept[:-5])
    assert not any(isinstance(s.daemons.inner, PackedDaemons) for s in kept[-5:])
    assert [x is y for x, y in zip(kept, snaps[-30:], strict=True)] == [True] * 30
    # Nothing mutates a Snapshot: every field holds the object it was made with (before,
    # History set the frozen snapshot's daemons field to the packed mapping).
    assert all(s.daemons is d for s, d in zip(snaps, held, strict=True))


def test_a_newer_snapshot_sharing_the_mapping_stays_whole() -> None:
    old = lab_snapshot()
    new = replace(old, time=old.time + 1)  # the hub's memo: the same daemons underneath
    assert new.daemons is not old.daemons and new.daemons.inner is old.daemons.inner
    h = History(maxlen=10, whole=1)
    h.append(old)
    h.append(new)
    assert isinstance(old.daemons.inner, PackedDaemons)
    assert not isinstance(new.daemons.inner, PackedDaemons)
    assert dict(old.daemons) == dict(new.daemons)


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



@dataclass(frozen=True)
class Spelled:
    """Figures spelled three ways, and fields that are no figure."""

    a: float | None = None
    b: Optional[float] = None  # noqa: UP045 - the spelling under test
    c: float = 0.0
    d: int | None = None
    e: str | None = None


def test_figures_are_found_by_type_however_the_annotation_is_spelled() -> None:
    # Before, only a field annotated exactly "float | None" was packed.
    assert figures_of(Spelled) == ("a", "b", "c")
    assert "read_iops" in FIGURES and "up" not in FIGURES


@dataclass(frozen=True)
class Gauge:
    """Figures spelt three ways: all are `float | None` to the type system."""

    name: str
    a: float | None = None
    b: Optional[float] = None  # noqa: UP045 - the spelling a string match missed
    c: None | float = None  # noqa: RUF036 - another spelling
    n: int | None = None


def test_figures_are_picked_by_type_however_spelt() -> None:
    assert figures_of(Gauge) == ("a", "b", "c")
    packer = Packer(Gauge)
    rows = {str(i): Gauge(str(i), a=i * 1.5, b=None if i % 2 else i / 3, c=-i, n=i)
            for i in range(5)}
    packed = packer.pack(rows)
    assert isinstance(packed, PackedDaemons) and dict(packed) == rows
    assert set(packed._figures) == {"a", "b", "c"}  # n is no figure: kept in the templates


def moving_disks(n: int):
    """Snapshots whose disks' figures move (a new Disk each, as a fleet scrape makes),
    some with a figure gone unknown, and every fourth sharing the mapping before it."""
    out = []
    for i, s in enumerate(history(n, step=1.0)):
        disks = {key: replace(k, util=0.1 * (i % 9), write_iops=None if (i + j) % 3 == 0
                              else 100.0 + i, queue_depth=1.5 * j + i)
                 for j, (key, k) in enumerate(s.disks.items())}
        out.append(replace(s, disks=out[-1].disks if i % 4 == 0 and out else disks))
    return out


def test_history_packs_older_disks_equal_field_by_field() -> None:
    from stormdeck.collectors.model import Disk, Disks

    snaps = moving_disks(30)
    want = [{k: dataclasses.astuple(v) for k, v in s.disks.items()} for s in snaps]
    h = History(maxlen=30, whole=5)
    for s in snaps:
        h.append(s)
    kept = list(h)
    assert all(isinstance(s.disks, Disks) for s in kept)
    # Before, a Snapshot's disks were the plain dict it was made with: never packed.
    assert all(isinstance(s.disks.inner, PackedDaemons) for s in kept[:-5])
    assert not any(isinstance(s.disks.inner, PackedDaemons) for s in kept[-5:])
    for s, w in zip(kept, want, strict=True):
        assert list(s.disks) == list(w) and len(s.disks) == len(w)
        for key, fields in w.items():
            got = s.disks[key]
            assert type(got) is Disk and dataclasses.astuple(got) == fields
            assert s.disks.get(key) == got and key in s.disks
    assert any(k.write_iops is None for s in kept[:-5] for k in s.disks.values())


def test_a_newer_snapshot_sharing_the_disks_stays_whole() -> None:
    old = lab_snapshot()
    new = replace(old, time=old.time + 1)  # the hub's memo: the same disks underneath
    assert new.disks is not old.disks and new.disks.inner is old.disks.inner
    h = History(maxlen=10, whole=1)
    h.append(old)
    h.append(new)
    assert isinstance(old.disks.inner, PackedDaemons)
    assert not isinstance(new.disks.inner, PackedDaemons)
    assert type(new.disks.inner) is dict
    assert dict(old.disks) == dict(new.disks) and old.disks == new.disks


def test_packed_disks_read_as_before_by_every_reader() -> None:
    import pickle

    from stormdeck.collectors.packing import value_of, values_of

    snap = lab_snapshot()
    plain = dict(snap.disks)
    packed = replace(snap, time=snap.time + 1)
    packed.disks.compact(Packer(type(next(iter(plain.values())))).pack)
    assert isinstance(packed.disks.inner, PackedDaemons)
    assert packed.disks == plain and plain == dict(packed.disks)
    assert pickle.loads(pickle.dumps(packed)).disks == plain
    key = next(iter(plain))
    assert value_of(packed.disks, key, "util") == plain[key].util
    assert values_of(packed.disks, "queue_depth") == [k.queue_depth for k in plain.values()]
    assert repr(packed.disks).startswith("Disks(")


def test_the_disk_limit_rule_judges_packed_disks_as_whole_ones() -> None:
    """The rule reads older snapshots' disks from their columns (no Disk made again per
    disk and snapshot): what it judges and shows is what the whole disks give."""
    from stormdeck.advisors.rules.base import Context
    from stormdeck.advisors.rules.disks import AtHardwareLimit
    from stormdeck.advisors.settings import load_settings

    def busy(s, i):
        disks = {k: replace(d, util=0.9, queue_depth=6.0 + i % 5, read_await=0.02 * (i % 4),
                            write_await=None if i % 7 == 0 else 0.07, read_iops=10.0 * (i % 3),
                            write_iops=300.0) if d.daemons else d
                 for k, d in s.disks.items()}
        return replace(s, disks=disks)

    snaps = list(history(40, step=1.0, edit=busy))
    whole = [replace(s, disks=dict(s.disks)) for s in snaps]
    h = History(maxlen=40, whole=3)
    for s in snaps:
        h.append(s)
    assert isinstance(snaps[0].disks.inner, PackedDaemons)
    assert not isinstance(whole[0].disks.inner, PackedDaemons)
    params = load_settings(None)[AtHardwareLimit.id].params
    got = list(AtHardwareLimit().check(Context(snaps[-1], snaps, params)))
    want = list(AtHardwareLimit().check(Context(whole[-1], whole, params)))
    assert got and got == want
    assert any(c.fire for c in got)
