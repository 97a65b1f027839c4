"""The one builder: the sources, the Engine and the Executor of every command and console tab.

`check`, `watch` (each tab), `record`, `plan`, `apply`, `undo`, `journal --refresh`,
`validate` and `snapshot` all take their pieces from `assemble()` and `executor_options()`,
so what one entry point judges or changes is what every other one would: the same
sources for the same options, the same mutes file (one for every cluster: a mute names
its cluster's fsid), the same validation results (advisors/validated.py) and rule
settings, the same executor options (the Curve tool, how long to verify and follow).
tests/unit/test_assembly.py holds each entry point to it.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stormdeck.advisors.actuators.curve import ALL_POOLS
from stormdeck.advisors.mutes import WAIT, MuteStore
from stormdeck.advisors.rules import ALL
from stormdeck.advisors.validated import store_in
from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.collectors.registry import declaration, named_by
from stormdeck.sources import (
    build_sources,
    ceph_admin,
    ceph_client,
    ceph_source,
    curve_source,
    declared_made,
)

# One mutes file for every cluster: each mute carries the fsid of the cluster it was made
# on (advisors/mutes.py), so `stormdeck mute`, `check` and every console tab read the same
# mutes of a cluster whatever name the config file gives it.
MUTES_FILE = "mutes.json"
# Before one file, a named console tab kept its mutes in mutes-NAME.json: folded in once.
_OLD_NAMED = "mutes-*.json"

DEFAULT_CURVE_TOOL = "curve_ops_tool"
DEFAULT_HEARTBEAT = 10.0
DEFAULT_VERIFY = 15.0
DEFAULT_CONVERGE = 120.0


# ---- options ----------------------------------------------------------------------------


def add_executor_options(p: argparse.ArgumentParser) -> None:
    """How a change is run and followed: `apply`, `undo` and the console take the same."""
    p.add_argument("--curve-tool", default=None, metavar="CMD",
                   help="curve_ops_tool and its flags, to run a leader schedule with (default "
                        "--curve-ops-tool, else curve_ops_tool on PATH)")
    p.add_argument("--heartbeat", type=float, default=DEFAULT_HEARTBEAT,
                   help="Curve heartbeat seconds, to follow a leader schedule (default 10)")
    p.add_argument("--verify-seconds", type=float, default=DEFAULT_VERIFY,
                   help="how long to wait for daemons to run a new value (default 15)")
    p.add_argument("--converge-seconds", type=float, default=DEFAULT_CONVERGE,
                   help="how long to follow pg_num or pgp_num to its target before the "
                        "journal says pending (default 120; undo follows it on)")
    p.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                   help="wait this long for another stormdeck changing the cluster to finish "
                        "(default: refuse at once)")


@dataclass(frozen=True)
class ExecutorOptions:
    """What every Executor of a run is made with, whichever entry point makes it."""

    curve_tool: tuple[str, ...] = (DEFAULT_CURVE_TOOL,)
    heartbeat: float = DEFAULT_HEARTBEAT
    verify_seconds: float = DEFAULT_VERIFY
    converge_seconds: float = DEFAULT_CONVERGE
    wait: float = 0.0


def executor_options(args: argparse.Namespace,
                     sources_args: argparse.Namespace | None = None) -> ExecutorOptions:
    """The command line's executor options; the Curve tool, unless --curve-tool names one,
    is the one the sources read Curve with (--curve-ops-tool, or the cluster's in the
    config file), so a console started with it schedules leaders with it too."""
    src = sources_args if sources_args is not None else args
    text = getattr(args, "curve_tool", None) or getattr(src, "curve_ops_tool", None) \
        or DEFAULT_CURVE_TOOL
    try:
        tool = tuple(shlex.split(text))
    except ValueError as exc:  # an unbalanced quote
        raise UserError(f"--curve-tool: cannot split the command ({exc})") from None
    if not tool:
        raise UserError("--curve-tool names no command")
    out = ExecutorOptions(
        curve_tool=tool,
        heartbeat=getattr(args, "heartbeat", DEFAULT_HEARTBEAT),
        verify_seconds=getattr(args, "verify_seconds", DEFAULT_VERIFY),
        converge_seconds=getattr(args, "converge_seconds", DEFAULT_CONVERGE),
        wait=getattr(args, "wait", 0.0) or 0.0)
    for name in ("heartbeat", "verify_seconds", "converge_seconds"):
        value = getattr(out, name)
        if not 0 < value < float("inf"):  # NaN fails it too
            raise UserError(f"--{name.replace('_', '-')} takes a number of seconds above 0")
    if not 0 <= out.wait < float("inf"):
        raise UserError("--wait takes a number of seconds, 0 or more")
    return out


# ---- judging ------------------------------------------------------------------------------


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    """The rule settings: rules.toml, or the file --rules names."""
    from stormdeck.advisors.settings import load_settings

    rules = getattr(args, "rules", None)
    return load_settings(Path(rules) if rules else None)


def mutes_store(wait: float | None = None) -> Any:  # -> MuteStore
    """The one mutes file of every cluster (a mute is its cluster's by fsid)."""
    from stormdeck.advisors.settings import state_dir

    if wait is not None and not 0 <= wait < float("inf"):
        raise UserError("--wait takes a number of seconds, 0 or more")
    store = MuteStore(state_dir() / MUTES_FILE, wait=WAIT if wait is None else wait)
    _fold_named(store)
    return store


def _fold_named(store: Any) -> None:
    """A console tab's mutes of before (mutes-NAME.json) join the one file, once: a mute
    made in the console is not lost, nor woken, by the upgrade."""
    old = sorted(store.path.parent.glob(_OLD_NAMED))
    if not old:
        return
    for path in old:
        try:
            mutes = MuteStore(path, wait=store.wait)._mutes
        except UserError as exc:  # a damaged old file is left where it is, and said
            print(f"stormdeck: {exc}", file=sys.stderr)
            continue
        try:
            store._change(f"fold {path.name} into {MUTES_FILE}",
                          lambda held, mutes=mutes: held.update(
                              {k: m for k, m in mutes.items() if k not in held}))
        except UserError as exc:
            # A state dir this user cannot write (or a writer holding its lock): the old
            # mutes still hold in this run, as they did before the one file, and the old
            # file stays to be folded by a run that can write.
            print(f"stormdeck: {printable(path.name, 80)} is not folded into {MUTES_FILE} "
                  f"({exc}); its mutes hold in this run", file=sys.stderr)
            store._mutes.update({k: m for k, m in mutes.items() if k not in store._mutes})
            continue
        with contextlib.suppress(OSError):
            path.rename(path.with_name(path.name + ".folded"))


def make_engine(args: argparse.Namespace, settings: dict[str, Any] | None = None,
                rules: Iterable[Any] | None = None, mutes: Any = None) -> Any:
    """An Engine with what validate measured (so the rules that act on it can propose) and
    the given mutes; a replay gives none, as its time is not now."""
    from stormdeck.advisors.engine import Engine
    from stormdeck.advisors.settings import state_dir

    return Engine(settings if settings is not None else settings_of(args), mutes=mutes,
                  rules=ALL if rules is None else rules, validated=store_in(state_dir()))


# ---- the pieces -------------------------------------------------------------------------


@dataclass
class Assembly:
    """One cluster's pieces: what it is read with, judged with, and changed with."""

    sources: list[Any]
    engine: Any
    mutes: Any
    options: ExecutorOptions
    sources_args: argparse.Namespace

    def executor(self, journal: Any, needs_ceph: bool = True,
                 read_only: bool | None = None) -> Any:
        """An Executor with this cluster's identity and the run's options; used in a
        `with`, which closes its connection. read_only None: as the config file holds
        the cluster this connection reached (by fsid)."""
        from stormdeck.advisors.apply import Executor
        from stormdeck.config import held_read_only

        ceph = ceph_admin(self.sources_args) if needs_ceph else None
        # held_read_only closes the connection if it raises.
        ro = held_read_only(self.sources_args, ceph) if read_only is None else read_only
        o = self.options
        return Executor(journal, ceph=ceph, read_only=ro, curve_tool=list(o.curve_tool),
                        verify_seconds=o.verify_seconds,
                        curve_follow=curve_follower(self.sources_args, o.heartbeat),
                        converge_seconds=o.converge_seconds, wait=o.wait)

    def executor_factory(self, journal: Any, read_only: bool,
                         reached: Callable[[Any], bool] | None = None) -> Callable[[], Any]:
        """What the console calls per change: a fresh connection with the sources'
        identity, closed when the change is done (the console uses each in a `with`).

        `read_only` is the tab's; `reached(admin)` says whether the cluster this change's
        own connection reached is one the config file holds read-only (by fsid): asked
        per change, as a conf file may be repointed while the console runs.
        """
        from stormdeck.advisors.apply import Executor

        client = ceph_client(self.sources_args)  # a bad keyring is said at start
        o = self.options
        follow = curve_follower(self.sources_args, o.heartbeat)

        def make() -> Executor:
            ceph = ceph_admin(self.sources_args) if client.conf else None
            ro = read_only
            if not ro and ceph is not None and reached is not None:
                try:
                    ro = reached(ceph)
                except BaseException:
                    ceph.close()
                    raise
            return Executor(journal, ceph=ceph, read_only=ro, curve_tool=list(o.curve_tool),
                            verify_seconds=o.verify_seconds, curve_follow=follow,
                            converge_seconds=o.converge_seconds, wait=o.wait)

        return make


def assemble(args: argparse.Namespace, sources_args: argparse.Namespace | None = None,
             settings: dict[str, Any] | None = None, rules: Sequence[Any] | None = None,
             judge: bool = True, sources: bool = True) -> Assembly:
    """The pieces of one cluster: `args` the command's options, `sources_args` the
    cluster's (a config file's entry for a console tab; the command's own otherwise).
    `judge=False`: no Engine (snapshot, apply, undo); `sources=False`: the command
    reads nothing through the sources (apply, undo)."""
    src = sources_args if sources_args is not None else args
    store = mutes_store() if judge else None
    return Assembly(sources=build_sources(src) if sources else [],
                    engine=make_engine(args, settings, rules, store) if judge else None,
                    mutes=store,
                    options=executor_options(args, src), sources_args=src)


def validate_sources(args: argparse.Namespace) -> list[Any]:
    """What `validate` looks at before it measures: the Ceph cluster and this host alone,
    with the sources' identity."""
    from stormdeck.collectors.host.source import HostSource

    client = ceph_client(args)
    return [ceph_source(client), HostSource(ceph_conf=client.conf),
            *declared_made(args, validate=True)]


# ---- following a leader schedule ---------------------------------------------------------


def wants_curve(args: argparse.Namespace) -> bool:
    return named_by(args, declaration("curve"))


def curve_follower(args: argparse.Namespace,
                   heartbeat: float) -> Callable[[str, str | None], tuple[bool, str]] | None:
    """Follow a pool's leadernum range over heartbeats after a leader schedule (K2.2): that
    pool's alone for a one-pool schedule; every pool's for the all-pools form. None when
    the options name no Curve to read it from. The actuator hands over the range its
    change saw (CurveLeaderSchedule.planned_range): no kind is known here."""
    from stormdeck.advisors.settings import load_settings

    if not wants_curve(args):
        return None
    source: list[Any] = []  # made at the first look: most changes are not schedules
    limit = float(load_settings()["curve.leaders.spread"].params["max_range"])

    def follow(pool: str, planned: str | None = None) -> tuple[bool, str]:
        first: float | str | None = planned
        worst: float | None = None
        for period in range(7):
            if period:
                time.sleep(heartbeat)
            try:
                if not source:
                    source.append(curve_source(args))
                part = source[0].poll()
            except Exception as exc:  # the cluster did not answer: say so, do not crash
                return False, f"could not read the range: {exc}"
            ranges = [p.leader_range for p in (part.curve.pools if part.curve else ())
                      if (pool == ALL_POOLS or p.name == pool) and p.leader_range is not None]
            if not ranges:
                return False, f"the MDS reports no pool {pool}"
            worst = max(ranges)
            first = f"{worst:g}" if first is None else first
            if worst <= limit:
                return True, (f"leadernum range {first} -> {worst:g} after "
                              f"{period * heartbeat:g} s")
        return False, (f"leadernum range still {worst:g} after "
                       f"{6 * heartbeat:g} s: run the schedule again "
                       "(curve-rapid-leader-schedule)")

    return follow
