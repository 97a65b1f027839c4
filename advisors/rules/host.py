"""Host settings: the tuned profile and the messenger's on-wire encryption (KNOWLEDGE.md K1.9)."""

from __future__ import annotations

from collections.abc import Iterable

from stormdeck.advisors.model import Change, Check, Severity
from stormdeck.advisors.rules.base import Context, Rule

LATENCY_PROFILES = ("latency-performance", "network-latency")


class TunedProfile(Rule):
    id = "host.tuned_profile"
    title = "Storage host without a latency tuned profile"
    source = "K1.9"
    explanation = (
        "CPU C-state and P-state changes cause latency spikes, most on Intel; the tuned "
        "profiles latency-performance and network-latency avoid them (K1.9).")

    def check(self, ctx: Context) -> Iterable[Check]:
        storage_hosts = {d.host for d in ctx.latest.daemons.values() if d.host}
        for name, host in ctx.latest.hosts.items():
            if name not in storage_hosts or host.tuned_profile is None:
                continue
            profile = host.tuned_profile
            good = profile in LATENCY_PROFILES
            want = str(ctx.p("profile"))
            change = None if good or not profile else Change(
                kind="tuned_profile", target=name, key="profile", current=profile,
                proposed=want, command=f"tuned-adm profile {want}", runtime=True,
                reversible=True, blast_radius="host",
                note=f"the way back: tuned-adm profile {profile}")
            yield Check(
                target=f"host {name}", fire=not good, clear=good, severity=Severity.INFO,
                summary=f"host {name} runs tuned profile {profile}" if profile else
                        f"host {name} has no tuned profile (tuned not installed or not run)",
                evidence=(ctx.evidence("tuned profile", [], now=profile or "none"),),
                changes=(change,) if change else (),
                procedure=() if profile else (f"apt-get install tuned, then `tuned-adm "
                                              f"profile {want}`.",))


MODES = ("ms_cluster_mode", "ms_service_mode", "ms_client_mode")


class SecureMode(Rule):
    id = "ceph.msgr.secure_mode"
    title = "Messenger prefers on-wire encryption"
    source = "K1.9"
    explanation = (
        "msgr v2 with cephx performs like v1, but its secure mode (on-wire encryption) "
        "cost 30-40% of performance at equal or higher CPU use (K1.9). Whether the "
        "encryption is needed is a security decision; this only says what it costs.")

    def check(self, ctx: Context) -> Iterable[Check]:
        for option in MODES:
            opt = ctx.option(option)
            value = ctx.effective(option, "global")
            if opt is None or not opt.exists or not value:
                continue
            first = value.replace(",", " ").split()[0]
            secure = first == "secure"
            yield Check(
                target=option, fire=secure, clear=not secure, severity=Severity.INFO,
                summary=f"{option} is '{value}': traffic is encrypted on the wire first",
                evidence=(ctx.evidence(option, [], now=value),))


RULES = (TunedProfile, SecureMode)
