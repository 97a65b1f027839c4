"""Rules over every OSD read them as columns and look only at those that can change a
verdict, and judge as walking every OSD and window does."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import replace

import pytest

from stormdeck.advisors.engine import Engine
from stormdeck.advisors.rules import ALL
from stormdeck.advisors.rules.base import Context
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.model import HealthCheck, Snapshot
from tests.unit.test_engine_columns import verdicts, wander

# Rules that, with the engine's columns, never walk ctx.osds() (flapping and the
# peering storm walk only while they fire: test_engine_columns judges them).
RULES = {"ceph.osd.memory", "ceph.osd.slowest", "ceph.osd.pgs_per_osd",
         "ceph.osd.failing_disk", "ceph.osd.fullness"}
GIB = float(1 << 30)


def signs(seed: int, n: int) -> list[Snapshot]:
    """wander's OSDs, with RSS past the target, PG counts past the limit and a disk's
    repair check coming and going, so that each of RULES fires and clears."""
    rnd = random.Random(seed)
    out = []
    counts: dict[str, int] = {}
    previous: dict = {}
    # osd_memory_target moved for a while, for every OSD and then for one (each one
    # object shared by the snapshots that hold it, as a poll's unchanged options are):
    # targets worked out once must be worked out again.
    config = wander(seed, 1, 1.0)[0].cluster.config  # type: ignore[union-attr]
    opt = config["osd_memory_target"]
    lower = {**config, opt.name: replace(opt, values={**opt.values, "osd": "1500M"})}
    own = {**config, opt.name: replace(opt, values={**opt.values, "osd.4": "1G"})}
    for i, snap in enumerate(wander(seed, n, 1.0)):
        if i % 10 == 0:  # PG counts move with the osdmap, not every tick
            counts = {k: rnd.choice((100, 240, 260, 800)) for k in snap.daemons}
        daemons = {k: replace(d, rss_bytes=(7.0 if k == "osd.3" and 10 <= i < 80 else
                                            rnd.choice((2.0, 3.0))) * GIB,
                              pgs=counts.get(k, 100),
                              utilization=(0.9 if k == "osd.2" and 20 <= i < 60 else None
                                           if rnd.random() < 0.1 else rnd.uniform(0.3, 0.5)))
                   for k, d in snap.daemons.items()}
        if i % 4 == 3 and set(daemons) == set(previous):
            daemons = previous  # one mapping for several polls, as a stats period gives
        previous = daemons
        c = snap.cluster
        assert c is not None
        checks = list(c.checks)
        if i % 20 < 12:
            checks.append(HealthCheck("OSD_TOO_MANY_REPAIRS", "HEALTH_WARN",
                                      "Too many repaired reads on 1 OSDs",
                                      detail=(f"osd.{1 + i // 20 % 3} had 13 reads repaired",)))
        pools = tuple(replace(p, autoscale_mode="warn") for p in c.pools)
        moved = {"config": lower} if 30 <= i < 45 else {"config": own} if 60 <= i < 75 else {}
        out.append(replace(snap, daemons=daemons,
                           cluster=replace(c, checks=tuple(checks), pools=pools, **moved)))
    return out


def test_rules_over_every_osd_judge_as_the_walk_without_walking(
        monkeypatch: pytest.MonkeyPatch) -> None:
    snaps = signs(7, 120)
    rules = [r for r in ALL if r.id in RULES]
    # Shorter for-durations, so that findings fire and must clear within the run.
    settings = load_settings()
    for rid in RULES:
        settings[rid] = replace(settings[rid], for_seconds=min(settings[rid].for_seconds, 10.0))
    fast = Engine(settings=settings, rules=rules)
    slow = Engine(settings=settings, rules=rules, incremental=False)
    whole, walk = Engine(), Engine(incremental=False)
    real = Context.osds
    history: deque[Snapshot] = deque(maxlen=90)
    fired: set[str] = set()
    firing: set[str] = set()
    for snap in snaps:
        history.append(snap)
        b = slow.evaluate(list(history))
        assert verdicts(whole.evaluate(history)) == verdicts(walk.evaluate(list(history)))

        def walked(ctx: Context) -> object:
            raise AssertionError("walked every OSD")
        monkeypatch.setattr(Context, "osds", walked)
        try:
            a = fast.evaluate(history)
        finally:
            monkeypatch.setattr(Context, "osds", real)
        assert not fast.errors, fast.errors
        assert verdicts(a) == verdicts(b)
        fired |= {f.rule for f in a}
        firing |= {f.rule for f in a if f.state == "firing"}
    assert fired >= RULES
    assert firing >= RULES - {"ceph.osd.pgs_per_osd"}
