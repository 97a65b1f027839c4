"""Load and storms on the lab: client IO, PG splits, OSD restarts, a daemon stopped and started."""

from __future__ import annotations

import shutil
import signal
import sys
import uuid

from stormdeck.lab import procs
from stormdeck.lab.state import (
    BENCH_POOL,
    STORM_POOL,
    LabError,
    Proc,
    State,
)


class Storms:
    """The Lab's load and incidents (a mixin: it uses the Lab's state and runners)."""


    # ---- load ----------------------------------------------------------------

    def load_start(self, size: int, threads: int, seconds: float,
                   round_seconds: float = 60) -> Proc:
        state = self._require()
        current = state.procs.get("load")
        if current and self.alive(current):
            raise LabError(f"load is already running (pid {current.pid}); "
                           "stop it with `stormdeck lab load --stop`")
        if threads < 1 or threads > 1024:
            raise LabError(f"--threads {threads}: give 1 to 1024")
        if seconds < 0:
            raise LabError("--seconds must be zero (until stopped) or more")
        if not 1 <= round_seconds <= 3600:
            raise LabError(f"--round {round_seconds:g}: give 1 to 3600 seconds")
        self._ensure_pool(BENCH_POOL, 32)
        proc = Proc("load", [sys.executable, "-m", "stormdeck.lab.loadgen",
                             "--conf", str(self.conf), "--pool", BENCH_POOL, "--size", str(size),
                             "--threads", str(threads), "--seconds", str(seconds),
                             "--round", str(round_seconds)])
        self._start(state, proc)
        return proc

    def load_stop(self) -> bool:
        state = self.read_state()
        proc = state.procs.get("load") if state else None
        if proc is None:
            return False
        stopped = procs.stop(proc.pid, self._marker(), group=True)
        del state.procs["load"]  # type: ignore[union-attr]
        self._save(state)  # type: ignore[arg-type]
        return stopped

    def _ensure_pool(self, pool: str, pgs: int) -> None:
        pools = self.ceph("osd", "pool", "ls")
        if pool not in pools:
            self._ceph_raw("osd", "pool", "create", pool, str(pgs), str(pgs))
            # Without an application tag the cluster warns POOL_APP_NOT_ENABLED.
            self._ceph_raw("osd", "pool", "application", "enable", pool, "rbd")

    # ---- storms --------------------------------------------------------------

    def storm_pgs(self, pgs: int) -> None:
        """Peering storm: (re)create a pool whose PGs all have to be created and peered."""
        self._require()
        if pgs < 1:
            raise LabError("--pgs must be at least 1")
        if STORM_POOL in self.ceph("osd", "pool", "ls"):
            self._ceph_raw("osd", "pool", "rm", STORM_POOL, STORM_POOL,
                           "--yes-i-really-really-mean-it")
        self._ensure_pool(STORM_POOL, pgs)
        self._progress(f"created pool {STORM_POOL} with {pgs} PGs")

    def storm_restart_osd(self, osd_id: int, down_timeout: float = 30.0) -> Proc:
        """Kill an OSD as a crash would, wait until the cluster sees it down, start it again."""
        state = self._require()
        proc = state.procs.get(f"osd.{osd_id}")
        if proc is None:
            known = ", ".join(sorted(n for n in state.procs if n.startswith("osd.")))
            raise LabError(f"the lab has no osd.{osd_id} (it has {known})")
        if self.alive(proc):
            procs.stop(proc.pid, self._marker(), sig=signal.SIGKILL)
        try:
            self._wait(f"osd.{osd_id} to be marked down", lambda: not self._osd_is_up(osd_id),
                       down_timeout)
        except LabError:
            self._ceph_raw("osd", "down", str(osd_id))
        self._progress(f"osd.{osd_id} killed and marked down; starting it again")
        self._start(state, proc)
        return proc

    def stop_daemon(self, name: str) -> None:
        """Stop one of the lab's processes (for fault rehearsals); `start_daemon` brings it back."""
        state = self._require_known(name)
        proc = state.procs[name]
        if not procs.stop(proc.pid, self._marker()):
            raise LabError(f"{name} is not running")

    def start_daemon(self, name: str) -> Proc:
        state = self._require_known(name)
        proc = state.procs[name]
        if self.alive(proc):
            raise LabError(f"{name} is already running (pid {proc.pid})")
        self._start(state, proc)
        return proc

    def add_standby_mgr(self, mgr_id: str, prometheus_port: int) -> Proc:
        """A second mgr, `mgr.<mgr_id>`, started as the lab's first was: a standby, until the
        active one fails. Its prometheus module gets a port of its own (a standby binds one
        too), so two labs' worth of ports never meet. `lab down` stops it with the rest."""
        state = self._require()
        name = f"mgr.{mgr_id}"
        if name in state.procs and self.alive(state.procs[name]):
            raise LabError(f"{name} is already running (pid {state.procs[name].pid})")
        self._ceph_raw("config", "set", name, "mgr/prometheus/server_port",
                       str(prometheus_port))
        (self.dir / "data" / name).mkdir(exist_ok=True)
        proc = Proc(name, self.argv("ceph-mgr", "-f", "-c", str(self.conf), "-i", mgr_id))
        self._start(state, proc)
        return proc

    def add_spare_osd(self) -> int:
        """One OSD more, in memory and outside the CRUSH map: up and in, yet no pool's PG
        maps to it, whatever pools the lab holds, and adding it moves no data. For a case
        that needs an OSD Ceph may stop (`osd ok-to-stop`) on a lab of one-copy pools.
        Its id; `remove_spare_osd` takes it out again, `lab down` stops it with the rest."""
        state = self._require()
        osd_uuid = str(uuid.uuid4())
        osd_id = int(self._ceph_raw("osd", "new", osd_uuid).strip())
        name = f"osd.{osd_id}"
        (self.dir / "data" / name).mkdir()
        args = ["-c", str(self.conf), "-i", str(osd_id), "--osd-objectstore", "memstore",
                "--osd-crush-update-on-start", "false"]
        self._run(self.argv("ceph-osd", *args, "--mkfs", "--osd-uuid", osd_uuid))
        self._start(state, Proc(name, self.argv("ceph-osd", "-f", *args)))
        self._wait(f"{name} to come up", lambda: self._osd_is_up(osd_id), 60)
        return osd_id

    def remove_spare_osd(self, osd_id: int) -> None:
        """Stop an OSD `add_spare_osd` added and purge it from the cluster's maps."""
        name = f"osd.{osd_id}"
        state = self._require_known(name)
        procs.stop(state.procs[name].pid, self._marker())
        del state.procs[name]
        self._save(state)
        # The mons refuse to purge an OSD they still count up.
        self._ceph_raw("osd", "down", str(osd_id))
        self._wait(f"{name} to be down", lambda: not self._osd_is_up(osd_id), 60)
        self._ceph_raw("osd", "purge", str(osd_id), "--yes-i-really-mean-it")
        shutil.rmtree(self.dir / "data" / name, ignore_errors=True)

    def _require_known(self, name: str) -> State:
        state = self.read_state()
        if state is None:
            raise LabError(f"no lab in {self.dir}; start one with `stormdeck lab up`")
        if name not in state.procs or name == "load":
            known = ", ".join(n for n in state.procs if n != "load")
            raise LabError(f"the lab has no daemon {name!r} (it has {known})")
        return state

    def _osd_is_up(self, osd_id: int) -> bool:
        dump = self.ceph("osd", "dump")
        return any(o["osd"] == osd_id and o["up"] for o in dump["osds"])

    def wait_clean(self, timeout: float) -> float:
        try:
            return self._wait("every PG to be active+clean", self.all_clean, timeout)
        except LabError as exc:
            # Say where it stuck: the PG states and which OSDs are down, for the log's reader.
            try:
                _, states = self.pg_counts()
                down = [str(o["osd"]) for o in self.ceph("osd", "dump")["osds"] if not o["up"]]
                where = (f"; PGs: {', '.join(f'{n} {s}' for s, n in sorted(states.items()))}"
                         + (f"; OSDs down: {', '.join(down)}" if down else ""))
            except LabError:
                where = ""
            raise LabError(f"{exc}{where}") from None
