"""This host's NICs: error and drop counters, MTU and link state, for the network rule."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import psutil

from stormdeck.collectors.model import Nic

SYS_NET = Path("/sys/class/net")


def physical(name: str, sys_net: Path = SYS_NET) -> bool:
    """A NIC with a device behind it, or a bond of them: not lo, veth, bridges, tunnels."""
    return (sys_net / name / "device").exists() or (sys_net / name / "bonding").exists()


def nic_stats(last: Mapping[str, Nic] | None = None,
              sys_net: Path = SYS_NET) -> Mapping[str, Nic]:
    """Every physical NIC's counters; `last` returned as it was when nothing moved (a
    History of ten minutes then holds one copy)."""
    try:
        counters = psutil.net_io_counters(pernic=True)
        stats = psutil.net_if_stats()
    except OSError:
        return last or {}
    out = {}
    for name, c in sorted(counters.items()):
        if not physical(name, sys_net):
            continue
        s = stats.get(name)
        out[name] = Nic(name, errin=c.errin, errout=c.errout, dropin=c.dropin,
                        dropout=c.dropout, mtu=s.mtu if s else None, up=s.isup if s else None,
                        speed=s.speed or None if s else None)
    if last is not None and out == dict(last):
        return last
    return out
