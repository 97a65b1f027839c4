"""What a validation step works with: its options, the tools it runs, what to undo, its pools.

Each step registers the undoing of whatever it creates before it creates it (Cleanup),
and runs its tools so that a cancel stops them (Ctx.run).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.collectors.model import Snapshot

POOL_PREFIX = "stormdeck-validate-"
SCRATCH_NAME = "stormdeck-validate-scratch"


class Cancelled(Exception):
    """The operator cancelled: clean up and stop."""


@dataclass
class Options:
    conf: str | None
    quick: bool = False
    scratch_dir: Path = Path("/var/tmp")
    confirmed_devices: tuple[str, ...] = ()  # typed names of devices that hold data
    peering_pgs: int = 256
    cpu_sweep: bool = False  # on a test cluster only: limits an OSD's cores
    cpu_osd: str | None = None
    state_dir: Path = Path("/var/tmp")
    # The client options the rados tool is run with beyond -c (--name, --keyring,
    # --cluster): the same identity the connection uses.
    client_args: tuple[str, ...] = ()
    # Nothing that writes runs: no pool, no bench, no affinity, no fio scratch file.
    read_only: bool = False


def _stop(procs: Sequence[subprocess.Popen[str]]) -> None:
    """SIGINT to those still running (rados bench cleans up on it), then SIGKILL."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    for p in procs:
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Cleanup:
    """What to undo, registered before it is done; undone in reverse, every item tried."""

    def __init__(self) -> None:
        self._items: list[tuple[str, Callable[[], None]]] = []
        self._lock = threading.Lock()
        self.done: list[str] = []
        self.failed: list[str] = []

    def push(self, what: str, undo: Callable[[], None]) -> None:
        with self._lock:
            self._items.append((what, undo))

    def pop(self, what: str) -> None:
        """Undo one item now (its step is over)."""
        with self._lock:
            found = [i for i in self._items if i[0] == what]
            for item in found:
                self._items.remove(item)
        for w, undo in found:
            self._run(w, undo)

    def run_all(self) -> None:
        with self._lock:
            items, self._items = self._items[::-1], []
        for what, undo in items:
            self._run(what, undo)

    def _run(self, what: str, undo: Callable[[], None]) -> None:
        try:
            undo()
            self.done.append(what)
        except Exception as exc:  # every item is tried; what failed is reported
            self.failed.append(f"{what}: {exc}")


@dataclass(frozen=True)
class Background:
    """A tool running beside a step (Ctx.background)."""

    proc: subprocess.Popen[str]
    err: IO[str]

    def poll(self) -> int | None:
        return self.proc.poll()

    def why(self) -> str:
        """Why it ended: its last line on stderr, or its exit status."""
        self.err.seek(0)
        lines = self.err.read().strip().splitlines()
        return printable(lines[-1], 200) if lines else f"exit {self.proc.returncode}"


@dataclass
class Ctx:
    """What a step works with: the cluster, the host, cancel, progress, cleanup."""

    options: Options
    admin: Any  # advisors.apply.CephAdmin
    snapshot: Snapshot
    cancel: threading.Event = field(default_factory=threading.Event)
    cleanup: Cleanup = field(default_factory=Cleanup)
    progress: Callable[[float, str], None] = lambda fraction, text: None
    confirm: Callable[[str, str], bool] = lambda prompt, phrase: False

    def check(self) -> None:
        if self.cancel.is_set():
            raise Cancelled()

    def sleep(self, seconds: float) -> None:
        if self.cancel.wait(seconds):
            raise Cancelled()

    def run(self, argv: Sequence[str], timeout: float) -> str:
        """A tool run that a cancel interrupts (SIGINT, then SIGKILL): its stdout."""
        return self.run_many([argv], timeout)[0]

    def run_many(self, argvs: Sequence[Sequence[str]], timeout: float) -> list[str]:
        """Tools run side by side (several bench clients), each as `run` runs one: a cancel,
        the timeout or one failing stops them all. Their stdouts, in order."""
        self.check()
        procs: list[subprocess.Popen[str]] = []
        with ExitStack() as files:
            # Output goes to files, not pipes: a chatty client must not block on a full
            # pipe while we wait for the others.
            outs = [files.enter_context(tempfile.TemporaryFile("w+")) for _ in argvs]
            errs = [files.enter_context(tempfile.TemporaryFile("w+")) for _ in argvs]
            try:
                for argv, out, err in zip(argvs, outs, errs, strict=True):
                    try:
                        procs.append(subprocess.Popen(list(argv), stdout=out, stderr=err,
                                                      text=True, start_new_session=True))
                    except OSError as exc:
                        raise UserError(f"cannot run {argv[0]}: {exc.strerror}") from None
                deadline = time.monotonic() + timeout
                failed: list[int] = []
                while any(p.poll() is None for p in procs) and not failed:
                    if self.cancel.is_set() or time.monotonic() > deadline:
                        _stop(procs)
                        if self.cancel.is_set():
                            raise Cancelled()
                        raise UserError(f"{Path(argvs[0][0]).name} did not finish in "
                                        f"{timeout:.0f} s")
                    failed = [i for i, p in enumerate(procs) if p.returncode not in (None, 0)]
                    time.sleep(0.1)
                _stop(procs)
                failed = failed or [i for i, p in enumerate(procs) if p.returncode != 0]
                texts = []
                for f in (*outs, *errs):
                    f.seek(0)
                for out in outs:
                    texts.append(out.read())
                if failed:
                    i = failed[0]
                    lines = (errs[i].read() or texts[i]).strip().splitlines()
                    why = lines[-1] if lines else f"exit {procs[i].returncode}"
                    raise UserError(f"{Path(argvs[i][0]).name} failed: {why}")
                return texts
            finally:
                _stop(procs)

    @contextmanager
    def background(self, argv: Sequence[str]) -> Iterator[Background]:
        """A tool that runs while the step measures (a load under the sweep): stopped as
        `run` stops one (SIGINT, then SIGKILL) when the block ends, however it ends."""
        self.check()
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            try:
                proc = subprocess.Popen(list(argv), stdout=out, stderr=err, text=True,
                                        start_new_session=True)
            except OSError as exc:
                raise UserError(f"cannot run {argv[0]}: {exc.strerror}") from None
            try:
                yield Background(proc, err)
            finally:
                _stop([proc])

    def rados(self, *args: str) -> list[str]:
        base = [shutil.which("rados") or "rados"]
        if self.options.conf:
            base += ["-c", self.options.conf]
        base += self.options.client_args
        return [*base, *args]


# ---- pools ---------------------------------------------------------------------------


@contextmanager
def scratch_pool(ctx: Ctx, name: str, pgs: int) -> Iterator[str]:
    """A pool of our own for the step, gone when the step ends, is cancelled, or fails."""
    if ctx.options.read_only:  # the runner skips such steps; this is the last word
        raise UserError("read-only mode: validate creates no pool")
    pool = POOL_PREFIX + name
    ctx.cleanup.push(f"pool {pool}", lambda: delete_pool(ctx.admin, pool))
    ctx.admin.cmd("osd pool create", pool=pool, pg_num=pgs, pgp_num=pgs)
    try:
        yield pool
    finally:
        ctx.cleanup.pop(f"pool {pool}")


def delete_pool(admin: Any, pool: str) -> None:
    if pool not in (admin.cmd("osd pool ls") or []):
        return
    allowed = admin.config_db("mon", "mon_allow_pool_delete")
    if (allowed or "false").lower() != "true":
        # Pool deletion is off on a careful cluster: on for our pool only, then as it was.
        admin.config_set("mon", "mon_allow_pool_delete", "true")
    try:
        admin.cmd("osd pool rm", pool=pool, pool2=pool, yes_i_really_really_mean_it=True)
    finally:
        if (allowed or "false").lower() != "true":
            if allowed is None:
                admin.config_rm("mon", "mon_allow_pool_delete")
            else:
                admin.config_set("mon", "mon_allow_pool_delete", allowed)


def leftover_pools(admin: Any) -> list[str]:
    return [p for p in (admin.cmd("osd pool ls") or []) if p.startswith(POOL_PREFIX)]


def pool_clean(admin: Any, pool: str) -> tuple[int, int]:
    """(PGs of the pool active+clean, its PGs): others' PGs do not time our pool."""
    try:
        out = admin.mgr_cmd("pg ls-by-pool", poolstr=pool)
    except UserError as exc:
        # The mgr answers from its own osdmap, which on Reef and Tentacle lags the
        # mon's by a moment after the pool is made: none of its PGs seen yet.
        if "does not exist" in str(exc):
            return 0, 0
        raise
    stats = out.get("pg_stats", []) if isinstance(out, dict) else (out or [])
    clean = sum(1 for p in stats if p.get("state") == "active+clean")
    return clean, len(stats)

