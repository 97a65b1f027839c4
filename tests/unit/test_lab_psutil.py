"""What the lab and validate read of processes and mounts, through psutil, on real processes
and real mounts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stormdeck.advisors.validate.measure import cpu_seconds, threads_of
from stormdeck.lab import procs

IN_NAMESPACE = """
import json, sys
from pathlib import Path
from stormdeck.lab import procs
from stormdeck.lab.cluster import Lab
lab_dir = Path(sys.argv[1])
seen = procs.mounts_below(str(lab_dir) + "/")
lab = Lab(lab_dir, progress=lambda m: None)
lab._unmount_below()
print(json.dumps({"seen": seen, "after": procs.mounts_below(str(lab_dir) + "/")}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="mounting needs root and unshare")
def test_a_lab_in_a_directory_with_a_space_finds_and_unmounts_its_mounts(tmp_path: Path) -> None:
    """/proc/mounts writes a space as \\040: split by hand, a lab in "/tmp/my lab/" never
    matched its own mount points and `lab down` left them mounted."""
    lab_dir = tmp_path / "my lab"
    point = lab_dir / "osd 0"
    point.mkdir(parents=True)
    # A private mount namespace: nothing is mounted where anyone else can see it.
    script = 'mount -t tmpfs tmpfs "$1" && exec "$2" -c "$3" "$4"'
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh",
                          str(point), sys.executable, IN_NAMESPACE, str(lab_dir)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen == {"seen": [str(point)], "after": []}


def test_argv_environment_and_zombies_of_real_processes(tmp_path: Path) -> None:
    marker = f"{tmp_path}/"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker],
                             env={**os.environ, "STORMDECK_LAB": marker})
    want = [sys.executable, "-c", "import time; time.sleep(30)", marker]
    try:
        # Until the child has exec'd, /proc shows the forked parent's argv (or none): on a
        # loaded machine that takes a while.
        deadline = time.monotonic() + 10
        while procs.cmdline(child.pid) != want and time.monotonic() < deadline:
            time.sleep(0.02)
        assert procs.cmdline(child.pid) == want
        assert procs.environ_has(child.pid, f"STORMDECK_LAB={marker}")
        assert not procs.environ_has(child.pid, "STORMDECK_LAB=/elsewhere/")
        assert procs.is_ours(child.pid, marker)
    finally:
        child.kill()
    # Killed but not yet waited for: a zombie (once the kernel has ended it, however busy
    # the host), whose argv is no one's. cmdline reaps it.
    deadline = time.monotonic() + 30
    while not Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].startswith(" Z") \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    assert procs.cmdline(child.pid) is None
    assert child.poll() is not None
    assert procs.cmdline(child.pid) is None and not procs.is_ours(child.pid, marker)


def test_threads_and_cpu_seconds_of_a_busy_process() -> None:
    code = ("import threading, time\n"
            "for _ in range(3): threading.Thread(target=time.sleep, args=(30,), daemon=True)"
            ".start()\n"
            "t = time.process_time()\n"
            "while time.process_time() - t < 0.6: pass\n"
            "time.sleep(30)\n")
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while len(threads_of(child.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        tids = threads_of(child.pid)
        assert len(tids) == 4 and child.pid in tids
        assert sorted(tids) == sorted(int(t) for t in os.listdir(f"/proc/{child.pid}/task"))
        while cpu_seconds(child.pid) < 0.6 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0.55 <= cpu_seconds(child.pid) < 5
    finally:
        child.kill()
        child.wait()
    assert threads_of(child.pid) == []
    # A process gone mid-step is an OSError, which the validate runner reports as the
    # step's fault; not a traceback.
    with pytest.raises(ProcessLookupError):
        cpu_seconds(child.pid)
