"""A read's unchanged daemons and disks are not built again: the last read's objects come back."""

from __future__ import annotations

from typing import Any

from stormdeck.collectors.model import Daemon
from stormdeck.collectors.prometheus.source import _Reuse


def test_records_are_built_only_where_their_fields_changed() -> None:
    built: list[str] = []

    def make(name: str, f: Any) -> Daemon:
        built.append(name)
        return Daemon(id=name, kind="osd", **f)

    reuse: _Reuse[Daemon] = _Reuse()
    first = reuse.build({"osd.0": {"up": True, "pgs": 10}, "osd.1": {"up": True, "pgs": 12}},
                        make)
    assert built == ["osd.0", "osd.1"]
    built.clear()
    # Fresh dicts of equal fields, as the next read parses them: nothing is built, and
    # the mapping itself is the last one (the hub's merge reuses what it made of it).
    again = reuse.build({"osd.0": {"up": True, "pgs": 10}, "osd.1": {"up": True, "pgs": 12}},
                        make)
    assert built == [] and again is first
    # One OSD moved: only it is built; the other is the same object.
    moved = reuse.build({"osd.0": {"up": True, "pgs": 10}, "osd.1": {"up": False, "pgs": 12}},
                        make)
    assert built == ["osd.1"]
    assert moved["osd.0"] is first["osd.0"]
    assert moved["osd.1"].up is False and moved is not first
    # A field that disappears (a series gone) is a change, not a carry-over.
    built.clear()
    gone = reuse.build({"osd.0": {"up": True}, "osd.1": {"up": False, "pgs": 12}}, make)
    assert built == ["osd.0"] and gone["osd.0"].pgs is None
    assert gone["osd.1"] is moved["osd.1"]
