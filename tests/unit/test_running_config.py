"""What the OSDs run with (`config show`): the parser on the lab's answers, the sampler's
order at scale, and the rules that judge running values, not the database's alone.

tests/data/pacific/config_show/ holds `ceph config show osd.N -f json` from a Pacific
16.2.15 lab whose ceph.conf sets `osd memory target = 939524096`, after `ceph config set
osd osd_memory_target 21474836480` (osd.0: the file outranks the database) and `ceph tell
osd.1 config set osd_memory_target 10737418240` (osd.1: the runtime value outranks both).
The answer's shape is the mgr's (src/mgr/DaemonServer.cc, "config show"): a list of
{name, value, source[, overrides]}, non-default values only.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from stormdeck.advisors.rules.memory import OsdMemory
from stormdeck.advisors.rules.running import RunningDiffers
from stormdeck.collectors.ceph.connection import CommandError, NoAnswer
from stormdeck.collectors.ceph.running import RunningSampler, parse_config_show, read_running
from stormdeck.collectors.model import RunningValue, Snapshot
from tests.captured import firing, history, lab_snapshot, run, with_cluster

DATA = Path(__file__).parents[1] / "data" / "pacific" / "config_show"
NAMES = ("osd_memory_target", "osd_max_backfills")


def shown(name: str) -> list:
    return json.loads((DATA / name).read_text())


def test_the_runtime_value_outranks_the_file_and_the_database() -> None:
    got = parse_config_show(shown("osd.1-override.json"), NAMES, now=5.0)
    mem = got["osd_memory_target"]
    assert (mem.value, mem.source) == ("10737418240", "override")
    assert mem.overrides == (("mon", "21474836480"), ("file", "939524096"))
    # Not listed: the OSD runs with Ceph's default.
    assert got["osd_max_backfills"] == RunningValue(None, "default", read_at=5.0)


def test_the_file_outranks_the_database() -> None:
    mem = parse_config_show(shown("osd.0-file-over-mon.json"), NAMES, 0.0)["osd_memory_target"]
    assert (mem.value, mem.source, mem.overrides) == \
        ("939524096", "file", (("mon", "21474836480"),))


def test_a_malformed_answer_is_refused_not_guessed() -> None:
    for bad in ({"name": "x"}, "text", None):
        try:
            parse_config_show(bad, NAMES, 0.0)
        except ValueError as exc:
            assert "expected a list" in str(exc)
        else:
            raise AssertionError(f"{bad!r} accepted")


def test_one_osd_per_host_first_then_the_rest_and_a_down_one_forgotten() -> None:
    osds = {f"osd.{i}": f"h{i // 4}" for i in range(12)}  # 3 hosts of 4
    s = RunningSampler(NAMES, per_poll=4, every=60.0)
    first = s.due(osds, 0.0)
    assert first == ["osd.0", "osd.4", "osd.8", "osd.1"]
    for o in first:
        s.take(o, {}, 0.0)
    assert s.due(osds, 5.0) == ["osd.2", "osd.3", "osd.5", "osd.6"]
    for o in ("osd.2", "osd.3", "osd.5", "osd.6", "osd.7", "osd.9", "osd.10", "osd.11"):
        s.take(o, {}, 5.0)
    assert s.due(osds, 10.0) == []  # every OSD read within `every`
    assert s.due(osds, 61.0) == ["osd.0", "osd.1", "osd.4", "osd.8"]  # oldest first
    # An OSD that went down forgets what it ran: read anew once it is back.
    version = s.version
    s.due({o: h for o, h in osds.items() if o != "osd.9"}, 62.0)
    assert "osd.9" not in s.read and s.version > version


def test_a_failed_read_keeps_the_last_value_and_a_dead_mgr_stops_the_round() -> None:
    s = RunningSampler(NAMES, per_poll=4, pace=0.0)
    osds = {"osd.0": "h", "osd.1": "h", "osd.2": "h"}
    answers = {"osd.0": json.dumps(shown("osd.0-file-over-mon.json")).encode()}
    errors: list[str] = []

    def send(who: str) -> bytes:
        if who == "osd.1":
            raise CommandError("config show: no config state for daemon osd.1")
        if who == "osd.2":
            raise NoAnswer("config show: timed out")
        return answers[who]

    read_running(s, osds, 0.0, send, errors.append)
    above, read, why = s.by_option()
    assert read == {"osd.0"}
    # Only what outranks the database is kept: osd.0's ceph.conf target.
    assert above["osd_memory_target"]["osd.0"].value == "939524096"
    assert above["osd_max_backfills"] == {}
    assert why in ("its daemon has reported no config to the mgr yet",
                   "config show did not answer (config show: timed out)")
    assert errors == ["running values not read: config show did not answer (config show: "
                      "timed out)"]
    # Later, osd.0's read fails: its last value stands.
    version = s.version
    s.every = 0.0
    read_running(s, {"osd.0": "h"}, 70.0,
                 lambda who: (_ for _ in ()).throw(NoAnswer("gone")), errors.append)
    above, read, why = s.by_option()
    assert above["osd_memory_target"]["osd.0"].value == "939524096" and read == {"osd.0"}
    assert why == "config show did not answer (gone)" and s.version > version


def test_a_read_that_finds_what_was_known_moves_nothing() -> None:
    """At 10,000 OSDs a round re-reads what was known: the rules' inputs stay the same
    objects, and the rules do not judge again."""
    s = RunningSampler(NAMES, per_poll=1, pace=0.0, every=0.0)
    answer = parse_config_show(shown("osd.0-file-over-mon.json"), NAMES, 0.0)
    s.take("osd.0", answer, 0.0)
    version, first = s.version, s.by_option()
    s.take("osd.0", parse_config_show(shown("osd.0-file-over-mon.json"), NAMES, 9.0), 9.0)
    assert s.version == version
    s.take("osd.0", parse_config_show(shown("osd.1-override.json"), NAMES, 12.0), 12.0)
    assert s.version > version and s.by_option() != first


def ran(value: str, source: str, *over: tuple[str, str], osds: tuple[str, ...] = ()
        ):
    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        opt = s.cluster.config["osd_memory_target"]
        who = osds or tuple(d for d in s.daemons if d.startswith("osd."))
        running = {d: RunningValue(value, source, over, read_at=0.0) for d in who}
        host = next(iter(s.hosts))
        s = replace(s, hosts={**s.hosts, host: replace(s.hosts[host], mem_total=24 << 30)})
        return with_cluster(s, running_read=frozenset(who), config={
            **s.cluster.config, "osd_memory_target": replace(opt, running=running)})
    return edit


def test_targets_set_at_runtime_are_judged_and_named() -> None:
    """10 GiB each by `ceph tell`, on a host of 24 GiB; the database says the default."""
    found = run(history(3, edit=ran("10737418240", "override")), rules=(OsdMemory,))
    (f,) = [f for f in found if f.target.startswith("host ")]
    assert "30.0 GiB" in f.summary and "3 set at runtime" in f.summary, f.summary
    assert any("config unset osd_memory_target" in p for p in f.procedure), f.procedure


def test_the_database_alone_does_not_claim_what_the_osds_run_with() -> None:
    """The database says 20 GiB; ceph.conf's 896 MiB outranks it on every OSD."""
    def edit(s: Snapshot, i: int) -> Snapshot:
        s = ran("939524096", "file", ("mon", "21474836480"))(s, i)
        assert s.cluster is not None
        opt = s.cluster.config["osd_memory_target"]
        return with_cluster(s, config={**s.cluster.config, "osd_memory_target": replace(
            opt, values={"osd": "21474836480"})})

    found = run(history(3, edit=edit), rules=(OsdMemory, RunningDiffers))
    assert not [f for f in found if f.rule == "ceph.osd.memory" and f.state == "firing"]
    (f,) = firing(found, "ceph.config.running_differs")
    assert f.target == "osd_memory_target (above the database)"
    assert "939524096 from file" in f.summary and "21474836480" in f.summary, f.summary


def test_an_osd_not_read_yet_is_said_so_with_the_reason() -> None:
    def edit(s: Snapshot, i: int) -> Snapshot:
        s = ran("10737418240", "override", osds=("osd.0", "osd.1"))(s, i)
        assert s.cluster is not None
        return with_cluster(s, running_error="config show did not answer (timed out)")

    found = run(history(3, edit=edit), rules=(OsdMemory,))
    (f,) = [f for f in found if f.target.startswith("host ")]
    assert "1 not read yet (`config show`), the config database's value taken (config " \
        "show did not answer (timed out))" in f.summary, f.summary
    assert "2 set at runtime" in f.summary


def test_the_sleeps_mclock_forces_at_every_start_are_not_a_runtime_value() -> None:
    """Tentacle 20.2.4 (tests/data/tentacle/config_show/osd.0-mclock.json, from its lab):
    under mClock the OSD itself sets every sleep to 0 with source "override"
    (OSD::maybe_override_sleep_options_for_qos), at each start: no operator's value,
    and no restart reverts it."""
    rows = json.loads((DATA.parents[1] / "tentacle" / "config_show" /
                       "osd.0-mclock.json").read_text())
    base = lab_snapshot(release="tentacle")
    assert base.cluster is not None
    names = tuple(base.cluster.config)
    got = parse_config_show(rows, names, 0.0)
    assert got["osd_recovery_sleep_hdd"].source == "override"

    def edit(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        config = dict(s.cluster.config)
        for name, opt in config.items():
            # What the lab's database holds for the sleeps (it sets them, as an operator
            # would under wpq): the OSDs still run 0.
            values = {"osd": "0.1"} if "sleep" in name else opt.values
            osds = frozenset(d for d in s.daemons if d.startswith("osd."))
            config[name] = replace(opt, values=values, running={
                d: got[name] for d in osds if got[name].source == "override"})
        return with_cluster(s, config=config, running_read=osds)

    found = run(history(3, base=base, edit=edit), rules=(RunningDiffers,))
    assert not firing(found, "ceph.config.running_differs"), [f.summary for f in found]


def test_running_values_survive_a_recording_and_the_snapshots_json() -> None:
    """A replay judges what the live console judged: the running values and the OSDs read
    are recorded and read back as they were (the set as a sorted list), and `snapshot
    --json` writes them."""
    from stormdeck.collectors.model import ConfigOption, to_json_dict
    from stormdeck.collectors.recording import Decoder, Encoder, decode, encode

    opt = ConfigOption("osd_memory_target", True, values={"osd": "21474836480"},
                       running={"osd.1": RunningValue("10737418240", "override",
                                                      (("file", "939524096"),), 3.0)})
    assert decode(ConfigOption, json.loads(json.dumps(encode(opt)))) == opt
    snap = lab_snapshot()
    assert snap.cluster is not None
    snap = with_cluster(snap, config={**snap.cluster.config, opt.name: opt},
                        running_read=frozenset({"osd.0", "osd.1", "osd.2", "osd.3", "osd.4"}),
                        running_error="config show did not answer (gone)")
    back = Decoder().snapshot(json.loads(json.dumps(Encoder().snapshot(snap))))
    assert back.cluster is not None and back.cluster.config[opt.name] == opt
    assert (back.cluster.running_read, back.cluster.running_error) == \
        (snap.cluster.running_read, snap.cluster.running_error)
    doc = json.loads(json.dumps(to_json_dict(snap), allow_nan=False))
    assert doc["cluster"]["running_read"] == ["osd.0", "osd.1", "osd.2", "osd.3", "osd.4"]
    assert doc["cluster"]["config"][opt.name]["running"]["osd.1"]["source"] == "override"


def test_a_daemon_the_mgr_has_no_report_of_is_unread_again() -> None:
    """ENOENT "no config state" after a value was read: the daemon restarted (its runtime
    values went with it), so its old values are dropped, not kept as if still run."""
    s = RunningSampler(NAMES, per_poll=1, pace=0.0, every=0.0)
    s.take("osd.1", parse_config_show(shown("osd.1-override.json"), NAMES, 0.0), 0.0)
    read_running(s, {"osd.1": "h"}, 9.0, lambda who: (_ for _ in ()).throw(
        CommandError("config show: no config state for daemon osd.1")), lambda _e: None)
    above, read, why = s.by_option()
    assert above["osd_memory_target"] == {} and read == frozenset()
    assert why == "its daemon has reported no config to the mgr yet"


def test_a_change_the_osds_would_not_run_is_not_proposed() -> None:
    """The scrub rule proposes `ceph config set osd osd_scrub_sleep 0.1`: where every up
    OSD was read and runs the option from ceph.conf, which outranks the database, the
    change would do nothing, and the finding says so in place of proposing it. One OSD
    that takes the database's value, or one not read yet, is enough to propose it."""
    def edit(few: tuple[str, ...], read: tuple[str, ...]):
        def e(s: Snapshot, i: int) -> Snapshot:
            s = with_cluster(s, pg_states={"active+clean": 30, "active+clean+scrubbing+deep": 3})
            assert s.cluster is not None
            opt = s.cluster.config["osd_scrub_sleep"]
            return with_cluster(s, running_read=frozenset(read), config={
                **s.cluster.config, "osd_scrub_sleep": replace(opt, running={
                    d: RunningValue("0", "file", read_at=0.0) for d in few})})
        return e

    every = tuple(d for d in lab_snapshot().daemons if d.startswith("osd."))
    (f,) = firing(run(history(41, edit=edit(every, every))), "ceph.scrub.during_load")
    assert f.changes == ()
    assert any("run osd_scrub_sleep from ceph.conf, which outranks the config database"
               in n for n in f.notes), f.notes
    for few, read in ((every[:-1], every), (every[:-1], every[:-1])):
        (g,) = firing(run(history(41, edit=edit(few, read))), "ceph.scrub.during_load")
        assert [c.key for c in g.changes] == ["osd_scrub_sleep"], (few, read)


def test_the_database_is_read_with_its_masks() -> None:
    """A value under the OSD's device class or host outranks the plain section's, as in
    Ceph's config map: `osd/class:ssd` is what an SSD OSD gets, not `osd`'s."""
    from stormdeck.advisors.rules.running import database_value
    from stormdeck.collectors.model import ConfigOption

    opt = ConfigOption("osd_memory_target", True, default="4294967296",
                       values={"osd": "1G", "osd/class:ssd": "8G", "global/host:a": "2G"})
    assert database_value(opt, "osd.0", "b", "ssd") == ("8G", True)
    assert database_value(opt, "osd.0", "b", "hdd") == ("1G", True)
    bare = replace(opt, values={"global/host:a": "2G"})
    assert database_value(bare, "osd.0", "a", "hdd") == ("2G", True)
    assert database_value(bare, "osd.0", "b", "hdd") == ("4294967296", False)


def test_a_sweep_publishes_the_osds_read_once_a_minute_and_values_at_once() -> None:
    """At 10,000 OSDs a sweep takes hours: OSDs read with nothing above the database move
    only the set read, which is published once a minute past the first few rounds; a
    value above the database is published in the round that found it."""
    s = RunningSampler(NAMES, per_poll=4, pace=0.0)
    osds = {f"osd.{i}": f"h{i // 10}" for i in range(100)}
    plain = json.dumps([]).encode()
    versions = []
    for t in range(0, 50, 5):
        read_running(s, osds, float(t), lambda who: plain, lambda _e: None)
        versions.append(s.version)
    # The first three rounds (12 OSDs) at once; then nothing new until a minute has passed.
    assert versions[:3] == [1, 2, 3] and set(versions[3:]) == {3}, versions
    read_running(s, osds, 71.0, lambda who: plain, lambda _e: None)
    assert s.version == 4 and len(s.by_option()[1]) == 44
    told = json.dumps(shown("osd.1-override.json")).encode()
    read_running(s, osds, 76.0, lambda who: told, lambda _e: None)
    assert s.version > 4 and len(s.by_option()[0]["osd_memory_target"]) == 4


def scrub_history(running: dict[str, RunningValue], read: tuple[str, ...],
                  database: str | None = None):
    """The lab's snapshots with scrubs under load (the scrub rule's case on wpq), the OSDs
    in `read` read, `running` what they run from above the database, and `database` the
    value `ceph config set osd osd_scrub_sleep` stored (None: unset, the default 0)."""
    def e(s: Snapshot, i: int) -> Snapshot:
        s = with_cluster(s, pg_states={"active+clean": 30, "active+clean+scrubbing+deep": 3})
        assert s.cluster is not None
        opt = s.cluster.config["osd_scrub_sleep"]
        values = {**opt.values, "osd": database} if database is not None else opt.values
        return with_cluster(s, running_read=frozenset(read), config={
            **s.cluster.config, "osd_scrub_sleep": replace(opt, running=running,
                                                            values=values)})
    return run(history(41, edit=e))


EVERY = tuple(d for d in lab_snapshot().daemons if d.startswith("osd."))


def test_the_scrub_rule_judges_the_sleep_the_osds_run_not_the_databases() -> None:
    """Every OSD told `config set osd_scrub_sleep 0.1` at runtime over a database that
    holds nothing (0): they run 0.1, and the rule is quiet. The other way round (the
    database says 0.1, the OSDs were told 0): it speaks, names the runtime layer, and
    proposes no `ceph config set` that would change nothing, but the `config unset`."""
    told = {d: RunningValue("0.100000", "override", read_at=0.0) for d in EVERY}
    assert firing(scrub_history(told, EVERY), "ceph.scrub.during_load") == []
    zero = {d: RunningValue("0.000000", "override", read_at=0.0) for d in EVERY}
    (f,) = firing(scrub_history(zero, EVERY, database="0.1"), "ceph.scrub.during_load")
    assert f.changes == ()
    assert "osd_scrub_sleep is 0.000000" in f.summary
    assert "set at runtime" in f.summary and "the config database gives 0.1" in f.summary
    assert "a restart reverts it" in f.summary, f.summary
    assert any(f"`ceph tell osd.N config unset osd_scrub_sleep` on {', '.join(EVERY)}" in p
               for p in f.procedure), f.procedure


def test_a_sample_of_the_osds_is_named_not_taken_for_all() -> None:
    """Two OSDs of three read, both told 0.1 at runtime: what the third runs is not known,
    so the database's 0 is judged, and the finding names the two that run otherwise."""
    told = {d: RunningValue("0.100000", "override", read_at=0.0) for d in EVERY[:2]}
    (f,) = firing(scrub_history(told, EVERY[:2]), "ceph.scrub.during_load")
    assert [c.key for c in f.changes] == ["osd_scrub_sleep"]
    assert f"{EVERY[0]}, {EVERY[1]} run osd_scrub_sleep = 0.100000 set at runtime" in \
        f.summary, f.summary
    assert "(2 of 2 OSDs read)" in f.summary


def test_op_threads_are_judged_as_each_osd_runs_them() -> None:
    """An OSD started with `osd op num shards = 32` in its ceph.conf runs 32 shards
    whatever the database says: effective_per_osd answers with the file's value for it and
    the database's for the others."""
    from stormdeck.advisors.rules.base import Context

    snap = lab_snapshot()
    assert snap.cluster is not None
    opt = snap.cluster.config["osd_op_num_shards"]
    opt = replace(opt, running={EVERY[0]: RunningValue("32", "file", read_at=0.0)},
                  values={**opt.values, "osd": "8"})
    snap = with_cluster(snap, running_read=frozenset(EVERY),
                        config={**snap.cluster.config, opt.name: opt})
    ctx = Context(snap, [snap], {})
    per = ctx.effective_per_osd("osd_op_num_shards")
    assert per(EVERY[0]) == "32" and per(EVERY[1]) == "8"
    assert ctx.effective("osd_op_num_shards", EVERY[0]) == "32"
    assert ctx.effective("osd_op_num_shards") == "8", "one OSD is not all of them"
    assert ctx.database("osd_op_num_shards", EVERY[0]) == "8"
    assert ctx.provenance("osd_op_num_shards", EVERY[0]) == (
        f"{EVERY[0]} runs osd_op_num_shards = 32 from ceph.conf; the config database "
        "gives 8")


def test_a_database_value_the_osd_takes_only_at_a_restart_is_not_taken_for_run() -> None:
    """`ceph config set osd osd_op_num_shards 4` on a running Pacific 16.2.15 lab (the
    option is read at start only): `config show osd.0` says it runs Ceph's default 0 and
    "ignores": "mon" (tests/data/pacific/config_show/osd.0-ignores-mon.json, captured
    2026-12-04). The rules judge the 0 it runs, and say the database's 4 waits for a
    restart."""
    from stormdeck.advisors.rules.base import Context

    got = parse_config_show(shown("osd.0-ignores-mon.json"), ("osd_op_num_shards",), 1.0)
    shards = got["osd_op_num_shards"]
    assert (shards.value, shards.source, shards.ignores) == ("0", "default", ("mon",))
    assert shards.wins_over_database
    s = RunningSampler(("osd_op_num_shards",), per_poll=1, pace=0.0)
    s.take("osd.0", got, 1.0)
    assert s.by_option()[0]["osd_op_num_shards"] == {"osd.0": shards}
    snap = lab_snapshot()
    assert snap.cluster is not None
    opt = replace(snap.cluster.config["osd_op_num_shards"], values={"osd": "4"},
                  running={"osd.0": shards})
    snap = with_cluster(snap, running_read=frozenset({"osd.0"}),
                        config={**snap.cluster.config, opt.name: opt})
    ctx = Context(snap, [snap], {})
    assert ctx.effective("osd_op_num_shards", "osd.0") == "0"
    assert ctx.provenance("osd_op_num_shards", "osd.0") == (
        "osd.0 runs osd_op_num_shards = 0 as Ceph's default; the config database gives 4, "
        "which it reads only at start: a restart takes it")


def test_a_database_value_waiting_for_a_restart_is_an_info_finding() -> None:
    """The database says osd_op_num_shards 4, the OSDs read run 0 and ignore it (the
    captured answer): ceph.config.running_differs says a restart is what it waits for."""
    shards = parse_config_show(shown("osd.0-ignores-mon.json"), ("osd_op_num_shards",),
                               0.0)["osd_op_num_shards"]

    def e(s: Snapshot, i: int) -> Snapshot:
        assert s.cluster is not None
        opt = replace(s.cluster.config["osd_op_num_shards"], values={"osd": "4"},
                      running={d: shards for d in EVERY})
        return with_cluster(s, running_read=frozenset(EVERY),
                            config={**s.cluster.config, opt.name: opt})

    found = [f for f in firing(run(history(5, edit=e)), "ceph.config.running_differs")
             if f.target == "osd_op_num_shards (awaits a restart)"]
    assert len(found) == 1, found
    assert "the database's value waits for a restart" in found[0].summary, found[0].summary
