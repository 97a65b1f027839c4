"""The config file: clusters by name, each with its sources and its own read-only default.

    # ~/.config/stormdeck/config.toml (or $STORMDECK_CONFIG, or --config FILE)
    [clusters.prod]
    conf = "/etc/ceph/ceph.conf"      # any source option of the command line, by name,
    prometheus = "https://prom:9090"  # checked with exactly the command line's choices
    prometheus_match = 'cluster="prod"'
    prometheus_ca = "/etc/ssl/prom-ca.pem"
    prometheus_token_file = "/etc/stormdeck/prom.token"   # file only: never on a command line
    read_only = true                  # refuse every change in this cluster's tab

    [clusters.lab]
    conf = "/var/tmp/stormdeck-lab/ceph.conf"
"""

from __future__ import annotations

import argparse
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.base.files import FileMissing, read_text
from stormdeck.base.text import printable

# Keys only the file may hold: secrets stay off command lines (and out of `ps`).
FILE_ONLY = ("prometheus_token_file", "prometheus_user", "prometheus_password_file",
             "read_only")
# A config file is a few hundred bytes; more is not one (a log named by mistake, /dev/zero).
CONFIG_LIMIT = 1 << 20
# The file says `host = false` where the command line says --no-host.
INVERTED = {"host": "no_host"}


def _file_keys() -> dict[str, argparse.Action]:
    """Each source option of the command line, by the name the file gives it."""
    from stormdeck.sources import source_parser

    keys = {}
    for action in source_parser()._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs:
            continue
        key = longs[0][2:].replace("-", "_")
        if key.startswith("no_") and action.dest == key:
            key = next(k for k, v in INVERTED.items() if v == action.dest)
        keys[key] = action
    return keys


def _defaults() -> dict[str, Any]:
    values = {a.dest: a.default for a in _file_keys().values()}
    values.update({k: None for k in FILE_ONLY if k != "read_only"})
    return values


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    sources: argparse.Namespace  # as build_sources takes them
    read_only: bool


def config_path() -> Path:
    env = os.environ.get("STORMDECK_CONFIG")
    if env:
        return Path(env)
    from stormdeck.advisors.settings import config_dir

    return config_dir() / "config.toml"


def load_clusters(path: Path | None = None) -> list[ClusterConfig]:
    """The clusters the file names, in its order; [] when there is no file."""
    # Named (--config, $STORMDECK_CONFIG), a missing file is an error; the default's
    # absence only means there is no config file.
    explicit = path is not None or bool(os.environ.get("STORMDECK_CONFIG"))
    path = path or config_path()
    try:
        # A FIFO or /dev/zero named as the config must end in a sentence, not a hang.
        doc = tomllib.loads(read_text(path, CONFIG_LIMIT))
    except FileMissing:
        if explicit:
            raise UserError(f"no such config file: {printable(str(path), 200)}") from None
        return []
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{printable(str(path), 200)} is not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per nesting level
        raise UserError(f"{printable(str(path), 200)} is not valid TOML: nested too "
                        "deeply") from None
    unknown = set(doc) - {"clusters"}
    if unknown:
        raise UserError(f"{path}: unknown table {sorted(unknown)[0]!r} (only [clusters.NAME])")
    clusters = doc.get("clusters", {})
    if not isinstance(clusters, dict):
        raise UserError(f"{path}: clusters must be tables: [clusters.NAME]")
    return [_cluster(path, name, table) for name, table in clusters.items()]


def _cluster(path: Path, name: str, table: Any) -> ClusterConfig:
    shown = printable(name, 60)  # a name may hold anything TOML allows: a newline, say
    if not isinstance(table, dict):
        raise UserError(f"{path}: clusters.{shown} must be a table")
    keys = _file_keys()
    values = _defaults()
    read_only = False
    for key, value in table.items():
        where = f"{path}: [clusters.{shown}] {printable(key, 60)}"
        if key not in keys and key not in FILE_ONLY:
            raise UserError(f"{path}: [clusters.{shown}] has no setting {printable(key, 60)!r} "
                            f"(known: {', '.join(sorted([*keys, *FILE_ONLY]))})")
        if key == "read_only":
            if not isinstance(value, bool):
                raise UserError(f"{where} = {_shown(value)} is not allowed: it takes true or "
                                "false")
            read_only = value
            continue
        if key in FILE_ONLY:
            values[key] = _file_only(where, key, value)
            continue
        action = keys[key]
        values[action.dest] = _checked(where, action, value, key in INVERTED)
    if values.get("prometheus_user") is not None and values.get("prometheus_token_file"):
        raise UserError(f"{path}: [clusters.{shown}] has both prometheus_token_file and "
                        "prometheus_user: give one way to authenticate")
    return ClusterConfig(name, argparse.Namespace(**values), read_only)


def _shown(value: Any) -> str:
    return printable(repr(value), 80)


def _checked(where: str, action: argparse.Action, value: Any, inverted: bool) -> Any:
    """The value as the command line would have taken it, or one sentence why not."""
    if action.nargs == 0:  # a flag: --ceph, --no-host, --prometheus-insecure
        if not isinstance(value, bool):
            raise UserError(f"{where} = {_shown(value)} is not allowed: it takes true or "
                            "false")
        return not value if inverted else value
    if isinstance(value, bool) or not isinstance(value, (str, int, float, list)):
        raise UserError(f"{where} = {_shown(value)} is not allowed: it takes "
                        f"{_what(action)}")
    if action.choices is not None:
        if value not in action.choices:
            raise UserError(f"{where} = {_shown(value)} is not allowed: it takes one of "
                            f"{', '.join(map(str, action.choices))}")
        return value
    convert = action.type
    if convert is None:
        if not isinstance(value, str):
            raise UserError(f"{where} = {_shown(value)} is not allowed: it takes text")
        return value
    if isinstance(value, list) and getattr(convert, "__name__", "") != "addr_list":
        raise UserError(f"{where} = {_shown(value)} is not allowed: it takes "
                        f"{_what(action)}, not a list")
    try:
        return convert(value)  # type: ignore[operator]
    except argparse.ArgumentTypeError as exc:
        raise UserError(f"{where} = {_shown(value)} is not allowed: it {exc}") from None


def _what(action: argparse.Action) -> str:
    if action.choices is not None:
        return "one of " + ", ".join(map(str, action.choices))
    return "a number" if action.type in (float, int) or \
        getattr(action.type, "__name__", "") == "positive_seconds" else "text"


def _file_only(where: str, key: str, value: Any) -> str:
    from stormdeck.sources import readable_file

    if not isinstance(value, str) or not value:
        raise UserError(f"{where} = {_shown(value)} is not allowed: it takes text")
    if key.endswith("_file"):
        try:
            readable_file(value)
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"{where} = {_shown(value)} is not allowed: it {exc}") from None
    return value


SOURCE_ATTRS = ("conf", "ceph", "client_id", "client_name", "keyring", "prometheus",
                "curve_mds", "curve_chunkserver", "curve_ops_tool", "curve_cli")
# CEPH_ARGS' client options name a source as the command line's do (as for `ceph`),
# but CEPH_CONF does not: it is where a default cluster's conf is, like /etc/ceph.


def choose_cluster(args: argparse.Namespace) -> None:
    """For a command of one cluster: the config file's, when no source option names one.

    The command line wins: a setting given there (other than its default) is kept.
    A cluster's read_only carries over to apply and undo.
    """
    if names_sources(args):
        return
    clusters = load_clusters(Path(args.config) if args.config else None)
    if not clusters:
        return  # as the ceph CLI: $CEPH_CONF, then /etc/ceph/ceph.conf
    if len(args.only) > 1:
        raise UserError("--only takes one cluster here (the console takes several)")
    if args.only:
        chosen = [c for c in clusters if c.name == args.only[0]]
        if not chosen:
            raise UserError(f"no cluster {printable(args.only[0], 60)!r} in the config file "
                            f"(it names {', '.join(printable(c.name, 60) for c in clusters)})")
    elif len(clusters) > 1:
        raise UserError(f"the config file names {len(clusters)} clusters "
                        f"({', '.join(printable(c.name, 60) for c in clusters)}): choose one "
                        "with --only NAME")
    else:
        chosen = clusters
    defaults = _defaults()
    for attr, value in vars(chosen[0].sources).items():
        if getattr(args, attr, None) in (None, defaults.get(attr)):
            setattr(args, attr, value)
    if chosen[0].read_only and hasattr(args, "read_only"):
        args.read_only = True


def names_sources(args: argparse.Namespace) -> bool:
    """Did the command line name a source itself? Then the config file is not used."""
    from stormdeck.sources import names_ceph

    return any(getattr(args, a, None) for a in SOURCE_ATTRS) or names_ceph(args)
