"""The device-level write-cache commands per transport (KNOWLEDGE.md K6.2), in one place."""

from __future__ import annotations

import re

TRANSPORTS = ("sata", "sas", "scsi", "nvme")


def controller(name: str) -> str:
    """NVMe's Volatile Write Cache belongs to the controller: nvme0n1 -> nvme0."""
    m = re.match(r"(nvme\d+)n\d+", name)
    return m.group(1) if m else name


def cache_argv(name: str, transport: str, on: bool) -> list[str] | None:
    """The command that turns a disk's own volatile write cache on or off; None if no tool fits."""
    if transport == "sata":
        return ["hdparm", "-W", "1" if on else "0", f"/dev/{name}"]
    if transport in ("sas", "scsi"):
        return ["sdparm", "--set" if on else "--clear", "WCE", "--save", f"/dev/{name}"]
    if transport == "nvme":
        return ["nvme", "set-feature", f"/dev/{controller(name)}", "-f", "6", "-v",
                "1" if on else "0"]
    return None


def transport_of_command(command: str) -> str | None:
    tool = command.split()[0] if command.split() else ""
    return {"hdparm": "sata", "sdparm": "sas", "nvme": "nvme"}.get(tool)
