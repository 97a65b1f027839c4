"""Every source, declared once: what the console, check, snapshot, config and validate list."""

# Adding a source is its module under collectors/ with a `SourceDeclaration` and one
# registration: a line in `_BUILT_IN`, or `register()` (`registered()` for a scope, as
# tests do), so no surface can keep a list of source names of its own to forget.

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from stormdeck.collectors.ceph.declaration import DECLARATION as CEPH
from stormdeck.collectors.curve.declaration import DECLARATION as CURVE
from stormdeck.collectors.declaration import Option, SourceDeclaration
from stormdeck.collectors.host.declaration import DECLARATION as HOST
from stormdeck.collectors.prometheus.declaration import DECLARATION as PROMETHEUS

# In merge priority (the hub's first non-empty value wins, in source order): librados
# first, then Curve, this host, Prometheus. The console names a part's late sources in
# this order too.
_BUILT_IN: tuple[SourceDeclaration, ...] = (CEPH, CURVE, HOST, PROMETHEUS)

_lock = threading.Lock()
_declared: list[SourceDeclaration] = list(_BUILT_IN)


def declared() -> tuple[SourceDeclaration, ...]:
    """Every source, in merge priority."""
    with _lock:
        return tuple(_declared)


def declaration(name: str) -> SourceDeclaration:
    for d in declared():
        if d.name == name:
            return d
    raise KeyError(name)


def register(decl: SourceDeclaration) -> None:
    """Add a source after those already declared (so it merges last)."""
    with _lock:
        taken = {d.name for d in _declared}
        if decl.name in taken:
            raise ValueError(f"a source named {decl.name!r} is already declared")
        keys = {k for d in _declared for k in d.enabled_by}
        if keys & set(decl.enabled_by):
            # Each key names one source: a config file's cluster would otherwise build
            # two sources from one setting.
            raise ValueError(f"source {decl.name!r}: {sorted(keys & set(decl.enabled_by))} "
                             "already name another source")
        _declared.append(decl)


def unregister(name: str) -> None:
    with _lock:
        if any(d.name == name for d in _BUILT_IN):
            raise ValueError(f"{name!r} is built in: it cannot be unregistered")
        before = len(_declared)
        _declared[:] = [d for d in _declared if d.name != name]
        if len(_declared) == before:
            raise KeyError(name)


@contextmanager
def registered(decl: SourceDeclaration) -> Iterator[SourceDeclaration]:
    """`decl` declared for the `with` block only: nothing outlives it (tests, plugins)."""
    register(decl)
    try:
        yield decl
    finally:
        unregister(decl.name)


# ---- what the surfaces read ----------------------------------------------------------


def part_sources() -> dict[str, tuple[str, ...]]:
    """part -> the sources that fill it, in merge priority: the console's part map."""
    out: dict[str, tuple[str, ...]] = {}
    for d in declared():
        for part in d.parts:
            out[part] = (*out.get(part, ()), d.name)
    return out


def cluster_sources() -> tuple[str, ...]:
    """The sources that read the cluster: `check` and `snapshot` say the cluster could not
    be read when none of them answered."""
    return tuple(d.name for d in declared() if d.scope == "cluster")


def enabling_keys() -> tuple[str, ...]:
    """Every option (argparse dest, config file key) that names a source."""
    return tuple(k for d in declared() for k in d.enabled_by)


def source_options() -> tuple[tuple[SourceDeclaration, tuple[Option, ...]], ...]:
    """The options sources bring, with their declaration (for the --help group)."""
    return tuple((d, d.options) for d in declared() if d.options)


def validate_sources() -> tuple[SourceDeclaration, ...]:
    """The sources validate reads before it measures."""
    return tuple(d for d in declared() if d.validate)


def named_by(args: object, decl: SourceDeclaration) -> bool:
    """Do these options (a parsed command line, a config file's cluster) name `decl`?"""
    return any(getattr(args, k, None) for k in decl.enabled_by)
