"""The hub: runs each source in its own worker thread, merges their partials into Snapshots.

A source that is slow or hangs delays nobody: its thread alone waits, and
the hub keeps showing its last good values marked stale, with the error,
until it answers again. The merge is pure: whoever runs the loop
(advisors/loop.py) keeps snapshots in a bounded History, from which windows
and series (sparklines, rule windows) are read.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from stormdeck.collectors.model import (
    Cluster,
    Daemon,
    Disk,
    Host,
    Partial,
    Records,
    Snapshot,
    SourceHealth,
    disk_key,
    merge_records,
)
from stormdeck.collectors.packing import PackedDaemons, Packer


class Source(Protocol):
    """A backend. It may also have `poll_timeout`: its own worst case, longer than the hub's."""

    name: str

    def poll(self) -> Partial: ...

    def close(self) -> None: ...


def one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text and text[0] else type(exc).__name__


@dataclass
class _State:
    """What the hub knows of one source; written by its worker, read under the lock."""

    partial: Partial | None = None
    last_success: float | None = None  # wall clock
    error: str | None = None
    polling_since: float | None = None  # monotonic; set while a poll runs
    polls: int = 0  # completed polls, good or bad
    good_polls: int = 0
    poll_seconds: float | None = None
    last_failed: bool = False  # the last poll raised: what we hold is from before


class History:
    """The last N snapshots, oldest first.

    All but the newest `whole` keep their daemons and disks packed
    (collectors/packing.py): the snapshot object stays the one everybody holds (frames,
    the engine's window), and its Daemons and Disks store themselves as equal, packed
    mappings (the Snapshot itself is never changed). Memory then grows with what
    changed, not with snapshots x daemons (or disks).
    """

    def __init__(self, maxlen: int = 600, whole: int = 30) -> None:
        self._items: deque[Snapshot] = deque(maxlen=maxlen)
        self._lock = threading.Lock()
        # The screen's sparklines read at most the newest 24 values every frame; the
        # engine reads each new snapshot once, and older rows through their columns.
        # Every whole snapshot whose daemons moved costs ~5 MB at 10,000 OSDs.
        self.whole = whole
        self._packer = Packer()
        # ~10,000 Disks a poll at 10,000 OSDs, made anew by a fleet source each scrape.
        self._disk_packer = Packer(Disk)

    def append(self, snap: Snapshot) -> None:
        with self._lock:
            self._items.append(snap)
            n = len(self._items)
            if n <= self.whole:
                return
            old = self._items[n - 1 - self.whole]
        for records, packer in ((old.daemons, self._packer), (old.disks, self._disk_packer)):
            if isinstance(records, Records) and not isinstance(records.inner, PackedDaemons):
                # Equal content, another representation (Records.compact): the Snapshot
                # is not touched, and a reader iterating the old mapping keeps reading it.
                records.compact(packer.pack)

    def __len__(self) -> int:
        return len(self._items)

    def last(self, n: int) -> tuple[Snapshot, ...]:
        """The newest `n` snapshots, oldest first."""
        with self._lock:
            k = len(self._items)
            return tuple(self._items[i] for i in range(max(0, k - n), k))

    def __iter__(self) -> Iterator[Snapshot]:
        with self._lock:
            return iter(list(self._items))

    @property
    def latest(self) -> Snapshot | None:
        with self._lock:
            return self._items[-1] if self._items else None

    def window(self, seconds: float, now: float | None = None) -> list[Snapshot]:
        with self._lock:
            items = list(self._items)
        if not items:
            return []
        end = now if now is not None else items[-1].time
        return [s for s in items if end - s.time <= seconds]

    def series(self, value: Callable[[Snapshot], float | None],
               seconds: float | None = None) -> list[tuple[float, float]]:
        """(time, value) pairs where `value` is known, for sparklines and rule windows."""
        snaps = self.window(seconds) if seconds is not None else list(self)
        out = []
        for s in snaps:
            v = value(s)
            if v is not None:
                out.append((s.time, v))
        return out


class Hub:
    """Polls sources every `interval` seconds, each in its own thread."""

    def __init__(self, sources: Sequence[Source], interval: float = 1.0,
                 timeout: float = 10.0) -> None:
        if not sources:
            raise ValueError("a hub needs at least one source")
        self.sources = list(sources)  # in merge priority order: first wins
        self.interval = interval
        self.timeout = timeout
        self._states = {s.name: _State() for s in self.sources}
        # A source that fans out (Curve: MDS, then chunkservers, each with its own
        # timeout) may take longer than one request before it is hung.
        self._deadlines = {s.name: max(timeout, getattr(s, "poll_timeout", 0.0))
                           for s in self.sources}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._memo = MergeMemo()  # touched only by whoever calls snapshot(): the loop
        # When the loop that reads the snapshots ticks next (monotonic), if one says so:
        # polls are then timed to end just before ticks (next_poll), not during them.
        self._next_tick: float | None = None
        self.wall: Callable[[], float] = time.time  # snapshot times (a benchmark shifts it)

    # -- workers --

    def start(self) -> None:
        for src in self.sources:
            t = threading.Thread(target=self._work, args=(src,), name=f"source-{src.name}",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, wait: float = 2.0) -> None:
        self._stop.set()
        deadline = time.monotonic() + wait
        for src, t in zip(self.sources, self._threads, strict=False):
            t.join(timeout=max(0.0, deadline - time.monotonic()))
            # Closing a librados handle under a command still in flight can
            # crash in C; a hung worker is a daemon thread and dies with us.
            if not t.is_alive():
                with contextlib.suppress(Exception):
                    src.close()

    def tick_due(self, at: float) -> None:
        """The loop's next tick is due at `at` (time.monotonic()): the sources' polls are
        timed to end before it. A poll that parses 10,000 OSDs' figures (~0.1 s of CPU
        once per stats period) running beside the loop's judging doubled its wall time
        for the interpreter lock; just before the tick, it also brings fresher figures."""
        self._next_tick = at

    def _work(self, src: Source) -> None:
        st = self._states[src.name]
        recent: deque[float] = deque(maxlen=10)  # this source's last polls' durations
        while not self._stop.is_set():
            started = time.monotonic()
            with self._lock:
                st.polling_since = started
            try:
                partial = src.poll()
            except Exception as exc:  # a source's fault is data for the screen, not a crash
                with self._changed:
                    st.error = one_line(exc)
                    st.last_failed = True
                    st.polls += 1
                    st.polling_since = None
                    st.poll_seconds = time.monotonic() - started
                    self._changed.notify_all()
            else:
                with self._changed:
                    st.partial = partial
                    st.last_success = partial.time
                    st.error = "; ".join(partial.errors) if partial.errors else None
                    st.last_failed = False
                    st.polls += 1
                    st.good_polls += 1
                    st.polling_since = None
                    st.poll_seconds = time.monotonic() - started
                    self._changed.notify_all()
            now = time.monotonic()
            recent.append(now - started)
            left = next_poll(started, now, self._next_tick, self.interval, max(recent)) - now
            if left > 0:
                self._stop.wait(left)

    def set_interval(self, seconds: float) -> None:
        self.interval = max(0.1, seconds)

    def wait_polls(self, count: int, timeout: float) -> bool:
        """Wait until every source has completed `count` polls (good or bad) or is hung."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                now = time.monotonic()
                if all(st.polls >= count or self._hung(n, st, now)
                       for n, st in self._states.items()):
                    return True
                if now >= deadline:
                    return False
                self._changed.wait(min(0.1, deadline - now))

    def _hung(self, name: str, st: _State, now: float) -> bool:
        return st.polling_since is not None and now - st.polling_since > self._deadlines[name]

    @property
    def longest_poll(self) -> float:
        """The longest any source may take before it counts as hung."""
        return max(self._deadlines.values())

    # -- snapshots --

    def health(self) -> dict[str, SourceHealth]:
        now = time.monotonic()
        wall = self.wall()
        out = {}
        modes = {s.name: getattr(s, "mode", None) for s in self.sources}
        with self._lock:
            for name, st in self._states.items():
                hung = self._hung(name, st, now)
                error = st.error
                if hung:
                    error = f"no answer for {now - st.polling_since:.0f} s"  # type: ignore[operator]
                # A poll that answered with some commands failing is not ok, but
                # its values are current; a failed or hung poll makes them stale, and so
                # does a poll still under way past when the next answer was due.
                h = SourceHealth(
                    name=name, ok=error is None and st.partial is not None,
                    last_success=st.last_success, error=error,
                    stale=st.partial is not None and (st.last_failed or hung),
                    poll_seconds=st.poll_seconds,
                    mode=modes.get(name) if isinstance(modes.get(name), str) else None)
                if not h.stale and st.polling_since is not None and \
                        is_late(h, wall, self.interval):
                    h = replace(h, ok=False, stale=True, error=error or (
                        f"no answer for {now - st.polling_since:.0f} s; the last one "
                        f"{wall - (st.last_success or wall):.1f} s ago"))
                out[name] = h
        return out

    def snapshot(self) -> Snapshot:
        """Merge the latest partial of every source into one Snapshot (nothing is kept)."""
        health = self.health()
        with self._lock:
            partials = [self._states[s.name].partial for s in self.sources]
        return merge([p for p in partials if p is not None], health, now=self.wall(),
                     memo=self._memo)


class MergeMemo:
    """What the last merge made from which inputs. A source that keeps an unchanged
    mapping (the same object) gets the same merged mapping back: snapshots in the
    History then share it, instead of each holding a copy of what did not move."""

    def __init__(self) -> None:
        self.daemon_maps: tuple[Any, ...] = ()
        self.daemons: dict[str, Daemon] = {}
        self.keys: list[str] = []
        self.order: list[str] = []
        self.disk_maps: tuple[Any, ...] = ()
        self.disks_for: Any = None
        self.disks: dict[str, Disk] = {}
        self.host_maps: tuple[Any, ...] = ()
        self.hosts: dict[str, Host] = {}


# Seconds of slack for a poll that takes a little longer than the last one did.
LATE_SLACK = 0.5


def is_late(h: SourceHealth, now: float, interval: float) -> bool:
    """The one test of a source's currency, for the console, `check` and `snapshot` alike:
    the hub says it failed or hung, or its last answer is older than a poll (the interval
    and the poll's own time) should make it, with room for one poll a little slower."""
    age = now - h.last_success if h.last_success is not None else None
    due = (interval + (h.poll_seconds or 0.0)) * 1.5 + LATE_SLACK
    return h.stale or (age is not None and age > due)


def next_poll(started: float, ended: float, tick: float | None, interval: float,
              takes: float) -> float:
    """When a source's next poll starts: `interval` after this one started; or, when the
    loop said when it ticks (`tick`, in the same clock), early enough before a tick for
    a poll that `takes` as long as the longest of late to end before it, and aimed at the
    tick after the one this poll ended in time for."""
    if tick is None or tick < ended - 2 * interval:
        return started + interval  # no loop ticks on these polls (or it stopped)
    lead = min(interval / 2, 1.5 * takes + 0.05)
    while tick < ended:  # the tick this poll serves: the first due at or after its end
        tick += interval
    return max(ended, tick + interval - lead)


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def merge(partials: Iterable[Partial], health: dict[str, SourceHealth] | None = None,
          now: float | None = None, memo: MergeMemo | None = None) -> Snapshot:
    """Partials in priority order -> one Snapshot; disks learn which daemons sit on them."""
    parts = list(partials)
    memo = memo if memo is not None else MergeMemo()
    clusters = [p.cluster for p in parts if p.cluster is not None]
    cluster: Cluster | None = merge_records(clusters) if clusters else None

    daemon_maps = tuple(p.daemons for p in parts if p.daemons)
    if daemon_maps and _same(memo.daemon_maps, daemon_maps):
        daemons = memo.daemons
    elif len(daemon_maps) == 1:
        only = daemon_maps[0]
        keys = list(only)
        order = memo.order if keys == memo.keys else sorted(keys, key=_id_order)
        memo.keys, memo.order = keys, order
        daemons = only if order == keys else {k: only[k] for k in order}  # type: ignore[assignment]
    else:
        by_id: dict[str, list[Daemon]] = {}
        for m in daemon_maps:
            for key, d in m.items():
                by_id.setdefault(key, []).append(d)
        daemons = {key: merge_records(ds)
                   for key, ds in sorted(by_id.items(), key=_daemon_order)}
    memo.daemon_maps, memo.daemons = daemon_maps, daemons

    disk_maps = tuple(p.disks for p in parts if p.disks)
    if not disk_maps:
        disks: dict[str, Disk] = {}
    elif _same(memo.disk_maps, disk_maps) and memo.disks_for is daemons:
        disks = memo.disks
    else:
        by_disk: dict[str, list[Disk]] = {}
        for m in disk_maps:
            for key, disk in m.items():
                by_disk.setdefault(key, []).append(disk)
        holders: dict[str, set[str]] = {}
        for d in daemons.values():
            if d.host:
                for dev in d.devices or ():
                    holders.setdefault(disk_key(d.host, dev), set()).add(d.id)
        disks = {}
        for key, ds in sorted(by_disk.items()):
            disk = merge_records(ds)
            on_it = holders.get(key, set()).union(*(x.daemons for x in ds))
            if on_it != set(disk.daemons):
                disk = replace(disk, daemons=tuple(sorted(on_it, key=_id_order)))
            disks[key] = disk
    memo.disk_maps, memo.disks_for, memo.disks = disk_maps, daemons, disks
    curves = [p.curve for p in parts if p.curve is not None]
    host_maps = tuple(p.hosts for p in parts if p.hosts)
    if host_maps and _same(memo.host_maps, host_maps):
        hosts = memo.hosts
    else:
        by_host: dict[str, list[Host]] = {}
        for m in host_maps:
            for name, h in m.items():
                by_host.setdefault(name, []).append(h)
        hosts = {n: merge_records(hs) for n, hs in sorted(by_host.items())}
    memo.host_maps, memo.hosts = host_maps, hosts
    return Snapshot(time=now if now is not None else time.time(), cluster=cluster,
                    daemons=daemons, disks=disks, sources=health or {},
                    curve=merge_records(curves) if curves else None, hosts=hosts)


def _id_order(daemon_id: str) -> tuple[str, int, str]:
    """osd.2 before osd.10; chunkservers (host:port) by host, then port."""
    host, colon, port = daemon_id.rpartition(":")
    if colon and port.isdigit():
        return ("~" + host, int(port), "")
    kind, _, num = daemon_id.partition(".")
    return (kind, int(num), "") if num.isdigit() else (daemon_id, 0, "")


def _daemon_order(item: tuple[str, object]) -> tuple[str, int, str]:
    return _id_order(item[0])
