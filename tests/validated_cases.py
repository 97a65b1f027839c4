"""What validate measured, for rule tests, made the way `stormdeck validate` makes it: the judge's
verdicts on recorded measurements, kept by advisors.validated.record."""

from __future__ import annotations

from pathlib import Path

from stormdeck.advisors import validated
from stormdeck.advisors.validate import judge
from stormdeck.advisors.validate.judge import Point
from stormdeck.advisors.validate.measure import levels, parse_bench
from stormdeck.advisors.validate.runner import StepReport
from stormdeck.advisors.validated import ValidatedStore

VAL = Path(__file__).parent / "data" / "validate"
# The captured Pacific lab's fsid (tests/data/pacific/status_load.json).
LAB_FSID = "1c5fc9ca-6f14-4c94-8e54-a82959de3a06"
CEPHADM_UNIT = f"ceph-{LAB_FSID}@osd.0.service"


def curve_points(kind: str) -> list[Point]:
    """The lab's recorded `rados bench` runs (validate --quick, Ceph 16.2.15)."""
    out = []
    for t in levels(quick=True):
        iops, lat = parse_bench((VAL / f"bench_{kind}_t{t}.txt").read_text())
        out.append(Point(float(t), iops, lat))
    return out


def recorded_curves(tmp: Path, fsid: str = LAB_FSID) -> ValidatedStore:
    step = StepReport("curve", "curve", status="done",
                      verdicts=[judge.response_curve(k, curve_points(k))
                                for k in ("write", "read")])
    path = tmp / validated.FILE
    validated.record(path, fsid, "vm", [step], quick=False, when=1_800_000_000.0)
    return ValidatedStore(path)


def fio_found(tmp: Path, disk: str, verdict: str) -> ValidatedStore:
    """fio's fdatasync writes on `disk` ("vm:/dev/sdb"): with the cache costing, each
    write also sent the device a flush (a kernel since 5.5 counts them apart)."""
    host, _, name = disk.partition(":/dev/")
    flushes = 480.0 if verdict == judge.FAIL else 0.0
    v = judge.write_cache(name, 480.0, 481.0, "write back", flushes, 1.9)
    assert v.verdict == verdict, v
    step = StepReport("hosts", "hosts", status="done", verdicts=[v])
    path = tmp / validated.FILE
    validated.record(path, LAB_FSID, host, [step], quick=False, when=1_800_000_000.0)
    return ValidatedStore(path)
