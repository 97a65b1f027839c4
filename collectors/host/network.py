"""The host's network interfaces: packet, drop and error rates between two polls (psutil)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psutil

from stormdeck.collectors.model import Nic

Counters = Mapping[str, Any]  # NIC name -> psutil's snetio


def nic_counters() -> dict[str, Any]:
    """Every interface but loopback, as psutil reads /proc/net/dev."""
    try:
        counters = psutil.net_io_counters(pernic=True, nowrap=True)
    except (OSError, RuntimeError):
        return {}
    return {name: c for name, c in counters.items() if name != "lo"}


def nic_rates(prev: tuple[float, Counters] | None, now: float,
              counters: Counters) -> tuple[Nic, ...]:
    """Rates since the previous poll; none on the first one, or for an interface that
    appeared since (a counter going backwards is a reset: that interface is skipped)."""
    if prev is None or now <= prev[0]:
        return ()
    dt = now - prev[0]
    out = []
    for name in sorted(counters):
        a, b = prev[1].get(name), counters[name]
        if a is None:
            continue
        packets = (b.packets_recv - a.packets_recv) + (b.packets_sent - a.packets_sent)
        drops = (b.dropin - a.dropin) + (b.dropout - a.dropout)
        errors = (b.errin - a.errin) + (b.errout - a.errout)
        if min(packets, drops, errors) < 0:
            continue
        out.append(Nic(name=name, packets=packets / dt, drops=drops / dt, errors=errors / dt))
    return tuple(out)
