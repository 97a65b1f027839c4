"""The shape of a rule, and the context it judges: the latest snapshot, a window of history."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from stormdeck.advisors.model import Change, Check, Evidence, Thresholds
from stormdeck.collectors.model import Cluster, ConfigOption, Daemon, Snapshot


@dataclass(frozen=True)
class Context:
    latest: Snapshot
    window: Sequence[Snapshot]  # oldest first, ends with latest
    params: Thresholds

    def p(self, name: str) -> Any:
        return self.params[name]

    @property
    def span(self) -> float:
        return self.latest.time - self.window[0].time if self.window else 0.0

    def values(self, fn: Callable[[Snapshot], float | None]) -> list[float]:
        out = []
        for snap in self.window:
            try:
                v = fn(snap)
            except (KeyError, AttributeError, TypeError, ZeroDivisionError):
                v = None
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                out.append(float(v))
        return out

    def daemon_values(self, daemon_id: str, attr: str) -> list[float]:
        return self.values(lambda s: getattr(s.daemons[daemon_id], attr))

    def evidence(self, metric: str, values: Sequence[float], unit: str = "",
                 now: float | str | None = None) -> Evidence:
        if not values:
            return Evidence(metric=metric, window=self.span, now=now, unit=unit, samples=0)
        return Evidence(metric=metric, window=self.span, now=values[-1] if now is None else now,
                        min=min(values), avg=sum(values) / len(values), max=max(values),
                        unit=unit, samples=len(values))

    @property
    def cluster(self) -> Cluster | None:
        return self.latest.cluster

    def option(self, name: str) -> ConfigOption | None:
        c = self.cluster
        return c.config.get(name) if c is not None else None

    def effective(self, name: str, who: str = "osd") -> str | None:
        """The value `who` runs with as far as the config database says: the most
        specific section set (osd.3 > osd > global), else the option's default."""
        opt = self.option(name)
        if opt is None:
            return None
        chain = [who]
        if "." in who:
            chain.append(who.split(".")[0])
        chain.append("global")
        for section in chain:
            if section in opt.values:
                return opt.values[section]
        return opt.default

    def osds(self) -> Iterable[Daemon]:
        return (d for d in self.latest.daemons.values() if d.kind == "osd")

    def chunkservers(self) -> Iterable[Daemon]:
        return (d for d in self.latest.daemons.values() if d.kind == "chunkserver")


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def config_change(ctx: Context, option: str, proposed: str, who: str = "osd",
                  blast_radius: str = "all OSDs", note: str = "") -> Change:
    opt = ctx.option(option)
    return Change(kind="ceph_config", target=who, key=option,
                  current=ctx.effective(option, who), proposed=proposed,
                  command=f"ceph config set {who} {option} {proposed}",
                  runtime=opt.runtime if opt else None, reversible=True,
                  blast_radius=blast_radius, note=note)


class Rule:
    """One advisor. Subclasses set the class attributes and implement `check`."""

    id: ClassVar[str]
    title: ClassVar[str]
    source: ClassVar[str]  # the KNOWLEDGE.md section(s) it rests on
    explanation: ClassVar[str]

    def check(self, ctx: Context) -> Iterable[Check]:
        raise NotImplementedError
