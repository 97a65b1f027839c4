"""One actuator per kind of change (read, before, apply, verify, inverse), and the table of them.

The executor is generic over these: adding a kind of change is one class here
and one line in ACTUATORS, and the plan validation, the stale check, the
journal, the read-back and undo follow from it. Nothing goes through a shell:
Ceph changes through librados, tools as argument lists.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

from stormdeck.advisors import overrides
from stormdeck.advisors.ceph_admin import CephAdmin
from stormdeck.advisors.curve_schedule import ALL_POOLS, POOL_ID
from stormdeck.advisors.devices import (
    TRANSPORTS,
    UDEV_RULES,
    cache_argv,
    controller,
    persist_path,
    udev_rule,
)
from stormdeck.advisors.model import Change
from stormdeck.base.errors import UserError


def same(a: str | None, b: str | None) -> bool:
    """Values equal as Ceph compares them: 0.1 == 0.100000, True == true."""
    if a is None or b is None:
        return a == b
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip().lower() == b.strip().lower()


@dataclass
class Backends:
    """What actuators act through: the cluster, the tools, and how long to wait for them."""

    ceph: CephAdmin | None = None
    curve_tool: tuple[str, ...] = ("curve_ops_tool",)
    curve_follow: Callable[[str], tuple[bool, str]] | None = None
    verify_seconds: float = 15.0
    # How long apply follows a change that converges (pg_num steps toward its target)
    # before it journals "pending"; a later undo or `journal --refresh` follows it on.
    converge_seconds: float = 120.0
    # Where a device cache change is kept across reboots (read at construction, so a
    # test can point it elsewhere).
    udev_rules: Path = field(default_factory=lambda: UDEV_RULES)

    def need_ceph(self) -> CephAdmin:
        if self.ceph is None:
            raise UserError("this change needs the Ceph cluster: give -c CONF")
        return self.ceph


# How far a change reaches, narrowest first: what an actuator computes from kind, target and
# key (Actuator.width). Anything wider than one daemon is confirmed by a typed phrase.
WIDTHS = ("daemon", "device class", "pool", "host", "all OSDs", "all monitors", "cluster")
RANK = {"daemon": 0, "device class": 1, "pool": 1, "host": 1, "all OSDs": 2,
        "all monitors": 2, "cluster": 3}
DEVICE = re.compile(r"^(?:[A-Za-z0-9_.-]+:)?/dev/([a-z0-9]+)$")


@dataclass(frozen=True, slots=True)
class Verified:
    outcome: str  # "applied" | "pending" | "pending restart" | "overridden by <reason>"
    after: str | None
    detail: str = ""


class Actuator:
    """A kind of change. Subclasses say how to read, set, check and invert it."""

    kind: ClassVar[str]
    needs_ceph: ClassVar[bool] = False
    # The fields a command is built from: each must be a plain token (plan.SAFE_TOKEN).
    plain: ClassVar[tuple[str, ...]] = ("target", "key", "proposed")
    # A value that can move between planning and applying (a schedule has none).
    has_value: ClassVar[bool] = True
    # The extra arguments (Change.args) its command is built from, and what each may hold.
    arg_values: ClassVar[dict[str, re.Pattern[str] | tuple[str, ...]]] = {}
    # Whether a change of this kind can be put back; decided here, never by a plan file.
    reversible: ClassVar[bool] = True
    # Whether it takes effect without a restart: True for every kind but Ceph's options,
    # which the cluster's own `config help` answers (None here: ask it).
    fixed_runtime: ClassVar[bool | None] = True

    def command(self, c: Change) -> str:
        """The exact command this change runs, rendered from its fields and args: what the
        review shows, `apply` prints and the journal keeps."""
        raise NotImplementedError

    def width(self, c: Change) -> str:
        """How far the change reaches (one of WIDTHS), from its kind, target and key."""
        raise NotImplementedError

    def runtime(self, ceph: CephAdmin | None, c: Change) -> bool | None:
        """Whether it applies without a restart; None: unknown (confirmed as if not)."""
        return self.fixed_runtime

    def read(self, b: Backends, c: Change) -> str | None:
        """The value now, in the same terms as the plan's `current`."""
        raise NotImplementedError

    def before(self, b: Backends, c: Change) -> str | None:
        """What undo must restore."""
        return self.read(b, c)

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        """Set what `c` names to `value` (None: back to unset, where that exists)."""
        raise NotImplementedError

    def verify(self, b: Backends, c: Change, want: str | None) -> Verified:
        now = self.read(b, c)
        if want is not None and not same(now, want):
            raise UserError(f"{c.key} on {c.target} reads {now} after the change, not {want}")
        return Verified("applied", now)

    def arrived(self, b: Backends, c: Change, want: str | None) -> str | None:
        """The value now if the change has reached `want` (stored and running), else None."""
        now = self.before(b, c)
        return (now if now is not None else "unset") if same(now, want) else None

    def cannot_undo(self, c: Change) -> str | None:
        """Why this change has no way back, or None."""
        if not c.reversible or not self.reversible:
            return f"{c.command} cannot be undone: {c.note or 'the change is irreversible'}"
        return None

    def inverse_command(self, c: Change, before: str | None) -> str:
        """The exact command undo runs, as the operator reviews it."""
        raise NotImplementedError

    def inverse(self, c: Change, before: str | None) -> Change:
        """The change that puts `before` back, with its exact command. The forward change's
        note spoke of the way there (e.g. "PGs split"), not of the way back."""
        return replace(c, current=c.proposed, proposed=before or "unset",
                       command=self.inverse_command(c, before),
                       note=self.inverse_note(c, before))

    def inverse_note(self, c: Change, before: str | None) -> str:
        return f"undo: puts back {before if before is not None else 'unset'}"

    def phrase(self, c: Change) -> str | None:
        """What the operator must type for this change, when a generic phrase is too weak."""
        return None


# ---- Ceph ---------------------------------------------------------------------------


class CephConfig(Actuator):
    """An option in the monitors' config database (`ceph config set/rm`), read back per OSD."""

    kind = "ceph_config"
    needs_ceph = True
    fixed_runtime = None

    def command(self, c: Change) -> str:
        return f"ceph config set {c.target} {c.key} {c.proposed}"

    def width(self, c: Change) -> str:
        section, _, mask = c.target.partition("/")
        if "." in section:
            return "daemon"  # osd.3, mon.a: one daemon's section
        if section == "osd":
            return ("device class" if mask.startswith("class:") else
                    "host" if mask.startswith("host:") else "all OSDs")
        if section == "mon":
            return "all monitors"
        return "cluster"  # global, mgr, client, a CRUSH-located mask: assume the widest

    def runtime(self, ceph: CephAdmin | None, c: Change) -> bool | None:
        """What the running cluster's `config help` says (can_update_at_runtime)."""
        if ceph is None:
            return None
        try:
            help_ = ceph.cmd("config help", key=c.key)
        except (UserError, ValueError, OSError):
            return None
        value = help_.get("can_update_at_runtime") if isinstance(help_, dict) else None
        return value if isinstance(value, bool) else None

    def read(self, b: Backends, c: Change) -> str | None:
        return b.need_ceph().config_get(c.target, c.key)

    def before(self, b: Backends, c: Change) -> str | None:
        # Exactly that section's stored value: undo must not copy an inherited one down.
        return b.need_ceph().config_db(c.target, c.key)

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        ceph = b.need_ceph()
        if value is None:
            ceph.config_rm(c.target, c.key)
        else:
            ceph.config_set(c.target, c.key, value)

    def verify(self, b: Backends, c: Change, want: str | None) -> Verified:
        ceph = b.need_ceph()
        daemons = self._daemons_of(ceph, c.target)
        # A scheduler that overrides the option (advisors/overrides.py) never lets the
        # daemons run it: say so at once, rather than wait for them and call it pending.
        over = self._override(ceph, daemons, c.key)
        stored = ceph.config_db(c.target, c.key)
        if over is not None and over.unless is not None and want is not None:
            # The OSD takes the change, then removes it from the database again: give
            # it the time a change takes to reach the daemons.
            deadline = time.monotonic() + b.verify_seconds
            while same(stored, want) and time.monotonic() < deadline:
                time.sleep(0.5)
                stored = ceph.config_db(c.target, c.key)
        version = ceph.config_log_version()
        log = f"config log version {version}" if version is not None else ""
        if not same(stored, want):
            if over is not None and want is not None and stored is None:
                # maybe_override_options_for_qos removed it from the database again.
                running = ceph.config_show(daemons[0], c.key) if daemons else None
                return Verified(overrides.outcome(over.scheduler), running,
                                f"the OSDs removed {c.key} {want} from the config database "
                                f"again and run {running}: {over.why()}; {log}".strip("; "))
            raise UserError(f"the config database holds {stored} for {c.key} on {c.target}, "
                            f"not {want}")
        effective = ceph.config_get(c.target, c.key)
        deadline = time.monotonic() + (0 if over is not None else b.verify_seconds)
        lagging = daemons
        while daemons:
            lagging = [d for d in daemons if not same(ceph.config_show(d, c.key), effective)]
            if not lagging or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if lagging and over is not None:
            running = ceph.config_show(lagging[0], c.key)
            return Verified(overrides.outcome(over.scheduler), running,
                            f"{', '.join(lagging[:5])} run {running}, not {effective}: "
                            f"{over.why()}; {log}".strip("; "))
        if lagging:
            return Verified("pending restart", effective,
                            f"{', '.join(lagging[:5])} still run the old value; {log}".strip())
        return Verified("applied", effective, log)

    @staticmethod
    def _override(ceph: CephAdmin, daemons: list[str], key: str) -> overrides.Override | None:
        """The override the daemons' own scheduler puts on `key`, from what the first of
        them runs (osd_op_queue, and the option that lifts a recovery override)."""
        rule = overrides.TABLE.get(key)
        if rule is None or not daemons:
            return None
        if not overrides.runs(rule, ceph.config_show(daemons[0], "osd_op_queue")):
            return None
        if rule.unless is not None and \
                overrides.is_true(ceph.config_show(daemons[0], rule.unless)):
            return None
        return rule

    @staticmethod
    def _daemons_of(ceph: CephAdmin, who: str) -> list[str]:
        """The running daemons whose value a change to `who` should reach (OSDs only)."""
        if re.fullmatch(r"osd\.\d+", who):
            return [who]
        up = set(ceph.osd_ids())
        if who == "osd":
            return [f"osd.{i}" for i in sorted(up)]
        m = re.fullmatch(r"osd/class:([A-Za-z0-9_-]+)", who)
        if m:
            return [f"osd.{i}" for i in ceph.osds_of_class(m.group(1)) if i in up]
        return []

    def inverse_command(self, c: Change, before: str | None) -> str:
        return (f"ceph config rm {c.target} {c.key}" if before is None
                else f"ceph config set {c.target} {c.key} {before}")


OSD_ID = re.compile(r"osd\.\d+")
# The flags `osd set-group` takes for one OSD (OSDMonitor: noup, nodown, noin, noout).
GROUP_FLAGS = ("noup", "nodown", "noin", "noout")


class OsdFlag(Actuator):
    """An OSD flag: cluster-wide (`ceph osd set/unset`: noout, noscrub, ...) when the target
    is "cluster", or one OSD's own (`ceph osd set-group/unset-group noup osd.N`) when the
    target names it, read back from that OSD's state in `osd dump`."""

    kind = "osd_flag"
    needs_ceph = True

    def command(self, c: Change) -> str:
        verb = "unset" if c.proposed == "unset" else "set"
        if self._one_osd(c):
            return f"ceph osd {verb}-group {c.key} {c.target}"
        return f"ceph osd {verb} {c.key}"

    def width(self, c: Change) -> str:
        return "daemon" if self._one_osd(c) else "cluster"

    @staticmethod
    def _one_osd(c: Change) -> bool:
        if c.target == "cluster":
            return False
        if not OSD_ID.fullmatch(c.target):
            raise UserError(f"an OSD flag is set on the cluster or on one OSD (osd.N), "
                            f"not on {c.target!r}")
        if c.key not in GROUP_FLAGS:
            raise UserError(f"{c.key} cannot be set on one OSD; only "
                            f"{', '.join(GROUP_FLAGS)} can")
        return True

    def read(self, b: Backends, c: Change) -> str | None:
        ceph = b.need_ceph()
        flags = ceph.osd_flags(c.target) if self._one_osd(c) else ceph.flags()
        return "set" if c.key in flags else "unset"

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        on = (value or "unset") == "set"
        if self._one_osd(c):
            if on and c.key == "noup":
                # Held down, the OSD's PGs must stay active: Ceph's own word, asked now.
                why = b.need_ceph().ok_to_stop(c.target)
                if why:
                    raise UserError(f"not holding {c.target} down: {why} (osd ok-to-stop)")
            b.need_ceph().set_group_flag(c.key, c.target, on)
        else:
            b.need_ceph().set_flag(c.key, on)

    def inverse_command(self, c: Change, before: str | None) -> str:
        verb = "set" if before == "set" else "unset"
        if self._one_osd(c):
            return f"ceph osd {verb}-group {c.key} {c.target}"
        return f"ceph osd {verb} {c.key}"


class PoolSet(Actuator):
    """A pool's variable (`ceph osd pool set`), pg_num above all: it moves step by step."""

    kind = "pool_set"
    needs_ceph = True

    # Set as a target the mgr steps the value toward (a split or merge at a time).
    CONVERGING = ("pg_num", "pgp_num")

    def command(self, c: Change) -> str:
        return f"ceph osd pool set {c.target} {c.key} {c.proposed}"

    def width(self, c: Change) -> str:
        return "pool"

    def read(self, b: Backends, c: Change) -> str | None:
        ceph = b.need_ceph()
        if c.key in self.CONVERGING:
            # What the operator set, not a step on the way: an undo of a merge still
            # running is not someone else's change.
            target = ceph.pool_target(c.target, c.key)
            if target is not None:
                return target
        return ceph.pool_get(c.target, c.key)

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        if value is None:
            raise UserError(f"{c.key} of pool {c.target} has no value to go back to")
        b.need_ceph().pool_set(c.target, c.key, value)

    def arrived(self, b: Backends, c: Change, want: str | None) -> str | None:
        now = b.need_ceph().pool_get(c.target, c.key)
        return now if same(now, want) else None

    def verify(self, b: Backends, c: Change, want: str | None) -> Verified:
        stored = self.read(b, c)
        if want is not None and not same(stored, want):
            raise UserError(f"{c.key} of pool {c.target} reads {stored} after the change, "
                            f"not {want}")
        if c.key not in self.CONVERGING:
            return Verified("applied", stored)
        ceph = b.need_ceph()
        now = ceph.pool_get(c.target, c.key)
        # Followed to its target or the time limit; pending is then what is known.
        deadline = time.monotonic() + max(b.verify_seconds, b.converge_seconds)
        while not same(now, want) and time.monotonic() < deadline:
            time.sleep(1.0)
            now = ceph.pool_get(c.target, c.key)
        if not same(now, want):
            way = "merging" if want is not None and now is not None and \
                float(want) < float(now) else "splitting"
            return Verified("pending", now, f"{c.key} is {now}, {way} on its way to {want}")
        return Verified("applied", now)

    def inverse_command(self, c: Change, before: str | None) -> str:
        return f"ceph osd pool set {c.target} {c.key} {before}"

    def inverse_note(self, c: Change, before: str | None) -> str:
        if c.key in self.CONVERGING and before is not None:
            try:
                fewer = float(before) < float(c.proposed)
            except ValueError:
                return super().inverse_note(c, before)
            return (f"undo: moves data: PGs {'merge' if fewer else 'split'} back to {before} "
                    "in the background, a step at a time")
        return super().inverse_note(c, before)

    def phrase(self, c: Change) -> str | None:
        # An irreversible pool change is confirmed by typing the pool's name.
        return None if self.reversible else c.target


class FastEC(PoolSet):
    """Tentacle's fast EC on an EC pool (`allow_ec_optimizations`): it cannot be turned off."""

    kind = "fast_ec"
    KEY = "allow_ec_optimizations"
    reversible = False

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        if c.key != self.KEY or not same(value, "true"):
            raise UserError(f"fast EC can only be turned on ({self.KEY} true), not set to "
                            f"{value} (K5.1)")
        super().apply(b, c, value)

    def cannot_undo(self, c: Change) -> str | None:
        return f"{c.command} cannot be undone: fast EC cannot be turned off again (K5.1)"

    def inverse_command(self, c: Change, before: str | None) -> str:
        return "(none: fast EC cannot be turned off)"

    def phrase(self, c: Change) -> str | None:
        return c.target


# ---- this host's devices and profile ------------------------------------------------


def run_tool(argv: list[str] | tuple[str, ...], timeout: float = 60.0) -> str:
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


def _short_hostname() -> str:
    import socket

    return socket.gethostname().split(".")[0]


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


class DeviceCache(Actuator):
    """A disk's own volatile write cache, through hdparm, sdparm or nvme (K6.2).

    Never /sys/block/*/queue/write_cache: that is the kernel's view only, and
    writing it stops the flushes a cached disk needs (K6.1).
    """

    kind = "device_cache"
    plain = ("target", "proposed")  # its key is a label, never sent anywhere
    arg_values: ClassVar[dict[str, re.Pattern[str] | tuple[str, ...]]] = {
        "transport": TRANSPORTS}

    @staticmethod
    def _transport(c: Change) -> str:
        transport = c.arg("transport")
        if transport not in TRANSPORTS:
            raise UserError(f"the change of {c.target}'s cache names no transport "
                            f"({', '.join(TRANSPORTS)}): make a new plan")
        return transport

    def command(self, c: Change) -> str:
        m = DEVICE.match(c.target)
        argv = cache_argv(m.group(1), self._transport(c), c.proposed == "on") if m else None
        if argv is None:
            raise UserError(f"{c.target!r} is not a disk whose cache stormdeck can change")
        return " ".join(argv)

    def width(self, c: Change) -> str:
        return "host"

    def read(self, b: Backends, c: Change) -> str | None:
        name, transport = device_of(c.target), self._transport(c)
        if transport == "sata":
            m = re.search(r"write-caching\s*=\s*(\d)",
                          run_tool(["hdparm", "-W", f"/dev/{name}"]))
        elif transport in ("sas", "scsi"):
            m = re.search(r"WCE\s+(\d)", run_tool(["sdparm", "--get", "WCE", f"/dev/{name}"]))
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

    def _argv(self, c: Change, on: bool) -> list[str]:
        transport = self._transport(c)
        argv = cache_argv(device_of(c.target), transport, on)
        if argv is None:
            raise UserError(f"no device-level tool for a {transport} disk")
        return argv

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        on = (value or "off") == "on"
        run_tool(self._argv(c, on))
        self._persist(b, c, on)

    @staticmethod
    def _persist(b: Backends, c: Change, on: bool) -> None:
        """Off: a udev rule keeps it off at every boot (SATA/SAS; NVMe saved it with -s).
        On (undo): the rule goes, so nothing turns it off again."""
        name = device_of(c.target)
        path = persist_path(name, b.udev_rules)
        if on:
            path.unlink(missing_ok=True)
            return
        transport = DeviceCache._transport(c)
        wwid = None
        with contextlib.suppress(OSError):
            wwid = Path(f"/sys/block/{name}/device/wwid").read_text().strip() or None
        tool = cache_argv(name, transport, on=False)
        rule = udev_rule(name, transport, wwid, shutil.which(tool[0]) if tool else None)
        if rule is None:
            return
        try:
            b.udev_rules.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(rule)
            os.replace(tmp, path)
        except OSError as exc:
            raise UserError(f"the cache of /dev/{name} is off now, but the udev rule that "
                            f"keeps it off could not be written ({exc.strerror}: {path}); "
                            "it comes back on at the next boot") from None

    def inverse_command(self, c: Change, before: str | None) -> str:
        command = " ".join(self._argv(c, before == "on"))
        if before == "on" and self._transport(c) != "nvme":
            command += f" (and removes {persist_path(device_of(c.target))})"
        return command


class TunedProfile(Actuator):
    """The host's tuned profile (K1.9)."""

    kind = "tuned_profile"

    def command(self, c: Change) -> str:
        return f"tuned-adm profile {c.proposed}"

    def width(self, c: Change) -> str:
        return "host"

    def read(self, b: Backends, c: Change) -> str | None:
        m = re.search(r"Current active profile:\s*(\S+)", run_tool(["tuned-adm", "active"]))
        if not m:
            raise UserError("cannot read the active tuned profile from tuned-adm")
        return m.group(1)

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        if value is None:
            raise UserError("there is no earlier tuned profile to go back to")
        run_tool(["tuned-adm", "profile", value])

    def inverse_command(self, c: Change, before: str | None) -> str:
        return f"tuned-adm profile {before}"


# ---- Curve --------------------------------------------------------------------------


class CurveLeaderSchedule(Actuator):
    """A logical pool's rapid leader schedule: leaders moved, followed over heartbeats (K2.2)."""

    kind = "curve_leader_schedule"
    plain = ("target",)
    has_value = False
    arg_values: ClassVar[dict[str, re.Pattern[str] | tuple[str, ...]]] = {"pool_id": POOL_ID}
    reversible = False

    def command(self, c: Change) -> str:
        if c.target == ALL_POOLS:
            return "curve_ops_tool rapid-leader-schedule -scheduleAll=true"
        pool_id = c.arg("pool_id")
        if pool_id is None or not POOL_ID.match(pool_id):
            raise UserError(f"the leader schedule for {c.target} names no logical pool id: "
                            "make a new plan")
        return f"curve_ops_tool rapid-leader-schedule -logical_pool_id={pool_id} " \
               "-scheduleAll=false"

    def width(self, c: Change) -> str:
        return "cluster" if c.target == ALL_POOLS else "pool"

    def read(self, b: Backends, c: Change) -> str | None:
        return c.current  # a schedule has no value to go stale

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        from stormdeck.advisors.curve_schedule import run_leader_schedule

        # That pool alone (curve_ops_tool, or the Go CLI where it is missing); the tool's
        # own words when the MDS refuses.
        run_leader_schedule(c, b.curve_tool)

    def verify(self, b: Backends, c: Change, want: str | None) -> Verified:
        if b.curve_follow is None:
            return Verified("applied", None,
                            "leader transfers ride on heartbeats; follow the range")
        converged, detail = b.curve_follow(c.target)
        return Verified("applied" if converged else "pending", None, detail)

    def cannot_undo(self, c: Change) -> str | None:
        return "a leader schedule moved leaders; there is nothing to undo"

    def inverse_command(self, c: Change, before: str | None) -> str:
        return "(none: a leader schedule has nothing to undo)"


ACTUATORS: dict[str, Actuator] = {a.kind: a for a in (
    CephConfig(), OsdFlag(), PoolSet(), FastEC(), DeviceCache(), TunedProfile(),
    CurveLeaderSchedule(),
)}


def actuator(kind: str) -> Actuator:
    try:
        return ACTUATORS[kind]
    except KeyError:
        raise UserError(f"unknown kind of change {kind!r}") from None


def change(kind: str, target: str, key: str, current: str | None, proposed: str, *,
           args: dict[str, str] | None = None, runtime: bool | None = None,
           note: str = "") -> Change:
    """A change as rules propose it: its command rendered by its actuator, and its reach and
    reversibility the actuator's, so what a plan shows is what runs."""
    act = actuator(kind)
    c = Change(kind=kind, target=target, key=key, current=current, proposed=proposed,
               command="", note=note, args=tuple((args or {}).items()))
    return replace(c, command=act.command(c), blast_radius=act.width(c),
                   reversible=act.reversible,
                   runtime=act.fixed_runtime if runtime is None else runtime)

