"""A cluster's sources and its admin connection, from options that follow `ceph`'s.

The client options are the ceph CLI's (-c/--conf, --id/--user, -n/--name,
-k/--keyring, --cluster), with CEPH_CONF and CEPH_ARGS read as `ceph` reads
them. Each option's allowed values live in its argparse `type` or `choices`,
so the config file (stormdeck/config.py) checks its keys with exactly these.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stormdeck.base.errors import UserError
from stormdeck.base.files import FileMissing, FileProblem, check_regular
from stormdeck.base.text import printable
from stormdeck.collectors.curve.source import CurveSource
from stormdeck.collectors.hub import Source
from stormdeck.collectors.registry import declaration, declared, named_by, source_options
from stormdeck.parsing import Parser

# ---- value types: the command line and the config file share them ------------------


def positive_seconds(text: Any) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError("takes a number of seconds") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("takes a number of seconds above 0")
    return value


def http_url(text: Any) -> str:
    if not isinstance(text, str) or not re.match(r"https?://[^/\s]+", text):
        raise argparse.ArgumentTypeError("takes a URL like http://127.0.0.1:9090 or "
                                         "https://prom.example:9090")
    return text


def readable_file(text: Any) -> str:
    if not isinstance(text, str) or not text:
        raise argparse.ArgumentTypeError("takes a file name")

    try:
        check_regular(text)  # a FIFO would hang the open, and later the read
    except FileProblem as exc:
        raise argparse.ArgumentTypeError(f"takes a readable file, and {printable(text, 200)} "
                                         f"is not ({exc.reason})") from None
    return text


def addr_list(text: Any) -> str:
    """host:port,host:port (a TOML list of them in the config file)."""
    if isinstance(text, list):
        if not all(isinstance(t, str) for t in text):
            raise argparse.ArgumentTypeError("takes host:port addresses")
        text = ",".join(text)
    if not isinstance(text, str):
        raise argparse.ArgumentTypeError("takes host:port addresses")
    items = [i.strip() for i in text.split(",") if i.strip()]
    for item in items:
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise argparse.ArgumentTypeError(f"takes host:port addresses, and {item!r} "
                                             "is not one")
    if not items:
        raise argparse.ArgumentTypeError("takes host:port addresses")
    return ",".join(items)


def label_matcher(text: Any) -> str:
    """A PromQL label matcher list: cluster="prod" or cluster="prod",dc=~"eu.*"."""
    from stormdeck.collectors.prometheus.promql import MatcherError, parse_matchers

    if not isinstance(text, str):
        raise argparse.ArgumentTypeError('takes a label matcher like cluster="prod"')
    try:
        return parse_matchers(text)
    except MatcherError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def query_override(text: Any) -> tuple[str, str]:
    """NAME=PROMQL: the PromQL the Prometheus source asks for one of its fields."""
    if not isinstance(text, str) or "=" not in text:
        raise argparse.ArgumentTypeError("takes NAME=PROMQL, like "
                                         "'read_iops=max by (ceph_daemon) (my:osd_reads)'")
    name, _, expr = text.partition("=")
    return checked_override(name.strip(), expr)


def checked_override(name: str, expr: Any) -> tuple[str, str]:
    """One query override, checked: a query of that name exists, its PromQL is not torn
    (strings closed, brackets balanced); Prometheus judges the rest when asked."""
    import difflib

    from stormdeck.collectors.prometheus.promql import MatcherError, check_query
    from stormdeck.collectors.prometheus.queries import ALL_QUERIES

    if name not in ALL_QUERIES:
        near = difflib.get_close_matches(name, list(ALL_QUERIES), n=3)
        raise argparse.ArgumentTypeError(
            f"names no Prometheus query {name!r}"
            + (f" (did you mean {', '.join(near)}?)" if near else "")
            + ": docs/fleet.md lists them")
    if not isinstance(expr, str):
        raise argparse.ArgumentTypeError(f"takes PromQL text for {name}")
    try:
        return name, check_query(expr)
    except MatcherError as exc:
        raise argparse.ArgumentTypeError(f"has PromQL for {name} that Prometheus would "
                                         f"refuse ({exc})") from None


def client_name(text: Any) -> str:
    """`ceph --name`: TYPE.ID, as librados takes it (client.admin)."""
    if not isinstance(text, str) or not re.fullmatch(r"[a-z]+\.[^\s]+", text):
        raise argparse.ArgumentTypeError("takes TYPE.ID, like client.admin")
    return text


def client_id(text: Any) -> str:
    if not isinstance(text, str) or not text or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError("takes an id without spaces, like admin")
    return text


# ---- options ----------------------------------------------------------------------------


def add_client_options(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The ceph CLI's client options, spelled as `ceph` spells them."""
    g = parser.add_argument_group("Ceph client (as the ceph CLI; also from CEPH_ARGS)")
    g.add_argument("-c", "--conf", metavar="FILE", default=None,
                   help="ceph.conf of the cluster (default $CEPH_CONF, then "
                        "/etc/ceph/CLUSTER.conf, ~/.ceph/CLUSTER.conf, ./CLUSTER.conf)")
    g.add_argument("--id", "--user", dest="client_id", metavar="ID", type=client_id, default=None,
                   help="client id for librados (as `ceph --id`: admin means client.admin)")
    g.add_argument("-n", "--name", dest="client_name", metavar="TYPE.ID", type=client_name,
                   default=None,
                   help="full client name for librados (as `ceph --name client.admin`)")
    g.add_argument("-k", "--keyring", metavar="FILE", default=None,
                   help="keyring file for that client")
    g.add_argument("--cluster", default="ceph", help="cluster name (default ceph)")
    return g


def add_source_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("the config file (used when no source option is given)")
    g.add_argument("--config", default=None, metavar="FILE",
                   help="the clusters by name (default ~/.config/stormdeck/config.toml or "
                        "$STORMDECK_CONFIG)")
    g.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="of the config file's clusters, this one (the console: repeatable)")
    g = add_client_options(parser)
    g.add_argument("--ceph", action="store_true",
                   help="watch a Ceph cluster through librados (implied by -c, --id, --name, "
                        "and by CEPH_CONF or /etc/ceph/CLUSTER.conf when no other source is given)")
    g = parser.add_argument_group("Prometheus (token and basic auth: config file only)")
    g.add_argument("--prometheus", metavar="URL", type=http_url, default=None,
                   help="read the fleet through this Prometheus (http://host:9090)")
    g.add_argument("--prometheus-for", choices=("ceph", "curve", "both"), default="ceph",
                   help="which cluster's series to read from --prometheus (default ceph)")
    g.add_argument("--prometheus-match", metavar="MATCHER", type=label_matcher, default=None,
                   help="label matcher added to every query, for a Prometheus that holds "
                        "several clusters (e.g. 'cluster=\"prod\"')")
    g.add_argument("--prometheus-scrape-interval", metavar="SECONDS", type=positive_seconds,
                   default=30.0,
                   help="how often that Prometheus scrapes Ceph: rates are taken over four "
                        "intervals, as Grafana's $__rate_interval (default 30, so 2 minutes)")
    g.add_argument("--prometheus-ca", metavar="FILE", type=readable_file, default=None,
                   help="CA certificate(s) to verify an https Prometheus with (default: the "
                        "system's)")
    g.add_argument("--prometheus-insecure", action="store_true",
                   help="do not verify the https Prometheus' certificate (never the default)")
    g.add_argument("--prometheus-query", metavar="NAME=PROMQL", type=query_override,
                   action="append", default=None,
                   help="ask this PromQL for the field NAME instead of stormdeck's own (a "
                        "site's recording rules or relabelled series; repeatable; config "
                        "table prometheus_query; names in docs/fleet.md)")
    g.add_argument("--prometheus-org-id", metavar="TENANT", default=None,
                   help="sent as X-Scope-OrgID: the tenant to read in Mimir or Cortex "
                        "(config key prometheus_org_id)")
    g = parser.add_argument_group("Curve and this host")
    g.add_argument("--curve-mds", metavar="ADDR,...", type=addr_list, default=None,
                   help="Curve MDS dummy addresses (host:7700,...); the leader is found by asking")
    g.add_argument("--curve-chunkserver", metavar="ADDR,...", type=addr_list, default=None,
                   help="Curve chunkserver addresses (host:8200,...)")
    g.add_argument("--curve-ops-tool", metavar="CMD", default=None,
                   help="curve_ops_tool and its flags, to list chunkservers and copyset health "
                        "(e.g. 'curve_ops_tool -confPath=/etc/curve/tools.conf')")
    g.add_argument("--curve-cli", metavar="CMD", default=None,
                   help="the curve CLI (tools-v2) and its flags, to list chunkservers")
    g.add_argument("--no-host", action="store_true",
                   help="do not read this host's own daemons and disks")
    g.add_argument("--timeout", type=positive_seconds, default=10.0,
                   help="seconds a source may take to answer (default 10)")
    # Last, so the built-in sources' help reads as it always has.
    for decl, options in source_options():
        g = parser.add_argument_group(decl.title or decl.name)
        for o in options:
            g.add_argument(*o.flags, **o.kwargs)


def source_parser() -> argparse.ArgumentParser:
    """A parser of the source options alone: what the config file is checked against."""
    p = Parser(prog="stormdeck", add_help=False)
    add_source_options(p)
    return p


# ---- who we are to the cluster ------------------------------------------------------


@dataclass(frozen=True)
class CephClient:
    """The identity and cluster a librados connection is made with, resolved once."""

    conf: str | None  # None: no ceph.conf found (librados then finds nothing either)
    name: str | None  # client.admin when None, as librados defaults
    keyring: str | None
    cluster: str
    timeout: float

    def args(self, conf: bool = True) -> list[str]:
        """The same identity for the `ceph` and `rados` tools."""
        out = ["--cluster", self.cluster]
        if self.conf and conf:
            out += ["-c", self.conf]
        if self.name:
            out += ["--name", self.name]
        if self.keyring:
            out += ["--keyring", self.keyring]
        return out


class _EnvParser(Parser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UserError(f"CEPH_ARGS: {message}")


def _ceph_args() -> argparse.Namespace:
    """CEPH_ARGS' client options, as the ceph CLI reads them (split on spaces).

    `ceph` appends CEPH_ARGS to its own arguments, so what CEPH_ARGS names wins
    over the command line; the rest of it librados reads itself
    (Rados.conf_parse_env, in collectors/ceph.py).
    """
    text = os.environ.get("CEPH_ARGS", "")
    p = _EnvParser(prog="CEPH_ARGS", add_help=False)
    add_client_options(p)
    for action in p._actions:
        action.default = None
    known, _ = p.parse_known_args(text.split())
    return known


def _default_conf(cluster: str) -> str | None:
    # librados' search path (CEPH_CONF_FILE_DEFAULT), after $CEPH_CONF.
    for candidate in (f"/etc/ceph/{cluster}.conf", f"~/.ceph/{cluster}.conf",
                      f"{cluster}.conf"):
        path = Path(candidate).expanduser()
        if path.is_file():
            return str(path)
    return None


def ceph_client(args: argparse.Namespace) -> CephClient:
    env = _ceph_args()

    def pick(attr: str) -> Any:
        value = getattr(env, attr, None)
        return value if value is not None else getattr(args, attr, None)

    cluster = pick("cluster") or "ceph"
    conf = pick("conf") or os.environ.get("CEPH_CONF") or _default_conf(cluster)
    cid, cname = pick("client_id"), pick("client_name")
    name = cname or (f"client.{cid}" if cid else None)
    keyring = pick("keyring")

    for path, what in ((conf, "ceph.conf"), (keyring, "keyring")):
        if not path:
            continue
        try:
            check_regular(path)  # librados would hang on a FIFO, or say "not found"
        except FileMissing:
            raise UserError(f"no such {what}: {printable(path, 200)}") from None
    return CephClient(conf=conf, name=name, keyring=keyring, cluster=cluster,
                      timeout=getattr(args, "timeout", 10.0))


def conf_path(args: argparse.Namespace) -> str | None:
    return ceph_client(args).conf


def names_ceph(args: argparse.Namespace) -> bool:
    """Did the options (or CEPH_ARGS) ask for Ceph by name?"""
    env = _ceph_args()
    return bool(getattr(args, "ceph", False) or args.conf or args.client_id
                or args.client_name or args.keyring or env.conf or env.client_id
                or env.client_name or env.keyring)


# ---- the sources ------------------------------------------------------------------


def names_other_cluster(args: argparse.Namespace) -> bool:
    """Do the options name a cluster source other than Ceph? Ceph is the default only
    when none is named."""
    return any(named_by(args, d) for d in declared() if d.scope == "cluster"
               and d.name != "ceph")


def build_sources(args: argparse.Namespace) -> list[Source]:
    """Sources in merge priority (collectors/registry.py): librados first, then Curve, this
    host, Prometheus, each source declared with its own `make` where it is declared."""
    want_curve = named_by(args, declaration("curve"))
    client = ceph_client(args)
    others = names_other_cluster(args)
    want_ceph = names_ceph(args) or (not others and client.conf is not None)
    if not want_ceph and not others:
        raise UserError("no cluster to watch: give -c CONF (or set CEPH_CONF) for Ceph, "
                        "--curve-mds ADDR for Curve, or --prometheus URL", exit_code=3)
    sources: list[Source] = []
    if want_ceph:
        sources.append(ceph_source(client))
    if want_curve:
        sources.append(curve_source(args))
    if not args.no_host:
        from stormdeck.collectors.host.source import HostSource

        sources.append(HostSource(ceph_conf=client.conf if want_ceph else None))
    if args.prometheus:
        sources.append(prometheus_source(args))
    # In the registry's order, as the console names a part's late sources in it too.
    order = {d.name: i for i, d in enumerate(declared())}
    return sorted([*sources, *declared_made(args)], key=lambda s: order.get(s.name, len(order)))


def declared_made(args: argparse.Namespace, validate: bool = False) -> list[Source]:
    """The sources declared with a `make` of their own (all, or those validate reads), from
    these options; the built-in four are made above."""
    return [s for d in declared() if d.make is not None and (d.validate or not validate)
            and (s := d.make(args)) is not None]


def ceph_source(client: CephClient) -> Source:
    from stormdeck.collectors.ceph.source import CephSource

    return CephSource(conffile=client.conf, client_name=client.name, keyring=client.keyring,
                      cluster=client.cluster, timeout=client.timeout)


def prometheus_source(args: argparse.Namespace) -> Source:
    from stormdeck.collectors.prometheus.source import PrometheusSource

    if getattr(args, "prometheus_insecure", False) and getattr(args, "prometheus_ca", None):
        raise UserError("--prometheus-ca and --prometheus-insecure contradict each other: "
                        "give one")
    return PrometheusSource(
        args.prometheus, timeout=args.timeout,
        ceph=args.prometheus_for in ("ceph", "both"),
        curve=args.prometheus_for in ("curve", "both"),
        match=getattr(args, "prometheus_match", None),
        ca=getattr(args, "prometheus_ca", None),
        insecure=getattr(args, "prometheus_insecure", False),
        token_file=getattr(args, "prometheus_token_file", None),
        user=getattr(args, "prometheus_user", None),
        password_file=getattr(args, "prometheus_password_file", None),
        org_id=getattr(args, "prometheus_org_id", None),
        queries=dict(getattr(args, "prometheus_query", None) or ()),
        scrape_interval=getattr(args, "prometheus_scrape_interval", 30.0))


def curve_source(args: argparse.Namespace) -> Source:
    mds = [a for a in (args.curve_mds or "").split(",") if a]
    chunkservers = [a for a in (args.curve_chunkserver or "").split(",") if a]
    try:
        ops = shlex.split(args.curve_ops_tool) if args.curve_ops_tool else None
        cli = shlex.split(args.curve_cli) if args.curve_cli else None
    except ValueError as exc:  # an unbalanced quote
        raise UserError(f"--curve-ops-tool/--curve-cli: cannot split the command ({exc})"
                        ) from None
    if not (mds or chunkservers or ops or cli):
        raise UserError("the Curve options name no address and no tool")
    from stormdeck.advisors.curve_schedule import own_schedule_times

    return CurveSource(mds=mds, chunkservers=chunkservers, ops_tool=ops, curve_cli=cli,
                       timeout=min(args.timeout, 5.0), schedules=own_schedule_times)


# ---- the executor -------------------------------------------------------------------


def ceph_admin(args: argparse.Namespace) -> Any:
    """A CephAdmin with the sources' identity; the caller closes it."""
    from stormdeck.advisors.apply import CephAdmin

    client = ceph_client(args)
    if client.conf is None:
        raise UserError("this change needs the Ceph cluster: give -c CONF or set CEPH_CONF")
    return CephAdmin(client.conf, client_name=client.name, keyring=client.keyring,
                     cluster=client.cluster, timeout=client.timeout)
