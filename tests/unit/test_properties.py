"""Any input gives a value or a clear error, never an exception that escapes: property tests
for every parser (Ceph command outputs, Curve's bvar and Prometheus text and tool outputs,
Prometheus API answers, recordings, the config file, plan files)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stormdeck.advisors.plan import Plan
from stormdeck.base.errors import UserError
from stormdeck.collectors.ceph.connection import CommandError
from stormdeck.collectors.curve import metrics as curve_metrics
from stormdeck.collectors.curve import parse as curve
from stormdeck.collectors.prometheus.client import PrometheusError, column, column_of
from stormdeck.collectors.prometheus.source import PrometheusSource
from stormdeck.collectors.recording import MAGIC, Recording
from stormdeck.config import load_clusters
from tests.captured import CannedCeph, lab_outputs

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])

scalars = (st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.floats()
           | st.text(max_size=20))
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=12), inner, max_size=5), max_leaves=25)


def mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """The real capture with one part, somewhere down its tree, replaced by anything."""
    if depth > 6 or not isinstance(value, dict | list) or not value \
            or data.draw(st.integers(0, 4)) == 0:
        return data.draw(json_values)
    if isinstance(value, dict):
        key = data.draw(st.sampled_from(sorted(value)))
        return {**value, key: mutate(value[key], data, depth + 1)}
    i = data.draw(st.integers(0, len(value) - 1))
    return [*value[:i], mutate(value[i], data, depth + 1), *value[i + 1:]]


JSON_COMMANDS = ["status", "health", "osd perf", "osd df", "osd dump", "osd pool ls",
                 "config dump", "osd metadata", "versions", "log last", "config log", "df"]


@FAST
@given(st.data())
def test_ceph_source_survives_any_command_output(data: st.DataObject) -> None:
    outputs = lab_outputs()
    command = data.draw(st.sampled_from([*JSON_COMMANDS, "osd status", "pg dump"]))
    how = data.draw(st.sampled_from(["mutate", "any json", "bytes"]))
    if how == "bytes" or (command in ("osd status", "pg dump") and how == "mutate"):
        outputs[command] = data.draw(st.binary(max_size=300))
    elif how == "any json":
        outputs[command] = json.dumps(data.draw(json_values)).encode()
    else:
        outputs[command] = json.dumps(mutate(json.loads(outputs[command]), data)).encode()
    try:
        part = CannedCeph(outputs).poll()
    except CommandError as exc:
        assert command == "status" and str(exc)  # only status is fatal, and says why
        return
    assert part.cluster is not None
    if command != "status":
        part.cluster.pgs_in("peering")


text_lines = st.lists(st.one_of(
    st.text(max_size=60),
    st.builds(lambda n, v: f"{n} : {v}", st.text(max_size=30), st.text(max_size=30)),
    st.builds(lambda n, v: f"{n}{{a=\"1\"}} {v}", st.from_regex(r"[a-z_]{1,20}", fullmatch=True),
              st.text(max_size=15)),
), max_size=20).map("\n".join)


@FAST
@given(text_lines)
def test_curve_text_parsers_survive_any_text(text: str) -> None:
    def value_or_clear_error(parse: Any, *args: Any) -> Any:
        try:
            return parse(*args)
        except curve.CurveError as exc:
            assert str(exc)
            return {}

    values = value_or_clear_error(curve.parse_vars, text)
    for parse in (curve.parse_prometheus_text, curve.parse_raft_stat,
                  curve.parse_ops_chunkserver_list, curve.parse_copysets_status,
                  curve.parse_chunkserver_status, curve.parse_cli_chunkservers):
        value_or_clear_error(parse, text)
    curve_metrics.mds_pools(values)
    curve_metrics.mds_chunkservers(values)
    curve_metrics.chunkserver_daemon("127.0.0.1:8200", values)


@FAST
@given(json_values)
def test_the_curve_cli_parser_survives_any_json(doc: Any) -> None:
    try:
        curve.parse_cli_chunkservers(json.dumps(doc))
    except curve.CurveError as exc:
        assert str(exc)


samples = st.lists(st.fixed_dictionaries({
    "metric": st.dictionaries(st.sampled_from(
        ["ceph_daemon", "device", "nodename", "hostname", "instance", "__name__", "pool_id",
         "name", "type", "profile", "transport", "rotational", "virtual", "devices",
         "conf_name", "conf_value", "model"]), st.text(max_size=12), max_size=6),
    "value": st.tuples(st.floats(0, 2e9), st.one_of(
        st.text(max_size=8), st.floats().map(str), st.integers().map(str))).map(list),
}), max_size=4)


class CannedPrometheus(PrometheusSource):
    """The real source, every query answered by the drawn samples."""

    def __init__(self, data: Any, curve_too: bool) -> None:
        super().__init__("http://127.0.0.1:1", ceph=True, curve=curve_too)
        # Drawn here: the poll asks its queries from worker threads, and Hypothesis
        # draws only in the test's own.
        self.answers = {name: data.draw(samples) for name in self.query_names()}

    def query(self, name: str) -> Any:
        # As the client reads them: a column where the source keys the answer, from
        # whatever samples were drawn (the fast reader's equality to this is tested
        # below and in test_prometheus_columns.py).
        labels = self.keyed_by(name)
        got = self.answers[name]
        return got if labels is None else column_of(got, labels)


# Each example is a whole poll (its worker threads, ~40 queries): 60 of them, not 150.
@settings(FAST, max_examples=60)
@given(st.data(), st.booleans())
def test_the_prometheus_source_survives_any_answer(data: st.DataObject,
                                                   curve_too: bool) -> None:
    source = CannedPrometheus(data, curve_too)
    try:
        part = source.poll()
    except PrometheusError as exc:
        assert str(exc)
        return
    finally:
        source.close()
    assert part.source == "prometheus"


@FAST
@given(st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8), st.one_of(
    st.floats().map(str), st.sampled_from(["NaN", "+Inf", "-Inf", "1e3", "x"]))),
    max_size=6), st.booleans())
def test_the_column_reader_agrees_with_a_full_decode(rows: list[tuple[str, str, str]],
                                                     two: bool) -> None:
    labels = ("device", "instance") if two else ("ceph_daemon",)
    result = [{"metric": dict(zip(labels, (a, b), strict=False)), "value": [1.5, v]}
              for a, b, v in rows]
    text = json.dumps({"status": "success", "data": {"resultType": "vector",
                                                     "result": result}},
                      separators=(",", ":"))
    fast = column(text, labels)
    if fast is not None:  # else the client decodes it whole: column_of
        assert fast == column_of(result, labels)


def frame(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">cdII", kind, 1.8e9, len(payload), zlib.crc32(payload)) + payload


@FAST
@given(st.data())
def test_a_recording_of_anything_opens_or_says_why(tmp_path_factory, data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("rec") / "r"
    how = data.draw(st.sampled_from(["bytes", "frames", "json frames"]))
    body = MAGIC + b'{"format": 1}\n'
    if how == "bytes":
        body += data.draw(st.binary(max_size=400))
    else:
        zipper = zlib.compressobj(6, zlib.DEFLATED, -15)
        for kind in data.draw(st.lists(st.sampled_from([b"K", b"S", b"F", b"J", b"X"]),
                                       min_size=1, max_size=5)):
            if kind == b"K":
                zipper = zlib.compressobj(6, zlib.DEFLATED, -15)
            obj = data.draw(json_values) if how == "json frames" else \
                {"s": data.draw(json_values)} if kind == b"K" else {"d": data.draw(json_values)}
            raw = zipper.compress(json.dumps(obj).encode()) + zipper.flush(zlib.Z_SYNC_FLUSH)
            body += frame(kind, raw)
    path.write_bytes(body)
    try:
        rec = Recording(path)
    except UserError as exc:
        assert str(exc)
        return
    list(rec.snapshots())  # decodes, or stops at the first frame it cannot, saying why
    list(rec.records())
    from stormdeck.advisors.session import recorded_changes, recorded_findings

    recorded_findings(rec)
    recorded_changes(rec)


@FAST
@given(st.dictionaries(st.text(max_size=8), st.dictionaries(
    st.sampled_from(["conf", "read_only", "prometheus", "host", "timeout", "curve_mds",
                     "nope", "id"]),
    st.one_of(st.text(max_size=10), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.lists(st.text(max_size=5), max_size=3)), max_size=4), max_size=3),
       st.text(max_size=80))
def test_the_config_file_loads_or_says_why(tmp_path_factory, clusters: dict, junk: str) -> None:
    path = tmp_path_factory.mktemp("cfg") / "config.toml"
    lines = []
    for name, table in clusters.items():
        lines.append(f"[clusters.{json.dumps(name)}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    for text in ("\n".join(lines), junk):
        path.write_text(text)
        try:
            load_clusters(path)
        except UserError as exc:
            assert str(exc) and "\n" not in str(exc).strip()


FSID = "8f4c1b9e-5d0a-4c7e-9b1f-2a3c4d5e6f70"


@FAST
@given(st.data())
def test_a_plan_file_loads_or_says_why(tmp_path_factory, data: st.DataObject) -> None:
    path = tmp_path_factory.mktemp("plan") / "p.json"
    good = {"version": 1, "id": "p1", "created": 1.0, "rule": "ceph.scrub.during_load",
            "target": "osd", "summary": "s", "source": "K1", "fsid": FSID,
            "changes": [{"kind": "ceph_config", "target": "osd", "key": "osd_scrub_sleep",
                         "current": "0", "proposed": "0.1", "blast_radius": "all OSDs",
                         "command": "ceph config set osd osd_scrub_sleep 0.1"}]}
    doc = mutate(good, data) if data.draw(st.booleans()) else data.draw(json_values)
    path.write_text(json.dumps(doc) if data.draw(st.booleans()) else
                    data.draw(st.text(max_size=50)))
    try:
        Plan.load(path)
    except UserError as exc:
        assert str(exc)


def test_the_plan_strategy_can_load_a_good_plan(tmp_path: Path) -> None:
    """The fuzzing starts from a plan that loads, so mutations test the edges."""
    from stormdeck.advisors.findings import Change

    plan = Plan(id="p1", created=1.0, rule="ceph.scrub.during_load", target="osd",
                summary="s", source="K1", fsid=FSID,
                changes=(Change(kind="ceph_config", target="osd", key="osd_scrub_sleep",
                                current="0", proposed="0.1",
                                command="ceph config set osd osd_scrub_sleep 0.1"),))
    plan.save(tmp_path / "p.json")
    assert Plan.load(tmp_path / "p.json") == plan


@pytest.mark.parametrize("bad", [b"", b"\x00" * 30, MAGIC, MAGIC + b"{}\n", MAGIC + b"x\n"])
def test_recordings_that_are_not_get_one_sentence(tmp_path: Path, bad: bytes) -> None:
    (tmp_path / "r").write_bytes(bad)
    with pytest.raises(UserError):
        Recording(tmp_path / "r")
