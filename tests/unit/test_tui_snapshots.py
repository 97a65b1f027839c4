"""SVG snapshots of every view at 80x24 and 160x48, on recorded data (lab captures and the
Curve wire). Regenerate after an intended change: pytest --snapshot-update."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from stormdeck.collectors.hub import merge
from stormdeck.collectors.model import Pool, SourceHealth
from stormdeck.tui.app import StormdeckApp
from stormdeck.tui.feed import Frame, StaticFeed
from tests.captured import with_cluster, with_daemon
from tests.clock import zone
from tests.unit.test_tui import EVIL, frames, incident

VIEWS = {"overview": "1", "daemons": "2", "leaders": "3", "latency": "4", "disks": "5",
         "findings": "6", "journal": "7", "triage": "8", "fullness": "9"}


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    # The views draw local times: the committed SVGs are drawn in UTC, wherever and
    # whenever the suite runs.
    with zone("UTC"):
        yield


def recorded() -> list[Frame]:
    """The lab capture, with a Curve pool beside it and a name that tries to be markup."""
    from stormdeck.collectors.curve.source import CurveSource
    from tests.curve_wire import CurveWire

    with CurveWire(leaders=[24, 18, 16, 16, 14, 12]) as wire:
        curve = CurveSource(mds=[m.addr for m in wire.mds], chunkservers=list(wire.addrs()))
        curve_part = curve.poll()
        # Ports are picked at random: name each chunkserver by its place in the wire.
        names = {c.addr: f"10.0.0.{i + 1}:8200" for i, c in enumerate(wire.chunkservers)}

    def edit(s, i):
        s = with_daemon(s, "osd.2", host=EVIL)
        assert s.cluster is not None
        s = with_cluster(s, pools=(*s.cluster.pools,
                                   Pool(id=99, name=EVIL, type="replicated", size=3,
                                        min_size=2, pg_num=100)))
        merged = merge([curve_part], {}, now=s.time)
        css = dict(sorted((names[a], replace(d, id=names[a], host=names[a].rpartition(":")[0]))
                          for a, d in merged.daemons.items()))
        sources = {**s.sources, "curve": SourceHealth("curve", True, s.time)}
        return replace(s, daemons={**s.daemons, **css}, curve=merged.curve, sources=sources)

    return frames(lambda s, i: edit(incident(s, i), i))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_view_snapshot(snap_compare, view: str, size: tuple[int, int]) -> None:
    app = StormdeckApp(StaticFeed(recorded()), cluster_name="lab")
    assert snap_compare(app, press=[VIEWS[view]], terminal_size=size)


def test_help_snapshot_at_80x24(snap_compare) -> None:
    """Help at the SSH size: a scrolling dialog, its first keys and how to scroll it."""
    app = StormdeckApp(StaticFeed(recorded()), cluster_name="lab")
    assert snap_compare(app, press=["question_mark"], terminal_size=(80, 24))
