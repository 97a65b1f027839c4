"""The config file: clusters by name, each with its sources and its own read-only default.

    # ~/.config/stormdeck/config.toml (or $STORMDECK_CONFIG, or --config FILE)
    [clusters.prod]
    conf = "/etc/ceph/ceph.conf"      # any source option of the command line, by name
    prometheus = "http://prom:9090"
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
from stormdeck.base.text import printable

# Setting in the file -> (attribute of the command line's namespace, type).
SETTINGS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "conf": ("conf", str), "ceph": ("ceph", bool), "id": ("client_id", str),
    "name": ("client_name", str), "keyring": ("keyring", str), "cluster": ("cluster", str),
    "prometheus": ("prometheus", str), "prometheus_for": ("prometheus_for", str),
    "curve_mds": ("curve_mds", (str, list)),
    "curve_chunkserver": ("curve_chunkserver", (str, list)),
    "curve_ops_tool": ("curve_ops_tool", str), "curve_cli": ("curve_cli", str),
    "host": ("no_host", bool), "timeout": ("timeout", (int, float)),
    "read_only": ("read_only", bool),
}
DEFAULTS: dict[str, Any] = {
    "conf": None, "ceph": False, "client_id": None, "client_name": None, "keyring": None,
    "cluster": "ceph", "prometheus": None, "prometheus_for": "ceph", "curve_mds": None,
    "curve_chunkserver": None, "curve_ops_tool": None, "curve_cli": None, "no_host": False,
    "timeout": 10.0,
}


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
    explicit = path is not None
    path = path or config_path()
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        if explicit:
            raise UserError(f"no such config file: {path}") from None
        return []
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path} is not valid TOML: {exc}") from None
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
    values = dict(DEFAULTS)
    read_only = False
    for key, value in table.items():
        if key not in SETTINGS:
            raise UserError(f"{path}: clusters.{shown} has no setting {printable(key, 60)!r} "
                            f"(known: {', '.join(sorted(SETTINGS))})")
        attr, kind = SETTINGS[key]
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise UserError(f"{path}: clusters.{shown}.{key} has the wrong type "
                            f"({type(value).__name__})")
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        if key == "host":
            value = not value
        if key == "read_only":
            read_only = bool(value)
            continue
        values[attr] = value
    return ClusterConfig(name, argparse.Namespace(**values), read_only)


SOURCE_ATTRS = ("conf", "ceph", "client_id", "client_name", "keyring", "prometheus",
                "curve_mds", "curve_chunkserver", "curve_ops_tool", "curve_cli")


def names_sources(args: argparse.Namespace) -> bool:
    """Did the command line name a source itself? Then the config file is not used."""
    return any(getattr(args, a, None) for a in SOURCE_ATTRS)
