"""Erasure-coded pools: fast EC in Tentacle, its defaults, the stripe unit, m < 2 (K5, K8.6).

Sources checked: Tentacle's ceph-mon refuses the flag with "ec optimizations not
currently supported for pool profile." and "stripe_unit must be divisible by 4096
to enable ec optimizations" (strings of the 20.2.4 binary; tried on the lab, see
tests/integration/test_pools_ec_lab.py); the plugins set
FLAG_EC_PLUGIN_OPTIMIZED_SUPPORTED only for jerasure with technique reed_sol_van
and isa with reed_sol_van (or its "default") in src/erasure-code/jerasure/
ErasureCodeJerasure.h and src/erasure-code/isa/ErasureCodeIsa.h (ceph/ceph main);
doc/rados/operations/erasure-code.rst (K8.6).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Proposes, Rule, config_change
from stormdeck.collectors.model import Cluster, Pool

FIXED = (20, 2, 1)  # 20.2.0 crashes OSDs with the flag set (tracker 74813)
# (plugin, technique) pairs whose plugin says FLAG_EC_PLUGIN_OPTIMIZED_SUPPORTED; both
# plugins default their technique to reed_sol_van when the profile names none.
FAST_EC_CODES = {("jerasure", "reed_sol_van"), ("isa", "reed_sol_van"), ("isa", "default")}


def _version(text: str | None) -> tuple[int, ...] | None:
    try:
        return tuple(int(x) for x in (text or "").split(".")[:3]) or None
    except ValueError:
        return None


def fast_ec_capable(pool: Pool) -> bool | None:
    """Whether the monitor takes allow_ec_optimizations for this pool's profile; None
    when the profile's plugin is not known (no profile in `osd dump`)."""
    if pool.ec_plugin is None:
        return None
    return (pool.ec_plugin, pool.ec_technique or "reed_sol_van") in FAST_EC_CODES


def rgw_bulk_data(pool: Pool) -> bool:
    """An RGW bucket-data pool (application rgw, name ending .data): large objects written
    whole, which fast EC's partial reads and writes do little for; the docs recommend it
    for block and file (K8.6)."""
    return "rgw" in pool.applications and pool.name.endswith(".data")


def tentacle(c: Cluster | None) -> tuple[int, ...] | None:
    """The oldest running version when it is Tentacle (20) or later, else None."""
    version = _version(c.version) if c else None
    return version if version is not None and version >= (20,) else None


class FastEcOff(Rule):
    id = "ceph.ec.fast_ec_off"
    # Nothing: an irreversible flag on a production pool is the operator's step, taken
    # after a test pool has run the load (issue 31); new pools get it by the default.
    title = "Erasure-coded pool without fast EC"
    source = "fast-ec-irreversible, fast-ec-results, fast-ec-tentacle-release, fast-ec-requirements"
    explanation = (
        "Tentacle's fast EC (allow_ec_optimizations) brings partial reads and writes and "
        "parity-delta writes: small reads 2-3x, small writes at least 2x at equal latency "
        "(K5.3). It can NOT be turned off again (K5.1, K7.3). The monitor takes it only for "
        "the jerasure and isa plugins with technique reed_sol_van, and only when every mon "
        "and OSD runs Tentacle (K8.6); RGW bucket-data pools (large objects written whole) "
        "gain little and are left alone. 20.2.0 crashes OSDs with it set (tracker 74813): "
        "use 20.2.1 or later. New pools get it from osd_pool_default_flag_ec_optimizations. "
        "On an existing pool it is information and a procedure, never a change made from "
        "here: a flag that cannot be turned off is tried on a test pool with the same "
        "profile and load first.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        version = tentacle(c)
        if c is None or version is None:
            return
        for pool in c.pools:
            if pool.type != "erasure":
                continue
            on = pool.ec_optimizations
            capable = fast_ec_capable(pool)
            target = f"pool {pool.name}"
            # The version is the oldest running: at 20 or later every daemon is on Tentacle,
            # which the flag needs (K8.6).
            if on or capable is not True or rgw_bulk_data(pool):
                # Nothing to propose: on already, a code the monitor refuses, or a pool
                # that gains little.
                yield Check(target=target, fire=False, clear=True, severity=Severity.INFO,
                            summary=f"EC pool {pool.name}: fast EC "
                                    f"{'on' if on else 'not applicable'}")
                continue
            if version < FIXED:
                yield Check(
                    target=target, fire=True, clear=False, severity=Severity.INFO,
                    summary=f"EC pool {pool.name} could use fast EC, but {c.version} crashes "
                            "OSDs with it (tracker 74813): upgrade to 20.2.1 first",
                    evidence=(ctx.evidence("ceph version", [], now=c.version),),
                    procedure=("Upgrade every daemon to 20.2.1 or later; only then turn fast "
                               "EC on (`ceph osd pool set POOL allow_ec_optimizations "
                               "true`).",))
                continue
            yield Check(
                target=target, fire=True, clear=False, severity=Severity.INFO,
                summary=f"EC pool {pool.name} ({pool.ec_k}+{pool.ec_m}, {pool.ec_plugin} "
                        f"{pool.ec_technique or 'reed_sol_van'}) runs without fast EC",
                evidence=(ctx.evidence("pool flags", [], now=",".join(pool.flags) or "none"),),
                procedure=fast_ec_procedure(pool))


def fast_ec_procedure(pool: Pool) -> tuple[str, ...]:
    """How to turn fast EC on for an existing pool without betting it on the first try."""
    profile = pool.ec_profile or "PROFILE"
    return (
        "Fast EC cannot be turned off again (K5.1, K7.3): try it on a test pool first. "
        f"`ceph osd pool create {pool.name}-fastec-test 32 32 erasure {profile}`, "
        f"`ceph osd pool set {pool.name}-fastec-test allow_ec_optimizations true`, put the "
        "pool's own kind of load on it (rbd bench or fio on an image in it, or rados "
        "bench) for hours, and watch `ceph crash ls-new` and the OSD logs.",
        f"Only then, in a quiet hour, with a backup of what matters: `ceph osd pool set "
        f"{pool.name} allow_ec_optimizations true` (IRREVERSIBLE); delete the test pool.",
        "For pools created later: `ceph config set mon "
        "osd_pool_default_flag_ec_optimizations true` (ceph.ec.fast_ec_default).")


class FastEcDefault(Rule):
    id = "ceph.ec.fast_ec_default"
    proposes = (Proposes("ceph_config", ("osd_pool_default_flag_ec_optimizations",), "mon",
                         "true"),)
    title = "New EC pools will be created without fast EC"
    source = "fast-ec-stripe-unit, fast-ec-requirements, config-history-and-reset"
    explanation = (
        "On Tentacle osd_pool_default_flag_ec_optimizations gives every new EC pool fast EC "
        "from the start (K8.6); it is off by default. A cluster that uses EC pools and runs "
        "20.2.1 or later (20.2.0 crashes OSDs with the flag, tracker 74813) can turn it on: "
        "it changes only pools created afterwards, and only those whose profile's code the "
        "monitor accepts (jerasure or isa with reed_sol_van).")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        version = tentacle(c)
        opt = ctx.option("osd_pool_default_flag_ec_optimizations")
        if c is None or version is None or opt is None or not opt.exists:
            return
        value = ctx.effective("osd_pool_default_flag_ec_optimizations", "mon")
        off = (value or "false").strip().lower() in ("false", "0", "no", "off")
        ec = [p for p in c.pools if p.type == "erasure"]
        fire = off and bool(ec) and version >= FIXED
        yield Check(
            target="cluster", fire=fire, clear=not fire, severity=Severity.INFO,
            summary=f"osd_pool_default_flag_ec_optimizations is {value or 'false'} while "
                    f"{len(ec)} EC pool(s) exist: new EC pools start without fast EC",
            evidence=(ctx.evidence("osd_pool_default_flag_ec_optimizations", [],
                                   now=value or "false"),),
            changes=(config_change(ctx, "osd_pool_default_flag_ec_optimizations", "true",
                                   who="mon",
                                   note="EC pools created from now on; existing pools keep "
                                        "their flags; undo with ceph config rm mon "
                                        "osd_pool_default_flag_ec_optimizations"),)
            if fire else ())


def stripe_unit_default(ctx: Context) -> tuple[int | None, bool]:
    """(what new profiles that name no stripe unit get, whether 0 means automatic here).

    Since ceph PR 64908 (ceph/ceph main, 2025-08) the option defaults to 0: 16K for a pool
    with fast EC, 4K otherwise; releases before it default to 4096 and have no such
    meaning of 0. The release's own `config help` says which this cluster runs (K9.6)."""
    opt = ctx.option("osd_pool_erasure_code_stripe_unit")
    automatic = opt is not None and opt.exists and (opt.default or "").strip() == "0"
    value = ctx.effective("osd_pool_erasure_code_stripe_unit", "mon")
    try:
        return (int(float(value)) if value is not None else None), automatic
    except ValueError:
        return None, automatic


class StripeUnitSmall(Rule):
    id = "ceph.ec.stripe_unit_small"
    title = "EC stripe unit smaller than fast EC wants"
    source = "fast-ec-stripe-unit, fast-ec-requirements, ec-stripe-unit-zero-auto"
    explanation = (
        "For new fast-EC pools a 16K stripe_unit is recommended (up to 256K for read-heavy "
        "pools); the default is still 4K, and an existing pool's stripe unit cannot change "
        "(K5.2, K8.6). So this is said once per cluster, about the next pool: it fires while "
        "EC pools that run (or could run) fast EC have a small stripe unit and new profiles "
        "still default to one (osd_pool_erasure_code_stripe_unit). Where the release reads "
        "0 as automatic (16K with fast EC, else 4K; ceph PR 64908) a 0 is not small, and "
        "16K is never forced on pools that will not run fast EC. The proposed profile "
        "copies every key of the old one (crush-root included) but the stripe unit.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or tentacle(c) is None:
            return
        want = int(ctx.p("stripe_unit"))
        # Pools fast EC cannot run on (a code the mon refuses, RGW bucket data) keep their
        # stripe unit: 16K buys them nothing.
        small = [p for p in c.pools if p.type == "erasure" and p.stripe_unit is not None
                 and p.stripe_unit < want and fast_ec_capable(p) is not False
                 and not rgw_bulk_data(p)]
        default, automatic = stripe_unit_default(ctx)
        default_small = default is None or (default < want and not (default == 0 and automatic))
        fire = bool(small) and default_small
        if not small:
            yield Check(target="cluster", fire=False, clear=True, severity=Severity.INFO,
                        summary="no fast-EC-capable EC pool with a small stripe unit")
            return
        model = self._model(small)
        names = ", ".join(f"{p.name} ({p.stripe_unit // 1024} KiB)" for p in small[:5])
        if automatic:
            default_step = ("Or let profiles that name no stripe unit choose: `ceph config rm "
                            "mon osd_pool_erasure_code_stripe_unit` (0, automatic on this "
                            "release: 16K for fast-EC pools, 4K for the rest).")
        else:
            default_step = ("Name the stripe unit in each fast-EC profile rather than "
                            "raising osd_pool_erasure_code_stripe_unit: on this release that "
                            "default applies to every new EC pool, fast EC or not.")
        yield Check(
            target="cluster", fire=fire, clear=not fire, severity=Severity.INFO,
            summary=f"EC pools {names} have stripe units below {want // 1024} KiB, which "
                    "cannot change; create the next fast-EC pool with a profile of "
                    f"{want // 1024} KiB",
            evidence=(ctx.evidence("stripe_unit", [float(p.stripe_unit or 0) for p in small],
                                   "B"),
                      ctx.evidence("osd_pool_erasure_code_stripe_unit", [],
                                   now="unknown" if default is None else
                                   f"{default}{' (automatic)' if default == 0 else ''}")),
            procedure=(f"For the next pool: `{self._profile_command(model, want)}`, then "
                       f"`ceph osd pool create NAME erasure {model.ec_profile}-su"
                       f"{want // 1024}k` (a pool cannot take a new profile; migrate data "
                       "to it if the old pool's small writes matter).", default_step),
            badness=float(len(small)))

    @staticmethod
    def _model(pools: list[Pool]) -> Pool:
        """The profile most of the small-stripe pools use: the one to copy."""
        common = Counter(p.ec_profile for p in pools).most_common(1)[0][0]
        return next(p for p in pools if p.ec_profile == common)

    @staticmethod
    def _profile_command(p: Pool, want: int) -> str:
        head = f"ceph osd erasure-code-profile set {p.ec_profile}-su{want // 1024}k"
        if p.ec_profile_settings:
            # Every key of the old profile, as `osd dump` gave it, but its stripe unit.
            keys = {k: v for k, v in p.ec_profile_settings.items() if v != ""}
            keys.pop("stripe_unit", None)  # an empty value is the default: same without
            first = [k for k in ("k", "m", "plugin", "technique") if k in keys]
            order = first + sorted(k for k in keys if k not in first)
            parts = [head, *(f"{k}={keys[k]}" for k in order)]
        else:
            parts = [head, f"k={p.ec_k}", f"m={p.ec_m}"]
            if p.ec_plugin:
                parts.append(f"plugin={p.ec_plugin}")
            if p.ec_technique:
                parts.append(f"technique={p.ec_technique}")
            if p.ec_failure_domain:
                parts.append(f"crush-failure-domain={p.ec_failure_domain}")
            if p.ec_device_class:
                parts.append(f"crush-device-class={p.ec_device_class}")
        parts.append(f"stripe_unit={want // 1024}K")
        return " ".join(parts)


class EcOneParity(Rule):
    id = "ceph.ec.single_parity"
    title = "Erasure-coded pool with one parity chunk (m < 2)"
    source = "fast-ec-results"
    explanation = (
        "An EC pool with m=1 survives one failure, like 2 replicas: while one OSD is down "
        "or recovering, a second failure loses data. m=2 gives the protection of 3 "
        "replicas, and with fast EC a wider k no longer costs performance, so k+2 (6+2: "
        "33% overhead) is the choice (K5.3). A pool's k and m cannot change: the way out is "
        "a new pool with an m=2 profile and moving the data.")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        for pool in (c.pools if c else ()):
            if pool.type != "erasure" or pool.ec_m is None:
                continue
            thin = pool.ec_m < 2
            yield Check(
                target=f"pool {pool.name}", fire=thin, clear=not thin,
                severity=Severity.WARNING,
                summary=f"EC pool {pool.name} is {pool.ec_k}+{pool.ec_m}: one more failure "
                        "while an OSD is down loses data",
                evidence=(ctx.evidence("m (parity chunks)", [float(pool.ec_m)]),),
                procedure=(f"Create a profile with m=2 (e.g. k={pool.ec_k or 4} m=2, same "
                           "plugin and failure domain), a pool on it, and move the data; "
                           "k and m of an existing pool cannot change.",),
                badness=float(2 - pool.ec_m))


RULES = (FastEcOff, FastEcDefault, StripeUnitSmall, EcOneParity)
