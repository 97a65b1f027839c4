"""A source declared in one module and registered once reaches every surface that lists sources."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stormdeck.advisors.validate import runner
from stormdeck.assembly import validate_sources
from stormdeck.base.errors import UserError
from stormdeck.cli import main
from stormdeck.collectors import registry
from stormdeck.collectors.model import Cluster, Partial, Snapshot, SourceHealth
from stormdeck.config import load_clusters, names_sources
from stormdeck.sources import build_sources, source_parser
from stormdeck.tui.feed import Frame, stale_part
from stormdeck.tui.stale import note, stale_parts
from tests import throwaway_source
from tests.throwaway_source import FAIL, NAME


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Nothing of this machine's may name a source or a cluster: only the test's options do.
    for var in ("CEPH_ARGS", "CEPH_CONF", "STORMDECK_CONFIG", "STORMDECK_READ_ONLY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path


@pytest.fixture
def throwaway(env: Path) -> Iterator[Path]:
    with registry.registered(throwaway_source.DECLARATION):
        yield env


def _parsed(*argv: str) -> argparse.Namespace:
    return source_parser().parse_args(list(argv))


def _frame(late: str) -> Frame:
    """A frame in which `late` last answered 30 s ago and every other source is current."""
    now = 1_000.0
    sources = {n: SourceHealth(n, ok=True, last_success=now)
               for n in ("ceph", "host", "prometheus")}
    sources[late] = SourceHealth(late, ok=False, last_success=now - 30, error="late",
                                 stale=True)
    snap = Snapshot(time=now, cluster=None, daemons={}, disks={}, sources=sources)
    return Frame(snapshot=snap, findings=(), history=(snap,))


def test_the_consoles_part_map_marks_its_parts(throwaway: Path) -> None:
    frame = _frame(NAME)
    assert stale_part(frame, "throwaway_part") == pytest.approx(30)
    assert stale_part(frame, "disks", {NAME: 30.0}) == 30.0
    assert set(stale_parts(frame, ["cluster", "hosts"])) == {"cluster"}
    assert note(frame, ["disks"]).startswith(f"STALE: {NAME} last answered 30 s ago")
    # Merged last, it is named after the sources that fill the part before it.
    assert registry.part_sources()["cluster"] == ("ceph", "prometheus", NAME)


def test_check_counts_it_as_the_cluster(throwaway: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--throwaway-url", "ok", "--no-host", "--for", "0",
                 "--interval", "0.2", "--timeout", "2"])
    err = capsys.readouterr().err
    # A source check did not count as the cluster would leave it "could not read": exit 3.
    assert code != 3, err
    assert "could not read the cluster" not in err


def test_snapshot_says_the_cluster_went_unread_when_it_fails(
        throwaway: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["snapshot", "--throwaway-url", FAIL, "--no-host", "--interval", "0.2",
                 "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert f"could not read the cluster ({NAME}: " in err


def test_its_options_are_the_config_files_keys(throwaway: Path) -> None:
    path = throwaway / "config.toml"
    path.write_text('[clusters.t]\nthrowaway_url = "ok"\n')
    (cluster,) = load_clusters(path)
    assert cluster.sources.throwaway_url == "ok"
    # Named on the command line, it keeps the config file's clusters out.
    assert names_sources(_parsed("--throwaway-url", "ok"))
    assert not names_sources(_parsed())
    # And the config file's cluster builds it, after the built-in ones.
    built = build_sources(cluster.sources)
    try:
        assert [s.name for s in built] == ["host", NAME]
    finally:
        for s in built:
            s.close()


def test_validate_reads_it_and_needs_it(throwaway: Path) -> None:
    made = validate_sources(_parsed("--throwaway-url", "ok"))
    try:
        assert [s.name for s in made] == ["ceph", "host", NAME]
    finally:
        for s in made:
            s.close()

    class Ceph:
        name = "ceph"

        def poll(self) -> Partial:
            return Partial(source="ceph", time=time.time(), cluster=Cluster(fsid="f"))

        def close(self) -> None:
            pass

    # Ceph answered, so only the declaration can tell validate the throwaway one must too.
    with pytest.raises(UserError, match=f"{NAME}: .*refuses"):
        runner.take_snapshot([Ceph(), throwaway_source.make(_parsed("--throwaway-url",
                                                                    FAIL))], timeout=2)


def test_unregistered_it_is_gone_from_every_surface(env: Path) -> None:
    with registry.registered(throwaway_source.DECLARATION):
        assert NAME in registry.cluster_sources()
    assert NAME not in registry.cluster_sources()
    assert "throwaway_part" not in registry.part_sources()
    assert "throwaway_url" not in registry.enabling_keys()
    assert not any("--throwaway-url" in a.option_strings for a in source_parser()._actions)
    path = env / "config.toml"
    path.write_text('[clusters.t]\nthrowaway_url = "ok"\n')
    with pytest.raises(UserError, match="has no setting 'throwaway_url'"):
        load_clusters(path)
    assert [d.name for d in registry.declared()] == ["ceph", "curve", "host", "prometheus"]


def test_a_name_or_a_key_is_declared_once() -> None:
    with pytest.raises(ValueError, match="already declared"):
        registry.register(registry.declaration("ceph"))
    clash = throwaway_source.DECLARATION.__class__(name="other", parts=(), scope="host",
                                                   enabled_by=("prometheus",))
    with pytest.raises(ValueError, match="already name another source"):
        registry.register(clash)
    with pytest.raises(ValueError, match="built in"):
        registry.unregister("ceph")


def test_every_built_in_key_is_an_option_of_the_command_line() -> None:
    dests = {a.dest for a in source_parser()._actions}
    for d in registry.declared():
        assert set(d.enabled_by) <= dests, d.name
