"""Shared fixtures: the CLI runner and one real lab Ceph cluster per test session."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

DATA = Path(__file__).parent / "data"
RELEASES_ENV = "STORMDECK_RELEASES"
KNOWN_RELEASES = ("pacific", "reef", "tentacle")
# Tentacle's lab starts its OSDs as cephadm does, each in a cgroup of this many cores:
# one lab per release covers both the release and the containerised shape.
CEPHADM_RELEASES = {"tentacle": 1.5}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--releases", default=None,
                     help="Ceph releases to run the release-parametrised integration tests on, "
                          f"comma-separated from {', '.join(KNOWN_RELEASES)} (default "
                          f"${RELEASES_ENV}, else pacific; pacific always runs)")
    parser.addoption("--lane", choices=("all", "pacific", "releases"), default="all",
                     help="which labs' tests: all; pacific (every test but the other "
                          "releases' labs); releases (only the other releases' labs). "
                          "`./dev test` runs the two lanes side by side")


def selected_releases(config: pytest.Config) -> list[str]:
    """Pacific (the host's) always; others from --releases or $STORMDECK_RELEASES."""
    raw = config.getoption("--releases") or os.environ.get(RELEASES_ENV) or "pacific"
    wanted = [r.strip().lower() for r in raw.split(",") if r.strip()]
    unknown = [r for r in wanted if r not in KNOWN_RELEASES]
    if unknown:
        raise pytest.UsageError(f"unknown release {', '.join(unknown)}; "
                                f"choose from {', '.join(KNOWN_RELEASES)}")
    return ["pacific", *[r for r in KNOWN_RELEASES[1:] if r in wanted]]


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Unit tests first: `./dev test` builds the release roots in the background meanwhile,
    and a unit failure shows in minutes, not after the labs. With --lane, the tests of
    one lane only: the labs mostly wait on Ceph, so the Reef and Tentacle labs run beside
    Pacific's in a second pytest instead of after it."""
    items.sort(key=lambda item: "/integration/" in str(item.path))
    lane = config.getoption("--lane")
    if lane == "all":
        return

    def other_release(item: pytest.Item) -> bool:
        callspec = getattr(item, "callspec", None)
        release = callspec.params.get("release_cluster") if callspec is not None else None
        return release not in (None, "pacific")

    keep = [i for i in items if other_release(i) == (lane == "releases")]
    dropped = [i for i in items if other_release(i) != (lane == "releases")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "release_cluster" in metafunc.fixturenames:
        releases = selected_releases(metafunc.config)
        # @pytest.mark.releases("pacific", "tentacle"): a test whose subject does not change
        # between the releases it skips runs on those it names only. The suite's time is
        # bounded (40 min on 2 cores), and each release lab costs about 100 s per such test.
        # Skipped rather than left out: a release keeps its index in the list, which is how
        # pytest groups the tests of one release lab (a shorter list would put Tentacle's
        # tests among Reef's and start each lab twice).
        marker = metafunc.definition.get_closest_marker("releases")
        params = [r if marker is None or r in marker.args else
                  pytest.param(r, marks=pytest.mark.skip(reason=not_on(r)))
                  for r in releases]
        metafunc.parametrize("release_cluster", params, indirect=True, scope="session")


# ---- skips: a lab test that skips where it is required fails the run ------------------
# A lab test that plants no state of its own can skip wherever an earlier test left the lab
# otherwise, and pass for years without running (issue 42). An integration test's skip is
# declared or it fails the session: the releases marker's "not on X", the soak's opt-in,
# and not_required(reason) where a test by design has nothing to run.

SOAK_OPT_IN = "opt-in: STORMDECK_SOAK=1"


def not_on(release: str) -> str:
    """The reason a test marked @pytest.mark.releases(...) skips on a release it leaves out."""
    return f"not on {release}: see the test"


class NotRequired(pytest.skip.Exception):
    """A declared skip: the test is not required where it stands (say why)."""

    # As pytest's own Skipped does, so -rs reads "NotRequired: why", not a module path.
    __module__ = "builtins"


def not_required(reason: str) -> NoReturn:
    """Skip an integration test that by design has nothing to run here; any other skip of
    an integration test makes the run fail."""
    __tracebackhide__ = True
    raise NotRequired(reason)


def declared_skip(item: pytest.Item, call: pytest.CallInfo[None]) -> bool:
    """not_required's skips by their type; a skip mark carries nothing but its reason, so
    the releases marker's and the soak's are known by theirs."""
    exc = call.excinfo.value if call.excinfo is not None else None
    if isinstance(exc, NotRequired):
        return True
    callspec = getattr(item, "callspec", None)
    release = callspec.params.get("release_cluster") if callspec is not None else None
    return getattr(exc, "msg", None) in {SOAK_OPT_IN, *([not_on(release)] if release else [])}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.skipped and not hasattr(report, "wasxfail") \
            and item.get_closest_marker("integration") is not None:
        # Carried in user_properties, which reach an xdist controller with the report.
        report.user_properties.append(("declared_skip", declared_skip(item, call)))
    return report


class SkipAudit:
    """Collects undeclared skips of integration tests; fails the session on any."""

    def __init__(self) -> None:
        self.undeclared: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and ("declared_skip", False) in report.user_properties:
            self._add(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        # A module-level skip (importorskip, allow_module_level) hides every test in it.
        if report.skipped and "/integration/" in f"/{report.nodeid}":
            self._add(report)

    def _add(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        self.undeclared.append(f"{report.nodeid}: {str(why).removeprefix('Skipped: ')}")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        for line in self.undeclared:
            terminalreporter.write_line(f"UNDECLARED SKIP of a lab test, which fails the run: "
                                        f"{line}", red=True, bold=True)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.undeclared and session.exitstatus in (pytest.ExitCode.OK,
                                                      pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    # `./dev test` runs the releases lane in the background, where SIGINT arrives ignored:
    # its trap sends SIGTERM, taken here as Ctrl-C is, so the labs' fixtures stop them.
    if config.getoption("--lane") == "releases":
        signal.signal(signal.SIGTERM, _interrupted)
    if not hasattr(config, "workerinput"):  # an xdist worker's reports reach the controller
        config.pluginmanager.register(SkipAudit(), "stormdeck-skip-audit")


@dataclass
class Result:
    rc: int
    out: str
    err: str


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600,
            user: str | None = None) -> Result:
    """Run the real `stormdeck` command in a child process, as an operator would."""
    argv = [sys.executable, "-m", "stormdeck", *args]
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=Path(__file__).parent.parent)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def free_ports(n: int) -> list[int]:
    """n distinct ports free on 127.0.0.1 right now, so a test lab never meets a running one."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def lab_port_args(ports: list[int]) -> list[str]:
    mon, mgr, prom, node, exporter = ports
    return ["--mon-port", str(mon), "--mgr-port", str(mgr),
            "--prometheus-port", str(prom), "--node-exporter-port", str(node),
            "--exporter-port", str(exporter)]


@dataclass
class LabCluster:
    dir: Path
    conf: Path
    mon_port: int
    mgr_port: int
    prometheus_port: int
    release: str = "pacific"
    osd_cpu_limit: float | None = None  # cephadm-shaped OSDs' cgroup quota, in cores

    def cli(self, *args: str, timeout: float = 600) -> Result:
        return run_cli(*args, "--dir", str(self.dir), timeout=timeout)

    def command(self, prefix: str, target: str = "mon", **args: object) -> object:
        """One command on a connection of its own, JSON in and out."""
        cluster = self.rados()
        try:
            return ceph_json(cluster, prefix, target, **args)
        finally:
            cluster.shutdown()

    def rados(self):  # -> rados.Rados; imported lazily so unit tests need no librados
        import rados

        cluster = rados.Rados(conffile=str(self.conf))
        cluster.connect(timeout=15)
        return cluster


@contextmanager
def lab_home() -> Iterator[Path]:
    """A directory for a lab, outside pytest's temporary directories: pytest keeps only
    its three newest, so another pytest run (a developer's unit tests in a second
    terminal) would delete a running lab's files from under it."""
    home = Path(tempfile.mkdtemp(prefix="stormdeck-test-lab-", dir="/var/tmp"))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def lab_dir() -> Iterator[Path]:
    with lab_home() as home:
        yield home / "lab"


@pytest.fixture(scope="session")
def lab_cluster() -> Iterator[LabCluster]:
    """A real lab: 3 BlueStore OSDs on loop devices plus Prometheus, torn down at the end."""
    if os.geteuid() != 0:
        pytest.fail("integration tests start a real lab on loop devices and need root "
                    "(run ./dev test as root, or -m 'not integration')")
    with lab_home() as home:
        yield from started_lab(home / "cluster")


@pytest.fixture(scope="session")
def release_cluster(request: pytest.FixtureRequest) -> Iterator[LabCluster]:
    """The lab of each selected release (parametrised by pytest_generate_tests): Pacific is
    the session's lab_cluster; Reef and Tentacle get one of their own, built from their
    root (Tentacle's OSDs in the cephadm shape), one at a time."""
    release = request.param
    if release == "pacific":
        yield request.getfixturevalue("lab_cluster")
        return
    if os.geteuid() != 0:
        pytest.fail("release labs run chrooted in a debootstrap root and need root")
    with lab_home() as home:
        yield from started_lab(home / "cluster", release)


def started_lab(directory: Path, release: str | None = None) -> Iterator[LabCluster]:
    ports = free_ports(5)
    limit = CEPHADM_RELEASES.get(release or "")
    extra = ["--release", release] if release else []
    if limit:
        extra += ["--cephadm", "--osd-cpu-limit", str(limit)]
    # A first run builds the release's root (about 70 s) before the lab starts.
    res = run_cli("lab", "up", "--dir", str(directory), "--prometheus", *lab_port_args(ports),
                  *extra, timeout=1800)
    if res.rc != 0:
        run_cli("lab", "down", "--dir", str(directory))
        pytest.fail(f"lab up {' '.join(extra)} failed (rc {res.rc}): {res.err}")
    cluster = LabCluster(directory, directory / "ceph.conf", ports[0], ports[1], ports[2],
                         release=release or "pacific", osd_cpu_limit=limit)
    try:
        hold_balancer_off(cluster)
        yield cluster
    finally:
        down = run_cli("lab", "down", "--dir", str(directory))
        assert down.rc == 0, down.err
        assert_nothing_left(directory)


def hold_balancer_off(cluster: LabCluster) -> None:
    """The mgr's balancer off for the test lab's whole life. It is on by default (upmap
    mode), and in a 3-OSD lab whose pools the tests make and drop it moves PGs at moments
    no test chose: a backfill it began outlived `lab storm --restart-osd`'s 180 s wait and
    left osd.0 with 3 PG copies more than `osd df` maps to it (CI, 2026-11-28), and it
    added moves to a measured split. `lab up` itself leaves it on, as clusters have it."""
    def off() -> bool:
        try:
            cluster.command("balancer off", "mgr")
        except AssertionError:  # the mgr has not loaded its always-on modules yet
            return False
        return not cluster.command("balancer status", "mgr")["active"]  # type: ignore[index]

    eventually(off, 60, interval=1)


def assert_nothing_left(directory: Path) -> None:
    """No mount, loop device or cgroup of the lab in `directory` outlives `lab down`."""
    marker = str(directory) + "/"
    with open("/proc/mounts") as f:
        mounts = [ln.split()[1] for ln in f if marker in ln.split()[1]]
    assert not mounts, mounts
    loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    assert marker not in loops, loops


def ceph_json(cluster, prefix: str, target: str = "mon", **args: object) -> object:
    """One command through librados, JSON in and out."""
    cmd = json.dumps({"prefix": prefix, "format": "json", **args})
    send = cluster.mgr_command if target == "mgr" else cluster.mon_command
    ret, out, err = send(cmd, b"", timeout=30)
    assert ret == 0, f"{prefix}: {err}"
    return json.loads(out) if out.strip() else None


CLEAN = frozenset({"active+clean", "active+clean+scrubbing", "active+clean+scrubbing+deep"})


def unsettled(cluster) -> str:
    """Why the PGs are not settled yet, or "" once every pool's PGs are reported, all clean.

    A pool just made is not in the PG map until the mgr has heard of its PGs: until then
    `pgs_by_state` lists only the old PGs, all active+clean, and looks settled when it is not.
    """
    pgmap = ceph_json(cluster, "status")["pgmap"]  # type: ignore[index]
    want = sum(p["pg_num"] for p in ceph_json(cluster, "osd pool ls", detail="detail"))  # type: ignore[union-attr]
    if pgmap.get("num_pgs") != want:
        return f"{pgmap.get('num_pgs')} PGs in the PG map, the pools have {want}"
    odd = {s["state_name"]: s["count"] for s in pgmap.get("pgs_by_state", [])
           if s["state_name"] not in CLEAN}
    return f"PGs not clean: {odd}" if odd else ""


def settle(cluster, timeout: float = 120.0) -> None:
    """Wait until `unsettled` has nothing to say; fail saying what it last said."""
    deadline = time.monotonic() + timeout
    while why := unsettled(cluster):
        if time.monotonic() > deadline:
            raise AssertionError(f"PGs not settled within {timeout} s: {why}")
        time.sleep(1.0)


def eventually(check: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    """Call `check` until it returns something true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"not within {timeout} s (last: {last!r})")
