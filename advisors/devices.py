"""The device-level write-cache commands per transport (KNOWLEDGE.md K6.2), in one place."""

from __future__ import annotations

import re
from pathlib import Path

TRANSPORTS = ("sata", "sas", "scsi", "nvme")


def controller(name: str) -> str:
    """NVMe's Volatile Write Cache belongs to the controller: nvme0n1 -> nvme0."""
    m = re.match(r"(nvme\d+)n\d+", name)
    return m.group(1) if m else name


def cache_argv(name: str, transport: str, on: bool) -> list[str] | None:
    """The command that turns a disk's own volatile write cache on or off; None if no tool fits.

    NVMe's set-feature saves the value (-s): the controller keeps it across resets and
    power cycles, where the drive can save feature 6 at all. SATA and SAS keep theirs
    through a udev rule (udev_rule) that runs this again whenever the disk appears.
    """
    if transport == "sata":
        return ["hdparm", "-W", "1" if on else "0", f"/dev/{name}"]
    if transport in ("sas", "scsi"):
        return ["sdparm", "--set" if on else "--clear", "WCE", "--save", f"/dev/{name}"]
    if transport == "nvme":
        return ["nvme", "set-feature", f"/dev/{controller(name)}", "-f", "6", "-v",
                "1" if on else "0", "-s"]
    return None


UDEV_RULES = Path("/etc/udev/rules.d")


def persist_path(name: str, rules_dir: Path = UDEV_RULES) -> Path:
    """The udev rule stormdeck writes for one disk's cache, and undo removes."""
    return rules_dir / f"99-stormdeck-write-cache-{name}.rules"


def udev_rule(name: str, transport: str, wwid: str | None = None,
              tool: str | None = None) -> str | None:
    """A udev rule that turns the disk's volatile write cache off each time it appears (at
    boot, after a reset): matched by its WWID where sysfs has one, as kernel names move
    between boots, else by its name. None for NVMe (saved in the controller instead)."""
    argv = cache_argv("%k", transport, on=False)
    if argv is None or transport == "nvme":
        return None
    argv[0] = tool or argv[0]
    # udev's own quoting: a value is the text between the double quotes.
    match = f'ATTRS{{wwid}}=="{wwid}"' if wwid and '"' not in wwid else f'KERNEL=="{name}"'
    return (f"# Written by stormdeck: the volatile write cache of /dev/{name} stays off "
            "(KNOWLEDGE K6.2); `stormdeck undo` removes this file.\n"
            f'ACTION=="add|change", SUBSYSTEM=="block", ENV{{DEVTYPE}}=="disk", {match}, '
            f'RUN+="{" ".join(argv)}"\n')

