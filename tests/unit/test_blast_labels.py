"""The hand-written reach label is gone: what a change moves and reaches is computed wherever it
is shown (plan review, `check` text and JSON), and plan files that still carry the label load."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.findings import Change, Finding, Severity
from stormdeck.advisors.plan import Plan, reach_of, review
from stormdeck.cli_check import finding_json, render

SPLIT = change("pool_set", "rbd", "pg_num", "100", "128")
SLEEP = change("ceph_config", "osd", "osd_scrub_sleep", "0", "0.1")


def finding(*changes: Change) -> Finding:
    return Finding(rule="ceph.pool.pg_not_power_of_two", title="t", severity=Severity.WARNING,
                   target="rbd", summary="s", explanation="", source="K0", state="firing",
                   first_seen=0.0, last_seen=0.0, changes=changes)


def test_the_reach_is_computed_and_says_whether_data_moves() -> None:
    assert "blast_radius" not in Change.__dataclass_fields__
    assert reach_of(SPLIT) == "moves data, affects pool"
    assert reach_of(SLEEP) == "moves no data, affects all OSDs"
    assert reach_of(change("osd_flag", "osd.3", "noup", "unset", "set")) == \
        "moves data, affects daemon"
    out = finding_json(finding(SPLIT, SLEEP))
    # The key stays for docs/check.schema.json's readers, its value computed.
    assert [c["blast_radius"] for c in out["changes"]] == \
        ["moves data, affects pool", "moves no data, affects all OSDs"]
    snap = SimpleNamespace(sources={})
    assert "moves no data, affects all OSDs" in render([finding(SLEEP)], {}, snap)


def test_a_plan_file_with_the_old_label_loads_and_the_label_is_not_shown(
        tmp_path: Path) -> None:
    plan = Plan(id="old1", created=time.time(), rule="ceph.pool.pg_not_power_of_two",
                target="rbd", summary="s", source="K0",
                fsid="01234567-89ab-cdef-0123-456789abcdef", changes=(SPLIT,))
    raw = json.loads(plan.to_json())
    raw["changes"][0]["blast_radius"] = "osd.3 alone"  # as the old version wrote it
    path = tmp_path / "old.json"
    path.write_text(json.dumps(raw))
    back = Plan.load(path)
    assert back.changes == (SPLIT,)
    shown = review(back)
    assert "osd.3 alone" not in shown and "moves data, affects pool" in shown
