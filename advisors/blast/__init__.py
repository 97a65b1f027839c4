"""Blast radius, the package's front door: what a change moves, from the cluster's own map.

Callers import from here (`from stormdeck.advisors.blast import ...`); each idea lives
in one module of the package:

- seeds.py: Ceph's placement-seed arithmetic (rjenkins hash, ceph_stable_mod, pps)
- tools.py: osdmaptool and crushtool of the cluster's release, found and run
- mapping.py: each PG's up set from the tools or in-process crush_do_rule
- prediction.py: the Prediction, how it reads, and beside the outcome
- compare.py: counting what differs between two sets of up sets
- questions.py: whatif's questions (out, weights, pg_num, down, upmaps)
- changes.py: a plan's data-moving changes, asked of their actuators, predicted

Every prediction, made before the change is confirmed, starts from the cluster's current
osdmap (`osd getmap`) and per-PG bytes (`pg dump`), maps every PG before and after the
change, and counts what differs:

- OSDs out, and reweights that only lower: only the PGs that can change are mapped (those
  whose up set holds one of the OSDs, or that have an upmap), before and after, by Ceph's
  own crush_do_rule called in-process (advisors/crushlib.py); every other PG keeps its up
  set. That "before" must equal pg dump's up sets (checked for every candidate and a
  sample of the rest), or it falls back to the tools below. At 10,000 OSDs and 1.28
  million PGs this is about a second instead of minutes (docs/measured.md).
- OSD out (one OSD) and CRUSH weight: `osdmaptool --test-map-pgs-dump-all --clear-temp`,
  run twice (as the map is, and with --mark-out / --adjust-crush-weight), up sets compared;
  the map as it is is mapped once and kept for the next prediction on the same map.
  osdmaptool's pitfalls (K9.2): --mark-out takes one OSD and also marks it up; -dump's
  "acting" is pg_temp, so the *up* sets are compared.
- Several OSDs out, and reweight: osdmaptool has no option for either, so each pool's
  rule is mapped by `crushtool --test --pool-id P --weight ID W` before and after, and
  the map's pg_upmap/pg_upmap_items and down OSDs are applied as OSDMap does.
- pg_num / pgp_num: osdmaptool cannot simulate it (--pg_num leaves pgp_num, so every
  child maps to its parent). Each child's placement seed is computed as
  pg_pool_t::raw_pg_to_pps does (ceph_stable_mod over pgp_num, then
  crush_hash32_2(RJENKINS1, seed, poolid) for hashpspool pools) and mapped through the
  pool's CRUSH rule with crushtool, whose --pool-id applies that same hash.
- OSDs going down (noup held, a host stopped): the up sets lose those OSDs at once (PGs
  below min_size go inactive), `ceph osd ok-to-stop` is asked for its own verdict, and
  the out-move that follows after mon_osd_down_out_interval (unless noout) is predicted
  as well.

Tools run are the cluster's own release where it can be found (the host's, or a
stormdeck release root under /var/tmp), and the prediction says which one it used.
"""

from __future__ import annotations

from stormdeck.advisors import crushlib
from stormdeck.advisors.blast.changes import (
    changes_key,
    moves_data,
    plan_prediction,
    predict_changes,
    predict_down_now,
    reusable,
    splits_pool,
    state_of,
    verdicts,
)
from stormdeck.advisors.blast.compare import compare
from stormdeck.advisors.blast.mapping import (
    CRUSH_LINE,
    PG_LINE,
    SAMPLE,
    Up,
    _ids,
    _pg_order,
    _weights,
    apply_upmaps,
    crush_map,
    crush_up_sets,
    lowered_up_sets,
    osdmaptool_up,
    osdmaptool_up_now,
    parse_dump_all,
    parse_mappings,
    to_up,
)
from stormdeck.advisors.blast.prediction import (
    OsdFill,
    Prediction,
    against_outcome,
    as_dict,
    human,
)
from stormdeck.advisors.blast.questions import (
    predict_crush_weight,
    predict_down,
    predict_out,
    predict_pg_num,
    predict_reweight,
    predict_upmap_items,
    predict_upmap_primary,
)
from stormdeck.advisors.blast.seeds import crush_hash32_2, mask_of, pps, seed, stable_mod
from stormdeck.advisors.blast.tools import Tools, find_tools
from stormdeck.collectors.placement import ClusterState

__all__ = [
    "CRUSH_LINE", "PG_LINE", "SAMPLE", "ClusterState", "OsdFill",
    "Prediction", "Tools", "Up", "_ids", "_pg_order", "_weights", "against_outcome",
    "apply_upmaps", "as_dict", "changes_key", "compare", "crush_hash32_2", "crush_map",
    "crush_up_sets", "crushlib", "find_tools", "human", "lowered_up_sets", "mask_of",
    "moves_data", "osdmaptool_up", "osdmaptool_up_now", "parse_dump_all", "parse_mappings",
    "plan_prediction", "pps", "predict_changes", "predict_crush_weight", "predict_down",
    "predict_down_now", "predict_out", "predict_pg_num", "predict_reweight",
    "predict_upmap_items", "predict_upmap_primary", "reusable", "seed", "splits_pool",
    "stable_mod", "state_of", "to_up", "verdicts",
]
