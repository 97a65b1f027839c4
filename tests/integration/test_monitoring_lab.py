"""The dashboard's queries and the alert rules on the lab's real Prometheus: ceph-mgr's,
node_exporter's and stormdeck's series, joined as the panels and rules join them."""

from __future__ import annotations

import json
import re
import urllib.parse
import urllib.request

import pytest

from tests.conftest import LabCluster, eventually
from tests.unit.test_monitoring_assets import panel_exprs, rules

pytestmark = pytest.mark.integration


def query(lab: LabCluster, expr: str) -> list[dict]:
    url = (f"http://127.0.0.1:{lab.prometheus_port}/api/v1/query?"
           + urllib.parse.urlencode({"query": expr}))
    with urllib.request.urlopen(url, timeout=30) as resp:
        doc = json.load(resp)
    assert doc["status"] == "success", (expr, doc)
    return doc["data"]["result"]


def lab_disks(lab: LabCluster) -> dict[str, str]:
    """osd.N -> the kernel name of the loop device the lab gave it."""
    procs = json.loads((lab.dir / "lab.json").read_text())["procs"]
    return {name: p["device"].removeprefix("/dev/") for name, p in procs.items()
            if name.startswith("osd.")}


def inline_recorded(expr: str) -> str:
    """The lab's Prometheus loads no rule file: put each recording rule's expression in."""
    for rule in rules():
        if "record" in rule:
            expr = re.sub(re.escape(rule["record"]) + r"(\{[^}]*\})?",
                          "(" + rule["expr"] + ")", expr)
    return expr


def test_the_osd_disk_mapping_joins_ceph_mgr_with_the_exporter(lab_cluster: LabCluster) -> None:
    (osd_disks,) = [r["expr"] for r in rules() if r.get("record") == "stormdeck:osd_disk:info"]
    rows = eventually(lambda: query(lab_cluster, osd_disks) or None, timeout=90, interval=3)
    got = {r["metric"]["ceph_daemon"]: r["metric"]["device"] for r in rows}
    # The lab puts osd.N on a loop device; ceph-mgr names it, the exporter serves it.
    assert got == lab_disks(lab_cluster)
    served = {r["metric"]["device"] for r in query(lab_cluster, "stormdeck_device_info")}
    assert set(got.values()) <= served


def test_every_panel_and_rule_runs_and_the_joins_find_the_lab(lab_cluster: LabCluster) -> None:
    exprs = [(title, inline_recorded(e)) for title, e in panel_exprs()]
    exprs += [(r.get("alert") or r["record"], inline_recorded(r["expr"])) for r in rules()]

    def all_answer() -> dict[str, list[dict]] | None:
        results = {f"{title}: {e}": query(lab_cluster, e) for title, e in exprs}
        must = ("Share of allowed cores used", "Cores used and allowed",
                "CPU throttled by the cgroup quota", "Cores used by device class",
                "Disk busy under OSDs", "Write cache per disk", "Tuned profile per host",
                "Exporter scrape duration")
        empty = [k for k, v in results.items() if k.startswith(must) and not v]
        return None if empty else results

    results = eventually(all_answer, timeout=120, interval=5)
    busy = next(v for k, v in results.items() if k.startswith("Disk busy under OSDs"))
    assert {r["metric"]["device"] for r in busy} == set(lab_disks(lab_cluster).values())
    share = next(v for k, v in results.items() if k.startswith("Share of allowed cores"))
    assert {r["metric"]["ceph_daemon"] for r in share} == {"osd.0", "osd.1", "osd.2"}
    assert all(0 <= float(r["value"][1]) <= 1.05 for r in share)
    # The lab's disks are loop devices: their cache is what is under them, never alerted.
    caches = next(v for k, v in results.items() if k.startswith("StormdeckWriteCacheOn"))
    assert caches == []
