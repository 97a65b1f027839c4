"""The Prediction: what a change does to placement, as every surface shows and keeps it.

Also how it reads (bytes, percentages, durations) and a journal entry's prediction beside
what happened (against_outcome).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class OsdFill:
    osd: int
    bytes_in: int
    bytes_out: int
    used_ratio_now: float | None
    used_ratio_after: float | None


@dataclass
class Prediction:
    """What a change does to placement, the same fields everywhere (console, plan, apply,
    journal, `whatif -f json`)."""

    what: str  # "out osd.3", "pg_num of rbd 32 -> 64"
    pgs_remapped: list[str] = field(default_factory=list)  # PGs whose up set changes
    copies_to_create: int = 0  # shard copies backfill must write
    bytes_to_move: int = 0
    largest_per_osd: int = 0  # the most bytes one OSD receives
    pgs_inactive: list[str] = field(default_factory=list)
    pgs_undersized: list[str] = field(default_factory=list)
    pgs_degraded: list[str] = field(default_factory=list)
    per_osd: list[OsdFill] = field(default_factory=list)
    osds_past_nearfull: list[int] = field(default_factory=list)
    osds_past_backfillfull: list[int] = field(default_factory=list)
    osds_past_full: list[int] = field(default_factory=list)
    ratios: dict[str, float] = field(default_factory=dict)
    eta_seconds: float | None = None
    eta_note: str = ""
    method: str = ""
    tool: str = ""
    epoch: int = 0
    made: float = 0.0
    seconds: float = 0.0  # how long the prediction took
    notes: list[str] = field(default_factory=list)
    then: Prediction | None = None  # what follows (the out-move after OSDs stay down)

    # -- the guard --

    def refusal(self) -> str | None:
        """Why a change with this outcome is refused (inactive PGs, an OSD past
        backfillfull), or None."""
        reasons = []
        for p in self.stages():
            if p.pgs_inactive:
                reasons.append(f"{p.what} makes {len(p.pgs_inactive)} PG(s) inactive "
                               f"({', '.join(p.pgs_inactive[:8])}"
                               f"{', ...' if len(p.pgs_inactive) > 8 else ''}): client IO "
                               "to them stops")
            if p.osds_past_backfillfull:
                reasons.append(f"{p.what} fills "
                               f"{', '.join(f'osd.{i}' for i in p.osds_past_backfillfull)} "
                               f"past backfillfull ({p.ratios.get('backfillfull', 0):.2f}): "
                               "backfill stops there")
        return "; ".join(reasons) or None

    def phrase_reason(self) -> str | None:
        """Past nearfull (not backfillfull): allowed with the typed phrase."""
        past = sorted({i for p in self.stages() for i in p.osds_past_nearfull})
        if past:
            return (f"it fills {', '.join(f'osd.{i}' for i in past)} past nearfull "
                    f"({self.ratios.get('nearfull', 0):.2f})")
        return None

    def stages(self) -> list[Prediction]:
        out, p = [], self
        while p is not None:
            out.append(p)
            p = p.then
        return out

    # -- what it says --

    def to_dict(self) -> dict[str, Any]:
        """The keys the issue names (whatif -f json), then the detail."""
        d: dict[str, Any] = {
            "what": self.what,
            "pgs_remapped": len(self.pgs_remapped),
            "copies_to_create": self.copies_to_create,
            "bytes_to_move": self.bytes_to_move,
            "pgs_inactive": len(self.pgs_inactive),
            "pgs_undersized": len(self.pgs_undersized),
            "osds_past_nearfull": self.osds_past_nearfull,
            "osds_past_backfillfull": self.osds_past_backfillfull,
            "osds_past_full": self.osds_past_full,
            "eta_seconds": self.eta_seconds,
            "per_osd": [{"osd": f.osd, "bytes_in": f.bytes_in, "bytes_out": f.bytes_out,
                         "used_ratio_after": f.used_ratio_after} for f in self.per_osd],
            "method": self.method,
            "tool": self.tool,
            "largest_per_osd": self.largest_per_osd,
            "pgs_degraded": len(self.pgs_degraded),
            "pgs_remapped_ids": self.pgs_remapped,
            "pgs_inactive_ids": self.pgs_inactive,
            "pgs_undersized_ids": self.pgs_undersized,
            "pgs_degraded_ids": self.pgs_degraded,
            "ratios": self.ratios,
            "eta_note": self.eta_note,
            "epoch": self.epoch,
            "made": self.made,
            "seconds": self.seconds,
            "notes": self.notes,
            "refused": self.refusal(),
            "then": self.then.to_dict() if self.then is not None else None,
        }
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Prediction:
        """Read back from a plan file or a journal record (data: shown, never trusted for
        the guard, which predicts again at apply time)."""
        def ints(name: str) -> list[int]:
            return [int(x) for x in d.get(name) or () if isinstance(x, int | float)]

        def strs(name: str) -> list[str]:
            return [str(x) for x in d.get(name) or ()][:100000]

        per = [OsdFill(int(f.get("osd", -1)), int(f.get("bytes_in") or 0),
                       int(f.get("bytes_out") or 0), None,
                       float(f["used_ratio_after"]) if isinstance(
                           f.get("used_ratio_after"), int | float) else None)
               for f in d.get("per_osd") or () if isinstance(f, Mapping)]
        then = d.get("then")
        eta = d.get("eta_seconds")
        return cls(what=str(d.get("what", "")), pgs_remapped=strs("pgs_remapped_ids"),
                   copies_to_create=int(d.get("copies_to_create") or 0),
                   bytes_to_move=int(d.get("bytes_to_move") or 0),
                   largest_per_osd=int(d.get("largest_per_osd") or 0),
                   pgs_inactive=strs("pgs_inactive_ids"),
                   pgs_undersized=strs("pgs_undersized_ids"),
                   pgs_degraded=strs("pgs_degraded_ids"), per_osd=per,
                   osds_past_nearfull=ints("osds_past_nearfull"),
                   osds_past_backfillfull=ints("osds_past_backfillfull"),
                   osds_past_full=ints("osds_past_full"),
                   ratios={str(k): float(v) for k, v in (d.get("ratios") or {}).items()
                           if isinstance(v, int | float)},
                   eta_seconds=float(eta) if isinstance(eta, int | float) else None,
                   eta_note=str(d.get("eta_note") or ""), method=str(d.get("method") or ""),
                   tool=str(d.get("tool") or ""), epoch=int(d.get("epoch") or 0),
                   made=float(d.get("made") or 0), seconds=float(d.get("seconds") or 0),
                   notes=[str(n) for n in d.get("notes") or ()],
                   then=cls.from_dict(then) if isinstance(then, Mapping) else None)

    def lines(self) -> list[str]:
        """The prediction as a review shows it."""
        out = []
        for i, p in enumerate(self.stages()):
            head = "predicted" if i == 0 else "then"
            out.append(f"{head}: {p.what}: {len(p.pgs_remapped)} PG(s) change their up set, "
                       f"{p.copies_to_create} shard copies to create, "
                       f"{human(p.bytes_to_move)} to move (most into one OSD: "
                       f"{human(p.largest_per_osd)})")
            bad = [f"{len(p.pgs_inactive)} inactive" if p.pgs_inactive else "",
                   f"{len(p.pgs_undersized)} undersized" if p.pgs_undersized else "",
                   f"{len(p.pgs_degraded)} degraded" if p.pgs_degraded else ""]
            bad = [b for b in bad if b]
            out.append("  PGs: " + (", ".join(bad) if bad else "none become inactive, "
                                    "undersized or degraded"))
            fills = [f"osd.{f.osd} {_pct(f.used_ratio_now)} -> {_pct(f.used_ratio_after)}"
                     for f in sorted(p.per_osd, key=lambda f: -(f.used_ratio_after or 0))
                     if f.bytes_in or f.bytes_out][:6]
            if fills:
                out.append(f"  fill (nearfull {p.ratios.get('nearfull', 0):.2f}, backfillfull "
                           f"{p.ratios.get('backfillfull', 0):.2f}, full "
                           f"{p.ratios.get('full', 0):.2f}): " + ", ".join(fills))
            for name, osds in (("nearfull", p.osds_past_nearfull),
                               ("backfillfull", p.osds_past_backfillfull),
                               ("full", p.osds_past_full)):
                if osds:
                    out.append(f"  past {name}: {', '.join(f'osd.{i}' for i in osds)}")
            out.append("  time: " + (f"about {_duration(p.eta_seconds)} ({p.eta_note})"
                                     if p.eta_seconds is not None else p.eta_note))
            out.append(f"  method: {p.method}; {p.tool}")
            out.extend(f"  note: {n}" for n in p.notes)
        return out

    def text(self) -> str:
        return "\n".join(self.lines())


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _pct(r: float | None) -> str:
    return "?" if r is None else f"{r * 100:.1f}%"


def _duration(s: float | None) -> str:
    if s is None:
        return "unknown"
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def against_outcome(prediction: Mapping[str, Any], observed: Mapping[str, Any] | None,
                    settled: Mapping[str, Any] | None) -> str:
    """A journal entry's prediction beside what happened: PGs remapped and bytes predicted
    against those seen (right after, and the most seen while it moved), eta_seconds against
    the real seconds until active+clean (advisors/apply.py Executor.settle)."""
    p = Prediction.from_dict(prediction)
    eta = "no eta (no recovery rate)" if p.eta_seconds is None else \
        f"eta {_duration(p.eta_seconds)}"
    text = (f"predicted: {len(p.pgs_remapped)} PGs remapped, {p.copies_to_create} copies, "
            f"{human(p.bytes_to_move)}, {len(p.pgs_inactive)} inactive, {eta}")
    if not isinstance(observed, Mapping):
        return text
    text += (f" | seen right after: {observed.get('pgs_remapped')} PGs remapped, "
             f"{observed.get('misplaced_objects')} objects misplaced, "
             f"{observed.get('pgs_inactive')} PGs not active")
    if not isinstance(settled, Mapping):
        return text + "; active+clean not seen yet"
    most = (f"at most {settled.get('pgs_remapped_max')} PGs remapped, "
            f"{settled.get('misplaced_objects_max')} objects misplaced (about "
            f"{human(float(settled.get('misplaced_bytes_max') or 0))}), "
            f"{settled.get('degraded_objects_max')} degraded, "
            f"{settled.get('pgs_inactive_max')} PGs not active")
    seconds = settled.get("seconds")
    if settled.get("clean_at") and isinstance(seconds, int | float):
        low = settled.get("seconds_at_least")
        when = f"active+clean after {_duration(float(seconds))}"
        if isinstance(low, int | float) and seconds - low > 10:
            # Seen by a later read: it became clean somewhere between two reads.
            when = (f"active+clean between {_duration(float(low))} and "
                    f"{_duration(float(seconds))} after")
        return f"{text}; {when} ({settled.get('by')}); {most}"
    so_far = settled.get("seconds_so_far")
    return (f"{text}; not active+clean after {_duration(float(so_far or 0))} "
            f"({settled.get('by')}); {most}")


def as_dict(p: Prediction | None) -> dict[str, Any] | None:
    return p.to_dict() if p is not None else None
