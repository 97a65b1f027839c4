"""This host's changes: a disk's write cache, the tuned profile."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import ClassVar

from stormdeck.advisors.actuators.base import DEVICE, Actuator, Backends
from stormdeck.advisors.ceph_admin import Refused
from stormdeck.advisors.devices import (
    TRANSPORTS,
    cache_argv,
    controller,
    persist_path,
    udev_rule,
)
from stormdeck.advisors.findings import Change
from stormdeck.base.errors import UserError


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

    @staticmethod
    def _here(c: Change) -> None:
        # tuned-adm acts on the host it runs on: a fleet console sees every host's profile
        # (stormdeck exporter), and a plan for another host must not change this one's.
        if c.target != _short_hostname():
            raise UserError(f"the tuned profile is host {c.target}'s, and this is "
                            f"{_short_hostname()}: run stormdeck on {c.target} to change it")

    def read(self, b: Backends, c: Change) -> str | None:
        self._here(c)
        # A merged profile ("throughput-performance virtual-guest") is the whole line, as
        # the collector reads it from active_profile: undo must restore all of it.
        m = re.search(r"Current active profile:[ \t]*(\S[^\n]*)",
                      run_tool(["tuned-adm", "active"]))
        if not m:
            raise UserError("cannot read the active tuned profile from tuned-adm")
        return " ".join(m.group(1).split())

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        self._here(c)
        if value is None or not value.split():
            # Refused: nothing ran, and the journal says so.
            raise Refused("there is no earlier tuned profile to go back to")
        run_tool(["tuned-adm", "profile", *value.split()])

    def inverse_command(self, c: Change, before: str | None) -> str:
        return f"tuned-adm profile {before}"
