"""The records of the last read handed back by identity where the new read's are equal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import compress, repeat
from operator import ne
from typing import Any, Generic, TypeVar

from stormdeck.collectors.model import row_maker
from stormdeck.collectors.prometheus.decode import _NONE

_ROW_MAKERS: dict[tuple[type, tuple[str, ...]], Callable[..., Any] | None] = {}


def _maker(cls: type, key: tuple[str, ...], fixed: Mapping[str, Any],
           named: tuple[str, ...]) -> Callable[[tuple[str, ...]], Callable[..., Any] | None]:
    """`rows` for _Reuse.build: a record maker per set of column names, made once."""
    def rows(names: tuple[str, ...]) -> Callable[..., Any] | None:
        memo = (cls, names)
        if memo not in _ROW_MAKERS:
            _ROW_MAKERS[memo] = row_maker(cls, key, fixed, names, named)
        return _ROW_MAKERS[memo]
    return rows



_R = TypeVar("_R")


class _Reuse(Generic[_R]):
    """The records of the last read, handed back by identity where equal to the new:
    an unchanged daemon, disk or host is the same object in every snapshot, so the
    History holds one of it, and a mapping with nothing changed is the same mapping
    (the hub's merge then reuses what it made of it)."""

    def __init__(self) -> None:
        self._last: Mapping[Any, _R] = {}
        self._cols: Mapping[str, Mapping[Any, float]] | None = None
        self._extra: Mapping[Any, Mapping[str, Any]] = {}
        self._conv: dict[str, tuple[Mapping[Any, float], Mapping[Any, Any]]] = {}

    def build(self, cols: Mapping[str, Mapping[Any, float]],
              extra: Mapping[Any, Mapping[str, Any]],
              make: Callable[[Any, dict[str, Any]], _R],
              convert: Mapping[str, Callable[[float], Any]] | None = None,
              keep: Callable[[Any], bool] | None = None,
              rows: Callable[[tuple[str, ...]], Callable[..., _R] | None] | None = None
              ) -> Mapping[Any, _R]:
        """The records `make` builds from a read's columns (per field, each key's value)
        and `extra` (per key, fields that are no column), building only those whose
        inputs differ from the last read's; the rest are the last read's objects, and
        with nothing changed the mapping is the last one (the hub's merge then reuses
        what it made of it). Which keys changed is found column by column, each value
        compared in C, and not at all once most have: at 10,000 OSDs a read brings 16
        columns of 10,000 values, and on a loaded cluster every rate moves. `convert`
        turns a field's value into the record's type, `keep` says which keys are
        records at all; `make` must depend on nothing but the key and its fields.
        `rows`, given the column names, may give a faster maker of the same records
        (`model.row_maker`: key, extra, then the values)."""
        last, last_cols, last_extra = self._last, self._cols, self._extra
        # Values in the record's types, each column converted once (in C) while it is
        # the same answer.
        convert = convert or {}
        cols = {name: self._converted(name, col, convert[name]) if name in convert else col
                for name, col in cols.items()}
        keys: dict[Any, None] = {}
        for col in cols.values():
            keys.update(dict.fromkeys(col))
        keys.update(dict.fromkeys(extra))
        # The keys whose inputs changed; None: all of them (the first read, or a scrape
        # that moved every daemon's rates, the common case on a loaded cluster).
        changed: set[Any] | None = None if last_cols is None else set()
        for name, col in cols.items():
            if changed is None or 2 * len(changed) > len(keys):
                changed = None  # most moved: all are made again (below)
                break
            old = last_cols.get(name) if last_cols is not None else None
            if old is col:
                continue
            if old is None:
                changed.update(col)
            elif old != col:
                # The keys whose value differs, each compared in C.
                changed.update(compress(keys, map(ne, map(old.get, keys), map(col.get, keys))))
                changed.update(old.keys() - col.keys())
        if changed is not None and extra is not last_extra and extra != last_extra:
            changed.update(k for k in keys.keys() | last_extra.keys()
                           if extra.get(k) != last_extra.get(k))
        # Each key's row of values, looked up column by column in C (None where a
        # column lacks the key: every field read from a column defaults to None, so
        # None and absent make the same record).
        names = tuple(cols)
        kept = [k for k in keys if keep(k)] if keep is not None else list(keys)
        fast = rows(names) if rows is not None else None
        new: dict[Any, _R]
        if fast is not None and changed is None:
            # Most keys' inputs moved (a loaded cluster's every scrape): all made in one
            # pass, the rows fed to the maker in C, cheaper than telling the rest apart.
            new = dict(zip(kept, map(fast, kept, map(extra.get, kept, repeat(_NONE)),
                                     *(map(cols[name].get, kept) for name in names)),
                           strict=True))
        else:
            new = {}
            for key, *values in zip(kept, *(map(cols[name].get, kept) for name in names),
                                    strict=True):
                old_rec = last.get(key)
                if old_rec is not None and changed is not None and key not in changed:
                    new[key] = old_rec
                elif fast is not None:
                    new[key] = fast(key, extra.get(key, _NONE), *values)
                else:
                    f = dict(extra.get(key, ()))
                    f.update(zip(names, values, strict=True))
                    new[key] = make(key, f)
        self._cols, self._extra = cols, extra
        if changed is not None and not changed and list(new) == list(last):
            return last
        self._last = new
        return new

    def _converted(self, name: str, col: Mapping[Any, float],
                   conv: Callable[[float], Any]) -> Mapping[Any, Any]:
        memo = self._conv.get(name)
        if memo is not None and memo[0] is col:
            return memo[1]
        out = dict(zip(col, map(conv, col.values()), strict=True))
        self._conv[name] = (col, out)
        return out

    def reuse(self, new: Mapping[str, _R]) -> Mapping[str, _R]:
        last = self._last
        out: dict[str, _R] = {}
        same = len(new) == len(last)
        for key, rec in new.items():
            old = last.get(key)
            if old is rec or (old is not None and old == rec):
                out[key] = old
            else:
                out[key] = rec
                same = False
        if same and list(out) == list(last):
            return last
        self._last = out
        return out
