"""Ceph releases the host does not package, each in a Debian root built once with debootstrap.

A root is built under /var/tmp (or $STORMDECK_ROOTS_DIR) the first time a lab
asks for its release, then reused. Two builders at once wait on one lock
file; a half-built root is never mistaken for a finished one (it is built
beside its final path and renamed at the end). Commands run in a root
through `unshare --mount` + `chroot`: /proc, /dev and /sys (and the lab's own
directory) are bound inside a private mount namespace, so the binds vanish
with the last process that uses them and nothing is left mounted on the host.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from stormdeck.base.errors import UserError

RECIPE = 1  # bump when the build changes: an older root is then built again
MARKER = ".stormdeck-root.json"
CEPH_PACKAGES = ("ceph-mon", "ceph-osd", "ceph-mgr", "ceph-common", "python3-rados")
# For stormdeck run inside a root with the root's own librados and Python.
CLIENT_PACKAGES = ("python3-pip", "python3-venv", "ca-certificates")
APT_CONF = """// Written by stormdeck's root builder.
// Debian's archive snapshots keep Release files past their Valid-Until.
Acquire::Check-Valid-Until "false";
APT::Install-Recommends "false";
APT::Install-Suggests "false";
"""
POLICY_RC_D = ("#!/bin/sh\n# No service starts inside a stormdeck root: "
               "the lab starts daemons itself.\nexit 101\n")
# Binds /proc, /dev, /sys and optional extra directories (at the same path)
# into the root inside the caller's private mount namespace, then chroots.
IN_ROOT_SH = r"""
r=$1; shift
while [ "$1" != "--" ]; do
    mkdir -p "$r$1"; mount --bind "$1" "$r$1"; shift
done
shift
for m in proc dev sys; do mount --rbind "/$m" "$r/$m"; done
exec chroot "$r" "$@"
"""

Progress = Callable[[str], None]


class RootError(UserError):
    """A release root that cannot be built or used; the message says why."""


@dataclass(frozen=True)
class Release:
    name: str
    suite: str  # the Debian suite that packages it
    ceph: str  # the version that suite carried when this was written
    script: str | None = None  # debootstrap script, when it lacks one for the suite
    bcrypt_fix: bool = False  # replace the PyO3 bcrypt that breaks the mgr's modules


RELEASES: dict[str, Release] = {
    "reef": Release("reef", "trixie", "18.2.7", bcrypt_fix=True),
    # debootstrap 1.0.128 (Debian 12) has no forky script; sid's is the same.
    "tentacle": Release("tentacle", "forky", "20.2.4", script="sid"),
}
HOST_RELEASES = ("pacific",)  # what Debian 12 itself packages
BCRYPT_WITHOUT_PYO3 = "bcrypt==3.2.2"


def roots_dir() -> Path:
    return Path(os.environ.get("STORMDECK_ROOTS_DIR", "/var/tmp"))


def root_path(release: str) -> Path:
    return roots_dir() / f"stormdeck-root-{release}"


def in_root(root: Path, argv: Sequence[str], binds: Sequence[Path | str] = ()) -> list[str]:
    """The argv that runs `argv` chrooted in `root`, with /proc /dev /sys and `binds` inside."""
    unshare = shutil.which("unshare") or "/usr/bin/unshare"
    return [unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-ec", IN_ROOT_SH,
            "sh", str(root), *(str(b) for b in binds), "--", *argv]


# The root's own directories (Debian's layout), which a lab's mount point may sit under.
ROOT_LAYOUT = frozenset({"/tmp", "/var", "/var/tmp", "/var/lib", "/run", "/home", "/root",
                         "/srv", "/opt", "/mnt", "/media", "/usr", "/etc"})


def remove_mount_points(root: Path, binds: Sequence[Path | str]) -> None:
    """Remove the empty directories `in_root` made in `root` to bind `binds` onto.

    Only once nothing that was started with those binds runs: removing a directory
    that is a mount point in another mount namespace detaches that mount there.
    """
    for bind in binds:
        point = root / str(bind).lstrip("/")
        while point != root and point.is_relative_to(root) and \
                "/" + str(point.relative_to(root)) not in ROOT_LAYOUT:
            try:
                point.rmdir()
            except OSError:  # not empty (another lab's, or the root's own), or gone
                break
            point = point.parent


def host_mirror(apt_dir: Path = Path("/etc/apt")) -> str | None:
    """The Debian archive the host's apt sources name (deb822 .sources or one-line .list)."""
    env = os.environ.get("STORMDECK_DEBIAN_MIRROR")
    if env:
        return env.rstrip("/")
    files = [apt_dir / "sources.list"]
    d = apt_dir / "sources.list.d"
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources"))
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        for uri in mirror_candidates(text):
            return uri
    return None


def mirror_candidates(text: str) -> Iterator[str]:
    """Archive URIs of Debian's main archive (not security) in one apt sources file."""
    uris: list[str] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"^URIs:\s*(.+)$", line, re.IGNORECASE)
        if m:
            uris += m.group(1).split()
            continue
        m = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+\S+", line)
        if m:
            uris.append(m.group(1))
    for uri in uris:
        path = uri.rstrip("/")
        if path.endswith("/debian") and "security" not in path:
            yield path


def ceph_version_of(root: Path) -> str | None:
    """`ceph --version` as the root's package says, read from dpkg's status without running it."""
    try:
        status = (root / "var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"^Package: ceph-common\n(?:(?!\n\n).)*?^Version: (\S+)", status,
                  re.MULTILINE | re.DOTALL)
    return m.group(1) if m else None


def ready(release: str) -> dict | None:
    """The built root's marker, if a root of the current recipe is there."""
    try:
        info = json.loads((root_path(release) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return info if info.get("recipe") == RECIPE else None


@contextmanager
def _locked(release: str, progress: Progress) -> Iterator[None]:
    lock = roots_dir() / f"stormdeck-root-{release}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"another process is building the {release} root; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_root(release: str, progress: Progress) -> Path:
    """The root for `release`, built first if it is not there yet; RootError says why not."""
    if release not in RELEASES:
        raise RootError(f"no root recipe for release {release!r} "
                        f"(known: {', '.join(RELEASES)})")
    rel = RELEASES[release]
    if ready(release) and _fixed(rel):
        return root_path(release)
    with _locked(release, progress):
        if not ready(release):  # else the other builder finished it while we waited
            _build(rel, progress)
        if not _fixed(rel):  # a root built before the fix was known, or fixed by hand
            fix_bcrypt(root_path(release), progress)
        return root_path(release)


def _fixed(rel: Release) -> bool:
    if not rel.bcrypt_fix:
        return True
    site = root_path(rel.name) / "usr/lib/python3/dist-packages"
    return (site / f"bcrypt-{BCRYPT_WITHOUT_PYO3.split('==')[1]}.dist-info").is_dir()


def _build(rel: Release, progress: Progress) -> Path:
    if os.geteuid() != 0:
        raise RootError(f"building the {rel.name} root needs root (debootstrap and chroot); "
                        "run it with sudo once, later labs reuse the root")
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise RootError(f"the {rel.name} root is built with debootstrap, which is not "
                        "installed (apt-get install debootstrap)")
    mirror = host_mirror()
    if mirror is None:
        raise RootError("no Debian archive in this host's apt sources to build the "
                        f"{rel.name} root from; set STORMDECK_DEBIAN_MIRROR to one")
    final = root_path(rel.name)
    partial = final.with_name(final.name + ".partial")
    for stale in (partial, final):
        if stale.exists():
            _refuse_if_used(stale)
            shutil.rmtree(stale)
    started = time.monotonic()
    argv = [debootstrap, "--variant=minbase", rel.suite, str(partial), mirror]
    if rel.script:
        argv.append(f"/usr/share/debootstrap/scripts/{rel.script}")
    progress(f"building the {rel.name} root: debootstrap {rel.suite} from {mirror}")
    _run(argv, f"debootstrap of Debian {rel.suite}", timeout=1200)
    took_bootstrap = time.monotonic() - started
    (partial / "etc/apt/apt.conf.d/99stormdeck").write_text(APT_CONF)
    policy = partial / "usr/sbin/policy-rc.d"
    policy.write_text(POLICY_RC_D)
    policy.chmod(0o755)
    progress(f"installing Ceph into the {rel.name} root ({took_bootstrap:.0f} s so far)")
    env = {"DEBIAN_FRONTEND": "noninteractive", "SYSTEMD_OFFLINE": "1", "LC_ALL": "C.UTF-8",
           "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    _run(in_root(partial, ["apt-get", "update", "-qq"]), f"apt-get update in the {rel.name} root",
         env=env)
    _run(in_root(partial, ["apt-get", "install", "-y", "-qq", *CEPH_PACKAGES,
                           *CLIENT_PACKAGES]),
         f"installing Ceph from Debian {rel.suite}", env=env, timeout=1800)
    # After ca-certificates, which writes its own bundle over ours.
    copy_host_trust(partial)
    if rel.bcrypt_fix:
        fix_bcrypt(partial, progress)
    _run(in_root(partial, ["apt-get", "clean"]), "apt-get clean", env=env)
    version = ceph_version_of(partial)
    took = time.monotonic() - started
    (partial / MARKER).write_text(json.dumps({
        "recipe": RECIPE, "release": rel.name, "suite": rel.suite, "mirror": mirror,
        "ceph": version, "built": time.time(), "seconds": round(took, 1),
        "bootstrap_seconds": round(took_bootstrap, 1)}, indent=2))
    os.replace(partial, final)
    progress(f"the {rel.name} root (Ceph {version}) is ready in {final} after {took:.0f} s")
    return final


def fix_bcrypt(root: Path, progress: Progress) -> None:
    """Put a bcrypt without PyO3 in place of Debian's, so the mgr can load its modules.

    Debian 13's python3-bcrypt 4.x is a PyO3 extension, and PyO3 refuses to load
    in the mgr's Python subinterpreters: mgr_util imports bcrypt, so every module
    fails ("PyO3 modules do not yet support subinterpreters"). bcrypt 3.2.2 is
    cffi-based. The same fix operators on Debian 13 and Ubuntu 24.04 apply.
    """
    progress("replacing the root's PyO3 bcrypt with bcrypt 3.2.2 (the mgr cannot load PyO3)")
    copy_host_trust(root)
    env = {"SYSTEMD_OFFLINE": "1", "LC_ALL": "C.UTF-8", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
           "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt"}
    status = subprocess.run(in_root(root, ["dpkg-query", "-W", "-f=${Status}",
                                           "python3-bcrypt"]),
                            capture_output=True, text=True, env=env)
    if "install ok installed" in status.stdout:
        _run(in_root(root, ["dpkg", "--remove", "--force-depends", "python3-bcrypt"]),
             "removing Debian's python3-bcrypt", env=env)
    _run(in_root(root, ["python3", "-m", "pip", "install", "-q", "--no-warn-conflicts",
                        "--break-system-packages", "--upgrade",
                        "--target", "/usr/lib/python3/dist-packages", BCRYPT_WITHOUT_PYO3]),
         f"pip install {BCRYPT_WITHOUT_PYO3} in the root", env=env, timeout=600)


def copy_host_trust(root: Path) -> None:
    # pip inside the root reaches the package index the host's pip is set up for,
    # through the same CA bundle.
    bundle = Path("/etc/ssl/certs/ca-certificates.crt")
    if bundle.is_file():
        (root / "etc/ssl/certs").mkdir(parents=True, exist_ok=True)
        shutil.copy2(bundle, root / "etc/ssl/certs/ca-certificates.crt")
    for conf in (Path("/etc/pip.conf"), Path("/root/.config/pip/pip.conf")):
        if conf.is_file():
            dest = root / conf.relative_to("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(conf, dest)


def _refuse_if_used(path: Path) -> None:
    # Its binds live in the users' own mount namespaces, not in /proc/mounts: look
    # for processes whose root is this one.
    users = []
    for pid in psutil.pids():
        try:  # psutil has no process root: read the link
            if os.readlink(f"/proc/{pid}/root") == str(path):
                users.append(pid)
        except OSError:
            continue
    if users:
        raise RootError(f"{len(users)} processes run in {path} (pid {users[0]}): a lab still "
                        "uses it; stop it with `stormdeck lab down` first")


def _run(argv: Sequence[str], what: str, env: dict[str, str] | None = None,
         timeout: float = 600) -> str:
    try:
        res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                             env=env)
    except subprocess.TimeoutExpired:
        raise RootError(f"{what} did not finish in {timeout:.0f} s") from None
    except OSError as exc:
        raise RootError(f"{what} could not start: {exc.strerror}") from None
    if res.returncode != 0:
        lines = [ln.strip() for ln in (res.stderr + res.stdout).splitlines() if ln.strip()]
        why = lines[-1] if lines else f"exit {res.returncode}"
        raise RootError(f"{what} failed: {why}")
    return res.stdout
