"""`stormdeck explain`: each rule, its thresholds as check runs them, its sources; rules.md."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from stormdeck.advisors import knowledge
from stormdeck.advisors.settings import load_settings
from stormdeck.cli import main
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_user_rules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The operator's own rules file must not leak into what these tests compare."""
    monkeypatch.delenv("STORMDECK_RULES", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["explain", *args])
    out, err = capsys.readouterr()
    return code, out, err


@cache
def listed_rules() -> tuple[str, ...]:
    """The rule ids as an operator finds them: `stormdeck check --list-rules`."""
    r = run_cli("check", "--list-rules")  # no rules file: the fixture moved the config home
    assert r.rc == 0, r.err
    return tuple(line.split()[0] for line in r.out.splitlines() if line.strip())


def test_every_listed_rule_is_explained_with_its_thresholds_and_links(capsys) -> None:
    ids = listed_rules()
    assert len(ids) >= 25
    settings = load_settings()
    index = knowledge.sections()
    for rule_id in ids:
        code, out, err = explain(capsys, rule_id, "-f", "json")
        assert code == 0 and not err, (rule_id, err)
        doc = json.loads(out)
        assert doc["rule"] == rule_id and doc["judges"]
        # The thresholds are the rule's own settings, not a copy that could drift.
        values = {t["name"]: t["value"] for t in doc["thresholds"]}
        s = settings[rule_id]
        assert values == {"for_seconds": s.for_seconds, "warmup_samples": s.warmup_samples,
                          **s.params}, rule_id
        assert doc["sections"], rule_id
        for sec in doc["sections"]:
            assert sec["id"] in index and sec["links"], (rule_id, sec["id"])
        code, text, _ = explain(capsys, rule_id)
        assert code == 0 and text.startswith(f"{rule_id}: ")
        for sec in doc["sections"]:
            assert f"{sec['id']}: " in text and sec["links"][0]["url"] in text
        assert "K1." not in text and "K2." not in text, "an older note number reached the user"


def test_the_committed_rule_list_is_the_generated_one(capsys) -> None:
    code, out, _ = explain(capsys, "--all", "-f", "markdown", "--shipped")
    assert code == 0
    committed = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert out == committed, ("docs/rules.md is stale: regenerate it with "
                              "`stormdeck explain --all -f markdown --shipped > docs/rules.md`")
    for rule_id in listed_rules():
        assert f"\n## {rule_id}\n" in committed


def test_a_users_threshold_is_shown_with_the_shipped_one(capsys, tmp_path: Path) -> None:
    rules = tmp_path / "rules.toml"
    rules.write_text('["ceph.osd.cores_beyond_knee"]\nknee_read = 9\n\n'
                     '["host.tuned_profile"]\nprofile = "x\\u001b[2Jy"\n')
    code, out, _ = explain(capsys, "ceph.osd.cores_beyond_knee", "--rules", str(rules))
    assert code == 0
    (line,) = [ln for ln in out.splitlines() if "knee_read" in ln]
    assert "knee_read = 9" in line and "(shipped: 10)" in line
    # The shipped view ignores the file; what a file says is data, printed escaped.
    code, out, _ = explain(capsys, "ceph.osd.cores_beyond_knee", "--shipped", "--rules",
                           str(rules))
    assert "knee_read = 10 " in out
    code, out, _ = explain(capsys, "host.tuned_profile", "--rules", str(rules))
    (line,) = [ln for ln in out.splitlines() if ln.lstrip().startswith("profile =")]
    assert code == 0 and "\x1b" not in out and "[2Jy" in line


def test_a_section_or_an_older_number_explains_that_section(capsys) -> None:
    code, out, _ = explain(capsys, "osd-cpu-cluster-knee")
    assert code == 0 and out.startswith("osd-cpu-cluster-knee: ")
    assert "ceph.osd.iops_per_core" in out.splitlines()[-1]  # cited by
    code, out, _ = explain(capsys, "K1.9", "-f", "json")
    ids = {d["id"] for d in json.loads(out)}
    assert ids == {"host-tuned-latency-profile", "msgr-secure-mode-cost"}


def test_an_unknown_id_is_one_sentence_and_exit_3() -> None:
    r = run_cli("explain", "ceph.no.such_rule")
    assert r.rc == 3 and not r.out
    assert r.err.count("\n") == 1 and "ceph.no.such_rule" in r.err
    assert "Traceback" not in r.err
    r = run_cli("explain")
    assert r.rc == 3 and "--all" in r.err
