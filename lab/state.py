"""The lab's files and facts: its state file, ports, ceph.conf, prometheus.yml, its errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from stormdeck.base.errors import UserError

STATE_FILE = "lab.json"
STATE_VERSION = 1
CEPH_BINARIES = ("ceph", "ceph-mon", "ceph-mgr", "ceph-osd", "monmaptool", "rados")
PROMETHEUS_BINARIES = ("prometheus", "prometheus-node-exporter")
DEBIAN_CEPH = "ceph-mon ceph-osd ceph-mgr ceph-common"
DEBIAN_PROMETHEUS = "prometheus prometheus-node-exporter"
STORM_POOL = "lab-storm"
BENCH_POOL = "lab-bench"
GIB = 1 << 30
HOST = "host"  # the release the host's own packages give
RELEASE_NAMES = ("pacific", "quincy", "reef", "squid", "tentacle", "umbrella")
# Where the lab's own cgroups go, one per cephadm-shaped OSD.
CGROUP_PARENT = "stormdeck-lab"
CGROUP_PERIOD_US = 100_000

Progress = Callable[[str], None]


class LabError(UserError):
    """A lab operation that cannot go on; the message says why and what to do."""


class MgrModulesDown(LabError):
    """The manager runs but cannot load the modules the lab needs: waiting will not help."""


def default_dir() -> Path:
    env = os.environ.get("STORMDECK_LAB_DIR")
    if env:
        return Path(env)
    uid = os.geteuid()
    return Path("/var/tmp/stormdeck-lab" if uid == 0 else f"/var/tmp/stormdeck-lab-{uid}")


@dataclass
class Ports:
    mon: int = 3300
    mgr_prometheus: int = 9283
    prometheus: int = 9090
    node_exporter: int = 9100
    exporter: int = 9567  # stormdeck's own, beside node exporter


@dataclass
class Proc:
    """One process the lab started: how to start it again, and where it runs."""

    name: str
    argv: list[str]
    pid: int = 0
    device: str | None = None  # the loop device under an OSD
    image: str | None = None  # the file behind that loop device
    env: dict[str, str] | None = None  # added to the lab's environment (cephadm shape)


@dataclass
class State:
    fsid: str
    objectstore: str
    ports: Ports
    created: float
    procs: dict[str, Proc] = field(default_factory=dict)
    prometheus: bool = False
    release: str = HOST  # "host", or a release whose root the daemons run in
    root: str | None = None  # that root
    cephadm: bool = False  # OSDs started as cephadm does, each in its own cgroup
    osd_cpu_limit: float | None = None  # cores, per cephadm-shaped OSD
    cgroups: list[str] = field(default_factory=list)  # cgroup directories made, to remove
    version: int = STATE_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> State:
        raw = json.loads(text)
        if raw.get("version") != STATE_VERSION:
            raise ValueError(f"state version {raw.get('version')!r}, expected {STATE_VERSION}")
        return cls(
            fsid=raw["fsid"],
            objectstore=raw["objectstore"],
            ports=Ports(**raw["ports"]),
            created=raw["created"],
            procs={k: Proc(**v) for k, v in raw["procs"].items()},
            prometheus=raw.get("prometheus", False),
            release=raw.get("release", HOST),
            root=raw.get("root"),
            cephadm=raw.get("cephadm", False),
            osd_cpu_limit=raw.get("osd_cpu_limit"),
            cgroups=raw.get("cgroups", []),
        )


def parse_size(text: str) -> int:
    """'4K', '64k', '4M', '1G' or plain bytes, in bytes (binary units, as rados bench takes)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    num, unit = (t[:-1], t[-1]) if t and t[-1] in "KMG" else (t, "")
    try:
        value = int(num) * units[unit]
    except ValueError:
        raise LabError(f"'{text}' is not a size; write it like 4096, 4K or 4M") from None
    if value <= 0:
        raise LabError(f"size '{text}' must be above zero")
    return value


def ceph_conf(directory: Path, fsid: str, ports: Ports, objectstore: str) -> str:
    d = directory
    return f"""# Written by `stormdeck lab up`; removed by `stormdeck lab down`.
[global]
fsid = {fsid}
mon host = [v2:127.0.0.1:{ports.mon}]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = false
run dir = {d}/run
crash dir = {d}/crash
osd objectstore = {objectstore}
bluestore block create = false
memstore device bytes = 536870912
osd memory target = 939524096
bluestore cache autotune = false
bluestore cache size = 134217728
osd pool default size = 1
osd pool default min size = 1
osd crush chooseleaf type = 0
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
# The lab's disk may be a busy shared one; its free space is no verdict on Ceph.
mon data avail warn = 2
mon data avail crit = 1
mgr initial modules = prometheus

[mon]
mon data = {d}/data/$name
log file = {d}/log/$name.log
admin socket = {d}/run/$name.asok

[mgr]
mgr data = {d}/data/$name
log file = {d}/log/$name.log
admin socket = {d}/run/$name.asok

[osd]
# The lab's OSDs are 2 GiB: Pacific's RocksDB defaults (four 256 MiB write buffers, WAL
# files up to 1 GiB, recycled at full size) outgrew one under minutes of 4 KiB writes
# (BlueFS "allocation failed, needed 0x1199a000", then abort). Smaller buffers and WAL,
# as a small device needs; Reef's buffers are 16 MiB already.
bluestore rocksdb options annex = write_buffer_size=16777216,max_total_wal_size=134217728
osd data = {d}/data/$name
log file = {d}/log/$name.log
admin socket = {d}/run/$name.asok

[client]
# Clients are many processes at once: each needs its own socket.
admin socket = {d}/run/$cluster-$name.$pid.$cctid.asok
"""


# Seconds between the lab Prometheus' scrapes; the mgr module is told the same, as its
# documentation asks (doc/mgr/prometheus.rst), and clients of the lab's Prometheus
# pass it as --prometheus-scrape-interval.
SCRAPE_INTERVAL = 5


RECORDING_RULES = "stormdeck-recording.yml"


def prometheus_yml(ports: Ports) -> str:
    return f"""# Written by `stormdeck lab up --prometheus`.
global:
  scrape_interval: {SCRAPE_INTERVAL}s
  evaluation_interval: {SCRAPE_INTERVAL}s
# stormdeck's recording rules (assets/), beside this file: the console reads them.
rule_files: ["{RECORDING_RULES}"]
scrape_configs:
  - job_name: ceph
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:{ports.mgr_prometheus}"]
  - job_name: node
    static_configs:
      - targets: ["127.0.0.1:{ports.node_exporter}"]
  - job_name: stormdeck
    static_configs:
      - targets: ["127.0.0.1:{ports.exporter}"]
"""


def write_prometheus_config(directory: Path, ports: Ports) -> Path:
    """prometheus.yml and the recording rules it loads, in `directory`; the yml's path.

    The rules are assets/stormdeck-recording.yml with its rates over four of the lab's
    scrape intervals, as the raw queries take them at --prometheus-scrape-interval 5
    (the shipped file's 2m is four scrapes at 30 s).
    """
    from importlib.resources import files

    rules = files("stormdeck.assets").joinpath(RECORDING_RULES).read_text()
    window = f"[{4 * SCRAPE_INTERVAL}s]"
    (directory / RECORDING_RULES).write_text(rules.replace("[2m]", window)
                                             .replace("over 2m:", f"over {window[1:-1]}:"))
    yml = directory / "prometheus.yml"
    yml.write_text(prometheus_yml(ports))
    return yml


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise LabError(f"{name} is not installed")
    return path


def _http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return 200 <= resp.status < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


_VERSION = re.compile(r"ceph version (\S+) \([0-9a-f]+\) (\w+)")


def parse_version(text: str) -> tuple[str, str] | None:
    """('20.2.4', 'tentacle') from `ceph --version` or a key of `ceph versions`."""
    m = _VERSION.search(text)
    return (m.group(1), m.group(2)) if m else None


def failed_mgr_modules(mgr_dump: dict[str, Any]) -> dict[str, str]:
    """Modules the active mgr reports it cannot run, with its reason, from `ceph mgr dump`.

    A module that fails to import (Reef's with a PyO3 bcrypt: "PyO3 modules do
    not yet support subinterpreters") is listed in `available_modules` with
    can_run false and an error_string.
    """
    out = {}
    for mod in mgr_dump.get("available_modules") or []:
        if isinstance(mod, dict) and mod.get("can_run") is False:
            out[str(mod.get("name"))] = str(mod.get("error_string") or "cannot run")
    return out


def _pg_counts(pg_stat: dict[str, Any]) -> tuple[int, dict[str, int]]:
    """(total PGs, PGs by state) from `ceph pg stat -f json`, in Pacific's and later shapes."""
    summary = pg_stat.get("pg_summary", pg_stat)
    by_state = {s["name"]: int(s["num"]) for s in summary.get("num_pg_by_state", [])}
    return int(summary.get("num_pgs", sum(by_state.values()))), by_state
