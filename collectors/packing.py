"""Daemons and disks of older snapshots held as columns: a template each, an array per figure.

A live cluster's figures (latencies, IOPS, bytes per second) move every few
seconds on every daemon, so each move makes a new Daemon per daemon: at
10,000 OSDs, 5 MB a move, 650 MB for ten minutes. What moves is a handful of
floats. PackedDaemons keeps, per daemon, a template (its last Daemon whose
other fields were the same: up, host, devices, PG counts...) and, per figure,
an array of 8-byte doubles, shared with the generation before when equal. A
Daemon is made again when asked for, equal to the one packed (a NaN figure
comes back as None: unknown either way). Disks are packed the same way: their
util, IOPS, bytes and awaits move with every scrape.

Which fields are figures is read from the record's type hints, not from the text
of its annotations: `from __future__ import annotations` turns every annotation
into a string, and a string compared with "float | None" misses
`Optional[float]`, `None | float` and any spelling to come.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from array import array
from collections.abc import Iterator, Mapping
from operator import attrgetter
from typing import Any

from stormdeck.collectors.model import Daemon, Records

# The figures: every field typed a float (known or not), found by its type as Python
# resolves it, not by how the annotation is spelled ("Optional[float]" packs as well).
_FLOATS = (float, float | None)


@functools.cache
def figures_of(cls: type) -> tuple[str, ...]:
    """The fields of a record class typed a float, known or not: its figures."""
    hints = typing.get_type_hints(cls)
    return tuple(f.name for f in dataclasses.fields(cls) if hints[f.name] in _FLOATS)


@functools.cache
def statics_of(cls: type) -> tuple[str, ...]:
    figures = figures_of(cls)
    return tuple(f.name for f in dataclasses.fields(cls) if f.name not in figures)


FIGURES = figures_of(Daemon)
STATIC = statics_of(Daemon)
_NAN = math.nan
_NAN_BYTES = array("d", [_NAN]).tobytes()


class PackedDaemons(Mapping[str, Any]):
    """A read-only mapping of key -> record (a Daemon, a Disk), stored as templates and
    figure columns."""

    __slots__ = ("_figures", "_index", "_keys", "_static", "_templates")

    def __init__(self, keys: tuple[str, ...], index: dict[str, int],
                 templates: list[Any], figures: dict[str, array],
                 static: tuple[str, ...] = STATIC) -> None:
        self._keys = keys
        self._index = index
        self._templates = templates
        self._figures = figures
        self._static = static

    def __getitem__(self, key: str) -> Any:
        i = self._index[key]
        t = self._templates[i]
        changes = {}
        for name, column in self._figures.items():
            v: float | None = column[i]
            if v != v:  # NaN: None
                v = None
            if getattr(t, name) != v:
                changes[name] = v
        return dataclasses.replace(t, **changes) if changes else t

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def figures_at(self, key: str, attrs: tuple[str, ...]) -> tuple[Any, ...] | None:
        """One record's `attrs` (a NaN figure: None) as the record made again would give
        them, without making it; None if `key` is absent."""
        i = self._index.get(key)
        if i is None:
            return None
        out = []
        for attr in attrs:
            column = self._figures.get(attr)
            if column is None:
                out.append(getattr(self._templates[i], attr, None))
            else:
                v = column[i]
                out.append(None if v != v else v)
        return tuple(out)

    def values_of(self, attr: str) -> list[Any]:
        """Every daemon's `attr`, in key order, as the Daemons made again would give it,
        without making them: a figure from its column (NaN: None), anything else from
        the templates (only figures differ between a template and its Daemon)."""
        column = self._figures.get(attr)
        if column is not None:
            return [None if v != v else v for v in column]
        if attr not in self._static:
            return [None] * len(self._keys)
        return list(map(attrgetter(attr), self._templates))


def value_of(daemons: Mapping[str, Daemon], key: str, attr: str) -> Any:
    """One daemon's `attr` (None if it is absent or has none), read from a packed
    mapping's column or template without making the Daemon again."""
    if isinstance(daemons, Records):
        daemons = daemons.inner
    if isinstance(daemons, PackedDaemons):
        i = daemons._index.get(key)
        if i is None:
            return None
        column = daemons._figures.get(attr)
        if column is not None:
            v = column[i]
            return None if v != v else v
        return getattr(daemons._templates[i], attr, None)
    d = daemons.get(key)
    return None if d is None else getattr(d, attr, None)


def values_of(daemons: Mapping[str, Daemon], attr: str) -> list[Any]:
    """`attr` of every daemon in the mapping, in its order (None where it has none)."""
    if isinstance(daemons, Records):
        daemons = daemons.inner
    if isinstance(daemons, PackedDaemons):
        return daemons.values_of(attr)
    return [getattr(d, attr, None) for d in daemons.values()]


class Packer:
    """Packs mappings of one record class (Daemon by default; Disk), sharing keys,
    templates and figure arrays with the last one."""

    def __init__(self, cls: type = Daemon) -> None:
        self.cls = cls
        self.figures = figures_of(cls)
        self.static = statics_of(cls)
        self._key = attrgetter(*self.static)
        self._last_in: Any = None
        self._last: PackedDaemons | None = None

    def pack(self, daemons: Mapping[str, Any]) -> Mapping[str, Any]:
        if isinstance(daemons, Records):
            daemons = daemons.inner
        if isinstance(daemons, PackedDaemons):
            return daemons
        if daemons is self._last_in and self._last is not None:
            return self._last  # snapshots that shared a mapping share its packing
        last = self._last
        keys = tuple(daemons)
        if last is not None and keys == last._keys:
            keys, index, old = last._keys, last._index, last._templates
        else:
            index, old = {k: i for i, k in enumerate(keys)}, None
        values = list(daemons.values())
        if not all(type(d) is self.cls for d in values):
            return daemons  # not this packer's records: kept as they are
        _static = self._key
        templates: list[Any] = []
        same = old is not None
        for i, d in enumerate(values):
            if old is not None:
                t = old[i]
                if t is d or _static(t) == _static(d):
                    templates.append(t)
                    continue
            same = False
            templates.append(d)
        if same and old is not None:
            templates = old
        figures = {}
        n = len(values)
        for name in self.figures:
            got = list(map(attrgetter(name), values))
            unknown = got.count(None)
            try:
                # Most figures are known for every daemon or for none (a Ceph cluster
                # has no raft latencies): both made in C, not a value at a time.
                column = array("d", got) if not unknown else \
                    array("d", bytes(_NAN_BYTES * n)) if unknown == n else \
                    array("d", [_NAN if v is None else v for v in got])
            except TypeError:  # not a number where a figure goes: keep it as it is
                return daemons
            prev = last._figures.get(name) if last is not None and keys is last._keys else None
            figures[name] = prev if prev is not None and _same_floats(prev, column) else column
        packed = PackedDaemons(keys, index, templates, figures, self.static)
        self._last_in, self._last = daemons, packed
        return packed


def _same_floats(a: array, b: array) -> bool:
    """Equal as stored, NaN (None) equal to NaN: byte for byte."""
    return a.tobytes() == b.tobytes()
