"""The demo's way into the console: the lab's conf and its Prometheus, said once."""

from __future__ import annotations

import subprocess
from pathlib import Path

from stormdeck.cli import build_parser
from stormdeck.cli_lab import console_args, print_status
from stormdeck.lab.state import SCRAPE_INTERVAL

ROOT = Path(__file__).resolve().parents[2]


def status(prometheus: bool) -> dict:
    return {"dir": "/var/tmp/lab", "running": True, "exists": True,
            "conf": "/var/tmp/lab dir/ceph.conf", "prometheus": prometheus,
            "ports": {"mon": 6789, "mgr_prometheus": 9283, "prometheus": 19090,
                      "node_exporter": 9100, "exporter": 9469},
            "daemons": [{"name": "mon.a", "pid": 1, "alive": True, "device": None}],
            "health": "HEALTH_OK", "release": "pacific", "ceph": "16.2.15"}


def test_the_console_on_the_lab_reads_its_prometheus_too() -> None:
    args = build_parser().parse_args(console_args(status(prometheus=True)))
    assert args.command == "watch" and args.conf == "/var/tmp/lab dir/ceph.conf"
    assert args.prometheus == "http://127.0.0.1:19090"
    assert args.prometheus_scrape_interval == SCRAPE_INTERVAL
    bare = build_parser().parse_args(console_args(status(prometheus=False)))
    assert bare.conf == "/var/tmp/lab dir/ceph.conf" and bare.prometheus is None


def test_the_status_names_the_console_and_what_makes_something_happen(capsys) -> None:
    print_status(status(prometheus=True))
    out = capsys.readouterr().out
    assert out.count("lab /var/tmp/lab: running") == 1
    line = next(x for x in out.splitlines() if x.strip().startswith("console"))
    # Quoted for a shell: the conf's path has a space.
    assert "stormdeck watch -c '/var/tmp/lab dir/ceph.conf' --prometheus " \
           "http://127.0.0.1:19090 --prometheus-scrape-interval 5" in line
    assert "stormdeck lab load" in out and "stormdeck lab storm" in out
    print_status(status(prometheus=False))
    assert "no Prometheus here" in capsys.readouterr().out


def test_dev_demo_installs_the_man_page_and_says_the_status_once() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "dev")], check=True)
    script = (ROOT / "dev").read_text()
    demo = script[script.index("    demo)"):script.index("    test)")]
    assert "install_shell_files" in demo
    # One status: `lab up` prints it, `lab status` only when the lab already ran.
    assert demo.count("lab status \"$@\"") == 1 and "lab up --prometheus" in demo
    assert '["console"]' in demo
