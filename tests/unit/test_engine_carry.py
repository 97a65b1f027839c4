"""The engine judges again only when a tick brings new data; in between (a fleet source
hands the same scrape for 15 s) findings carry over and for-durations still run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from stormdeck.advisors.columns import Columns
from stormdeck.advisors.engine import Engine
from stormdeck.advisors.findings import Check, RuleSettings, Severity
from stormdeck.advisors.rules import Context, Rule
from stormdeck.advisors.rules.cpu import CoresStarved
from stormdeck.advisors.settings import load_settings
from stormdeck.collectors.model import Snapshot
from tests.captured import lab_snapshot, with_daemon

SCRAPE = 15  # ticks (seconds) each scrape's data is held for


class Hot(Rule):
    """Fires while osd.0's cores_used is at or above 0.9; counts its judgements."""

    id = "test.hot"
    title = "test"
    source = "K0"
    explanation = "test"
    calls = 0

    def check(self, ctx: Context) -> Iterable[Check]:
        type(self).calls += 1
        used = ctx.latest.daemons["osd.0"].cores_used or 0.0
        yield Check(target="osd.0", fire=used >= 0.9, clear=used < 0.9,
                    severity=Severity.WARNING, summary=f"{used:.2f}")


class HotByClock(Hot):
    id = "test.hot_clock"
    clock = True


def scrapes(levels: list[float], base: Snapshot | None = None) -> list[Snapshot]:
    """One snapshot a second; each scrape's data (one cores_used level) held SCRAPE ticks,
    shared by identity as the hub shares an unchanged source's partial."""
    base = base or lab_snapshot()
    out = []
    for n, level in enumerate(levels):
        scrape = with_daemon(base, "osd.0", cores_allowed=1.0, cores_used=level,
                             read_iops=500.0, write_iops=500.0, read_bps=2e6, write_bps=2e6)
        for i in range(SCRAPE):
            out.append(replace(scrape, time=base.time + n * SCRAPE + i))
    return out


def run(engine: Engine, snaps: list[Snapshot], rule: str) -> list[str | None]:
    out: list[str | None] = []
    for i in range(1, len(snaps) + 1):
        found = [f for f in engine.evaluate(snaps[max(0, i - 120):i]) if f.rule == rule]
        out.append(found[0].state if found else None)
    return out


def test_a_for_duration_fires_at_its_tick_while_the_data_stands_still() -> None:
    Hot.calls = 0
    settings = {Hot.id: RuleSettings(for_seconds=20, warmup_samples=1)}
    engine = Engine(settings, rules=[Hot])
    got = run(engine, scrapes([0.95, 0.95, 0.5, 0.5]), Hot.id)
    # Pending from the first tick, firing 20 s later although the scrape that started it
    # was judged once (tick 0) and the next once (tick 15); cleared on the first tick of
    # the scrape that says so, not a scrape later.
    assert got == ["pending"] * 20 + ["firing"] * 10 + [None] * 30
    assert Hot.calls == 4, "judged once per scrape, not once per tick"
    # The reference judges every tick and agrees.
    slow = Engine(settings, rules=[Hot], incremental=False)
    assert run(slow, scrapes([0.95, 0.95, 0.5, 0.5]), Hot.id) == got


def test_a_pending_finding_carried_over_ends_when_new_data_ends_it() -> None:
    settings = {Hot.id: RuleSettings(for_seconds=20, warmup_samples=1)}
    got = run(Engine(settings, rules=[Hot]), scrapes([0.95, 0.5, 0.95]), Hot.id)
    assert got == ["pending"] * 15 + [None] * 15 + ["pending"] * 15


def test_a_clock_rule_is_judged_every_tick() -> None:
    HotByClock.calls = 0
    settings = {HotByClock.id: RuleSettings(for_seconds=0, warmup_samples=1)}
    run(Engine(settings, rules=[HotByClock]), scrapes([0.95, 0.5]), HotByClock.id)
    assert HotByClock.calls == 2 * SCRAPE


def test_a_rule_warmed_up_between_scrapes_is_judged_then() -> None:
    Hot.calls = 0
    settings = {Hot.id: RuleSettings(for_seconds=0, warmup_samples=4)}
    got = run(Engine(settings, rules=[Hot]), scrapes([0.95]), Hot.id)
    assert got == [None] * 3 + ["firing"] * 12
    assert Hot.calls == 1


def test_cores_starved_over_scrapes_against_judging_every_tick() -> None:
    """The real rule (window 30 s, for 30 s) over held scrapes judges once a scrape. It
    fires on the same tick as the engine that judges every tick; what only the window's
    sliding changes (the mean falling as the busy scrapes leave it) it sees at the next
    scrape, at most one scrape interval later."""
    settings = load_settings()
    s = settings["ceph.osd.cores_starved"]
    quick = {**settings, "ceph.osd.cores_starved": replace(s, warmup_samples=1)}
    snaps = scrapes([0.95, 0.95, 0.95, 0.95, 0.5, 0.5])
    fast, slow = Engine(quick, rules=[CoresStarved]), Engine(quick, rules=[CoresStarved],
                                                             incremental=False)
    got = run(fast, snaps, "ceph.osd.cores_starved")
    every = run(slow, snaps, "ceph.osd.cores_starved")
    assert got.index("firing") == every.index("firing") == 30  # its for-duration, to the tick
    # Busy until tick 60; the 30 s mean drops under 75% (it clears) 13 ticks later.
    assert every.index(None) == 73
    assert got.index(None) == 75  # the next scrape
    assert got[:73] == every[:73] and got[75:] == every[75:]
    assert fast.judged == 0 and slow.judged == 1  # the last tick: a held scrape


def test_snapshots_of_one_scrape_share_one_row_of_the_columns() -> None:
    """Each Snapshot wraps its daemons anew; the columns read the mapping underneath,
    so the snapshots of one scrape cost one row, not one each."""
    snaps = scrapes([0.95, 0.5])
    cols = Columns()
    cols.sync(snaps, 300.0)
    means = cols.means(list(snaps[-1].daemons), "cores_used", cols.base)
    m = cols._mats["cores_used"]
    assert m.rows[0] is m.rows[SCRAPE - 1] and m.rows[SCRAPE] is not m.rows[0]
    walked = [s.daemons["osd.0"].cores_used for s in snaps]
    assert means["osd.0"] == sum(walked) / len(walked)  # bit for bit


def test_osds_and_disks_that_can_change_nothing_are_not_judged() -> None:
    """cores_starved judges only OSDs with few cores busy enough to fire (or tracked);
    at_hardware_limit only disks whose queue reached a limit somewhere in the window.
    The reference walk (no columns) still judges every one."""
    from stormdeck.advisors.rules.disks import AtHardwareLimit

    settings = load_settings()
    base = lab_snapshot()
    osds = [d for d in base.daemons.values() if d.kind == "osd"]
    daemons = dict(base.daemons)
    daemons[osds[0].id] = replace(osds[0], cores_allowed=1.0, cores_used=0.95)
    for d in osds[1:]:
        daemons[d.id] = replace(d, cores_allowed=8.0, cores_used=0.95)  # not few
    disks = {k: replace(x, queue_depth=0.5, read_await=0.001, write_await=0.001)
             for k, x in base.disks.items()}
    judged_disks = [k for k, x in disks.items() if x.daemons and not (x.virtual and x.backing)]
    assert judged_disks, "the lab capture has disks with OSDs on them"
    snap = replace(base, daemons=daemons, disks=disks)
    snaps = [replace(snap, time=snap.time + i) for i in range(5)]
    for rule, expect in ((CoresStarved(), [osds[0].id]), (AtHardwareLimit(), [])):
        s = settings[rule.id]
        cols = Columns()
        cols.sync(snaps, 300.0)
        ctx = Context(snaps[-1], snaps, s.params, cols, cols.base)
        assert [c.target for c in rule.check(ctx)] == expect
        walked = [c.target for c in rule.check(Context(snaps[-1], snaps, s.params))]
        assert len(walked) == (len(osds) if rule.id.startswith("ceph") else len(judged_disks))
        tracked = Context(snaps[-1], snaps, s.params, cols, cols.base,
                          frozenset({walked[-1]}))
        assert walked[-1] in [c.target for c in rule.check(tracked)]  # it may clear


def test_with_no_evidence_file_held_scrapes_still_carry_over(tmp_path: Path) -> None:
    """The validated store gives a new empty Validated each call when there is no
    file: equal evidence is the same input."""
    from stormdeck.advisors.validated import ValidatedStore

    Hot.calls = 0
    settings = {Hot.id: RuleSettings(for_seconds=0, warmup_samples=1)}
    engine = Engine(settings, rules=[Hot], validated=ValidatedStore(tmp_path / "none.json"))
    run(engine, scrapes([0.95, 0.5]), Hot.id)
    assert Hot.calls == 2


class HotDaemons(Hot):
    id = "test.hot_daemons"
    reads = ("daemons",)


def test_a_rule_of_the_daemons_alone_carries_over_while_this_hosts_figures_move() -> None:
    """This host's own source brings new host figures every second: a rule that reads
    only the daemons still judges once a scrape; one that reads everything, each tick."""
    HotDaemons.calls = Hot.calls = 0
    snaps = [replace(s, hosts={k: replace(h, cpu_busy=(i % 7) / 10)
                               for k, h in s.hosts.items()})
             for i, s in enumerate(scrapes([0.95, 0.5]))]
    assert snaps[0].hosts, "the lab capture has this host's figures"
    settings = {r.id: RuleSettings(for_seconds=5, warmup_samples=1) for r in (Hot, HotDaemons)}
    engine = Engine(settings, rules=[Hot, HotDaemons])
    states = run(engine, snaps, HotDaemons.id)
    assert HotDaemons.calls == 2 and Hot.calls == 2 * SCRAPE
    assert states == ["pending"] * 5 + ["firing"] * 10 + [None] * 15
