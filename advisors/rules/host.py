"""Host settings: the tuned profile and the messenger's on-wire encryption (KNOWLEDGE.md K1.9)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.actuators.table import change
from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import ANY, Context, Proposes, Rule

LATENCY_PROFILES = ("latency-performance", "network-latency")


class TunedProfile(Rule):
    id = "host.tuned_profile"
    proposes = (Proposes("tuned_profile", ("profile",), ANY),)
    title = "Storage host without a latency tuned profile"
    source = "host-tuned-latency-profile"
    explanation = (
        "CPU C-state and P-state changes cause latency spikes, most on Intel; the tuned "
        "profiles latency-performance and network-latency avoid them (K1.9).")

    def check(self, ctx: Context) -> Iterable[Check]:
        profiled = [(name, host) for name, host in ctx.latest.hosts.items()
                    if host.tuned_profile is not None]
        # Which hosts hold daemons is a walk of every daemon (10,000 at scale): only
        # when some host reports a profile at all.
        storage_hosts = {d.host for d in ctx.latest.daemons.values() if d.host} \
            if profiled else set()
        for name, host in profiled:
            if name not in storage_hosts:
                continue
            profile = host.tuned_profile
            good = profile in LATENCY_PROFILES
            want = str(ctx.p("profile"))
            proposal = None if good or not profile else change(
                "tuned_profile", name, "profile", profile, want,
                note=f"the way back: tuned-adm profile {profile}")
            yield Check(
                target=f"host {name}", fire=not good, clear=good, severity=Severity.INFO,
                summary=f"host {name} runs tuned profile {profile}" if profile else
                        f"host {name} has no tuned profile (tuned not installed or not run)",
                evidence=(ctx.evidence("tuned profile", [], now=profile or "none"),),
                changes=(proposal,) if proposal else (),
                procedure=() if profile else (f"apt-get install tuned, then `tuned-adm "
                                              f"profile {want}`.",))


# Where each mode is read: clients read ms_client_mode; daemons read ms_cluster_mode for
# their connections to each other and ms_service_mode for the connections they accept
# (doc/rados/configuration/msgr2.rst). The mons' own ms_mon_*_mode are left out: mon
# traffic is small, and they default to secure.
MODES = (("ms_cluster_mode", ("osd", "mon")), ("ms_service_mode", ("osd", "mon")),
         ("ms_client_mode", ("client",)))


class SecureMode(Rule):
    id = "ceph.msgr.secure_mode"
    title = "Messenger prefers on-wire encryption"
    source = "msgr-secure-mode-cost"
    explanation = (
        "msgr v2 with cephx performs like v1, but its secure mode (on-wire encryption) "
        "cost 30-40% of performance at equal or higher CPU use (K1.9). Each mode is judged "
        "where it is read: ms_client_mode in the client section (and client.NAME ones), "
        "ms_cluster_mode and ms_service_mode in the osd and mon sections (and osd.N), each "
        "falling back to global as `ceph config get` does. Whether the encryption is "
        "needed is a security decision; this only says what it costs.")

    def check(self, ctx: Context) -> Iterable[Check]:
        for option, families in MODES:
            opt = ctx.option(option)
            if opt is None or not opt.exists:
                continue
            sections = list(families)
            # Sections of one daemon or client set apart in `config dump` (osd.3,
            # client.rgw.a, osd/class:ssd) are judged on their own too.
            sections += sorted(w for w in opt.values
                               if w.split("/")[0].split(".")[0] in families
                               and w not in families)
            for who in sections:
                value = opt.values.get(who) if who not in families else \
                    ctx.effective(option, who)
                if not value:
                    continue
                secure = value.replace(",", " ").split()[0] == "secure"
                yield Check(
                    target=f"{option} {who}", fire=secure, clear=not secure,
                    severity=Severity.INFO,
                    summary=f"{option} is '{value}' for {who}: traffic is encrypted on the "
                            "wire first",
                    evidence=(ctx.evidence(f"{option} ({who})", [], now=value),))


RULES = (TunedProfile, SecureMode)
