"""The executor: read-only guard, stale-plan check, apply, read back, journal; and undo.

Every change is journaled (intent fsync'd) before it is made and ended after.
Nothing goes through a shell: Ceph changes through librados, tools as argument
lists. Undo applies the targeted inverse of one entry (`config set` to the old
value or `config rm`, a flag unset, a profile or cache restored), never
`config reset`, which would roll back everyone's later changes (K7.4).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from stormdeck.advisors.devices import cache_argv, controller, transport_of_command
from stormdeck.advisors.journal import Entry, Journal
from stormdeck.advisors.model import Change
from stormdeck.advisors.plan import Plan, validate_change
from stormdeck.base.errors import UserError


class ReadOnlyError(UserError):
    pass


class StaleError(UserError):
    pass


def same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip().lower() == b.strip().lower()


# ---- Ceph --------------------------------------------------------------------------


class CephAdmin:
    """The few mon commands changes need, through one librados connection."""

    def __init__(self, conffile: str | None, client_name: str | None = None,
                 keyring: str | None = None, timeout: float = 10.0,
                 cluster: str = "ceph") -> None:
        from stormdeck.collectors.ceph import CephSource

        # The connection opens at the first command; close() ends it, and every
        # user calls it (a librados handle holds threads and sockets).
        self._src = CephSource(conffile=conffile, client_name=client_name, keyring=keyring,
                               cluster=cluster, timeout=timeout)

    def close(self) -> None:
        self._src.close()

    def cmd(self, prefix: str, **args: Any) -> Any:
        return self._send("mon", prefix, args)

    def mgr_cmd(self, prefix: str, **args: Any) -> Any:
        return self._send("mgr", prefix, args)

    def _send(self, target: str, prefix: str, args: dict[str, Any]) -> Any:
        from stormdeck.collectors.ceph import CommandError

        try:
            out = self._src._send(target, {"prefix": prefix, **args}, self._src.timeout)
        except CommandError as exc:
            raise UserError(f"Ceph refused `{prefix}`: {exc}") from None
        return json.loads(out) if out.strip() else None

    def fsid(self) -> str:
        return str(self.cmd("status")["fsid"])

    def config_db(self, who: str, key: str) -> str | None:
        """The value stored for exactly `who` (None: unset there), as undo needs it.
        `who` may carry a mask: osd/class:ssd, osd/host:node1."""
        section, _, mask = who.partition("/")
        for row in self.cmd("config dump"):
            if row.get("section") == section and row.get("name") == key and \
                    (row.get("mask") or "") == mask:
                return str(row.get("value"))
        return None

    def config_get(self, who: str, key: str) -> str:
        """What `who` gets: `config get` answers entities and sections, not masks."""
        section, _, mask = who.partition("/")
        if mask:
            stored = self.config_db(who, key)
            return stored if stored is not None else self.config_get(section, key)
        return str(self.cmd("config get", who=who, key=key))

    def osds_of_class(self, device_class: str) -> list[int]:
        return [int(i) for i in self.cmd("osd crush class ls-osd", **{"class": device_class})]

    def config_set(self, who: str, key: str, value: str) -> None:
        self.cmd("config set", who=who, name=key, value=value)

    def config_rm(self, who: str, key: str) -> None:
        self.cmd("config rm", who=who, name=key)

    def config_show(self, daemon: str, key: str) -> str | None:
        try:
            value = self.cmd("config show", who=daemon, key=key)
        except UserError:
            return None  # the daemon is down or does not report its config
        return None if value is None else str(value)

    def config_log_version(self) -> int | None:
        log = self.cmd("config log", num=1)
        return int(log[0]["version"]) if log else None

    def osd_ids(self) -> list[int]:
        return [int(o["osd"]) for o in self.cmd("osd dump")["osds"] if o.get("up")]

    def flags(self) -> set[str]:
        flags = self.cmd("osd dump").get("flags", "")
        return set(flags.split(",") if isinstance(flags, str) else flags)

    def set_flag(self, flag: str, on: bool) -> None:
        self.cmd("osd set" if on else "osd unset", key=flag)

    def pool_get(self, pool: str, var: str) -> str:
        out = self.cmd("osd pool get", pool=pool, var=var)
        return str(out.get(var)) if isinstance(out, dict) else str(out)

    def pool_set(self, pool: str, var: str, value: str) -> None:
        self.cmd("osd pool set", pool=pool, var=var, val=value)


# ---- tools on this host -------------------------------------------------------------


def run_tool(argv: list[str], timeout: float = 60.0) -> str:
    """Run a tool as an argument list (never a shell); its failure is one sentence."""
    path = shutil.which(argv[0])
    if path is None:
        raise UserError(f"{argv[0]} is not installed on this host")
    try:
        res = subprocess.run([path, *argv[1:]], capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        raise UserError(f"`{' '.join(argv)}` did not finish in {timeout:g} s") from None
    if res.returncode != 0:
        lines = (res.stderr or res.stdout).strip().splitlines()
        raise UserError(f"`{' '.join(argv)}` failed: "
                        f"{lines[-1] if lines else f'exit {res.returncode}'}")
    return res.stdout


VIRTUAL = re.compile(r"^(loop|dm-|md|rbd|nbd|zram|ram|sr|drbd)")


def device_of(target: str) -> str:
    """'host:/dev/sdb' -> 'sdb', refusing devices whose cache is not theirs (K6.1)."""
    host, _, dev = target.partition(":/dev/")
    name = dev or target.removeprefix("/dev/")
    if not re.fullmatch(r"[a-z0-9]+", name):
        raise UserError(f"{target!r} does not name a block device")
    if VIRTUAL.match(name) or "/virtual/" in os.path.realpath(f"/sys/block/{name}"):
        raise UserError(f"{name} is a virtual device: its cache is the one of what lies under "
                        "it; change that device's cache instead")
    if host and host != _short_hostname():
        raise UserError(f"{target} is on host {host}; run stormdeck there to change its cache")
    return name


def _short_hostname() -> str:
    import socket

    return socket.gethostname().split(".")[0]


def cache_state(name: str, transport: str) -> str:
    """'on' or 'off', as the device itself reports its volatile write cache."""
    if transport == "sata":
        out = run_tool(["hdparm", "-W", f"/dev/{name}"])
        m = re.search(r"write-caching\s*=\s*(\d)", out)
    elif transport in ("sas", "scsi"):
        out = run_tool(["sdparm", "--get", "WCE", f"/dev/{name}"])
        m = re.search(r"WCE\s+(\d)", out)
    elif transport == "nvme":
        out = run_tool(["nvme", "get-feature", f"/dev/{controller(name)}", "-f", "6"])
        m = re.search(r"Current value:\s*(?:0x)?([0-9a-fA-F]+)", out)
        if m:
            return "on" if int(m.group(1), 16) & 1 else "off"
    else:
        raise UserError(f"no device-level tool for a {transport} disk")
    if not m:
        raise UserError(f"cannot read the write cache of /dev/{name} from the tool's answer")
    return "on" if m.group(1) != "0" else "off"


def set_cache(name: str, transport: str, on: bool) -> None:
    argv = cache_argv(name, transport, on)
    if argv is None:
        raise UserError(f"no device-level tool for a {transport} disk")
    run_tool(argv)


def transport_of_change(c: Change) -> str:
    transport = transport_of_command(c.command)
    if transport is None:
        raise UserError(f"cannot tell the transport of {c.target} from {c.command!r}")
    return transport


def tuned_active() -> str:
    out = run_tool(["tuned-adm", "active"])
    m = re.search(r"Current active profile:\s*(\S+)", out)
    if not m:
        raise UserError("cannot read the active tuned profile from tuned-adm")
    return m.group(1)


# ---- the executor -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    entry: str
    change: Change
    outcome: str  # "applied" | "pending restart"
    after: str | None
    detail: str = ""


class Executor:
    """Applies plans and undoes journal entries; refuses everything in read-only mode."""

    def __init__(self, journal: Journal, ceph: CephAdmin | None = None,
                 read_only: bool = False, curve_tool: list[str] | None = None,
                 verify_seconds: float = 15.0, curve_follow: Callable[[str], Any] | None = None
                 ) -> None:
        self.journal = journal
        self.ceph = ceph
        self.read_only = read_only
        self.curve_tool = curve_tool or ["curve_ops_tool"]
        self.verify_seconds = verify_seconds
        self.curve_follow = curve_follow

    def _guard(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"read-only mode: {what} refused (start without --read-only, "
                                "or set read_only = false for this cluster, to make changes)")

    def _need_ceph(self) -> CephAdmin:
        if self.ceph is None:
            raise UserError("this change needs the Ceph cluster: give -c CONF")
        return self.ceph

    # -- reading --

    def current(self, c: Change) -> str | None:
        """The value now, in the same terms as the plan's `current`."""
        if c.kind == "ceph_config":
            return self._need_ceph().config_get(c.target, c.key)
        if c.kind == "osd_flag":
            return "set" if c.key in self._need_ceph().flags() else "unset"
        if c.kind == "pool_set":
            return self._need_ceph().pool_get(c.target, c.key)
        if c.kind == "device_cache":
            return cache_state(device_of(c.target), transport_of_change(c))
        if c.kind == "tuned_profile":
            return tuned_active()
        return c.current  # a leader schedule has no value to go stale

    def before(self, c: Change) -> str | None:
        """What undo must restore: for config, the value stored at exactly that section."""
        if c.kind == "ceph_config":
            return self._need_ceph().config_db(c.target, c.key)
        return self.current(c)

    # -- applying --

    def check_stale(self, plan: Plan) -> None:
        if plan.fsid and self.ceph is not None and self.ceph.fsid() != plan.fsid:
            raise StaleError(f"the plan was made for cluster {plan.fsid}, not this one "
                             f"({self.ceph.fsid()})")
        moved = []
        for c in plan.changes:
            if c.kind == "curve_leader_schedule":
                continue
            now = self.current(c)
            if not same(now, c.current):
                moved.append(f"{c.key} on {c.target} was {c.current} when planned and is "
                             f"{now} now")
        if moved:
            raise StaleError("refused, the cluster moved since the plan: " + "; ".join(moved)
                             + "; make a new plan")

    def apply(self, plan: Plan) -> list[Outcome]:
        self._guard(f"applying {plan.rule}")
        for c in plan.changes:
            validate_change(c)
        self.check_stale(plan)
        return [self._one(c, c.proposed, plan=plan.id, rule=plan.rule, cluster=plan.fsid)
                for c in plan.changes]

    def _one(self, c: Change, value: str | None, plan: str | None = None,
             rule: str | None = None, cluster: str | None = None,
             undoes: str | None = None) -> Outcome:
        """Set what `c` names to `value` (None: back to unset), journaled around it."""
        before = self.before(c)
        entry = self.journal.intent(c, before, plan=plan, rule=rule, cluster=cluster,
                                    undoes=undoes)
        try:
            self._do(c, value)
            outcome, after, detail = self._verify(c, value)
        except UserError as exc:
            self.journal.end(entry, "failed", str(exc))
            raise
        except Exception as exc:  # journal first, then let it be one sentence above
            self.journal.end(entry, "failed", f"{type(exc).__name__}: {exc}")
            raise UserError(f"{c.command} failed: {type(exc).__name__}: {exc}") from None
        self.journal.end(entry, outcome, detail, after)
        return Outcome(entry, c, outcome, after, detail)

    def _do(self, c: Change, value: str | None) -> None:
        if c.kind == "ceph_config":
            ceph = self._need_ceph()
            if value is None:
                ceph.config_rm(c.target, c.key)
            else:
                ceph.config_set(c.target, c.key, value)
        elif c.kind == "osd_flag":
            self._need_ceph().set_flag(c.key, (value or "unset") == "set")
        elif c.kind == "pool_set":
            if value is None:
                raise UserError(f"{c.key} of pool {c.target} has no value to go back to")
            self._need_ceph().pool_set(c.target, c.key, value)
        elif c.kind == "device_cache":
            set_cache(device_of(c.target), transport_of_change(c), (value or "off") == "on")
        elif c.kind == "tuned_profile":
            if value is None:
                raise UserError("there is no earlier tuned profile to go back to")
            run_tool(["tuned-adm", "profile", value])
        elif c.kind == "curve_leader_schedule":
            argv = [*self.curve_tool, "rapid-leader-schedule"]
            m = re.search(r"-logical_pool_id=(\d+)", c.command)
            if m:
                argv += [f"-logical_pool_id={m.group(1)}", "-scheduleAll=false"]
            out = run_tool(argv, timeout=120)
            if "fail" in out.lower():
                raise UserError(out.strip().splitlines()[-1])

    def _verify(self, c: Change, want: str | None) -> tuple[str, str | None, str]:
        if c.kind == "curve_leader_schedule":
            if self.curve_follow is None:
                return "applied", None, "leader transfers ride on heartbeats; follow the range"
            converged, detail = self.curve_follow(c.target)
            return ("applied" if converged else "pending"), None, detail
        if c.kind == "ceph_config":
            return self._verify_config(c, want)
        now = self.current(c)
        if c.kind == "pool_set" and want is not None and not same(now, want):
            # pg_num moves toward its target step by step (the mgr splits or merges).
            deadline = time.monotonic() + self.verify_seconds
            while not same(now, want) and time.monotonic() < deadline:
                time.sleep(0.5)
                now = self.current(c)
            if not same(now, want):
                return "pending", now, f"{c.key} is {now}, on its way to {want}"
        if want is not None and not same(now, want):
            raise UserError(f"{c.key} on {c.target} reads {now} after the change, not {want}")
        return "applied", now, ""

    def _verify_config(self, c: Change, want: str | None) -> tuple[str, str | None, str]:
        ceph = self._need_ceph()
        stored = ceph.config_db(c.target, c.key)
        if not same(stored, want):
            raise UserError(f"the config database holds {stored} for {c.key} on {c.target}, "
                            f"not {want}")
        version = ceph.config_log_version()
        effective = ceph.config_get(c.target, c.key)
        daemons = self._daemons_of(c.target)
        deadline = time.monotonic() + self.verify_seconds
        lagging = daemons
        while daemons:
            lagging = [d for d in daemons
                       if not same(ceph.config_show(d, c.key), effective)]
            if not lagging or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        log = f"config log version {version}" if version is not None else ""
        if lagging:
            return ("pending restart", effective,
                    f"{', '.join(lagging[:5])} still run the old value; {log}".strip())
        return "applied", effective, log

    def _daemons_of(self, who: str) -> list[str]:
        """The running daemons whose value a change to `who` should reach (OSDs only)."""
        if re.fullmatch(r"osd\.\d+", who):
            return [who]
        up = set(self._need_ceph().osd_ids())
        if who == "osd":
            return [f"osd.{i}" for i in sorted(up)]
        m = re.fullmatch(r"osd/class:([A-Za-z0-9_-]+)", who)
        if m:
            return [f"osd.{i}" for i in self._need_ceph().osds_of_class(m.group(1)) if i in up]
        return []

    # -- undo --

    def undo(self, entry: Entry) -> Outcome:
        self._guard(f"undoing {entry.id}")
        c = entry.change
        if entry.undone_by:
            raise UserError(f"{entry.id} is already undone by {', '.join(entry.undone_by)}")
        if entry.undoes is not None:
            raise UserError(f"{entry.id} is itself an undo; undo {entry.undoes} is done")
        if not c.reversible:
            raise UserError(f"{entry.id} ({c.command}) cannot be undone: "
                            f"{c.note or 'the change is irreversible'}")
        if c.kind == "curve_leader_schedule":
            raise UserError("a leader schedule moved leaders; there is nothing to undo")
        if entry.status == "failed":
            raise UserError(f"{entry.id} failed and changed nothing to undo")
        if entry.cluster and self.ceph is not None and self.ceph.fsid() != entry.cluster:
            raise UserError(f"{entry.id} was made on cluster {entry.cluster}, not on this one "
                            f"({self.ceph.fsid()}): undo it there")
        inverse = replace(c, current=c.proposed, proposed=entry.before or "unset",
                          command=self._inverse_command(c, entry.before))
        return self._one(inverse, entry.before, rule=entry.rule, cluster=entry.cluster,
                         undoes=entry.id)

    @staticmethod
    def _inverse_command(c: Change, before: str | None) -> str:
        if c.kind == "ceph_config":
            return (f"ceph config rm {c.target} {c.key}" if before is None
                    else f"ceph config set {c.target} {c.key} {before}")
        if c.kind == "osd_flag":
            return f"ceph osd {'set' if before == 'set' else 'unset'} {c.key}"
        if c.kind == "pool_set":
            return f"ceph osd pool set {c.target} {c.key} {before}"
        if c.kind == "tuned_profile":
            return f"tuned-adm profile {before}"
        if c.kind == "device_cache":
            argv = cache_argv(device_of(c.target), transport_of_change(c), before == "on")
            return " ".join(argv) if argv else c.command
        return c.command


def journal_path() -> Path:
    from stormdeck.advisors.settings import state_dir

    return state_dir() / "journal.jsonl"
