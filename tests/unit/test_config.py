"""The config file's clusters, and the console's one tab per cluster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from stormdeck.base.errors import UserError
from stormdeck.cli import build_parser
from stormdeck.config import load_clusters
from stormdeck.tui.app import ClusterTab, StormdeckApp
from stormdeck.tui.feed import Frame, StaticFeed
from tests.captured import lab_snapshot, with_cluster

GOOD = """
[clusters.prod]
conf = "{d}/prod.conf"
prometheus = "http://127.0.0.1:9090"
read_only = true

[clusters.lab]
conf = "{d}/lab.conf"
curve_mds = ["127.0.0.1:6700", "127.0.0.1:6701"]
host = false
timeout = 5
"""


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "prod.conf").write_text("[global]\n")
    (tmp_path / "lab.conf").write_text("[global]\n")
    path = tmp_path / "config.toml"
    path.write_text(text.replace("{d}", str(tmp_path)))
    return path


def test_clusters_come_with_their_sources_and_read_only(tmp_path: Path) -> None:
    prod, lab = load_clusters(write(tmp_path, GOOD))
    assert (prod.name, prod.read_only, lab.read_only) == ("prod", True, False)
    assert prod.sources.prometheus == "http://127.0.0.1:9090"
    assert lab.sources.curve_mds == "127.0.0.1:6700,127.0.0.1:6701"
    assert lab.sources.no_host is True and lab.sources.timeout == 5


@pytest.mark.parametrize("text, words", [
    ("[clusters.a]\nconff = 'x'\n", "has no setting 'conff'"),
    ("[clusters.a]\nread_only = 'yes'\n",
     r"\[clusters.a\] read_only = 'yes' is not allowed: it takes true or false$"),
    ("[clusters.a]\ntimeout = true\n",
     r"\[clusters.a\] timeout = True is not allowed: it takes a number$"),
    ("[clusters.a]\nprometheus_scrape_interval = 0\n",
     r"\[clusters.a\] prometheus_scrape_interval = 0 is not allowed: it takes a number of "
     "seconds above 0$"),
    ("[clusters\n", "not valid TOML"),
    ("[other]\n", "unknown table 'other'"),
    ("clusters = 3\n", "must be tables"),
    ('[clusters."a\\nb"]\nread_only = "x"\n', r"\[clusters.a\\x0ab\] read_only = 'x' is not"),
])
def test_a_bad_config_file_is_one_sentence(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=words):
        load_clusters(path)
    with pytest.raises(UserError, match="no such config file"):
        load_clusters(tmp_path / "missing.toml")


def app_for(tmp_path: Path, *argv: str):
    from stormdeck.cli_watch import build_app

    args = build_parser().parse_args(["watch", *argv])
    return build_app(args)


def test_watch_opens_a_tab_per_cluster_each_read_only_as_configured(tmp_path: Path,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("STORMDECK_READ_ONLY", raising=False)
    monkeypatch.delenv("CEPH_CONF", raising=False)
    path = write(tmp_path, GOOD)
    app = app_for(tmp_path, "--config", str(path))
    assert [(t.name, t.read_only) for t in app.tabs] == [("prod", True), ("lab", False)]
    assert app.tabs[0].feed is not app.tabs[1].feed
    assert app.tabs[0].mutes.path.name == "mutes.json"  # one file: a mute names its fsid
    only = app_for(tmp_path, "--config", str(path), "--only", "lab")
    assert [t.name for t in only.tabs] == ["lab"]
    forced = app_for(tmp_path, "--config", str(path), "--read-only")
    assert all(t.read_only for t in forced.tabs)
    # A source on the command line wins over the file: one tab, that source.
    single = app_for(tmp_path, "--config", str(path), "-c", str(tmp_path / "lab.conf"))
    assert len(single.tabs) == 1 and single.tabs[0].name == ""
    with pytest.raises(UserError, match="no cluster 'nope'"):
        app_for(tmp_path, "--config", str(path), "--only", "nope")
    with pytest.raises(UserError, match="--record records one cluster"):
        app_for(tmp_path, "--config", str(path), "--record", str(tmp_path / "r"))
    for tab in app.tabs + only.tabs + forced.tabs + single.tabs:
        tab.feed.hub.stop(wait=0)


@pytest.mark.asyncio
async def test_switching_tabs_shows_that_clusters_frames_and_acts_on_it() -> None:
    def frames(fsid: str) -> list[Frame]:
        snap = with_cluster(lab_snapshot(), fsid=fsid)
        return [Frame(replace(snap, time=snap.time + i), (), (snap,)) for i in range(2)]

    made: list[str] = []
    tabs = [ClusterTab(name, StaticFeed(frames(fsid)), executor_factory=lambda n=name:
                       made.append(n), read_only=ro)
            for name, fsid, ro in (("a", "aaaa-1", False), ("b", "bbbb-2", True))]
    app = StormdeckApp(tabs[0].feed, tabs=tabs)
    async with app.run_test() as pilot:
        assert app.frame.snapshot.cluster.fsid == "aaaa-1"
        assert "[RO]" not in app.status_line(app.frame).plain
        await pilot.press("greater_than_sign")
        await pilot.pause()
        assert app.frame.snapshot.cluster.fsid == "bbbb-2" and app.cluster_name == "b"
        assert "[RO]" in app.status_line(app.frame).plain
        app.executor_factory()
        await pilot.press("less_than_sign")
        await pilot.pause()
        assert app.frame.snapshot.cluster.fsid == "aaaa-1"
        app.executor_factory()
    assert made == ["b", "a"]


# ---- read-only wherever it is set ----------------------------------------------------------

FSID = "8f1c2a7e-3b5d-4e6f-9a0b-1c2d3e4f5a6b"


def ro_config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "ro.toml"
    path.write_text(f"[clusters.prod]\n{body}read_only = true\n\n"
                    f'[clusters.lab]\nconf = "{tmp_path / "lab.conf"}"\n')
    return path


def parsed(*argv: str):
    return build_parser().parse_args(list(argv))


@pytest.fixture
def confs(tmp_path: Path, monkeypatch) -> Path:
    for k in ("STORMDECK_READ_ONLY", "CEPH_CONF", "CEPH_ARGS", "STORMDECK_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    # As cephadm writes it: every line indented with a tab.
    (tmp_path / "prod.conf").write_text(f"# minimal ceph.conf\n[global]\n\tfsid = "
                                        f"{FSID.upper()}  ; the cluster\n\tmon_host = x\n")
    (tmp_path / "lab.conf").write_text("[global]\nmon host = y\n")
    (tmp_path / "link.conf").symlink_to(tmp_path / "prod.conf")
    return tmp_path


def test_a_read_only_cluster_holds_when_its_conf_is_named_on_the_command_line(
        confs: Path) -> None:
    from stormdeck.config import choose_cluster, read_only_cluster

    path = ro_config(confs, f'conf = "{confs / "prod.conf"}"\n')
    for conf in (confs / "prod.conf", confs / "link.conf",
                 Path(str(confs) + "/./sub/../prod.conf")):
        (confs / "sub").mkdir(exist_ok=True)
        args = parsed("apply", "p.json", "--config", str(path), "-c", str(conf))
        assert not args.read_only
        choose_cluster(args)
        assert args.read_only, conf
        assert "cluster 'prod' is read_only" in read_only_cluster(args)
    for command in (["undo"], ["validate"]):
        args = parsed(*command, "-c", str(confs / "link.conf"))
        assert read_only_cluster(args, config=path), command
    other = parsed("apply", "p.json", "--config", str(path), "-c", str(confs / "lab.conf"))
    choose_cluster(other)
    assert not other.read_only and read_only_cluster(other) is None


def test_ceph_args_naming_a_read_only_clusters_conf_is_read_only(confs: Path,
                                                                 monkeypatch) -> None:
    from stormdeck.config import choose_cluster

    path = ro_config(confs, f'conf = "{confs / "prod.conf"}"\n')
    # CEPH_ARGS wins over the command line, as for `ceph`: its conf is the one used.
    monkeypatch.setenv("CEPH_ARGS", f"--conf {confs / 'link.conf'}")
    args = parsed("undo", "--config", str(path), "-c", str(confs / "lab.conf"))
    choose_cluster(args)
    assert args.read_only


def test_a_read_only_cluster_holds_by_its_fsid_from_the_key_or_its_conf(confs: Path) -> None:
    from stormdeck.config import load_clusters, read_only_cluster, read_only_fsids

    args = parsed("apply", "p.json", "-c", str(confs / "lab.conf"))
    # The fsid its conf records (any case, a tab before it).
    by_conf = ro_config(confs, f'conf = "{confs / "prod.conf"}"\n')
    assert read_only_fsids(by_conf)
    assert read_only_cluster(args, config=by_conf) is None
    assert "is its fsid" in read_only_cluster(args, fsid=FSID, config=by_conf)
    assert read_only_cluster(args, fsid=FSID.replace("8f", "9f"), config=by_conf) is None
    # The table's own fsid key, when the conf records none.
    by_key = ro_config(confs, f'conf = "/nowhere/prod.conf"\nfsid = "{FSID.upper()}"\n')
    assert load_clusters(by_key)[0].fsid == FSID
    assert "is its fsid" in read_only_cluster(args, fsid=FSID, config=by_key)
    # Neither: only the conf can name it, and nothing asks the cluster.
    assert not read_only_fsids(ro_config(confs, 'conf = "/nowhere/prod.conf"\n'))
    with pytest.raises(UserError, match=r"fsid = 'tomorrow' is not allowed: it takes a "
                                        "cluster's fsid"):
        load_clusters(ro_config(confs, 'fsid = "tomorrow"\n'))


def test_a_curve_or_prometheus_cluster_does_not_claim_the_default_ceph_conf(
        confs: Path) -> None:
    from stormdeck.config import read_only_cluster

    path = ro_config(confs, 'curve_mds = ["127.0.0.1:6700"]\n')
    assert read_only_cluster(parsed("apply", "p.json", "-c", str(confs / "prod.conf")),
                             config=path) is None


def test_the_console_tab_of_a_read_only_clusters_conf_is_read_only(confs: Path,
                                                                   monkeypatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(confs / "state"))
    path = ro_config(confs, f'conf = "{confs / "prod.conf"}"\n')
    app = app_for(confs, "--config", str(path), "-c", str(confs / "link.conf"), "--no-host")
    other = app_for(confs, "--config", str(path), "-c", str(confs / "lab.conf"), "--no-host")
    try:
        assert [t.read_only for t in app.tabs] == [True]
        assert [t.read_only for t in other.tabs] == [False]
    finally:
        for tab in app.tabs + other.tabs:
            tab.feed.hub.stop(wait=0)


def test_validate_in_read_only_runs_no_step_that_writes() -> None:
    """No cluster at all (admin None): a step that wrote would fail on it."""
    from stormdeck.advisors.validate import runner
    from stormdeck.advisors.validate.context import Ctx, Options, scratch_pool

    options = Options(conf=None, read_only=True, cpu_sweep=True)
    run = runner.Validation(options, None, lab_snapshot(), skip=["hosts", "settings"])
    report = run.run()
    steps = {s.id: s for s in report.steps}
    for step in ("curve", "peering", "cpu"):
        assert steps[step].status == "skipped" and steps[step].error is None, step
        assert "read-only mode: not run" in steps[step].verdicts[0].summary
    assert report.exit_code() == 0 and not report.cleanup_done
    assert "read-only mode: not run, as it creates a pool" in runner.to_markdown(report)
    with pytest.raises(UserError, match="read-only mode: validate creates no pool"), \
            scratch_pool(Ctx(options=options, admin=None, snapshot=lab_snapshot()), "x", 8):
        pass
