"""Snapshots built from outputs captured on the lab (Ceph 16.2.15), for rule and view tests.

The Ceph part runs the real CephSource over the captured command outputs;
the host part is what the real HostSource returned on the lab under load.
Scenarios are made by editing these real snapshots (dataclasses.replace).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Finding
from stormdeck.advisors.rules import ALL
from stormdeck.advisors.settings import load_settings
from stormdeck.advisors.validated import ValidatedStore
from stormdeck.collectors.ceph.connection import CommandError
from stormdeck.collectors.ceph.source import CephSource
from stormdeck.collectors.hub import merge
from stormdeck.collectors.model import Daemon, Disk, Host, Partial, Snapshot, SourceHealth
from tests.capture_release import STATIC

PAC = Path(__file__).parent / "data" / "pacific"


class CannedCeph(CephSource):
    """The real CephSource, answered from stored outputs instead of a cluster."""

    def __init__(self, outputs: Mapping[str, bytes],
                 helps: Mapping[str, Any] | None = None) -> None:
        super().__init__(conffile=None)
        self.outputs = dict(outputs)
        self.helps = helps or {}

    def _send(self, target: str, cmd: dict[str, Any], timeout: float) -> bytes:
        if cmd["prefix"] == "config help":
            found = self.helps.get(cmd["key"])
            return json.dumps(found).encode() if found is not None else b""
        if cmd["prefix"] == "config show" and "config show" not in self.outputs:
            # The mgr's answer for a daemon it has no report of (a capture without one).
            raise CommandError(f"config show: no config state for daemon {cmd['who']}")
        return self.outputs[cmd["prefix"]]


def lab_outputs(load: bool = True, data: Path = PAC) -> dict[str, bytes]:
    """The outputs of one release's lab capture (tests/data/<release>/, same file names)."""
    r = lambda name: (data / name).read_bytes()  # noqa: E731
    return {
        "status": r("status_load.json" if load else "status.json"),
        "health": r("health_detail.json"),
        "osd perf": r("osd_perf_load.json" if load else "osd_perf.json"),
        "osd status": r("osd_status_table_load.txt" if load else "osd_status_table.txt"),
        "osd df": r("osd_df.json"),
        "osd dump": r("osd_dump.json"),
        "pg dump": r("pg_dump_pgs_brief.json"),
        "osd pool ls": r("osd_pool_ls_detail.json"),
        "config dump": r("config_dump.json"),
        "osd metadata": r("osd_metadata.json"),
        "versions": r("versions.json"),
        "log last": r("log_last.json"),
        "config log": r("config_log.json"),
        "mgr dump": r("mgr_dump.json"),
        # `df` was captured later, once per release (`ceph df -f json` on its lab): a
        # capture in a subfolder (mgr_failover) takes its release's.
        "df": (data / "df.json" if (data / "df.json").exists() else
               data.parent / "df.json").read_bytes(),
        # Likewise the slow-cadence commands (capture_release --static-only).
        **{prefix: (data / name if (data / name).exists() else data.parent / name).read_bytes()
           for prefix, name in STATIC.items()},
    }


def ceph_partial(load: bool = True, release: str = "pacific") -> Partial:
    data = PAC.parent / release
    helps = json.loads((data / "config_help_watched.json").read_text())
    return CannedCeph(lab_outputs(load, data), helps).poll()


def host_partial() -> Partial:
    doc = json.loads((PAC / "host_partial_load.json").read_text())
    tup = ("devices", "daemons")
    fix = lambda d: {k: tuple(v) if k in tup and v is not None else v for k, v in d.items()}  # noqa: E731
    return Partial(
        source="host", time=0.0,
        daemons={k: Daemon(**fix(v)) for k, v in doc["daemons"].items()},
        disks={k: Disk(**fix(v)) for k, v in doc["disks"].items()},
        hosts={k: Host(**v) for k, v in doc["hosts"].items()})


def lab_snapshot(t: float = 1_800_000_000.0, load: bool = True,
                 release: str = "pacific") -> Snapshot:
    """The lab capture of `release` (the host part is the Pacific lab's: the host's own)."""
    health = {n: SourceHealth(n, True, t) for n in ("ceph", "host")}
    return merge([ceph_partial(load, release), host_partial()], health, now=t)


def history(n: int, step: float = 10.0, edit: Callable[[Snapshot, int], Snapshot] | None = None,
            base: Snapshot | None = None) -> list[Snapshot]:
    """n snapshots `step` seconds apart, each the lab capture passed through `edit`."""
    snap = base or lab_snapshot()
    out = []
    for i in range(n):
        # Every source answered each poll: its last success moves with the snapshot's time
        # (else the console rightly calls it stale).
        sources = {k: replace(v, last_success=v.last_success + i * step)
                   if v.last_success is not None else v for k, v in snap.sources.items()}
        s = replace(snap, time=snap.time + i * step, sources=sources)
        out.append(edit(s, i) if edit else s)
    return out


def with_daemon(snap: Snapshot, daemon_id: str, **changes: Any) -> Snapshot:
    daemons = dict(snap.daemons)
    daemons[daemon_id] = replace(daemons[daemon_id], **changes)
    return replace(snap, daemons=daemons)


def with_cluster(snap: Snapshot, **changes: Any) -> Snapshot:
    assert snap.cluster is not None
    return replace(snap, cluster=replace(snap.cluster, **changes))


def with_config(snap: Snapshot, option: str, who: str, value: str) -> Snapshot:
    assert snap.cluster is not None
    config = dict(snap.cluster.config)
    opt = config[option]
    config[option] = replace(opt, values={**opt.values, who: value})
    return with_cluster(snap, config=config)


def run(snaps: list[Snapshot], rules: tuple | None = None,
        validated: ValidatedStore | None = None) -> list[Finding]:
    """Feed snapshots one at a time, as the console does, and return the last findings."""
    engine = Engine(settings=load_settings(), rules=rules or ALL, validated=validated)
    findings: list[Finding] = []
    for i in range(1, len(snaps) + 1):
        findings = engine.evaluate(snaps[:i])
    assert not engine.errors, engine.errors
    return findings


def firing(findings: list[Finding], rule: str) -> list[Finding]:
    return [f for f in findings if f.rule == rule and f.state == "firing"]
