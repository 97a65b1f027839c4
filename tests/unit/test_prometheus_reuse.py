"""A read's unchanged daemons and disks are not built again: the last read's objects come back."""

from __future__ import annotations

from typing import Any

from stormdeck.collectors.model import Daemon
from stormdeck.collectors.prometheus.reuse import _Reuse


def test_records_are_built_only_where_their_columns_changed() -> None:
    built: list[str] = []

    def make(name: str, f: Any) -> Daemon:
        built.append(name)
        return Daemon(id=name, kind="osd", **f)

    def read(up: dict[str, float], pgs: dict[str, float]) -> dict[str, dict[str, float]]:
        return {"up": up, "pgs": pgs}

    conv = {"up": lambda v: v >= 1, "pgs": int}
    extra = {"osd.0": {"host": "a"}, "osd.1": {"host": "b"}}
    reuse: _Reuse[Daemon] = _Reuse()
    first = reuse.build(read({"osd.0": 1, "osd.1": 1}, {"osd.0": 10, "osd.1": 12}), extra,
                        make, conv)
    assert built == ["osd.0", "osd.1"] and first["osd.1"].pgs == 12 and first["osd.1"].up
    built.clear()
    # Fresh columns of equal values, as the next read decodes them: nothing is built,
    # and the mapping itself is the last one (the hub's merge reuses what it made of it).
    again = reuse.build(read({"osd.0": 1, "osd.1": 1}, {"osd.0": 10, "osd.1": 12}),
                        dict(extra), make, conv)
    assert built == [] and again is first
    # One OSD moved: only it is built; the other is the same object.
    moved = reuse.build(read({"osd.0": 1, "osd.1": 0}, {"osd.0": 10, "osd.1": 12}), extra,
                        make, conv)
    assert built == ["osd.1"]
    assert moved["osd.0"] is first["osd.0"]
    assert moved["osd.1"].up is False and moved is not first
    # A value that disappears (a series gone) is a change, not a carry-over.
    built.clear()
    gone = reuse.build(read({"osd.0": 1, "osd.1": 0}, {"osd.1": 12}), extra, make, conv)
    assert built == ["osd.0"] and gone["osd.0"].pgs is None
    assert gone["osd.1"] is moved["osd.1"]
    # What the static series say of an OSD changed: it alone is built again.
    built.clear()
    hosted = reuse.build(read({"osd.0": 1, "osd.1": 0}, {"osd.1": 12}),
                         {"osd.0": {"host": "a"}, "osd.1": {"host": "c"}}, make, conv)
    assert built == ["osd.1"] and hosted["osd.1"].host == "c"
    # Every key's inputs moved: all are built, none carried over.
    built.clear()
    every = reuse.build(read({"osd.0": 0, "osd.1": 1}, {"osd.0": 1, "osd.1": 2}),
                        {"osd.0": {"host": "a"}, "osd.1": {"host": "c"}}, make, conv)
    assert built == ["osd.0", "osd.1"] and every["osd.0"].pgs == 1 and not every["osd.0"].up


def test_the_row_maker_makes_what_the_records_own_init_makes() -> None:
    from stormdeck.collectors.model import Disk, row_maker
    from stormdeck.collectors.prometheus.decode import _CONVERT
    from stormdeck.collectors.prometheus.fleet import (
        _DISK_NAMED,
        _DISK_ROWS,
        _OSD_NAMED,
        _OSD_ROWS,
    )

    make = row_maker(Daemon, ("id",), {"kind": "osd"}, ("up", "pgs", "read_iops"), _OSD_NAMED)
    assert make is not None
    extra = {"host": "stor1", "devices": ("sdb",), "device_class": "hdd"}
    assert make("osd.3", extra, True, 12, None) == Daemon(
        id="osd.3", kind="osd", up=True, pgs=12, **extra)  # type: ignore[arg-type]
    assert make("osd.4", {}, None, None, 2.5) == Daemon(id="osd.4", kind="osd", read_iops=2.5)
    disk = row_maker(Disk, ("host", "name"), {}, ("util", "read_iops"), _DISK_NAMED)
    assert disk is not None
    assert disk(("stor1", "sdb"), {"write_cache": "write back", "daemons": ("osd.3",)},
                0.5, None) == Disk(host="stor1", name="sdb", util=0.5,
                                   write_cache="write back", daemons=("osd.3",))
    # A field that is not the record's, or given twice: no maker (the caller's __init__).
    assert row_maker(Daemon, ("id",), {}, ("nonsense",), ()) is None
    assert row_maker(Daemon, ("id",), {}, ("up",), ("up",)) is None

    # The whole build, with and without the row maker, reads alike; every key moved.
    cols = {"up": {"osd.0": 1.0, "osd.1": 0.0, "mds.a": 1.0}, "pgs": {"osd.0": 9.0},
            "read_iops": {"osd.1": 3.0}}
    extras = {"osd.0": {"host": "a", "devices": ("sdb",)}, "osd.1": {"host": "b"}}
    with_rows: _Reuse[Daemon] = _Reuse()
    plain: _Reuse[Daemon] = _Reuse()

    def kw(name: str, f: Any) -> Daemon:
        return Daemon(id=name, kind="osd", **f)

    def is_osd(k: str) -> bool:
        return k.startswith("osd.")
    for step in range(3):
        moved = {n: {k: v + step for k, v in c.items()} for n, c in cols.items()}
        a = with_rows.build(moved, extras, kw, _CONVERT, is_osd, rows=_OSD_ROWS)
        b = plain.build(moved, extras, kw, _CONVERT, is_osd)
        assert dict(a) == dict(b) and list(a) == ["osd.0", "osd.1"]
    assert _DISK_ROWS(("util",)) is not None
