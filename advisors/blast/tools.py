"""osdmaptool and crushtool: where the cluster's own release of them runs, and running them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from stormdeck.base.errors import UserError


@dataclass(frozen=True)
class Tools:
    """Where osdmaptool and crushtool run: on the host, chrooted in a release root, or in
    the cluster's own container image through `cephadm shell` (a cephadm host has no Ceph
    packages of its own)."""

    root: Path | None  # None: the host's own binaries
    version: str  # "16.2.15"
    release: str  # "pacific"
    cephadm: str | None = None  # the cephadm binary, when the tools run in its shell

    def describe(self, cluster_version: str) -> str:
        where = (f"release root {self.root}" if self.root else
                 "cephadm shell" if self.cephadm else "host")
        same = self.version == cluster_version
        return (f"osdmaptool/crushtool {self.version} {self.release} ({where})"
                + ("" if same else f", not the cluster's {cluster_version}: a tool older "
                   "than the map drops what it does not know"))

    def workdir(self) -> tempfile.TemporaryDirectory[str]:
        base = self.root / "tmp" if self.root else None
        return tempfile.TemporaryDirectory(prefix="stormdeck-blast-", dir=base)

    def inside(self, path: str) -> str:
        """A path of the work directory as the tool sees it."""
        if self.root is None:
            return path
        return "/" + os.path.relpath(path, self.root)

    def argv(self, tool: str, args: Sequence[str]) -> list[str]:
        if self.root is not None:
            return [shutil.which("chroot") or "/usr/sbin/chroot", str(self.root),
                    f"/usr/bin/{tool}", *args]
        if self.cephadm is not None:
            # The work directory is under the temporary directory: mounted at the same
            # path, the tool reads and writes the files where stormdeck put them.
            tmp = tempfile.gettempdir()
            return [self.cephadm, "shell", "--mount", f"{tmp}:{tmp}", "--", tool, *args]
        path = shutil.which(tool)
        if path is None:
            raise UserError(f"{tool} is not installed on this host (package ceph-base): "
                            "the prediction needs it")
        return [path, *args]

    def run(self, tool: str, args: Sequence[str], timeout: float = 300.0) -> str:
        argv = self.argv(tool, args)
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise UserError(f"{tool} did not finish in {timeout:g} s") from None
        if res.returncode != 0:
            lines = (res.stderr or res.stdout).strip().splitlines()
            raise UserError(f"{tool} failed: {lines[-1] if lines else res.returncode}")
        return res.stdout


VERSION = re.compile(r"ceph version (\d+\.\d+\.\d+)\S* \(\w+\) (\w+)")


def _host_version() -> tuple[str, str] | None:
    path = shutil.which("osdmaptool")
    return _version_of([path, "--version"], 30) if path else None


def _cephadm_version(cephadm: str) -> tuple[str, str] | None:
    """The Ceph version of the image `cephadm shell` runs (it may pull it: minutes)."""
    return _version_of([cephadm, "shell", "--", "osdmaptool", "--version"], 300)


def _version_of(argv: list[str], timeout: float) -> tuple[str, str] | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = VERSION.search(out)
    return (m.group(1), m.group(2)) if m else None


def _root_version(root: Path) -> str | None:
    """The Ceph version a release root's package database holds (no chroot needed)."""
    try:
        text = (root / "var/lib/dpkg/status").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"Package: ceph-base\n(?:[^\n]+\n)*?Version: (?:\d+:)?(\d+\.\d+\.\d+)", text)
    return m.group(1) if m else None


def find_tools(cluster_version: str, cluster_release: str) -> Tools:
    """The cluster's own release's tools where they can be found: the host's when they
    match, else a stormdeck release root (/var/tmp/stormdeck-root-<release>, or
    $STORMDECK_ROOTS_DIR) when running as root, else the cluster's image through
    `cephadm shell`; otherwise the host's, said so."""
    host = _host_version()
    if host is not None and host[1] == cluster_release:
        return Tools(None, host[0], host[1])
    root = Path(os.environ.get("STORMDECK_ROOTS_DIR", "/var/tmp")) / \
        f"stormdeck-root-{cluster_release}"
    if os.geteuid() == 0 and (root / "usr/bin/osdmaptool").exists() and \
            shutil.which("chroot") is not None:
        return Tools(root, _root_version(root) or "unknown", cluster_release)
    cephadm = shutil.which("cephadm") if os.geteuid() == 0 else None
    image = _cephadm_version(cephadm) if cephadm else None
    if image is not None and (image[1] == cluster_release or host is None):
        return Tools(None, image[0], image[1], cephadm=cephadm)
    if host is None:
        raise UserError("osdmaptool is not installed on this host (package ceph-base, or "
                        "run as root on a cephadm host): the prediction needs it")
    return Tools(None, host[0], host[1])
