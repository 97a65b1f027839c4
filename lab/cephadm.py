"""OSDs started the way cephadm starts them: a daemon directory each, a cgroup with its limit."""

from __future__ import annotations

import contextlib
import uuid
from pathlib import Path

from stormdeck.lab import procs
from stormdeck.lab.state import (
    CGROUP_PARENT,
    CGROUP_PERIOD_US,
    LabError,
    Proc,
    State,
    _binary,
    ceph_conf,
)


class CephadmShape:
    """The Lab's cephadm-shaped OSDs (a mixin: it uses the Lab's state and runners)."""


    # ---- OSDs as cephadm starts them -------------------------------------------

    def daemon_dir(self, state: State, name: str) -> tuple[Path, Path]:
        """(path the daemon sees, path on this host) of a cephadm-shaped daemon's directory.

        cephadm keeps /var/lib/ceph/FSID/osd.N (data, `block` link, `config`) and
        mounts it into the container; in a release root it is there, inside the
        root only, so readers must go through /proc/PID/root as they must for a
        container. On the host release it is the lab's data directory.
        """
        if self.root is None:
            d = self.dir / "data" / name
            return d, d
        inside = Path("/var/lib/ceph") / state.fsid / name
        return inside, self.root / inside.relative_to("/")

    def _add_osd_cephadm(self, state: State, osd_size: int) -> None:
        osd_uuid = str(uuid.uuid4())
        osd_id = int(self._ceph_raw("osd", "new", osd_uuid).strip())
        name = f"osd.{osd_id}"
        inside, here = self.daemon_dir(state, name)
        here.mkdir(parents=True)
        config = inside / "config"
        # cephadm's minimal conf plus what the lab's daemons need; the daemon
        # reads it through CEPH_CONF, as a container reads its /etc/ceph/ceph.conf.
        (here / "config").write_text(ceph_conf(self.dir, state.fsid, state.ports,
                                               state.objectstore)
                                     + f"\n[{name}]\nosd data = {inside}\n")
        proc = Proc(name, [], env={"CEPH_CONF": str(config),
                                   procs.MARK_VARIABLE: self._marker()})
        state.procs[name] = proc
        self._save(state)
        if state.objectstore == "bluestore":
            image = self.dir / f"{name}.img"
            with open(image, "wb") as f:
                f.truncate(osd_size)
            proc.image = str(image)
            self._save(state)
            proc.device = self._run([_binary("losetup"), "--find", "--show", str(image)]).strip()
            self._save(state)
            # BlueStore's default block path is $osd_data/block, cephadm's layout.
            (here / "block").symlink_to(proc.device)
        self._run(self.argv("ceph-osd", "-n", name, "--mkfs", "--osd-uuid", osd_uuid),
                  env={"CEPH_CONF": str(config)})
        cgroups = self._make_cgroups(state, name)
        join = [f"{c}/cgroup.procs" for c in cgroups]
        proc.argv = ["/bin/sh", "-c", 'while [ "$1" != -- ]; do echo $$ > "$1"; shift; done; '
                     'shift; exec "$@"', "sh", *join, "--",
                     *self.argv("ceph-osd", "-n", name, "-f")]
        self._start(state, proc)
        where = f" on {proc.device}" if proc.device else " in memory"
        self._progress(f"{name} started as cephadm does{where}, "
                       f"limited to {state.osd_cpu_limit:g} cores")

    def _make_cgroups(self, state: State, name: str,
                      base: Path = Path("/sys/fs/cgroup")) -> list[str]:
        """The OSD's own cgroup with its CPU limit, as a container runtime makes one.

        v1 (cpu and cpuset hierarchies) where the cpu controller is mounted on
        its own, else v2's cpu.max.
        """
        leaf = f"ceph-{state.fsid}@{name}.service"
        limit = state.osd_cpu_limit or 1.0
        quota = str(int(limit * CGROUP_PERIOD_US))
        made: list[str] = []
        v1_cpu = next((base / c for c in ("cpu,cpuacct", "cpu") if
                       (base / c / "cgroup.procs").exists()), None)
        try:
            if v1_cpu is not None:
                cpu = v1_cpu / CGROUP_PARENT / leaf
                cpu.mkdir(parents=True, exist_ok=True)
                made.append(str(cpu))
                state.cgroups.append(str(cpu))
                self._save(state)
                (cpu / "cpu.cfs_period_us").write_text(str(CGROUP_PERIOD_US))
                (cpu / "cpu.cfs_quota_us").write_text(quota)
                cpuset_root = base / "cpuset"
                if (cpuset_root / "cgroup.procs").exists():
                    cpus = (cpuset_root / "cpuset.cpus").read_text().strip()
                    mems = (cpuset_root / "cpuset.mems").read_text().strip()
                    # A cpuset cgroup takes no task until its cpus and mems are set,
                    # at every level.
                    parent = cpuset_root / CGROUP_PARENT
                    for d in (parent, parent / leaf):
                        d.mkdir(exist_ok=True)
                        if d.name == leaf:
                            made.append(str(d))
                            state.cgroups.append(str(d))
                            self._save(state)
                        (d / "cpuset.cpus").write_text(cpus)
                        (d / "cpuset.mems").write_text(mems)
            elif "cpu" in (base / "cgroup.controllers").read_text().split():
                parent = base / CGROUP_PARENT
                parent.mkdir(exist_ok=True)
                (base / "cgroup.subtree_control").write_text("+cpu")
                (parent / "cgroup.subtree_control").write_text("+cpu")
                cg = parent / leaf
                cg.mkdir(exist_ok=True)
                made.append(str(cg))
                state.cgroups.append(str(cg))
                self._save(state)
                (cg / "cpu.max").write_text(f"{quota} {CGROUP_PERIOD_US}")
            else:
                raise LabError("no cgroup cpu controller here (neither v1 nor v2) to limit "
                               "cephadm-shaped OSDs with")
        except OSError as exc:
            raise LabError(f"cannot make {name}'s cgroup: {exc.strerror} "
                           f"({exc.filename})") from None
        return made

    def _remove_cgroups(self, state: State) -> None:
        # Leaves first; the shared parent goes only once no other lab has one in it.
        for cg in sorted(set(state.cgroups), reverse=True):
            for d in (Path(cg), Path(cg).parent):
                if d.exists() and (d == Path(cg) or d.name == CGROUP_PARENT):
                    with contextlib.suppress(OSError):
                        d.rmdir()
