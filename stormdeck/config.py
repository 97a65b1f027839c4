"""The config file: clusters by name, each with its sources and its own read-only default.

    # ~/.config/stormdeck/config.toml (or $STORMDECK_CONFIG, or --config FILE)
    [clusters.prod]
    conf = "/etc/ceph/ceph.conf"      # any source option of the command line, by name,
    prometheus = "https://prom:9090"  # checked with exactly the command line's choices
    prometheus_match = 'cluster="prod"'
    prometheus_ca = "/etc/ssl/prom-ca.pem"
    prometheus_token_file = "/etc/stormdeck/prom.token"   # file only: never on a command line
    prometheus_org_id = "tenant-1"    # X-Scope-OrgID, for Mimir or Cortex
    read_only = true                  # refuse every change to this cluster
    fsid = "8f1c..."                  # optional: by default the fsid in its conf's [global]

    [clusters.prod.prometheus_query]  # --prometheus-query NAME=PROMQL, by name
    read_iops = 'max by (ceph_daemon) (site:ceph_osd_op_r:rate5m)'

    [clusters.lab]
    conf = "/var/tmp/stormdeck-lab/ceph.conf"

A cluster's read_only holds whichever option names it: chosen by name (--only), or by
its conf file given with -c (the same file, compared resolved), or by its fsid once a
change connects (the `fsid` key, or the fsid its conf file records).
"""

from __future__ import annotations

import argparse
import os
import tomllib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.base.files import FileMissing, read_text
from stormdeck.base.text import printable
from stormdeck.collectors.registry import enabling_keys
from stormdeck.sources import (
    ceph_client,
    checked_override,
    names_ceph,
    names_other_cluster,
    readable_file,
    source_parser,
)

# Keys only the file may hold: secrets stay off command lines (and out of `ps`).
FILE_ONLY = ("prometheus_token_file", "prometheus_user", "prometheus_password_file",
             "read_only", "fsid")
# Keys of the cluster itself, not of its sources.
CLUSTER_KEYS = ("read_only", "fsid")
# A config file is a few hundred bytes; more is not one (a log named by mistake, /dev/zero).
CONFIG_LIMIT = 1 << 20
# The file says `host = false` where the command line says --no-host.
INVERTED = {"host": "no_host"}


def _file_keys() -> dict[str, argparse.Action]:
    """Each source option of the command line, by the name the file gives it."""
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
    values.update({k: None for k in FILE_ONLY if k not in CLUSTER_KEYS})
    return values


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    sources: argparse.Namespace  # as build_sources takes them
    read_only: bool
    fsid: str | None = None  # as the file gives it (lower case); None: not given


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
    fsid = None
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
        if key == "fsid":
            fsid = _fsid(where, value)
            continue
        if key in FILE_ONLY:
            values[key] = _file_only(where, key, value)
            continue
        action = keys[key]
        values[action.dest] = _checked(where, action, value, key in INVERTED)
    if values.get("prometheus_user") is not None and values.get("prometheus_token_file"):
        raise UserError(f"{path}: [clusters.{shown}] has both prometheus_token_file and "
                        "prometheus_user: give one way to authenticate")
    return ClusterConfig(name, argparse.Namespace(**values), read_only, fsid)


def _fsid(where: str, value: Any) -> str:
    try:
        if isinstance(value, str):
            return str(uuid.UUID(value))
    except ValueError:
        pass
    raise UserError(f"{where} = {_shown(value)} is not allowed: it takes a cluster's fsid, "
                    "like 8f1c2a7e-3b5d-4e6f-9a0b-1c2d3e4f5a6b (ceph fsid)")


def _shown(value: Any) -> str:
    return printable(repr(value), 80)


def _checked(where: str, action: argparse.Action, value: Any, inverted: bool) -> Any:
    """The value as the command line would have taken it, or one sentence why not."""
    if action.dest == "prometheus_query":
        return _overrides(where, value)
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


def _overrides(where: str, value: Any) -> list[tuple[str, str]]:
    """prometheus_query: a table of NAME = "PROMQL" (or a list of "NAME=PROMQL", as the
    command line spells them), each checked as --prometheus-query checks it."""
    if isinstance(value, list) and all(isinstance(v, str) and "=" in v for v in value):
        value = dict(v.partition("=")[::2] for v in value)
    if not isinstance(value, dict):
        raise UserError(f"{where} = {_shown(value)} is not allowed: it takes a table of "
                        "query names and PromQL, like [clusters.NAME.prometheus_query] "
                        "read_iops = '...'")
    out = []
    for name, expr in value.items():
        try:
            out.append(checked_override(str(name).strip(), expr))
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"{where}.{printable(str(name), 60)} is not allowed: it {exc}") \
                from None
    return out


def _what(action: argparse.Action) -> str:
    if action.choices is not None:
        return "one of " + ", ".join(map(str, action.choices))
    return "a number" if action.type in (float, int) or \
        getattr(action.type, "__name__", "") == "positive_seconds" else "text"


def _file_only(where: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise UserError(f"{where} = {_shown(value)} is not allowed: it takes text")
    if key.endswith("_file"):
        try:
            readable_file(value)
        except argparse.ArgumentTypeError as exc:
            raise UserError(f"{where} = {_shown(value)} is not allowed: it {exc}") from None
    return value


# The options that name a source are each source's `enabled_by` (collectors/registry.py).
# CEPH_ARGS' client options name a source as the command line's do (as for `ceph`),
# but CEPH_CONF does not: it is where a default cluster's conf is, like /etc/ceph.


def choose_cluster(args: argparse.Namespace) -> None:
    """For a command of one cluster: the config file's, when no source option names one.

    The command line wins: a setting given there (other than its default) is kept.
    A cluster's read_only carries over to apply, undo and validate, also when the command
    line names that cluster's conf itself (-c) rather than the cluster.
    """
    if not names_sources(args):
        _choose(args)
    if hasattr(args, "read_only") and not args.read_only and read_only_cluster(args):
        args.read_only = True


def _choose(args: argparse.Namespace) -> None:
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
    return any(getattr(args, a, None) for a in enabling_keys()) or names_ceph(args)


# ---- read-only wherever it is set ------------------------------------------------------


def read_only_cluster(args: argparse.Namespace, fsid: str | None = None,
                      config: str | Path | None = None) -> str | None:
    """Which read_only cluster of the config file the options name, as the reason to show;
    None when none does.

    By conf: the file the command would connect with (-c, CEPH_ARGS, CEPH_CONF, the
    default), against each read_only cluster's, as the same file (a symlink or another
    spelling of the path is the same file). By fsid (`fsid`, once connected): the
    cluster's fsid key, else the fsid its conf file records.
    """
    config = config if config is not None else getattr(args, "config", None)
    clusters = [c for c in load_clusters(Path(config) if config else None) if c.read_only]
    if not clusters:
        return None
    mine = _conf_of(args)
    for c in clusters:
        theirs = _conf_of(c.sources) if _uses_ceph(c.sources) else None
        if mine and theirs and _same_file(mine, theirs):
            return (f"the config file's cluster {printable(c.name, 60)!r} is read_only, and "
                    f"{printable(mine, 200)} is its conf")
        known = c.fsid or (_fsid_in_conf(theirs) if theirs else None)
        if fsid and known and _uuid(fsid) == known:
            return (f"the config file's cluster {printable(c.name, 60)!r} is read_only, and "
                    f"{printable(fsid, 60)} is its fsid")
    return None


def forced_read_only(args: argparse.Namespace) -> bool:
    """--read-only, or STORMDECK_READ_ONLY set (to anything but 0)."""
    return bool(getattr(args, "read_only", False)
                or os.environ.get("STORMDECK_READ_ONLY", "") not in ("", "0"))


def held_read_only(args: argparse.Namespace, admin: Any = None) -> bool:
    """Must a change through these options be refused? --read-only, STORMDECK_READ_ONLY, or
    a read_only cluster of the config file: named by its conf, or (through `admin`, a
    CephAdmin already made) reached by its fsid. `admin` is closed if this raises."""
    if forced_read_only(args):
        return True
    try:
        return bool(read_only_reached(args, admin))
    except BaseException:
        if admin is not None:
            admin.close()
        raise


def read_only_reached(args: argparse.Namespace, admin: Any = None,
                      config: str | Path | None = None) -> str | None:
    """read_only_cluster, with the fsid of the cluster `admin` reached, asked only when a
    read_only cluster's fsid is known (one round trip, not one per change otherwise)."""
    config = config if config is not None else getattr(args, "config", None)
    fsid = admin.fsid() if admin is not None and read_only_fsids(config) else None
    return read_only_cluster(args, fsid=fsid, config=config)


def read_only_fsids(config: str | Path | None = None) -> bool:
    """Does any read_only cluster of the config file have a known fsid (so that checking the
    connected cluster's is worth a round trip)?"""
    for c in load_clusters(Path(config) if config else None):
        if not c.read_only:
            continue
        theirs = _conf_of(c.sources) if _uses_ceph(c.sources) else None
        if c.fsid or (theirs and _fsid_in_conf(theirs)):
            return True
    return False


def _uses_ceph(ns: argparse.Namespace) -> bool:
    """As build_sources decides: named, or the default when no other cluster source is."""
    return names_ceph(ns) or not names_other_cluster(ns)


def _conf_of(ns: argparse.Namespace) -> str | None:
    """The conf file these options connect with (as `ceph` finds it), if any."""
    try:
        return ceph_client(ns).conf
    except UserError:  # a conf or keyring that is not there: the path named, all the same
        return getattr(ns, "conf", None)


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one is missing: the same path spelled otherwise still counts
        return os.path.realpath(os.path.expanduser(a)) == \
            os.path.realpath(os.path.expanduser(b))


def _fsid_in_conf(path: str) -> str | None:
    """The fsid a ceph.conf's [global] records, read as Ceph reads it: keys spelled with
    spaces or _, indented or not (cephadm's minimal conf indents every line with a tab,
    which configparser would read as one continued value), ; and # comments."""
    if not os.path.isfile(path):  # a FIFO would hang the read
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read(1 << 20).splitlines()
    except OSError:
        return None
    section = ""
    for line in lines:
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip().lower()
            continue
        key, eq, value = line.partition("=")
        if eq and section == "global" and "_".join(key.split()).lower() == "fsid":
            return _uuid(value)
    return None


def _uuid(text: str | None) -> str | None:
    """A fsid in its canonical spelling (lower case, dashed), or None if it is not one."""
    try:
        return str(uuid.UUID(text.strip())) if text else None
    except ValueError:
        return None
