"""Options the running OSD scheduler overrides, or the release lacks: the one table every
proposal is vetted against, and what names a value the daemons forced back.

The table comes from Ceph's own sources (ceph/ceph, main as of 2026; the same in Reef
18.2 and Tentacle 20.2, checked on the labs, see tests/data/tentacle/README.md):

- src/osd/OSD.cc, `OSD::maybe_override_sleep_options_for_qos`: under mclock_scheduler
  the OSD `set_val`s every recovery, degraded-recovery, delete and snap-trim sleep and
  osd_scrub_sleep to 0, at boot and whenever one of them changes (`handle_conf_change`),
  whatever the profile, `custom` included. `config show osd.N` then reports the value
  with source "override" and the monitors' value under "overrides" (KNOWLEDGE K8.1).
- src/osd/OSD.cc, `OSD::maybe_override_options_for_qos`: under mclock_scheduler a change
  of osd_max_backfills or osd_recovery_max_active(_hdd/_ssd) is removed again from the
  monitors' config database (`config rm` for `osd` and `osd.N`) and the OSD logs
  "Change to <key> on osd.N did not take effect. Enable
  osd_mclock_override_recovery_settings before setting this option", unless
  osd_mclock_override_recovery_settings is true (K8.2).
- src/osd/OSD.cc, `OSD::maybe_override_max_osd_capacity_for_qos`: the OSD writes its
  own osd_mclock_max_capacity_iops_hdd/ssd from a boot-time bench; a value an operator
  sets is what the OSD measures against, not overridden, so it is not in the table.
- src/common/options/osd.yaml.in: osd_op_queue defaults to mclock_scheduler (since
  Quincy; Pacific's default is wpq) and needs a restart; the sleeps above and
  osd_scrub_extended_sleep carry "This setting is ignored when the mClock scheduler is
  used"; osd_mclock_profile is balanced, high_client_ops, high_recovery_ops or custom.

What a release lacks is not a static list here: the running cluster's own `config
help` says it (K3.8), read for every watched option (collectors/ceph.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stormdeck.collectors.model import Cluster

MCLOCK = "mclock_scheduler"
WPQ = "wpq"
# Releases whose osd_op_queue defaults to wpq (osd.yaml.in history; K8.1): used only when
# the cluster's own config help for osd_op_queue is unknown (an old recording).
WPQ_RELEASES = frozenset({"luminous", "mimic", "nautilus", "octopus", "pacific"})

SLEEP_SOURCE = "src/osd/OSD.cc OSD::maybe_override_sleep_options_for_qos"
RECOVERY_SOURCE = "src/osd/OSD.cc OSD::maybe_override_options_for_qos"
MCLOCK_ONLY_SOURCE = ("src/common/options/osd.yaml.in (\"Only considered for osd_op_queue = "
                      "mclock_scheduler\")")
IGNORED_SOURCE = "src/common/options/osd.yaml.in (\"ignored when the mClock scheduler is used\")"
OVERRIDE_RECOVERY = "osd_mclock_override_recovery_settings"
PROFILE_ADVICE = ("under mClock the lever is osd_mclock_profile (high_client_ops favours "
                  "clients, high_recovery_ops background work; K8.2)")


@dataclass(frozen=True, slots=True)
class Override:
    """One option a scheduler does not let an operator set."""

    option: str
    scheduler: str
    how: str  # what the OSD does with a value set: "forces it to 0", "ignores it", ...
    source: str
    unless: str | None = None  # a boolean option that, true, lifts the override
    forced: str | None = None  # the value the daemon runs instead, where it is fixed

    def why(self) -> str:
        lift = f" unless {self.unless} is true" if self.unless else ""
        return f"under {self.scheduler} the OSD {self.how}{lift} ({self.source})"


def _sleeps(base: str) -> tuple[str, ...]:
    return (base, f"{base}_hdd", f"{base}_ssd", f"{base}_hybrid")


TABLE: Mapping[str, Override] = {o.option: o for o in (
    *(Override(name, MCLOCK, "forces it to 0", SLEEP_SOURCE, forced="0") for name in (
        *_sleeps("osd_recovery_sleep"), *_sleeps("osd_recovery_sleep_degraded"),
        *_sleeps("osd_delete_sleep"), *_sleeps("osd_snap_trim_sleep"), "osd_scrub_sleep")),
    Override("osd_scrub_extended_sleep", MCLOCK, "ignores it", IGNORED_SOURCE),
    # The other way round: "Only considered for osd_op_queue = mclock_scheduler".
    Override("osd_mclock_profile", WPQ, "ignores it", MCLOCK_ONLY_SOURCE),
    *(Override(name, MCLOCK, "removes a change of it from the config database",
               RECOVERY_SOURCE, unless=OVERRIDE_RECOVERY)
      for name in ("osd_max_backfills", "osd_recovery_max_active",
                   "osd_recovery_max_active_hdd", "osd_recovery_max_active_ssd")),
)}


def _value(cluster: Cluster | None, name: str, who: str = "osd") -> str | None:
    """The value `who` gets from the config database (osd.N > osd > global), else the
    release's default; None when this option's config help is unknown."""
    if cluster is None:
        return None
    opt = cluster.config.get(name)
    if opt is None or not opt.exists:
        return None
    section = who.partition("/")[0]  # osd/class:ssd -> osd
    chain = [who, section, section.partition(".")[0], "global"]
    for section in dict.fromkeys(chain):
        if section in opt.values:
            return opt.values[section]
    return opt.default


def scheduler(cluster: Cluster | None, who: str = "osd") -> str | None:
    """The OSD op scheduler `who` runs: osd_op_queue from the config database or the
    release's default (it changes only with a restart, K8.1); None when unknown.

    `debug_random` picks one per OSD at boot: it is reported as is, and callers treat
    it as possibly mClock.
    """
    value = _value(cluster, "osd_op_queue", who)
    if value:
        return value.strip().lower()
    if cluster is not None and cluster.release:
        return WPQ if cluster.release.lower() in WPQ_RELEASES else MCLOCK
    return None


def is_mclock(scheduler_name: str | None) -> bool:
    return scheduler_name in (MCLOCK, "debug_random")


def runs(o: Override, running: str | None) -> bool:
    """Whether the scheduler `running` is the one `o` is about (debug_random may be mClock)."""
    if o.scheduler == MCLOCK:
        return is_mclock(running)
    return (running or "").strip().lower() == o.scheduler


def is_true(text: str | None) -> bool:
    return (text or "").strip().lower() in ("true", "1", "yes", "on")


def override(cluster: Cluster | None, option: str, who: str = "osd") -> Override | None:
    """The override that keeps `option` from taking effect on `who` in this cluster, if any."""
    o = TABLE.get(option)
    if o is None or not runs(o, scheduler(cluster, who)):
        return None
    if o.unless is not None and is_true(_value(cluster, o.unless, who)):
        return None
    return o


def vet(cluster: Cluster | None, option: str, who: str = "osd") -> str | None:
    """Why a change of `option` on `who` must not be proposed here, or None: the release
    lacks it (its config help said ENOENT, or was never asked, K3.8), or the running
    scheduler overrides it (the table above, K8.1-K8.2)."""
    release = (cluster.release if cluster else None) or "this release"
    opt = cluster.config.get(option) if cluster is not None else None
    if opt is None or not opt.exists:
        return f"{option} does not exist in {release}: not proposed (K3.8)"
    o = override(cluster, option, who)
    if o is None:
        return None
    if o.scheduler != MCLOCK:
        return f"{option} does nothing under {o.scheduler}: {o.why()}; not proposed"
    return f"{option} is overridden by {o.scheduler}: {o.why()}; not proposed: {PROFILE_ADVICE}"


def outcome(reason: str) -> str:
    """The journal's and the read-back's word for a value the daemons forced back."""
    return f"overridden by {reason}"


def is_overridden(outcome_text: str | None) -> bool:
    return (outcome_text or "").startswith("overridden by ")
