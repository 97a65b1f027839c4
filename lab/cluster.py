"""The lab cluster: one mon, one mgr, N OSDs and optionally Prometheus, all on 127.0.0.1.

Everything it starts is recorded in a state file in the lab directory as it
is started, so `down` can stop exactly that, by PID, even after `up` or the
shell that ran it crashed. It shells out to Ceph's own binaries: the lab
stands apart from the collectors it exists to exercise.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from stormdeck.lab import procs, roots
from stormdeck.lab.cephadm import CephadmShape
from stormdeck.lab.state import (
    CEPH_BINARIES,
    DEBIAN_CEPH,
    DEBIAN_PROMETHEUS,
    GIB,
    HOST,
    PROMETHEUS_BINARIES,
    SCRAPE_INTERVAL,
    STATE_FILE,
    LabError,
    MgrModulesDown,
    Ports,
    Proc,
    Progress,
    State,
    _binary,
    _http_ok,
    _pg_counts,
    ceph_conf,
    default_dir,
    failed_mgr_modules,
    parse_version,
    write_prometheus_config,
)
from stormdeck.lab.storms import Storms


class Lab(CephadmShape, Storms):
    """A lab cluster rooted at one directory."""

    def __init__(self, directory: Path | None = None, progress: Progress | None = None) -> None:
        self.dir = (directory or default_dir()).absolute()
        self.conf = self.dir / "ceph.conf"
        self.state_path = self.dir / STATE_FILE
        self._progress = progress or (lambda msg: print(f"lab: {msg}", file=sys.stderr))
        self.root: Path | None = None  # the release root the daemons run in, if not the host

    def argv(self, name: str, *args: str) -> list[str]:
        """How the lab runs Ceph's `name`: the host's, or the release root's (chrooted)."""
        if self.root is None:
            return [_binary(name), *args]
        if not (self.root / "usr/bin" / name).exists():
            raise LabError(f"{name} is missing from {self.root}; rebuild it by removing it")
        return roots.in_root(self.root, [f"/usr/bin/{name}", *args], binds=[self.dir])

    # ---- state -------------------------------------------------------------

    def read_state(self) -> State | None:
        try:
            text = self.state_path.read_text()
        except FileNotFoundError:
            return None
        except PermissionError:
            raise LabError(f"cannot read {self.state_path}: permission denied "
                           "(the lab was started by another user; use sudo)") from None
        try:
            state = State.from_json(text)
        except (ValueError, KeyError, TypeError) as exc:
            raise LabError(f"{self.state_path} is not a lab state file this version "
                           f"understands ({exc})") from None
        self.root = Path(state.root) if state.root else None
        return state

    def _save(self, state: State) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(state.to_json())
        os.replace(tmp, self.state_path)

    def _marker(self) -> str:
        # Every process the lab starts names the lab directory in its argv.
        return str(self.dir) + "/"

    def alive(self, proc: Proc) -> bool:
        return procs.is_ours(proc.pid, self._marker())

    def _require(self) -> State:
        state = self.read_state()
        if state is None:
            raise LabError(f"no lab in {self.dir}; start one with `stormdeck lab up`")
        mon = state.procs.get("mon.a")
        if mon is None or not self.alive(mon):
            raise LabError(f"the lab in {self.dir} is not running (its monitor is down); "
                           "clean it with `stormdeck lab down`")
        return state

    # ---- talking to the cluster ---------------------------------------------

    def ceph(self, *args: str, timeout: float = 30.0) -> Any:
        """Run `ceph ARGS -f json` against the lab and return the parsed output."""
        out = self._ceph_raw(*args, "-f", "json", timeout=timeout)
        return json.loads(out) if out.strip() else None

    def _ceph_raw(self, *args: str, timeout: float = 30.0) -> str:
        argv = self.argv("ceph", "-c", str(self.conf), "--connect-timeout", "10", *args)
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LabError(f"`ceph {' '.join(args)}` did not answer in {timeout:.0f} s") from None
        if res.returncode != 0:
            lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
            why = lines[-1] if lines else f"exit {res.returncode}"
            raise LabError(f"`ceph {' '.join(args)}` failed: {why}")
        return res.stdout

    def _wait(self, what: str, check: Callable[[], bool], timeout: float,
              interval: float = 0.5) -> float:
        start = time.monotonic()
        last_error: str | None = None
        while time.monotonic() - start < timeout:
            try:
                if check():
                    return time.monotonic() - start
                last_error = None
            except MgrModulesDown:
                raise
            except LabError as exc:
                last_error = str(exc)
            time.sleep(interval)
        extra = f" (last error: {last_error})" if last_error else ""
        raise LabError(f"timed out after {timeout:.0f} s waiting for {what}{extra}; "
                       f"logs are in {self.dir / 'log'}")

    def pg_counts(self) -> tuple[int, dict[str, int]]:
        return _pg_counts(self.ceph("pg", "stat"))

    def all_clean(self) -> bool:
        total, by_state = self.pg_counts()
        return by_state.get("active+clean", 0) == total

    def osd_up_count(self) -> tuple[int, int]:
        raw = self.ceph("osd", "stat")
        stat = raw.get("osdmap", raw)  # older releases wrap it
        return int(stat["num_up_osds"]), int(stat["num_osds"])

    # ---- up ------------------------------------------------------------------

    def preflight(self, osds: int, memstore: bool, prometheus: bool, ports: Ports,
                  release: str | None = None, cephadm: bool = False) -> None:
        if osds < 1 or osds > 16:
            raise LabError(f"--osds {osds}: a lab has 1 to 16 OSDs")
        if not memstore and os.geteuid() != 0:
            raise LabError("`lab up` needs root for its loop devices (run it with sudo, "
                           "or use --memstore for OSDs in memory)")
        if cephadm and os.geteuid() != 0:
            raise LabError("--cephadm needs root to give each OSD its own cgroup")
        if release is not None and release not in (*roots.HOST_RELEASES, *roots.RELEASES):
            raise LabError(f"--release {release}: the lab runs "
                           f"{', '.join((*roots.HOST_RELEASES, *roots.RELEASES))}")
        if release in roots.RELEASES and os.geteuid() != 0:
            raise LabError(f"--release {release} runs its daemons chrooted in a root of its "
                           "own, which needs root (run it with sudo)")
        missing = [b for b in CEPH_BINARIES if shutil.which(b) is None]
        if missing and release not in roots.RELEASES:
            raise LabError(f"Ceph is not installed here (missing {', '.join(missing)}); "
                           f"install it with ./dev setup or apt-get install {DEBIAN_CEPH}")
        if release in roots.HOST_RELEASES:
            res = subprocess.run([_binary("ceph"), "--version"], capture_output=True, text=True)
            found = parse_version(res.stdout)
            if found is None or found[1] != release:
                have = f"{found[1]} {found[0]}" if found else "an unknown release"
                raise LabError(f"--release {release}: this host's Ceph is {have}")
        if prometheus:
            missing = [b for b in PROMETHEUS_BINARIES if shutil.which(b) is None]
            if missing:
                raise LabError(f"--prometheus needs {', '.join(missing)}; "
                               f"install it with apt-get install {DEBIAN_PROMETHEUS}")
        state = self.read_state()
        if state is not None:
            self.root = None  # the state read is someone else's; this lab has not begun
            mon = state.procs.get("mon.a")
            if mon is not None and self.alive(mon):
                raise LabError(f"a lab is already running in {self.dir} (mon pid {mon.pid}); "
                               "stop it with `stormdeck lab down` or use another --dir")
            raise LabError(f"a stopped lab is left in {self.dir}; "
                           "clean it with `stormdeck lab down` first")
        if self.dir.exists() and any(self.dir.iterdir()):
            raise LabError(f"{self.dir} exists and is not a lab; choose another --dir")
        wanted = {"mon": ports.mon, "mgr prometheus": ports.mgr_prometheus}
        if prometheus:
            wanted |= {"prometheus": ports.prometheus, "node exporter": ports.node_exporter,
                       "stormdeck exporter": ports.exporter}
        if len(set(wanted.values())) != len(wanted):
            raise LabError(f"the lab's ports must differ: {wanted}")
        busy = [f"{name} {port}" for name, port in wanted.items() if not procs.port_free(port)]
        if busy:
            raise LabError(f"port in use on 127.0.0.1: {', '.join(busy)}; "
                           "stop what holds it or choose other ports (see lab up --help)")

    def up(self, osds: int = 3, memstore: bool = False, prometheus: bool = False,
           ports: Ports | None = None, osd_size: int = 2 * GIB, timeout: float = 300.0,
           release: str | None = None, cephadm: bool = False,
           osd_cpu_limit: float | None = None) -> State:
        ports = ports or Ports()
        self.preflight(osds, memstore, prometheus, ports, release, cephadm)
        if osd_cpu_limit is not None and (not cephadm or osd_cpu_limit <= 0):
            raise LabError("--osd-cpu-limit is a number of cores above zero, with --cephadm")
        if release in roots.RELEASES:
            try:
                self.root = roots.ensure_root(release, self._progress)
            except roots.RootError as exc:
                raise LabError(str(exc)) from None
        t0 = time.monotonic()
        for sub in ("run", "log", "data", "crash"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        state = State(fsid=str(uuid.uuid4()), objectstore="memstore" if memstore else "bluestore",
                      ports=ports, created=time.time(), prometheus=prometheus,
                      release=release if self.root else HOST,
                      root=str(self.root) if self.root else None, cephadm=cephadm,
                      osd_cpu_limit=(osd_cpu_limit or 1.0) if cephadm else None)
        self._save(state)
        try:
            self._bring_up(state, osds, osd_size, timeout)
        except BaseException as exc:
            self._progress(f"start-up failed, cleaning up: {exc}")
            with contextlib.suppress(Exception):
                self.down()
            raise
        self._progress(f"up in {time.monotonic() - t0:.1f} s")
        return state

    def _start(self, state: State, proc: Proc) -> None:
        proc.pid = procs.spawn(proc.argv, self.dir / "log" / f"{proc.name}.out", proc.env)
        state.procs[proc.name] = proc
        self._save(state)

    def _bring_up(self, state: State, osds: int, osd_size: int, timeout: float) -> None:
        d, conf, ports = self.dir, str(self.conf), state.ports
        self.conf.write_text(ceph_conf(d, state.fsid, ports, state.objectstore))

        monmap = d / "monmap"
        self._run(self.argv("monmaptool", "--create", "--addv", "a",
                            f"[v2:127.0.0.1:{ports.mon}]", "--fsid", state.fsid, str(monmap)))
        self._run(self.argv("ceph-mon", "-c", conf, "--mkfs", "-i", "a", "--monmap",
                            str(monmap)))
        self._start(state, Proc("mon.a", self.argv("ceph-mon", "-f", "-c", conf, "-i", "a")))
        took = self._wait("the monitor", lambda: self._ceph_raw("mon", "stat", timeout=15) != "",
                          timeout)
        self._progress(f"mon.a answering on 127.0.0.1:{ports.mon} ({took:.1f} s)")

        (d / "data" / "mgr.x").mkdir()
        self._start(state, Proc("mgr.x", self.argv("ceph-mgr", "-f", "-c", conf, "-i", "x")))
        self._wait("the manager", lambda: bool(self.ceph("mgr", "stat").get("available")), timeout)
        self._wait("the manager to report its modules", self._mgr_modules_loaded, timeout)
        self._configure_mgr_prometheus(ports, timeout)
        self._progress(f"mgr.x serving http://127.0.0.1:{ports.mgr_prometheus}/metrics")

        for _ in range(osds):
            self._add_osd(state, osd_size)
        took = self._wait(f"{osds} OSDs to come up",
                          lambda: self.osd_up_count() == (osds, osds), timeout)
        self._progress(f"{osds} OSDs up ({took:.1f} s)")

        if state.prometheus:
            self._start_prometheus(state, timeout)

        took = self._wait("every PG to be active+clean", self.all_clean, timeout)
        self._progress(f"all PGs active+clean ({took:.1f} s)")

    def _run(self, argv: list[str], timeout: float = 120.0,
             env: dict[str, str] | None = None) -> str:
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                 env={**os.environ, **env} if env else None)
        except subprocess.TimeoutExpired:
            raise LabError(f"{Path(argv[0]).name} did not finish in {timeout:.0f} s") from None
        if res.returncode != 0:
            lines = [ln for ln in (res.stderr + res.stdout).strip().splitlines() if ln.strip()]
            why = lines[-1] if lines else f"exit {res.returncode}"
            raise LabError(f"{Path(argv[0]).name} failed: {why}")
        return res.stdout

    def _mgr_modules_loaded(self) -> bool:
        """True once the mgr lists its modules; LabError at once if prometheus cannot run."""
        dump = self.ceph("mgr", "dump")
        if not dump.get("available_modules"):
            return False
        failed = failed_mgr_modules(dump)
        if "prometheus" in failed:
            first = failed["prometheus"].strip().splitlines()
            raise MgrModulesDown(
                f"the manager cannot run {len(failed)} of its "
                f"{len(dump['available_modules'])} modules, prometheus among them "
                f"({first[-1] if first else 'no reason given'}); see {self.dir / 'log'}/mgr.x.log")
        return True

    def _configure_mgr_prometheus(self, ports: Ports, timeout: float) -> None:
        # The monitor refuses mgr/... options until the mgr has reported its
        # modules, which can lag behind "available": retry until accepted.
        def configured() -> bool:
            self._ceph_raw("config", "set", "mgr", "mgr/prometheus/server_addr", "127.0.0.1")
            self._ceph_raw("config", "set", "mgr", "mgr/prometheus/server_port",
                           str(ports.mgr_prometheus))
            # The module caches its answer for scrape_interval (15 s by default): scraped
            # every 5 s, counters would stand still for two scrapes in three.
            self._ceph_raw("config", "set", "mgr", "mgr/prometheus/scrape_interval",
                           str(SCRAPE_INTERVAL))
            return True

        self._wait("the manager to accept prometheus options", configured, timeout, interval=1.0)
        # From Reef the module leaves per-daemon perf counters (ceph_osd_numpg, the
        # latencies) to ceph-exporter; the lab runs none, so the mgr serves them as
        # Pacific's did. Pacific has no such option: nothing to do there.
        with contextlib.suppress(LabError):
            self._ceph_raw("config", "set", "mgr", "mgr/prometheus/exclude_perf_counters",
                           "false")
        # The module reads its address once: restart it so it binds the lab's port.
        self._ceph_raw("mgr", "module", "disable", "prometheus")
        self._ceph_raw("mgr", "module", "enable", "prometheus")
        url = f"http://127.0.0.1:{ports.mgr_prometheus}/metrics"
        self._wait(f"the mgr prometheus module at {url}", lambda: _http_ok(url), timeout)

    def _add_osd(self, state: State, osd_size: int) -> None:
        if state.cephadm:
            self._add_osd_cephadm(state, osd_size)
            return
        conf = str(self.conf)
        osd_uuid = str(uuid.uuid4())
        osd_id = int(self._ceph_raw("osd", "new", osd_uuid).strip())
        name = f"osd.{osd_id}"
        (self.dir / "data" / name).mkdir()
        extra: list[str] = []
        proc = Proc(name, [])
        if state.objectstore == "bluestore":
            image = self.dir / f"{name}.img"
            with open(image, "wb") as f:
                f.truncate(osd_size)
            proc.image = str(image)
            # Record the image before attaching, so `down` can always find the device.
            state.procs[name] = proc
            self._save(state)
            proc.device = self._run([_binary("losetup"), "--find", "--show", str(image)]).strip()
            self._save(state)
            extra = ["--bluestore-block-path", proc.device]
        self._run(self.argv("ceph-osd", "-c", conf, "-i", str(osd_id), "--mkfs",
                            "--osd-uuid", osd_uuid, *extra))
        proc.argv = self.argv("ceph-osd", "-f", "-c", conf, "-i", str(osd_id), *extra)
        self._start(state, proc)
        where = f" on {proc.device}" if proc.device else " in memory"
        self._progress(f"{name} started{where}")

    def _start_prometheus(self, state: State, timeout: float) -> None:
        ports, d = state.ports, self.dir
        (d / "prometheus").mkdir(exist_ok=True)
        (d / "textfile").mkdir(exist_ok=True)
        yml = write_prometheus_config(d / "prometheus", ports)
        self._start(state, Proc("node-exporter", [
            _binary("prometheus-node-exporter"),
            f"--web.listen-address=127.0.0.1:{ports.node_exporter}",
            # Also the marker that makes this process ours to stop.
            f"--collector.textfile.directory={d}/textfile",
            # The default leaves out loop devices, which are the lab's OSD disks.
            r"--collector.diskstats.device-exclude=^(ram|fd)\d+$",
        ]))
        # Its -c names the lab's conf: that is also the marker that makes it ours.
        self._start(state, Proc("stormdeck-exporter", [
            sys.executable, "-m", "stormdeck", "exporter",
            "--listen", f"127.0.0.1:{ports.exporter}", "-c", str(d / "ceph.conf"),
        ]))
        self._start(state, Proc("prometheus", [
            _binary("prometheus"),
            f"--config.file={yml}",
            f"--storage.tsdb.path={d}/prometheus/data",
            "--storage.tsdb.retention.time=2d",
            f"--web.listen-address=127.0.0.1:{ports.prometheus}",
        ]))
        base = f"http://127.0.0.1:{ports.prometheus}"
        self._wait("Prometheus", lambda: _http_ok(f"{base}/-/ready"), timeout)
        self._wait("the node exporter",
                   lambda: _http_ok(f"http://127.0.0.1:{ports.node_exporter}/metrics"), timeout)
        self._wait("stormdeck's exporter",
                   lambda: _http_ok(f"http://127.0.0.1:{ports.exporter}/metrics"), timeout)
        self._progress(f"prometheus at {base}, node exporter on 127.0.0.1:{ports.node_exporter}")

    # ---- down ----------------------------------------------------------------

    def down(self) -> list[str]:
        """Stop everything the lab started, detach its loop devices, remove its directory."""
        state = self.read_state()
        if state is None:
            if self.dir.exists() and any(self.dir.iterdir()):
                raise LabError(f"{self.dir} holds no lab state file; not touching it")
            return []
        if os.geteuid() != 0 and any(p.device for p in state.procs.values()):
            raise LabError(f"`lab down` needs root to detach the loop devices of {self.dir}")
        marker = self._marker()
        # Everything but the monitor at once (the load is killed outright: its
        # pool goes with the lab), then the monitor, so daemons can say goodbye.
        first = [p for n, p in state.procs.items() if n != "mon.a"]
        stopped = procs.stop_all(
            [(p.pid, p.name == "load", signal.SIGKILL if p.name == "load" else signal.SIGTERM)
             for p in first], marker)
        names = [p.name for p, ok in zip(first, stopped, strict=True) if ok]
        mon = state.procs.get("mon.a")
        if mon and procs.stop(mon.pid, marker):
            names.append(mon.name)
        for proc in state.procs.values():
            if proc.image:
                self._detach(Path(proc.image))
        self._remove_cgroups(state)
        self._unmount_below()
        if self.root is not None:
            self._clean_root(state)
        shutil.rmtree(self.dir)
        return names

    def _clean_root(self, state: State) -> None:
        """Remove what the lab left in its release root: mount points and daemon directories."""
        root = self.root
        assert root is not None
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(root / "var/lib/ceph" / state.fsid)
        roots.remove_mount_points(root, [self.dir])
        held = procs.mounts_below(str(root) + "/")
        if held:
            raise LabError(f"{held[0]} is still mounted inside {root} after the lab stopped")

    def _detach(self, image: Path, timeout: float = 30.0) -> None:
        # Find every loop device backed by this image, not just the recorded
        # one: a crash between losetup and saving state leaves it unrecorded.
        losetup = _binary("losetup")

        def attached() -> list[str]:
            res = subprocess.run([losetup, "--noheadings", "--output", "NAME", "-j",
                                  str(image)], capture_output=True, text=True, timeout=30)
            return res.stdout.split()

        for dev in attached():
            self._run([losetup, "-d", dev], timeout=30)
        # A device still held open (an exiting OSD's last threads) is only marked
        # to detach on close: wait for it, so "down" means nothing is left.
        deadline = time.monotonic() + timeout
        while (left := attached()) and time.monotonic() < deadline:
            time.sleep(0.2)
        if left:
            raise LabError(f"{', '.join(left)} still attached to {image} after {timeout:.0f} s: "
                           "something holds it open (see fuser -v)")

    def _unmount_below(self) -> None:
        points = procs.mounts_below(self._marker())
        for point in sorted(points, reverse=True):
            self._run([_binary("umount"), point], timeout=60)

    # ---- status --------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        state = self.read_state()
        if state is None:
            return {"dir": str(self.dir), "running": False, "exists": False}
        daemons = [{"name": p.name, "pid": p.pid, "alive": self.alive(p), "device": p.device}
                   for p in state.procs.values()]
        mon_alive = any(d["alive"] for d in daemons if d["name"] == "mon.a")
        out: dict[str, Any] = {
            "dir": str(self.dir), "exists": True, "running": mon_alive,
            "conf": str(self.conf), "fsid": state.fsid, "objectstore": state.objectstore,
            "ports": asdict(state.ports), "prometheus": state.prometheus,
            "daemons": daemons, "health": None, "pgs": None, "osds": None,
            "release": state.release, "root": state.root, "cephadm": state.cephadm,
            "osd_cpu_limit": state.osd_cpu_limit, "ceph": None,
        }
        if mon_alive:
            try:
                versions = self.ceph("versions", timeout=15) or {}
                found = {parse_version(k) for k in versions.get("overall", {})} - {None}
                out["ceph"] = ", ".join(f"{v} {n}" for v, n in sorted(found))  # type: ignore[misc]
                if state.release == HOST and len(found) == 1:
                    out["release"] = next(iter(found))[1]  # type: ignore[index]
                health = self.ceph("health", timeout=15)
                total, by_state = self.pg_counts()
                up, count = self.osd_up_count()
            except LabError as exc:
                out["error"] = str(exc)
            else:
                out["health"] = health.get("status")
                out["checks"] = sorted(health.get("checks", {}))
                out["pgs"] = {"total": total, "by_state": by_state}
                out["osds"] = {"up": up, "total": count}
        return out
