"""The Grafana dashboard and the alert rules in assets/, checked with promtool and a schema."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

from stormdeck.collectors.exporter import HostCollector

ROOT = Path(__file__).resolve().parent.parent.parent
RULES = ROOT / "assets" / "stormdeck-alerts.yml"
DASHBOARD = ROOT / "assets" / "stormdeck-dashboard.json"
DATA = ROOT / "tests" / "data" / "monitoring"
RULE_TESTS = DATA / "stormdeck-alerts.test.yml"
SCHEMA = DATA / "grafana-dashboard.schema.json"

# What Grafana puts in place of its variables before Prometheus sees the query.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "30s", "$__range": "1h",
                     "$cluster": ".*", "$hostname": ".*"}

needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool is not installed (./dev setup: prometheus)")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def panel_exprs() -> list[tuple[str, str]]:
    """(panel title, PromQL as Prometheus receives it) for every target of every panel."""
    out = []
    for panel in dashboard()["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"]
            for name, value in GRAFANA_VARIABLES.items():
                expr = expr.replace(name, value)
            out.append((panel["title"], expr))
    return out


def check_parses(exprs: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """promtool check rules on the expressions as recording rules: it parses each one."""
    doc = {"groups": [{"name": "parse", "rules": [
        {"record": f"stormdeck_test:expr_{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    path = tmp_path / "exprs.yml"
    path.write_text(yaml.safe_dump(doc))
    return promtool("check", "rules", str(path))


@needs_promtool
def test_the_alert_rules_pass_promtool_check() -> None:
    res = promtool("check", "rules", str(RULES))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"SUCCESS: {len(rules())} rules found" in res.stdout


@needs_promtool
def test_every_alert_has_a_promtool_unit_test_and_passes_it() -> None:
    alerts = {r["alert"] for r in rules() if "alert" in r}
    assert alerts == {"StormdeckCoresStarved", "StormdeckOSDThrottled",
                      "StormdeckWriteCacheOnUnderOSD"}
    cases = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    fired = {t["alertname"] for case in cases for t in case.get("alert_rule_test", [])
             if t["exp_alerts"]}
    quiet = {t["alertname"] for case in cases for t in case.get("alert_rule_test", [])
             if not t["exp_alerts"]}
    assert fired == alerts and quiet == alerts, "each alert: a time it fires, one it must not"
    res = promtool("test", "rules", str(RULE_TESTS))
    assert res.returncode == 0, res.stdout + res.stderr


@needs_promtool
def test_promtool_unit_tests_can_fail(tmp_path: Path) -> None:
    # The same cases against a rule that fires too early must fail: the tests judge.
    loose = RULES.read_text().replace("for: 10m", "for: 1m")
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "stormdeck-alerts.yml").write_text(loose)
    cases = tmp_path / "tests" / "data" / "monitoring"
    cases.mkdir(parents=True)
    shutil.copy(RULE_TESTS, cases)
    res = promtool("test", "rules", str(cases / RULE_TESTS.name))
    assert res.returncode != 0 and "StormdeckCoresStarved" in res.stdout + res.stderr


def test_the_dashboard_matches_the_schema() -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(dashboard(), schema, cls=jsonschema.Draft202012Validator)
    # And the schema refuses what it is for: a panel without a data source.
    broken = dashboard()
    del next(p for p in broken["panels"] if p["type"] != "row")["datasource"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema, cls=jsonschema.Draft202012Validator)


def test_panels_do_not_overlap_and_ids_are_unique() -> None:
    panels = dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: dict[tuple[int, int], str] = {}
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, (p["title"], cells.get((x, y)))
                cells[x, y] = p["title"]


@needs_promtool
def test_every_dashboard_query_parses_with_promtool(tmp_path: Path) -> None:
    exprs = panel_exprs()
    assert len(exprs) >= 10
    res = check_parses([e for _, e in exprs], tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    # The check can fail: one unbalanced parenthesis is refused.
    res = check_parses([exprs[0][1] + ")"], tmp_path)
    assert res.returncode != 0


def exporter_series() -> set[str]:
    """Every series name the exporter's collector declares, with or without samples here."""
    names = set()
    for family in HostCollector(hostname="h1").collect():
        names.add(family.name + "_total" if family.type == "counter" else family.name)
    return names


def test_every_stormdeck_series_named_is_one_the_exporter_serves() -> None:
    served = exporter_series()
    assert "stormdeck_device_cache_on" in served  # declared even where no disk has one
    recorded = {r["record"] for r in rules() if "record" in r}
    text = RULES.read_text() + DASHBOARD.read_text()
    named = set(re.findall(r"\bstormdeck[_:][a-z_:]+[a-z]", text))
    named -= {"stormdeck_test"}
    assert named, "no series named?"
    unknown = {n for n in named if n not in served and n not in recorded}
    assert not unknown, unknown
    # The dashboard's `cluster` and `hostname` variables read labels the exporter gives.
    assert any("cluster" in v.get("definition", "") for v in dashboard()["templating"]["list"])

