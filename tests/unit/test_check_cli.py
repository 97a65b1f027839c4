"""`stormdeck check` end to end on a Curve cluster served from 127.0.0.1: JSON schema, exits."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.conftest import run_cli
from tests.curve_wire import CurveWire

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "check.schema.json").read_text())
TYPES = {"object": dict, "array": list, "string": str, "number": (int, float),
         "integer": int, "boolean": bool, "null": type(None)}


def conforms(value: Any, schema: dict[str, Any], where: str = "$") -> None:
    """The parts of JSON Schema that docs/check.schema.json uses."""
    if "const" in schema:
        assert value == schema["const"], where
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(isinstance(value, TYPES[k]) and not (k in ("number", "integer")
                                                      and isinstance(value, bool))
                 for k in kinds)
        assert ok, f"{where}: {value!r} is not {kinds}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, f"{where}: no {key}"
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                conforms(value[key], sub, f"{where}.{key}")
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, v in value.items():
                if key not in schema.get("properties", {}):
                    conforms(v, extra, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            conforms(item, schema["items"], f"{where}[{i}]")


def check(wire: CurveWire, tmp_path: Path, *args: str):
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    return run_cli("check", "--curve-mds", ",".join(m.addr for m in wire.mds),
                   "--curve-chunkserver", ",".join(wire.addrs()), "--no-host", *args,
                   env=env, timeout=120)


def test_check_json_follows_the_schema_and_pending_does_not_count(tmp_path: Path) -> None:
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        res = check(wire, tmp_path, "--json", "--for", "1", "--interval", "0.5")
    assert res.rc == 0, res.err
    out = json.loads(res.out)
    conforms(out, SCHEMA)
    assert out["muted"] == {"count": 0, "exit_without_mutes": 0}
    (f,) = [f for f in out["findings"] if f["rule"] == "curve.leaders.spread"]
    assert f["state"] == "pending", "it needs 20 s to fire"


def test_check_exits_1_on_a_firing_warning(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('["curve.leaders.spread"]\nfor_seconds = 0\n')
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        res = check(wire, tmp_path, "--for", "0", "--rules", str(rules))
    assert res.rc == 1, res.err
    assert "WARNING  firing" in res.out and "leadernum range 12" in res.out
    assert res.out.rstrip().endswith("muted: none")
    assert "change: curve_ops_tool rapid-leader-schedule" in res.out


def test_check_exits_3_when_nothing_can_be_read(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    res = run_cli("check", "--prometheus", "http://127.0.0.1:1", "--no-host", "--for", "0",
                  "--timeout", "1", env=env)
    assert res.rc == 3
    assert "could not read the cluster" in res.err and "Traceback" not in res.err


def test_check_with_a_bad_rules_file_is_one_sentence(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('["ceph.osd.cores_starved"]\nbusy = 2\n')
    res = run_cli("check", "--list-rules", "--rules", str(rules))
    assert res.rc == 3 and "has no setting 'busy'" in res.err
    assert len(res.err.strip().splitlines()) == 1


def test_list_rules_names_every_rule_and_its_source() -> None:
    res = run_cli("check", "--list-rules")
    assert res.rc == 0
    from stormdeck.advisors.rules import ALL

    assert len(res.out.strip().splitlines()) == len(ALL) >= 44
    assert "curve.leaders.spread" in res.out and "K2.1" in res.out


def test_mute_then_check_shows_it_muted_and_exits_0(tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('["curve.leaders.spread"]\nfor_seconds = 0\n')
    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"),
               "STORMDECK_RULES": str(rules)}
        addr = ["--curve-mds", ",".join(m.addr for m in wire.mds), "--no-host"]
        res = run_cli("mute", "curve.leaders.spread", *addr, env=env)
        assert res.rc == 3 and "--for TIME" in res.err
        res = run_cli("mute", "curve.leaders.spread", "--for", "2h", "--reason", "known",
                      *addr, env=env)
        assert res.rc == 0, res.err
        # With the MDS alone no pool id can be read: the finding is the all-pools one.
        assert "muted curve.leaders.spread on all-pools" in res.out
        listed = run_cli("mute", "--list", env=env)
        assert "all-pools" in listed.out and "known" in listed.out
        res = run_cli("check", *addr, "--for", "0", env=env)
        assert res.rc == 0 and "firing muted" in res.out
        # Green only because of the mute: check says so, in text and in JSON.
        assert "muted: 1 finding; without the mutes check would exit 1" in res.out
        res = run_cli("check", *addr, "--for", "0", "--json", env=env)
        assert res.rc == 0, res.err
        out = json.loads(res.out)
        conforms(out, SCHEMA)
        assert out["muted"] == {"count": 1, "exit_without_mutes": 1}
        # Worse than when muted: the mute lifts and the warning counts again.
        wire.set_leaders([30, 18, 16, 16, 14, 6])
        res = run_cli("check", *addr, "--for", "0", env=env)
        assert res.rc == 1 and "unmuted: it grew worse" in res.out
    assert run_cli("unmute", "curve.leaders.spread", "x", env=env).rc == 3
