"""`stormdeck whatif`: what a change would move (PGs, copies, bytes, fill, time), read only."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.base.text import printable
from stormdeck.output import add_format_options, dump, is_json
from stormdeck.sources import add_source_options, ceph_admin

KINDS = ("out", "down", "reweight", "crush-weight", "pg_num", "pgp_num", "plan", "upmap",
         "upmap-primary")
OSD = re.compile(r"^(?:osd\.)?(\d+)$")
PGID = re.compile(r"^\d+\.[0-9a-f]+$")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "whatif", help="what a change would move, predicted from the cluster's own map",
        description="Predict, from the cluster's osdmap and pg dump, what a change would do: "
                    "PGs remapped, shard copies and bytes to move, PGs made inactive or "
                    "undersized, each OSD's fill after it against nearfull, backfillfull and full, "
                    "and the time at the current recovery rate. Nothing is changed. "
                    "Forms: out osd.N [osd.M ...]; down osd.N ... | host:NAME; "
                    "reweight osd.N W; crush-weight osd.N W; pg_num POOL N|2x; "
                    "pgp_num POOL N; plan FILE; upmap PGID FROM TO [FROM TO ...] "
                    "(pg-upmap-items); upmap-primary PGID OSD (pg-upmap-primary, Reef and "
                    "later).")
    p.add_argument("kind", choices=KINDS, metavar="KIND",
                   help=f"what would change: {', '.join(KINDS)}")
    p.add_argument("args", nargs="+", metavar="ARG", help="OSDs, a pool and a count, or a "
                                                          "plan file")
    add_format_options(p, "the prediction")
    add_source_options(p)
    p.set_defaults(handler=cmd_whatif)


def osd_id(text: str) -> int:
    m = OSD.match(text)
    if not m:
        raise UserError(f"{printable(text, 60)!r} is not an OSD (osd.N)")
    return int(m.group(1))


def pg_id(text: str) -> str:
    if not PGID.match(text):
        raise UserError(f"{printable(text, 60)!r} is not a PG id (POOL.HEX, as 1.1f)")
    return text


def weight(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{printable(text, 60)!r} is not a {what}") from None
    if value < 0 or value != value or value == float("inf"):
        raise UserError(f"a {what} is a number of 0 or more, not {printable(text, 60)}")
    return value


def pairs(args: list[str], what: str) -> dict[int, float]:
    """osd.N W [osd.M W ...]"""
    if len(args) % 2:
        raise UserError(f"{what} takes pairs of an OSD and a weight (osd.3 0.8)")
    return {osd_id(args[i]): weight(args[i + 1], what) for i in range(0, len(args), 2)}


def host_osds(admin: Any, name: str) -> list[int]:
    for node in (admin.cmd("osd tree") or {}).get("nodes", ()):
        if node.get("type") == "host" and node.get("name") == name:
            return sorted(int(c) for c in node.get("children", ()) if int(c) >= 0)
    raise UserError(f"there is no host {printable(name, 60)!r} in the CRUSH map")


def count_of(text: str, now: int) -> int:
    """N, or 2x/0.5x of the pool's pg_num now."""
    try:
        if text.lower().endswith("x"):
            value = float(text[:-1]) * now
            if value != int(value):
                raise ValueError
            return int(value)
        return int(text)
    except ValueError:
        raise UserError(f"{printable(text, 60)!r} is not a PG count (a number, or 2x)") from None


def predict(args: argparse.Namespace, admin: Any) -> Any:
    from stormdeck.advisors import blast

    kind, rest = args.kind, list(args.args)
    if kind == "plan":
        from stormdeck.advisors.plan import Plan

        if len(rest) != 1:
            raise UserError("whatif plan takes one plan file")
        plan = Plan.load(Path(rest[0]))
        p = blast.plan_prediction(admin.connection, plan.changes)
        if p is None:
            raise UserError(f"plan {printable(plan.id)} changes nothing that moves data "
                            "(pg_num, pgp_num, an OSD's noup)")
        return p
    state = blast.state_of(admin.connection)
    if kind == "upmap-primary":
        if len(rest) != 2:
            raise UserError("whatif upmap-primary takes a PG and an OSD (1.1f osd.3)")
        return blast.predict_upmap_primary(state, pg_id(rest[0]), osd_id(rest[1]))
    tools = blast.find_tools(state.version, state.release)
    if kind == "upmap":
        if len(rest) < 3 or len(rest) % 2 == 0:
            raise UserError("whatif upmap takes a PG and pairs of OSDs (1.1f osd.3 osd.5)")
        pairs = [(osd_id(rest[i]), osd_id(rest[i + 1])) for i in range(1, len(rest), 2)]
        return blast.predict_upmap_items(state, tools, pg_id(rest[0]), pairs)
    if kind == "out":
        return blast.predict_out(state, tools, [osd_id(a) for a in rest])
    if kind == "down":
        if len(rest) == 1 and rest[0].startswith("host:"):
            host = rest[0].removeprefix("host:")
            ids = host_osds(admin, host)
            what = f"down host {host} ({', '.join(f'osd.{i}' for i in ids)})"
        else:
            ids, what = [osd_id(a) for a in rest], None
        return blast.predict_down(state, tools, ids, blast.verdicts(admin.connection)(ids),
                                  what=what)
    if kind == "reweight":
        return blast.predict_reweight(state, tools, pairs(rest, "reweight"))
    if kind == "crush-weight":
        return blast.predict_crush_weight(state, tools, pairs(rest, "CRUSH weight"))
    # pg_num / pgp_num POOL N
    if len(rest) != 2:
        raise UserError(f"whatif {kind} takes a pool and a count (whatif {kind} rbd 256)")
    pool = state.pool_by_name(rest[0])
    if pool is None:
        raise UserError(f"there is no pool {printable(rest[0], 60)!r} in this cluster")
    now = pool.pg_num if kind == "pg_num" else pool.pgp_num
    return blast.predict_pg_num(state, tools, pool.name, count_of(rest[1], now), kind)


def cmd_whatif(args: argparse.Namespace) -> int:
    admin = ceph_admin(args)
    try:
        p = predict(args, admin)
    finally:
        admin.close()
    if is_json(args):
        dump(p.to_dict(), args)
    else:
        for line in p.lines():
            print(printable(line, 2000))
        reason = p.refusal()
        if reason:
            print(f"a plan making this change would be refused: {printable(reason, 600)}")
    return 0
