"""Rule thresholds: the shipped defaults (assets/rules.toml) under a user's overrides."""

from __future__ import annotations

import contextlib
import os
import tomllib
from importlib.resources import files
from pathlib import Path
from typing import Any

from stormdeck.advisors.findings import RuleSettings
from stormdeck.advisors.lock import secure_dir
from stormdeck.advisors.rules import BY_ID
from stormdeck.base.errors import UserError
from stormdeck.base.files import FileMissing, read_text
from stormdeck.base.text import printable

ENGINE_KEYS = ("enabled", "for_seconds", "warmup_samples")
RULES_LIMIT = 1 << 20  # a rules file is a few KiB; more is not one


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "stormdeck"


def state_dir() -> Path:
    """Where plans, mutes, the journal, reports and evidence live: made 0700 when first
    asked for, and an existing one that others could read is closed (they hold what was
    changed on which cluster, and the cluster's own values)."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    path = Path(base) / "stormdeck"
    with contextlib.suppress(OSError):  # cannot be made: its first writer says so, in its words
        secure_dir(path)
    return path


def defaults() -> dict[str, dict[str, Any]]:
    return tomllib.loads(files("stormdeck.assets").joinpath("rules.toml").read_text())


def user_rules_file() -> Path | None:
    env = os.environ.get("STORMDECK_RULES")
    if env:
        return Path(env)
    path = config_dir() / "rules.toml"
    return path if path.exists() else None


def load_settings(user_file: Path | None = None) -> dict[str, RuleSettings]:
    """Every rule's settings; a user file's mistakes end in one sentence naming file and key."""
    tables = defaults()
    path = user_file or user_rules_file()
    if path is not None:
        shown = printable(str(path), 200)
        try:
            user = tomllib.loads(read_text(path, RULES_LIMIT))
        except FileMissing:
            raise UserError(f"no such rules file: {shown}") from None
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"{shown} is not valid TOML: {exc}") from None
        except RecursionError:  # tomllib recurses once per nesting level
            raise UserError(f"{shown} is not valid TOML: nested too deeply") from None
        _merge(tables, user, path)
    return {rule_id: _settings(tables.get(rule_id, {})) for rule_id in BY_ID}


def _merge(tables: dict[str, dict[str, Any]], user: dict[str, Any], path: Path) -> None:
    for rule_id, table in user.items():
        if rule_id not in BY_ID:
            raise UserError(f"{path}: there is no rule {rule_id!r} (see `stormdeck check "
                            "--list-rules`)")
        if not isinstance(table, dict):
            raise UserError(f"{path}: [\"{rule_id}\"] must be a table of settings")
        base = tables.setdefault(rule_id, {})
        for key, value in table.items():
            if key == "enabled":
                if not isinstance(value, bool):
                    raise UserError(f"{path}: {rule_id}.enabled must be true or false")
            elif key not in base:
                known = ", ".join(sorted(base)) or "none"
                raise UserError(f"{path}: rule {rule_id} has no setting {key!r} "
                                f"(it has: {known})")
            elif not _same_kind(base[key], value):
                raise UserError(f"{path}: {rule_id}.{key} must be {_kind(base[key])}, "
                                f"not {value!r}")
            base[key] = value


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, int | float):
        return isinstance(value, int | float) and value >= 0
    return isinstance(value, type(default))


def _kind(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int | float):
        return "a number of zero or more"
    return "a string" if isinstance(default, str) else type(default).__name__


def _settings(table: dict[str, Any]) -> RuleSettings:
    params = {k: v for k, v in table.items() if k not in ENGINE_KEYS}
    return RuleSettings(enabled=bool(table.get("enabled", True)),
                        for_seconds=float(table.get("for_seconds", 0)),
                        warmup_samples=int(table.get("warmup_samples", 1)), params=params)
