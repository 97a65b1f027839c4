"""Choosing the sources a command watches, from options that follow the `ceph` CLI's conventions."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from stormdeck.base.errors import UserError
from stormdeck.collectors.hub import Source


def add_source_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("what to watch")
    g.add_argument("--ceph", action="store_true",
                   help="watch a Ceph cluster through librados (implied by -c, --id, --name, "
                        "and by CEPH_CONF or /etc/ceph/CLUSTER.conf when no other source is given)")
    g.add_argument("-c", "--conf", default=None,
                   help="ceph.conf of the cluster (default $CEPH_CONF, then /etc/ceph/ceph.conf)")
    g.add_argument("--id", dest="client_id", default=None,
                   help="client id for librados (as `ceph --id`: admin means client.admin)")
    g.add_argument("--name", dest="client_name", default=None,
                   help="full client name for librados (as `ceph --name client.admin`)")
    g.add_argument("--keyring", default=None, help="keyring file for that client")
    g.add_argument("--cluster", default="ceph", help="cluster name (default ceph)")
    g.add_argument("--prometheus", metavar="URL", default=None,
                   help="read the fleet through this Prometheus (http://host:9090)")
    g.add_argument("--prometheus-for", choices=("ceph", "curve", "both"), default="ceph",
                   help="which cluster's series to read from --prometheus (default ceph)")
    g.add_argument("--curve-mds", metavar="ADDR,...", default=None,
                   help="Curve MDS dummy addresses (host:7700,...); the leader is found by asking")
    g.add_argument("--curve-chunkserver", metavar="ADDR,...", default=None,
                   help="Curve chunkserver addresses (host:8200,...)")
    g.add_argument("--curve-ops-tool", metavar="CMD", default=None,
                   help="curve_ops_tool and its flags, to list chunkservers and copyset health "
                        "(e.g. 'curve_ops_tool -confPath=/etc/curve/tools.conf')")
    g.add_argument("--curve-cli", metavar="CMD", default=None,
                   help="the curve CLI (tools-v2) and its flags, to list chunkservers")
    g.add_argument("--no-host", action="store_true",
                   help="do not read this host's own daemons and disks")
    g.add_argument("--timeout", type=float, default=10.0,
                   help="seconds a source may take to answer (default 10)")


def conf_path(args: argparse.Namespace) -> str | None:
    if args.conf:
        return args.conf
    if os.environ.get("CEPH_CONF"):
        return os.environ["CEPH_CONF"]
    default = Path(f"/etc/ceph/{args.cluster}.conf")
    return str(default) if default.exists() else None


def build_sources(args: argparse.Namespace) -> list[Source]:
    """Sources in merge priority: librados first, then this host, then Prometheus."""
    explicit_ceph = bool(args.ceph or args.conf or args.client_id or args.client_name
                         or args.keyring)
    want_curve = bool(args.curve_mds or args.curve_chunkserver or args.curve_ops_tool
                      or args.curve_cli)
    conf = conf_path(args)
    want_ceph = explicit_ceph or (args.prometheus is None and not want_curve
                                  and conf is not None)
    if args.conf and not Path(args.conf).is_file():
        raise UserError(f"no such ceph.conf: {args.conf}")
    if args.keyring and not Path(args.keyring).is_file():
        raise UserError(f"no such keyring: {args.keyring}")
    if args.timeout <= 0:
        raise UserError("--timeout must be above zero")
    if not want_ceph and not want_curve and args.prometheus is None:
        raise UserError("no cluster to watch: give -c CONF (or set CEPH_CONF) for Ceph, "
                        "--curve-mds ADDR for Curve, or --prometheus URL", exit_code=3)
    sources: list[Source] = []
    if want_ceph:
        from stormdeck.collectors.ceph import CephSource

        name = args.client_name or (f"client.{args.client_id}" if args.client_id else None)
        sources.append(CephSource(conffile=conf, client_name=name, keyring=args.keyring,
                                  cluster=args.cluster, timeout=args.timeout))
    if want_curve:
        sources.append(curve_source(args))
    if not args.no_host:
        from stormdeck.collectors.host import HostSource

        sources.append(HostSource(ceph_conf=conf if want_ceph else None))
    if args.prometheus:
        if not args.prometheus.startswith(("http://", "https://")):
            raise UserError(f"--prometheus wants a URL like http://127.0.0.1:9090, "
                            f"not {args.prometheus!r}")
        from stormdeck.collectors.prometheus import PrometheusSource

        sources.append(PrometheusSource(args.prometheus, timeout=args.timeout,
                                        ceph=args.prometheus_for in ("ceph", "both"),
                                        curve=args.prometheus_for in ("curve", "both")))
    return sources


def _addrs(text: str | None, option: str) -> list[str]:
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"{option}: {item!r} is not host:port")
        out.append(item)
    return out


def curve_source(args: argparse.Namespace) -> Source:
    import shlex

    from stormdeck.collectors.curve import CurveSource

    mds = _addrs(args.curve_mds, "--curve-mds")
    chunkservers = _addrs(args.curve_chunkserver, "--curve-chunkserver")
    ops = shlex.split(args.curve_ops_tool) if args.curve_ops_tool else None
    cli = shlex.split(args.curve_cli) if args.curve_cli else None
    if not (mds or chunkservers or ops or cli):
        raise UserError("the Curve options name no address and no tool")
    return CurveSource(mds=mds, chunkservers=chunkservers, ops_tool=ops, curve_cli=cli,
                       timeout=min(args.timeout, 5.0))
