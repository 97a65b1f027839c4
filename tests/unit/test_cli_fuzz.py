"""A campaign of malformed command lines and inputs against every file-taking command:
each must end in exit 3 and one sentence, never exit 70, a traceback or a hang.

The inputs a user can get wrong: a missing file, a directory, a FIFO, /dev/null and
/dev/zero where a file goes, a file where a directory goes, bytes that are not UTF-8,
TOML nested past the parser's depth, JSON and recordings of the wrong shape, NaN and
infinity where a number goes, and files only root may read; every subcommand has
some (lab up only where it is refused before anything starts: never here). The cases run in-process
in two child processes (importing stormdeck once per child, not once per case), each
with a deadline, so a hang names its case instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import pwd
import selectors
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from stormdeck.collectors.recording import MAGIC, Recorder
from tests.captured import history
from tests.conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
CASE_DEADLINE = 8.0  # seconds for one case; the slowest (record --for 1) takes about 1
# A source that fails at once: build_sources succeeds and nothing waits on a network.
QUICK_SOURCE = ["--prometheus", "http://127.0.0.1:1", "--no-host", "--timeout", "1"]
RULE = "ceph.osd.cores_beyond_knee"


@dataclass
class Case:
    id: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    says: str | None = None  # a phrase the sentence must hold


def _frame(kind: bytes, at: float, payload: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, -15)
    data = z.compress(payload) + z.flush(zlib.Z_SYNC_FLUSH)
    return struct.pack(">cdII", kind, at, len(data), zlib.crc32(data)) + data


def make_inputs(d: Path) -> dict[str, str]:
    """Every kind of bad input, by name; the regular files among them are readable."""
    files: dict[str, str] = {}

    def put(name: str, data: bytes) -> None:
        (d / name).write_bytes(data)
        files[name] = str(d / name)

    header = MAGIC + b'{"format": 1}\n'
    put("not_utf8", b"[clusters.x]\nconf = '\xe9t\xe9'\n")
    put("binary", bytes(range(256)) * 8)
    put("deep_toml", b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n")
    put("json_garbage", b"{not json ][")
    put("json_list", b"[1, 2, 3]")
    put("empty", b"")
    put("rec_magic_only", MAGIC)
    put("rec_header_list", MAGIC + b"[1]\n")
    put("rec_format_inf", MAGIC + b'{"format": 1e400}\n')
    put("rec_empty_frame_then_garbage", header + struct.pack(">cdII", b"K", 0.0, 0, 0)
        + b"garbage")
    put("rec_wrong_shape", header + _frame(b"K", 1.0, b'{"s": [1, 2]}'))
    put("rec_bad_snapshot", header + _frame(b"K", 1.0, b'{"s": {"time": "x", "daemons": 5}}'))
    put("rec_nan_time", header + _frame(b"K", float("nan"), b'{"s": {"time": 1.0}}'))
    put("rec_far_time", header + _frame(b"K", 1e300, b'{"s": {"time": 1e300}}'))
    (d / "a_dir").mkdir()
    files["a_dir"] = str(d / "a_dir")
    os.mkfifo(d / "fifo")
    files["fifo"] = str(d / "fifo")
    files["dev_null"] = "/dev/null"
    files["dev_zero"] = "/dev/zero"
    files["missing"] = str(d / "missing")
    return files


NOT_REGULAR = ("a_dir", "fifo", "dev_null", "dev_zero", "missing")
RECORDINGS = ("rec_magic_only", "rec_header_list", "rec_format_inf",
              "rec_empty_frame_then_garbage", "rec_wrong_shape", "rec_bad_snapshot",
              "rec_nan_time", "rec_far_time", "binary", "empty", "not_utf8")


def cases(d: Path) -> list[Case]:
    f = make_inputs(d)
    good = d / "good.rec"
    rec = Recorder(good)
    for s in history(3, step=1.0):
        rec.add_snapshot(s)
    rec.close()
    dead_conf = d / "dead.conf"
    dead_conf.write_text("[global]\nmon host = 127.0.0.1:1\n")
    not_text = ("not_utf8", "binary")
    out: list[Case] = []

    def add(name: str, argv: list[str], env: dict[str, str] | None = None,
            says: str | None = None) -> None:
        out.append(Case(name, argv, env or {}, says))

    # Files read whole: the config, the rules, a secret named by the config.
    for kind in (*NOT_REGULAR, *not_text, "deep_toml"):
        p = f[kind]
        if kind != "deep_toml":  # as a token it is text like any other
            cfg = d / f"cfg_secret_{kind}.toml"
            cfg.write_text(f"[clusters.a]\nprometheus = 'http://127.0.0.1:1'\n"
                           f"prometheus_token_file = '{p}'\n")
            add(f"config token file {kind}", ["check", "--config", str(cfg), "--no-host",
                                              "--for", "1"])
        says = {"fifo": "FIFO", "a_dir": "directory", "dev_zero": "device",
                "not_utf8": "not UTF-8", "binary": "not UTF-8",
                "deep_toml": "nested too deeply"}.get(kind)
        add(f"check --config {kind}", ["check", "--config", p, *QUICK_SOURCE[3:]], says=says)
        add(f"STORMDECK_CONFIG={kind} check", ["check"], {"STORMDECK_CONFIG": p},
            "no such config file" if kind == "missing" else says)
        add(f"check --rules {kind}", ["check", "--rules", p, "--list-rules"], says=says)
        add(f"STORMDECK_RULES={kind} check", ["check", "--list-rules"],
            {"STORMDECK_RULES": p}, says)
    # Files only checked, then handed on (a CA, a certificate, a ceph.conf, a keyring).
    for kind in NOT_REGULAR:
        p = f[kind]
        add(f"--prometheus-ca {kind}", ["snapshot", *QUICK_SOURCE, "--prometheus-ca", p])
        add(f"exporter --tls-cert {kind}", ["exporter", "--tls-cert", p, "--tls-key", p])
        add(f"exporter -c {kind}", ["exporter", "-c", p, "--listen", "127.0.0.1:1"])
        add(f"check -c {kind}", ["check", "-c", p, "--for", "1"])
        add(f"CEPH_CONF={kind} check", ["check", "--for", "1"], {"CEPH_CONF": p})
        add(f"check -k {kind}", ["check", "-c", str(dead_conf), "-k", p, "--for", "1"])
        add(f"validate -c {kind}", ["validate", "-c", p, "--headless"])
    add("exporter with a garbage certificate", ["exporter", "--tls-cert", f["json_list"],
                                                "--tls-key", f["json_list"], "--listen",
                                                "127.0.0.1:1"], says="cannot serve TLS")
    # Recordings.
    for kind in (*NOT_REGULAR, *RECORDINGS):
        add(f"report {kind}", ["report", f[kind]])
        add(f"replay {kind}", ["replay", f[kind]])
    # Where output goes: a missing directory, a directory, a file where a directory goes.
    nowhere = str(d / "no" / "such" / "dir" / "file")
    under_file = str(d / "json_list" / "file")
    for where, target in (("missing dir", nowhere), ("a dir", f["a_dir"]),
                          ("under a file", under_file)):
        add(f"report -o {where}", ["report", str(good), "-o", target])
        add(f"record into {where}", ["record", target, "--for", "1", *QUICK_SOURCE])
    add("plan -o missing dir", ["plan", RULE, "-o", nowhere, "-c", str(dead_conf)],
        says="no such directory")
    add("plan -o under a file", ["plan", RULE, "-o", under_file, "-c", str(dead_conf)])
    add("lab status --dir a file", ["lab", "status", "--dir", f["json_list"]])
    add("lab down --dir /dev/null", ["lab", "down", "--dir", "/dev/null"])
    add("lab load --dir a fifo", ["lab", "load", "--dir", f["fifo"]])
    # Numbers: NaN passes every `< 0` test, infinity never ends a wait.
    for opt, value in (("--for", "nan"), ("--interval", "nan"), ("--interval", "inf"),
                       ("--max-size", "nan"), ("--max-size", "-1"), ("--for", "-1")):
        add(f"record {opt} {value}", ["record", str(d / f"r{opt}{value}"), opt, value,
                                      *QUICK_SOURCE])
    for opt, value in (("--for", "nan"), ("--for", "inf"), ("--interval", "nan")):
        add(f"check {opt} {value}", ["check", opt, value, *QUICK_SOURCE])
    add("plan --for nan", ["plan", RULE, "--for", "nan", *QUICK_SOURCE])
    add("report --from garbage", ["report", str(good), "--from", "garbage"])
    add("report --to 1e400", ["report", str(good), "--to", "1e400"])
    add("report --from nan", ["report", str(good), "--from", "nan"])
    # The console must refuse before it opens: a console that opens runs until quit.
    add("watch --interval nan", ["watch", "--interval", "nan", *QUICK_SOURCE])
    add("watch --rules fifo", ["watch", "--rules", f["fifo"], *QUICK_SOURCE], says="FIFO")
    add("watch --record into missing dir", ["watch", "--record", nowhere, *QUICK_SOURCE])
    add("watch --max-size nan", ["watch", "--record", str(d / "w.rec"), "--max-size", "nan",
                                 *QUICK_SOURCE])
    add("manpage -o missing dir", ["manpage", "-o", nowhere])
    # Plans (their loading is the plan file's own; FIFO and /dev/zero are left to it).
    for kind in ("missing", "a_dir", "not_utf8", "binary", "json_list", "json_garbage",
                 "empty"):
        add(f"apply {kind}", ["apply", f[kind], "--yes", "--read-only"])
    add("mute without --for", ["mute", RULE])
    add("mute --for nan", ["mute", RULE, "--for", "nan"])
    add("unmute without a target", ["unmute", RULE])
    add("journal -f xml", ["journal", "-f", "xml"])
    add("completion ksh", ["completion", "ksh"])
    add("curve tool with an open quote", ["check", "--curve-ops-tool", "'open", "--for", "1",
                                          "--no-host"])
    return out


RUNNER = r"""
import contextlib, io, json, os, sys
from stormdeck.cli import main
cases = [json.loads(line) for line in open(sys.argv[1])]
base = dict(os.environ)
for case in cases:
    os.environ.clear()
    os.environ.update(base)
    os.environ.update(case["env"])
    print(json.dumps({"start": case["id"]}), flush=True)
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = main(case["argv"])
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else repr(exc.code)
        except BaseException as exc:  # what the CLI let escape is the finding
            rc = f"raised {type(exc).__name__}: {exc}"
    print(json.dumps({"id": case["id"], "rc": rc, "err": err.getvalue()}), flush=True)
"""


def run_batch(batch: list[Case], workdir: Path, env: dict[str, str]) -> Iterator[dict]:
    """Each case's {"id", "rc", "err"}. A case that does not end within CASE_DEADLINE is a
    hang: its child is killed and the cases after it go on in a new one."""
    left = list(batch)
    while left:
        listing = workdir / f"cases-{id(left)}-{len(left)}.jsonl"
        listing.write_text("".join(json.dumps({"id": c.id, "argv": c.argv, "env": c.env})
                                   + "\n" for c in left))
        proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(listing)], cwd=workdir,
                                env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, bufsize=0)  # unbuffered: what
        # select() says is waiting is all there is (a buffer would hide a line read ahead)
        assert proc.stdout is not None
        started: str | None = None
        done = 0
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while True:
                if not sel.select(timeout=CASE_DEADLINE):
                    break  # the case in `started` hangs
                line = proc.stdout.readline()
                if not line:
                    break  # the child ended (or died in a case: `started` says which)
                try:
                    rec = json.loads(line)
                except ValueError:  # something wrote to the descriptor itself (C code)
                    continue
                if "start" in rec:
                    started = rec["start"]
                    continue
                started = None
                done += 1
                yield rec
        proc.kill()
        proc.wait()
        if started is None:
            return
        yield {"id": started, "rc": f"hung or died (no end within {CASE_DEADLINE:g} s)",
               "err": ""}
        left = left[done + 1:]


def clean_env(home: Path) -> dict[str, str]:
    """No config, rules, state or cluster of the machine's: only what a case gives."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STORMDECK_", "CEPH_", "XDG_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"),
               XDG_STATE_HOME=str(home / "state"), PYTHONPATH=str(REPO))
    return env


def verdict(case: Case, rc: object, err: str) -> str | None:
    lines = err.strip().splitlines()
    if rc != 3:
        return f"exit {rc}"
    if "Traceback" in err or "internal error" in err:
        return "a traceback or an internal error"
    if len(lines) != 1 or not lines[0].startswith("stormdeck"):
        return f"{len(lines)} lines, not one sentence"
    if case.says and case.says not in err:
        return f"does not say {case.says!r}"
    return None


def test_every_malformed_input_ends_in_exit_3_and_one_sentence(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    all_cases = cases(inputs)
    by_id = {c.id: c for c in all_cases}
    assert len(by_id) == len(all_cases) > 140
    env = clean_env(home)
    halves = [all_cases[0::2], all_cases[1::2]]  # two cores
    with ThreadPoolExecutor(2) as pool:
        results = [r for rs in pool.map(lambda b: list(run_batch(b, tmp_path, env)), halves)
                   for r in rs]
    seen = {r["id"] for r in results}
    failures = [f"{r['id']}: {why}: {r['err'].strip()[:300]!r}" for r in results
                if (why := verdict(by_id[r["id"]], r["rc"], r["err"])) is not None]
    failures += [f"{c.id}: never ran" for c in all_cases if c.id not in seen]
    assert not failures, f"{len(failures)} of {len(all_cases)} cases:\n" + "\n".join(failures)


@pytest.fixture
def unreadable() -> Iterator[Path]:
    """A file only root may read, in a directory anyone may enter (pytest's own are 0700:
    the denial must come from the file, not from the way to it)."""
    if os.geteuid() != 0:
        pytest.skip("needs root, to run the command as another user (runuser)")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    top = Path(tempfile.mkdtemp(prefix="stormdeck-fuzz-"))
    try:
        top.chmod(0o755)
        (top / "home").mkdir(mode=0o777)
        (top / "home").chmod(0o777)
        path = top / "secret.toml"
        path.write_text("[clusters.x]\nconf = '/etc/ceph/ceph.conf'\n")
        path.chmod(0)
        yield path
    finally:
        shutil.rmtree(top, ignore_errors=True)


def test_a_file_the_user_may_not_read_is_one_sentence(unreadable: Path) -> None:
    env = clean_env(unreadable.parent / "home")
    p = str(unreadable)
    argvs = [["check", "--config", p], ["check", "--rules", p, "--list-rules"],
             ["report", p], ["check", "-c", p, "--for", "1"],
             ["snapshot", *QUICK_SOURCE, "--prometheus-ca", p]]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda a: (a, run_cli(*a, env=env, user="nobody",
                                                       timeout=30)), argvs))
    for argv, res in results:
        assert verdict(Case(" ".join(argv), argv, says="ermission denied"), res.rc,
                       res.err) is None, (argv, res.rc, res.err)
