"""The running Ceph release: past its end of life, or a version with a known fast-EC crash."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from stormdeck.advisors.findings import Check, Severity
from stormdeck.advisors.rules.base import Context, Rule
from stormdeck.advisors.rules.ec import _version
from stormdeck.advisors.rules.leaders import RELEASES

# Archived releases and the day their maintenance ended: docs.ceph.com/en/latest/releases
# ("Archived Releases": initial release + days maintained, as its timeline draws them;
# read 2026-11). Releases still maintained have only estimates there and are left out.
END_OF_LIFE = {
    "pacific": "2024-03-04",  # 16.2.15 the last
    "quincy": "2025-01-13",  # 17.2.9
    "reef": "2026-03-20",  # 18.2.8
}
LAST_ARCHIVED = "reef"


def end_of_life(release: str | None) -> str | None:
    """The day `release`'s maintenance ended ("before 2024" for those before Pacific), or
    None while it is maintained or unknown."""
    if release in END_OF_LIFE:
        return END_OF_LIFE[release]
    if release in RELEASES and RELEASES.index(release) < RELEASES.index("pacific"):
        return "before 2024-03-04"
    return None


class ReleaseAdvisory(Rule):
    id = "ceph.release.advisory"
    title = "Ceph release past its end of life, or with a known fast-EC crash"
    source = "fast-ec-tentacle-release, mclock-forces-sleeps-zero, read-balancer-compat"
    clock = True  # the end of life comes by the date
    explanation = (
        "An archived release gets no backports or security fixes (docs.ceph.com releases "
        "index): Pacific's ended 2024-03-04, Quincy's 2025-01-13, Reef's 2026-03-20. What "
        "this project's advice rests on changed after Pacific: mClock replaced wpq as the "
        "scheduler (K8.1), Reef and Squid brought the read balancer (K8.5), Tentacle fast "
        "EC. Tentacle 20.2.0 crashes OSDs once a pool has fast EC (allow_ec_optimizations, "
        "tracker 74813); 20.2.1 fixes it and refuses the flag for stripe units not aligned "
        "to 4K (K7.3).")

    def check(self, ctx: Context) -> Iterable[Check]:
        c = ctx.cluster
        if c is None or (c.release is None and c.version is None):
            return
        version = _version(c.version)
        running = c.version or c.release or "unknown"
        ended = end_of_life(c.release)
        now = datetime.fromtimestamp(ctx.latest.time, UTC).date().isoformat()
        over = ended is not None and (ended.startswith("before") or ended <= now)
        yield Check(
            target="end of life", fire=over, clear=not over, severity=Severity.INFO,
            summary=f"Ceph {running} ({c.release}) is past its end of life ({ended}): no "
                    "more fixes; upgrade to a maintained release",
            evidence=(ctx.evidence("ceph version", [], now=running),),
            procedure=("Plan the upgrade one release at a time as the release notes allow "
                       "(Pacific and Quincy -> Reef -> Squid or Tentacle); with cephadm "
                       "`ceph orch upgrade start --ceph-version X`.",) if over else ())
        if version is not None and version[:2] == (20, 2) and version < (20, 2, 1):
            flagged = [p.name for p in c.pools if p.ec_optimizations]
            ec = any(p.type == "erasure" for p in c.pools)
            yield Check(
                target="fast EC crash", fire=ec, clear=not ec,
                severity=Severity.WARNING if flagged else Severity.INFO,
                summary=f"Ceph {c.version} crashes OSDs on pools with fast EC (tracker 74813)"
                        + (f"; pools with it on: {', '.join(flagged)}" if flagged else
                           "; no pool has it on: do not turn it on before 20.2.1"),
                evidence=(ctx.evidence("ceph version", [], now=c.version),),
                procedure=("Upgrade every daemon to 20.2.1 or later before any pool gets "
                           "allow_ec_optimizations (it cannot be turned off again).",))
        else:
            yield Check(target="fast EC crash", fire=False, clear=True,
                        severity=Severity.INFO, summary=f"Ceph {running}")


RULES = (ReleaseAdvisory,)
