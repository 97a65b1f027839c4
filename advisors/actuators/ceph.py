"""Ceph's changes: a config option, an OSD's group flags, a pool's settings, fast EC."""

from __future__ import annotations

import re
import time

from stormdeck.advisors import overrides
from stormdeck.advisors.actuators.base import Actuator, Backends, DataMovement, Verified, same
from stormdeck.advisors.ceph_admin import CephAdmin, Refused
from stormdeck.advisors.findings import Change
from stormdeck.base.errors import UserError
from stormdeck.collectors.model import Cluster
from stormdeck.collectors.options import LAYER_FROM, osd_number


class CephConfig(Actuator):
    """An option in the monitors' config database (`ceph config set/rm`), read back per OSD."""

    kind = "ceph_config"
    needs_ceph = True
    fixed_runtime = None
    unset_removes = True  # an option unset is `config rm`

    def command(self, c: Change) -> str:
        return f"ceph config set {c.target} {c.key} {c.proposed}"

    def width(self, c: Change) -> str:
        section, _, mask = c.target.partition("/")
        if "." in section:
            return "daemon"  # osd.3, mon.a: one daemon's section
        if section == "osd":
            return ("device class" if mask.startswith("class:") else
                    "host" if mask.startswith("host:") else "all OSDs")
        if section == "mon":
            return "all monitors"
        return "cluster"  # global, mgr, client, a CRUSH-located mask: assume the widest

    def vet(self, cluster: Cluster | None, c: Change) -> str | None:
        """An option the release lacks (K3.8) or the running scheduler overrides
        (advisors/overrides.py) is not proposed, nor one every OSD it is for runs from a
        layer that outranks the database (docs/knowledge.md, running-config)."""
        return overrides.vet(cluster, c.key, c.target) or outranked(cluster, c.key, c.target)

    def runtime(self, ceph: CephAdmin | None, c: Change) -> bool | None:
        """What the running cluster's `config help` says (can_update_at_runtime)."""
        if ceph is None:
            return None
        try:
            help_ = ceph.cmd("config help", key=c.key)
        except (UserError, ValueError, OSError):
            return None
        value = help_.get("can_update_at_runtime") if isinstance(help_, dict) else None
        return value if isinstance(value, bool) else None

    def read(self, b: Backends, c: Change) -> str | None:
        return b.need_ceph().config_get(c.target, c.key)

    def before(self, b: Backends, c: Change) -> str | None:
        # Exactly that section's stored value: undo must not copy an inherited one down.
        return b.need_ceph().config_db(c.target, c.key)

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        ceph = b.need_ceph()
        if value is None:
            ceph.config_rm(c.target, c.key)
        else:
            ceph.config_set(c.target, c.key, value)

    def verify(self, b: Backends, c: Change, want: str | None) -> Verified:
        ceph = b.need_ceph()
        reached = self._daemons_of(ceph, c.target)
        daemons = readback_sample(reached)
        # A scheduler that overrides the option (advisors/overrides.py) never lets the
        # daemons run it: say so at once, rather than wait for them and call it pending.
        over = self._override(ceph, daemons, c.key)
        stored = ceph.config_db(c.target, c.key)
        if over is not None and over.unless is not None and want is not None:
            # The OSD takes the change, then removes it from the database again: give
            # it the time a change takes to reach the daemons.
            deadline = time.monotonic() + b.verify_seconds
            while same(stored, want) and time.monotonic() < deadline:
                time.sleep(0.5)
                stored = ceph.config_db(c.target, c.key)
        version = ceph.config_log_version()
        log = f"config log version {version}" if version is not None else ""
        if len(daemons) < len(reached):
            log = f"read back from {len(daemons)} of {len(reached)} up OSDs; {log}".strip("; ")
        if not same(stored, want):
            if over is not None and want is not None and stored is None:
                # maybe_override_options_for_qos removed it from the database again.
                running = ceph.config_show(daemons[0], c.key) if daemons else None
                return Verified(overrides.outcome(over.scheduler), running,
                                f"the OSDs removed {c.key} {want} from the config database "
                                f"again and run {running}: {over.why()}; {log}".strip("; "))
            raise UserError(f"the config database holds {stored} for {c.key} on {c.target}, "
                            f"not {want}")
        effective = ceph.config_get(c.target, c.key)
        # A daemon that runs the value its scheduler forces is done: it will never run
        # the database's, so it is not waited for. Any other daemon not yet running the
        # database's value is still on its way, overridden or not: under mClock an OSD
        # that reverts a recovery limit does so on its own config update, a second or
        # more after the first OSD took the value out of the database again.
        forced = over.forced if over is not None else None
        deadline = time.monotonic() + b.verify_seconds
        lagging = daemons
        # Daemons a more specific setting gives another value (their own osd.N section, a
        # class or host mask): they are not meant to run the section's, and waiting for them
        # ended in a false "pending restart". `config get osd.N` is what the mon hands that
        # daemon; asked only of a daemon seen not running the section's value.
        own: dict[str, str] = {}
        asked: set[str] = set()
        live: bool | None = None
        while daemons:
            running = {d: ceph.config_show(d, c.key) for d in daemons}
            for d in daemons:
                if d != c.target and d not in asked and not same(running[d], effective):
                    asked.add(d)
                    try:
                        mine = ceph.config_get(d, c.key)
                    except UserError:  # unasked, it is waited for as before
                        continue
                    if not same(mine, effective):
                        own[d] = mine
            lagging = [d for d in daemons if not same(running[d], own.get(d, effective))]
            moving = [d for d in lagging if forced is None or not same(running[d], forced)]
            if not moving or time.monotonic() > deadline:
                break
            # An option the cluster says takes a restart reaches no running daemon:
            # waiting for it is 15 s of nothing (asked once, only of a lagging change).
            if live is None:
                live = c.runtime if c.runtime is not None else \
                    self.runtime(ceph, c) is not False
            if live is False:
                break
            time.sleep(0.5)
        if own:
            kept = ", ".join(f"{d} keeps {v}" for d, v in list(own.items())[:5])
            log = f"{kept} (its own setting); {log}".strip("; ")
        if lagging and over is not None:
            running = ceph.config_show(lagging[0], c.key)
            return Verified(overrides.outcome(over.scheduler), running,
                            f"{', '.join(lagging[:5])} run {running}, not {effective}: "
                            f"{over.why()}; {log}".strip("; "))
        if lagging:
            return Verified("pending restart", effective,
                            f"{', '.join(lagging[:5])} still run the old value; {log}".strip())
        if over is not None and over.forced is None and over.unless is None \
                and want is not None:
            # The daemons run the value, and their scheduler does not look at it
            # (osd_scrub_extended_sleep under mClock, osd_mclock_profile under wpq):
            # "applied" would promise an effect there is none of.
            shown = ", ".join(daemons[:5]) + (" ..." if len(daemons) > 5 else "")
            return Verified(overrides.outcome(over.scheduler), effective,
                            f"{shown} run {effective}, but {over.why()}; {log}".strip("; "))
        return Verified("applied", effective, log)

    @staticmethod
    def _override(ceph: CephAdmin, daemons: list[str], key: str) -> overrides.Override | None:
        """The override the daemons' own scheduler puts on `key`, from what the first of
        them runs (osd_op_queue, and the option that lifts a recovery override)."""
        rule = overrides.TABLE.get(key)
        if rule is None or not daemons:
            return None
        if not overrides.runs(rule, ceph.config_show(daemons[0], "osd_op_queue")):
            return None
        if rule.unless is not None and \
                overrides.is_true(ceph.config_show(daemons[0], rule.unless)):
            return None
        return rule

    @staticmethod
    def _daemons_of(ceph: CephAdmin, who: str) -> list[str]:
        """The running daemons whose value a change to `who` should reach (OSDs only)."""
        if re.fullmatch(r"osd\.\d+", who):
            return [who]
        up = set(ceph.osd_ids())
        if who == "osd":
            return [f"osd.{i}" for i in sorted(up)]
        m = re.fullmatch(r"osd/class:([A-Za-z0-9_-]+)", who)
        if m:
            return [f"osd.{i}" for i in ceph.osds_of_class(m.group(1)) if i in up]
        return []

    def inverse_command(self, c: Change, before: str | None) -> str:
        return (f"ceph config rm {c.target} {c.key}" if before is None
                else f"ceph config set {c.target} {c.key} {before}")


# `config show` is a round trip per daemon (the mon hands it to the mgr): at 10,000 OSDs a
# pass over all of them took minutes, with the operator waiting on apply. The database is
# the truth the mon pushes to every daemon; a spread sample shows that it arrived.
READBACK_MAX = 32


def readback_sample(daemons: list[str], limit: int = READBACK_MAX) -> list[str]:
    """At most `limit` of `daemons`, spread evenly over the list (its first and last in)."""
    if len(daemons) <= limit:
        return daemons
    if limit <= 1:
        return daemons[:limit]
    step = (len(daemons) - 1) / (limit - 1)
    return [daemons[round(i * step)] for i in range(limit)]


OSD_ID = re.compile(r"osd\.\d+")


# The flags `osd set-group` takes for one OSD (OSDMonitor: noup, nodown, noin, noout).
GROUP_FLAGS = ("noup", "nodown", "noin", "noout")


def outranked(cluster: Cluster | None, key: str, target: str) -> str | None:
    """Why a `ceph config set TARGET KEY` would change nothing the OSDs run: every OSD it
    is for runs the option from ceph.conf, the environment, the command line or a runtime
    setting, which outrank the database (`config show`). Said only when that is known of
    every OSD: one OSD's section once it was read; `osd` or `global` once every up OSD
    was read (a sample says nothing of the rest). A masked section (osd/class:ssd,
    osd/host:X) is not judged here: its OSDs are not known to this check."""
    opt = cluster.config.get(key) if cluster is not None else None
    if cluster is None or opt is None or not opt.running or "/" in target:
        return None
    if target.startswith("osd."):
        scope = {target} & cluster.running_read
    elif target in ("osd", "global"):
        scope = set(cluster.running_read)
        if cluster.num_up_osds is None or len(scope) < cluster.num_up_osds:
            return None
    else:
        return None
    above = sorted((o for o in scope if o in opt.running), key=osd_number)
    if not scope or len(above) < len(scope):
        return None
    layers = sorted({LAYER_FROM.get(opt.running[o].source or "", "from another layer")
                     for o in above})
    named = ", ".join(above[:4]) + (f" and {len(above) - 4} more" if len(above) > 4 else "")
    return (f"{named} run {key} {' and '.join(layers)}, which outranks the config "
            f"database: `ceph config set {target} {key}` would change nothing they run; "
            "change it where it is set (docs/knowledge.md, running-config); not proposed")


class OsdFlag(Actuator):
    """An OSD flag: cluster-wide (`ceph osd set/unset`: noout, noscrub, ...) when the target
    is "cluster", or one OSD's own (`ceph osd set-group/unset-group noup osd.N`) when the
    target names it, read back from that OSD's state in `osd dump`."""

    kind = "osd_flag"
    needs_ceph = True

    def command(self, c: Change) -> str:
        verb = "unset" if c.proposed == "unset" else "set"
        if self._one_osd(c):
            return f"ceph osd {verb}-group {c.key} {c.target}"
        return f"ceph osd {verb} {c.key}"

    def width(self, c: Change) -> str:
        return "daemon" if self._one_osd(c) else "cluster"

    def moves_data(self, c: Change) -> bool:
        """noup set on one OSD: the next time that OSD goes down it stays down, and its PGs
        lose it (below min_size they stop serving IO); the cluster's own noup holds no OSD
        of its own."""
        return c.key == "noup" and c.proposed == "set" and c.target != "cluster"

    def data_movement(self, c: Change) -> DataMovement:
        return DataMovement(held_down=(int(c.target.removeprefix("osd.")),))

    def follows_to_clean(self, c: Change) -> bool:
        # Nothing moves until that OSD next goes down: no movement of its own to follow.
        return False

    @staticmethod
    def _one_osd(c: Change) -> bool:
        if c.target == "cluster":
            return False
        if not OSD_ID.fullmatch(c.target):
            raise UserError(f"an OSD flag is set on the cluster or on one OSD (osd.N), "
                            f"not on {c.target!r}")
        if c.key not in GROUP_FLAGS:
            raise UserError(f"{c.key} cannot be set on one OSD; only "
                            f"{', '.join(GROUP_FLAGS)} can")
        return True

    def read(self, b: Backends, c: Change) -> str | None:
        ceph = b.need_ceph()
        flags = ceph.osd_flags(c.target) if self._one_osd(c) else ceph.flags()
        return "set" if c.key in flags else "unset"

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        on = (value or "unset") == "set"
        if self._one_osd(c):
            if on and c.key == "noup":
                # Held down, the OSD's PGs must stay active: Ceph's own word, asked now.
                # Its no (or no answer) comes before anything is sent: Refused, so the
                # journal says "refused, nothing changed", not "sent, outcome unknown".
                try:
                    why = b.need_ceph().ok_to_stop(c.target)
                except UserError as exc:
                    raise Refused(f"not holding {c.target} down: osd ok-to-stop could not "
                                  f"be asked ({exc})") from None
                if why:
                    raise Refused(f"not holding {c.target} down: {why} (osd ok-to-stop)")
            b.need_ceph().set_group_flag(c.key, c.target, on)
        else:
            b.need_ceph().set_flag(c.key, on)

    def inverse_command(self, c: Change, before: str | None) -> str:
        verb = "set" if before == "set" else "unset"
        if self._one_osd(c):
            return f"ceph osd {verb}-group {c.key} {c.target}"
        return f"ceph osd {verb} {c.key}"


class PoolSet(Actuator):
    """A pool's variable (`ceph osd pool set`), pg_num above all: it moves step by step."""

    kind = "pool_set"
    needs_ceph = True

    # Set as a target the mgr steps the value toward (a split or merge at a time).
    CONVERGING = ("pg_num", "pgp_num")

    def command(self, c: Change) -> str:
        return f"ceph osd pool set {c.target} {c.key} {c.proposed}"

    def width(self, c: Change) -> str:
        return "pool"

    def moves_data(self, c: Change) -> bool:
        """pg_num or pgp_num: PGs split or merge and data moves as the mgr steps pgp_num,
        for hours; a pool's other variables move none."""
        return c.key in self.CONVERGING

    def data_movement(self, c: Change) -> DataMovement:
        return DataMovement(pool=c.target, key=c.key, count=c.proposed)

    def read(self, b: Backends, c: Change) -> str | None:
        ceph = b.need_ceph()
        if c.key in self.CONVERGING:
            # What the operator set, not a step on the way: an undo of a merge still
            # running is not someone else's change.
            target = ceph.pool_target(c.target, c.key)
            if target is not None:
                return target
        return ceph.pool_get(c.target, c.key)

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        if value is None:
            raise UserError(f"{c.key} of pool {c.target} has no value to go back to")
        b.need_ceph().pool_set(c.target, c.key, value)

    def arrived(self, b: Backends, c: Change, want: str | None) -> str | None:
        now = b.need_ceph().pool_get(c.target, c.key)
        return now if same(now, want) else None

    def verify(self, b: Backends, c: Change, want: str | None) -> Verified:
        stored = self.read(b, c)
        if want is not None and not same(stored, want):
            raise UserError(f"{c.key} of pool {c.target} reads {stored} after the change, "
                            f"not {want}")
        if c.key not in self.CONVERGING:
            return Verified("applied", stored)
        ceph = b.need_ceph()
        now = ceph.pool_get(c.target, c.key)
        # Followed to its target or the time limit; pending is then what is known.
        deadline = time.monotonic() + max(b.verify_seconds, b.converge_seconds)
        while not same(now, want) and time.monotonic() < deadline:
            time.sleep(1.0)
            now = ceph.pool_get(c.target, c.key)
        if not same(now, want):
            way = "merging" if want is not None and now is not None and \
                float(want) < float(now) else "splitting"
            return Verified("pending", now, f"{c.key} is {now}, {way} on its way to {want}")
        return Verified("applied", now)

    def inverse_command(self, c: Change, before: str | None) -> str:
        return f"ceph osd pool set {c.target} {c.key} {before}"

    def inverse_note(self, c: Change, before: str | None) -> str:
        if c.key in self.CONVERGING and before is not None:
            try:
                fewer = float(before) < float(c.proposed)
            except ValueError:
                return super().inverse_note(c, before)
            return (f"undo: moves data: PGs {'merge' if fewer else 'split'} back to {before} "
                    "in the background, a step at a time")
        return super().inverse_note(c, before)

    def phrase(self, c: Change) -> str | None:
        # An irreversible pool change is confirmed by typing the pool's name.
        return None if self.reversible else c.target


class FastEC(PoolSet):
    """Tentacle's fast EC on an EC pool (`allow_ec_optimizations`): it cannot be turned off."""

    kind = "fast_ec"
    KEY = "allow_ec_optimizations"
    reversible = False

    def apply(self, b: Backends, c: Change, value: str | None) -> None:
        if c.key != self.KEY or not same(value, "true"):
            raise UserError(f"fast EC can only be turned on ({self.KEY} true), not set to "
                            f"{value} (K5.1)")
        super().apply(b, c, value)

    def moves_data(self, c: Change) -> bool:
        # It changes how an EC pool's shards are written, not where they are.
        return False

    def cannot_undo(self, c: Change) -> str | None:
        return f"{c.command} cannot be undone: fast EC cannot be turned off again (K5.1)"

    def inverse_command(self, c: Change, before: str | None) -> str:
        return "(none: fast EC cannot be turned off)"

    def phrase(self, c: Change) -> str | None:
        return c.target
