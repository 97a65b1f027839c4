"""The fleet read as columns: Prometheus' own answers read in C where they have its exact
shape and decoded in full where not, an unchanged answer handed back as the same column,
disks keyed by scrape target and named by node_uname_info, and the divisions the source
does instead of PromQL's matched binary operations."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stormdeck.collectors.prometheus.client import PrometheusClient, column
from stormdeck.collectors.prometheus.queries import DIVIDED_BY, RECORDED_PROBE, RECORDED_QUERIES
from stormdeck.collectors.prometheus.source import PrometheusSource
from tests.prometheus_wire import Answers, StandIn, row

DATA = Path(__file__).resolve().parents[1] / "data" / "prometheus"


def general(text: str, labels: tuple[str, ...]) -> dict[Any, float]:
    """What a full JSON decode of the answer gives, keyed as the column reader keys it."""
    out: dict[Any, float] = {}
    for s in json.loads(text)["data"]["result"]:
        key = tuple(s["metric"].get(label) for label in labels)
        if None not in key:
            v = float(s["value"][1])
            if v == v and abs(v) != float("inf"):
                out[key[0] if len(labels) == 1 else key] = v
    return out


@pytest.mark.parametrize("name, labels", [
    ("query-max-by-ceph-daemon.json", ("ceph_daemon",)),
    ("query-max-by-instance-device.json", ("device", "instance")),
])
def test_prometheus_own_answers_are_read_in_c_and_equal_a_full_decode(
        name: str, labels: tuple[str, ...]) -> None:
    text = (DATA / name).read_text()
    fast = column(text, labels)
    assert fast is not None and len(fast) == 12
    assert fast == general(text, labels)
    assert list(fast) == list(general(text, labels))  # Prometheus' order kept
    # Read again (keys now known), and with a series no read has named before.
    assert column(text, labels) == fast
    head = '{"metric":{"' + labels[0] + '":"'
    renamed = text.replace(head, head + "new", 1)
    assert renamed != text
    assert column(renamed, labels) == general(renamed, labels)


def test_answers_of_another_shape_are_left_to_the_full_decoder() -> None:
    docs = (DATA / "query-up-prometheus-docs.json").read_text()
    assert column(docs, ("instance",)) is None  # indented, as the docs print it
    compact = json.dumps(json.loads(docs), separators=(",", ":"))
    # Labels beyond the ones asked for (a site's query without `max by`): not a column.
    assert column(compact, ("instance",)) is None
    mine = (DATA / "query-max-by-ceph-daemon.json").read_text()
    # A label value with an escaped quote: the count of samples read falls short.
    escaped = mine.replace('"osd.10"', '"osd.\\"10"')
    assert column(escaped, ("ceph_daemon",)) is None
    # NaN and infinities are dropped, as the general path drops them.
    odd = mine.replace('"osd.0"},"value":[1795860333.740,"1"]',
                       '"osd.0"},"value":[1795860333.740,"NaN"]')
    odd = odd.replace('"osd.1"},"value":[1795860333.740,"1"]',
                      '"osd.1"},"value":[1795860333.740,"+Inf"]')
    got = column(odd, ("ceph_daemon",))
    assert got is not None and "osd.0" not in got and "osd.1" not in got
    assert got == general(odd, ("ceph_daemon",))
    # Not a vector at all.
    assert column('{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}',
                  ("ceph_daemon",)) is None


def test_an_answer_unchanged_but_for_its_instant_is_the_same_column() -> None:
    raw = StandIn()
    client = PrometheusClient(raw.url, timeout=5)
    try:
        text = (DATA / "query-max-by-ceph-daemon.json").read_text()
        raw.body = text.encode()
        first = client.query_column("q", "q", 1795860333.74, ("ceph_daemon",))
        # The next scrape's answer: every sample's instant moved, nothing else.
        raw.body = text.replace("1795860333.740", "1795860348.740").encode()
        again = client.query_column("q", "q", 1795860348.74, ("ceph_daemon",))
        assert again is first
        # One value moved: a new column, with it.
        raw.body = text.replace('"osd.0"},"value":[1795860333.740,"1"]',
                                '"osd.0"},"value":[1795860333.740,"0"]').encode()
        moved = client.query_column("q", "q", 1795860363.74, ("ceph_daemon",))
        assert moved is not first and moved["osd.0"] == 0.0 and first["osd.0"] == 1.0
        # A value whose text is longer: the answer's length moved, so it is read without
        # a digest; unchanged next scrape it is read once more (equal), then held.
        longer = text.replace('"osd.0"},"value":[1795860333.740,"1"]',
                              '"osd.0"},"value":[1795860333.740,"12.5"]')
        raw.body = longer.encode()
        grown = client.query_column("q", "q", 1795860378.74, ("ceph_daemon",))
        assert grown["osd.0"] == 12.5
        raw.body = longer.replace("1795860333.740", "1795860393.740").encode()
        once = client.query_column("q", "q", 1795860393.74, ("ceph_daemon",))
        assert once == grown
        raw.body = longer.replace("1795860333.740", "1795860408.740").encode()
        assert client.query_column("q", "q", 1795860408.74, ("ceph_daemon",)) is once
    finally:
        client.close()
        raw.close()


@pytest.fixture
def answers() -> Iterator[Answers]:
    with Answers() as a:
        yield a


def test_disks_are_named_by_node_uname_info_and_figures_divided_exactly(
        answers: Answers) -> None:
    src = PrometheusSource(answers.url, timeout=5, scrape_interval=15)
    rows = answers.rows
    try:
        rows[src.queries["newest"]] = [row(time.time())]
        rows[src.queries["up"]] = [row(1, ceph_daemon="osd.0"), row(1, ceph_daemon="osd.1")]
        rows[src.queries["metadata"]] = [
            row(1, ceph_daemon=f"osd.{i}", hostname="stor1.example") for i in (0, 1)]
        rows[src.queries["occupation"]] = [
            row(1, ceph_daemon="osd.0", devices="sdb", instance="stor1")]
        rows[src.queries["read_iops"]] = [row(40, ceph_daemon="osd.0"),
                                          row(0, ceph_daemon="osd.1")]
        # Seconds of latency summed per second: 0.1 s per read at 40 reads a second.
        rows[src.queries["op_read_latency"]] = [row(4, ceph_daemon="osd.0"),
                                                row(0, ceph_daemon="osd.1")]
        rows[src.queries["utilization"]] = [row(1e12, ceph_daemon="osd.0")]
        rows[src.queries["osd_bytes"]] = [row(4e12, ceph_daemon="osd.0")]
        # Two scrape targets of one host (two jobs, two instance labels): the larger.
        rows[src.queries["nodes"]] = [row(1, instance="stor1:9100", nodename="stor1.example"),
                                      row(1, instance="stor1", nodename="stor1.example")]
        rows[src.queries["disk_read_iops"]] = [
            row(200, device="sdb", instance="stor1:9100"),
            row(201, device="sdb", instance="stor1"),
            row(5, device="sdc", instance="gone:9100")]  # no uname: no host, left out
        rows[src.queries["disk_read_await"]] = [row(1.0, device="sdb", instance="stor1:9100")]
        part = src.poll()
        assert not part.errors, part.errors
        osd0, osd1 = part.daemons["osd.0"], part.daemons["osd.1"]
        assert osd0.op_read_latency == 4 / 40 and osd1.op_read_latency is None  # 0/0
        assert osd0.utilization == 0.25 and osd1.utilization is None
        assert set(part.disks) == {"stor1:/dev/sdb"}
        disk = part.disks["stor1:/dev/sdb"]
        # Each target divided by its own IOPS, as PromQL matches them, then the larger.
        assert disk.read_iops == 201 and disk.read_await == 1.0 / 200
        assert disk.daemons == ("osd.0",)
        # What Prometheus was asked: no matched division, no join, for these fields.
        for name in DIVIDED_BY:
            assert " / " not in src.queries[name] and "group_left" not in src.queries[name]
    finally:
        src.close()


def test_an_override_or_a_recorded_denominator_keeps_the_whole_figure(
        answers: Answers) -> None:
    mine = "max by (ceph_daemon) (site:op_r_latency:avg)"
    src = PrometheusSource(answers.url, timeout=5, queries={"op_read_latency": mine})
    rows = answers.rows
    now = time.time()
    try:
        rows[src.queries["newest"]] = [row(now)]
        rows[src.queries["up"]] = [row(1, ceph_daemon="osd.0")]
        rows[src.queries["read_iops"]] = [row(40, ceph_daemon="osd.0")]
        rows[mine] = [row(0.1, ceph_daemon="osd.0")]
        assert src.poll().daemons["osd.0"].op_read_latency == 0.1  # not divided
        # write_iops recorded, op_write_latency not: the raw query is the whole figure,
        # for the recorded IOPS need not be keyed as the raw numerator is.
        rows[RECORDED_PROBE] = [row(1, __name__="stormdeck:write_iops")]
        rows[RECORDED_QUERIES["write_iops"]] = [row(50, ceph_daemon="osd.0")]
        whole = src._whole["op_write_latency"]
        rows[whole] = [row(0.02, ceph_daemon="osd.0")]
        rows[src.queries["newest"]] = [row(now + 15)]
        src._probe_mono = None
        part = src.poll()
        assert whole in answers.asked and src.queries["op_write_latency"] not in answers.asked[-40:]
        assert part.daemons["osd.0"].op_write_latency == 0.02
        assert part.daemons["osd.0"].write_iops == 50
    finally:
        src.close()
