"""`stormdeck lab ...`: the command-line face of the throwaway lab cluster."""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path
from typing import Any

from stormdeck.lab import roots
from stormdeck.lab.cluster import Lab
from stormdeck.lab.state import GIB, SCRAPE_INTERVAL, LabError, Ports, default_dir, parse_size
from stormdeck.output import add_format_options, dump, is_json


def register(sub: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=None,
                        help=f"the lab's directory (default {default_dir()}, "
                             "or $STORMDECK_LAB_DIR)")

    lab = sub.add_parser("lab", help="a real throwaway Ceph cluster on this host",
                         description="A real throwaway Ceph cluster on this host, on 127.0.0.1: "
                                     "for rehearsal, demos and tests.")
    lab_sub = lab.add_subparsers(dest="lab_command", metavar="ACTION", required=True,
                                 parser_class=type(lab))

    up = lab_sub.add_parser("up", parents=[common], help="start a lab cluster",
                            description="Start one mon, one mgr (with its prometheus module) "
                                        "and N OSDs, and wait until every PG is active+clean.")
    up.add_argument("--osds", type=int, default=3, help="number of OSDs (default 3)")
    releases = (*roots.HOST_RELEASES, *roots.RELEASES)
    up.add_argument("--release", choices=releases, default=None,
                    help="the Ceph release to run (default: the host's own Ceph); "
                         + ", ".join(f"{n} from Debian {r.suite}" for n, r in
                                     roots.RELEASES.items())
                         + " run chrooted in a root built once with debootstrap under "
                           f"{roots.roots_dir()} and reused")
    up.add_argument("--cephadm", action="store_true",
                    help="start OSDs as cephadm does: `ceph-osd -n osd.N -f`, their conf in "
                         "the daemon's own directory (CEPH_CONF), each in its own cgroup "
                         "with a CPU limit")
    up.add_argument("--osd-cpu-limit", type=float, default=None, metavar="CORES",
                    help="with --cephadm: each OSD's cgroup CPU quota in cores (default 1)")
    up.add_argument("--memstore", action="store_true",
                    help="OSDs in memory instead of BlueStore on loop devices (needs no root)")
    up.add_argument("--prometheus", action="store_true",
                    help="also start Prometheus and a node exporter that scrape the lab")
    up.add_argument("--osd-size", default="2G", help="size of each OSD's loop device (default 2G)")
    up.add_argument("--mon-port", type=int, default=Ports.mon, help="monitor v2 port")
    up.add_argument("--mgr-port", type=int, default=Ports.mgr_prometheus,
                    help="mgr prometheus module port")
    up.add_argument("--prometheus-port", type=int, default=Ports.prometheus,
                    help="Prometheus port (with --prometheus)")
    up.add_argument("--node-exporter-port", type=int, default=Ports.node_exporter,
                    help="node exporter port (with --prometheus)")
    up.add_argument("--exporter-port", type=int, default=Ports.exporter,
                    help="stormdeck exporter port (with --prometheus)")
    up.add_argument("--timeout", type=float, default=300.0,
                    help="seconds to wait for each start-up step (default 300)")
    up.set_defaults(handler=cmd_up)

    down = lab_sub.add_parser("down", parents=[common], help="stop the lab and remove it",
                              description="Stop every process the lab started (by recorded "
                                          "PID), detach its loop devices, remove its directory.")
    down.set_defaults(handler=cmd_down)

    status = lab_sub.add_parser("status", parents=[common], help="what the lab runs",
                                description="Processes, ports, devices and health of the lab. "
                                            "Exits 0 if it runs, 1 if not.")
    add_format_options(status, "the lab's status")
    status.add_argument("--quiet", action="store_true", help="print nothing; only the exit code")
    status.set_defaults(handler=cmd_status)

    load = lab_sub.add_parser("load", parents=[common], help="real client load (rados bench)",
                              description="Start rados bench writes in the background, "
                                          "or stop them with --stop.")
    load.add_argument("--size", default="4K", help="bytes per write (default 4K)")
    load.add_argument("--threads", type=int, default=16, help="writes in flight (default 16)")
    load.add_argument("--round", type=float, default=60, metavar="SECONDS",
                      help="seconds per rados bench round (default 60); each round deletes "
                           "what it wrote when it ends, so its disks never fill, and those "
                           "deletes are a load of another kind: `stormdeck experiment` on "
                           "the lab wants a round longer than the experiment")
    load.add_argument("--seconds", type=float, default=0,
                      help="how long; 0 (the default) runs until --stop or lab down")
    load.add_argument("--stop", action="store_true", help="stop the running load")
    load.set_defaults(handler=cmd_load)

    storm = lab_sub.add_parser("storm", parents=[common], help="a real peering storm",
                               description="Create a pool of many PGs, or crash and restart "
                                           "an OSD, then follow the PGs back to active+clean.")
    what = storm.add_mutually_exclusive_group()
    what.add_argument("--pgs", type=int, default=None,
                      help="(re)create pool lab-storm with this many PGs (default 256)")
    what.add_argument("--restart-osd", type=int, default=None, metavar="ID",
                      help="kill osd.ID, wait until it is marked down, start it again")
    storm.add_argument("--no-wait", action="store_true",
                       help="return at once instead of waiting for active+clean")
    storm.add_argument("--timeout", type=float, default=600.0,
                       help="seconds to wait for active+clean (default 600)")
    storm.set_defaults(handler=cmd_storm)

    for action, verb in (("stop", "stop"), ("start", "start again")):
        one = lab_sub.add_parser(action, parents=[common], help=f"{verb} one lab daemon",
                                 description=f"{verb.capitalize()} one of the lab's processes "
                                             "by name (mon.a, mgr.x, osd.N, prometheus, "
                                             "node-exporter): for fault rehearsals.")
        one.add_argument("daemon", help="the daemon's name, as `lab status` lists it")
        one.set_defaults(handler=cmd_stop if action == "stop" else cmd_start)


def cmd_up(args: argparse.Namespace) -> int:
    ports = Ports(mon=args.mon_port, mgr_prometheus=args.mgr_port,
                  prometheus=args.prometheus_port, node_exporter=args.node_exporter_port,
                  exporter=args.exporter_port)
    osd_size = parse_size(args.osd_size)
    if osd_size < GIB:
        raise LabError(f"--osd-size {args.osd_size}: BlueStore needs at least 1G per OSD")
    lab = Lab(args.dir)
    lab.up(osds=args.osds, memstore=args.memstore, prometheus=args.prometheus,
           ports=ports, osd_size=osd_size, timeout=args.timeout, release=args.release,
           cephadm=args.cephadm, osd_cpu_limit=args.osd_cpu_limit)
    print_status(lab.status())
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    lab = Lab(args.dir)
    if lab.read_state() is None and not lab.dir.exists():
        print(f"no lab in {lab.dir}; nothing to stop")
        return 0
    stopped = lab.down()
    print(f"lab in {lab.dir} stopped ({', '.join(stopped) or 'nothing was running'}) "
          "and removed")
    return 0


def console_args(s: dict[str, Any]) -> list[str]:
    """The `stormdeck` arguments that open the console on the lab: its conf, and its
    Prometheus when it runs one (p99 and op latency come from there), read at the pace
    Prometheus scrapes."""
    args = ["watch", "-c", s["conf"]]
    if s.get("prometheus"):
        args += ["--prometheus", f"http://127.0.0.1:{s['ports']['prometheus']}",
                 "--prometheus-scrape-interval", f"{SCRAPE_INTERVAL:g}"]
    return args


def cmd_status(args: argparse.Namespace) -> int:
    status = Lab(args.dir).status()
    if status.get("exists") and status.get("conf"):
        status["console"] = console_args(status)
    if args.quiet:
        pass
    elif is_json(args):
        dump(status, args)
    elif not status["exists"]:
        print(f"no lab in {status['dir']}")
    else:
        print_status(status)
    return 0 if status["running"] else 1


def print_status(s: dict[str, Any]) -> None:
    state = "running" if s["running"] else "NOT RUNNING (clean it with `stormdeck lab down`)"
    print(f"lab {s['dir']}: {state}")
    health = s.get("health") or "unknown"
    checks = f" ({', '.join(s['checks'])})" if s.get("checks") else ""
    print(f"  health      {health}{checks}")
    where = f", chrooted in {s['root']}" if s.get("root") else ", the host's own"
    print(f"  release     {s.get('release') or 'unknown'} (ceph {s.get('ceph') or 'unknown'})"
          f"{where}")
    if s.get("osds"):
        shape = (f", as cephadm starts them ({s['osd_cpu_limit']:g} cores each)"
                 if s.get("cephadm") else "")
        print(f"  osds        {s['osds']['up']} of {s['osds']['total']} up, "
              f"{s['objectstore']}{shape}")
    if s.get("pgs"):
        states = ", ".join(f"{n} {k}" for k, n in sorted(s["pgs"]["by_state"].items()))
        print(f"  pgs         {s['pgs']['total']}: {states or 'none'}")
    if s.get("error"):
        print(f"  error       {s['error']}")
    p = s["ports"]
    print(f"  conf        {s['conf']}   (export CEPH_CONF={s['conf']}; ceph -s)")
    print(f"  mon         v2 127.0.0.1:{p['mon']}")
    print(f"  mgr metrics http://127.0.0.1:{p['mgr_prometheus']}/metrics")
    if s["prometheus"]:
        print(f"  prometheus  http://127.0.0.1:{p['prometheus']}  "
              f"(node exporter 127.0.0.1:{p['node_exporter']}, stormdeck exporter "
              f"127.0.0.1:{p.get('exporter', '-')})")
        print(f"              scrapes every {SCRAPE_INTERVAL} s")
    for d in s["daemons"]:
        alive = "up  " if d["alive"] else "DOWN"
        dev = f"  {d['device']}" if d.get("device") else ""
        print(f"  {alive} {d['name']:<18} pid {d['pid']}{dev}")
    print(f"  console     stormdeck {' '.join(shlex.quote(a) for a in console_args(s))}")
    if not s["prometheus"]:
        print("              (no Prometheus here, so no p99 or op latency: `stormdeck lab "
              "down`, then `stormdeck lab up --prometheus`)")
    print("  to see something happen: `stormdeck lab load` (client IO), `stormdeck lab "
          "storm` (a peering storm), `stormdeck lab storm --restart-osd 0` (an OSD restart)")


def cmd_load(args: argparse.Namespace) -> int:
    lab = Lab(args.dir)
    if args.stop:
        if lab.load_stop():
            print("load stopped")
        else:
            print("no load was running")
        return 0
    proc = lab.load_start(parse_size(args.size), args.threads, args.seconds, args.round)
    until = f"for {args.seconds:g} s" if args.seconds else "until `stormdeck lab load --stop`"
    print(f"load running (pid {proc.pid}): {args.size} writes, {args.threads} in flight, {until}")
    return 0


def cmd_storm(args: argparse.Namespace) -> int:
    lab = Lab(args.dir)
    start = time.monotonic()
    if args.restart_osd is not None:
        lab.storm_restart_osd(args.restart_osd)
    else:
        lab.storm_pgs(args.pgs if args.pgs is not None else 256)
    if args.no_wait:
        return 0
    lab.wait_clean(args.timeout)
    total, _ = lab.pg_counts()
    print(f"storm over: all {total} PGs active+clean {time.monotonic() - start:.1f} s after it "
          "began")
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    Lab(args.dir).stop_daemon(args.daemon)
    print(f"{args.daemon} stopped; bring it back with `stormdeck lab start {args.daemon}`")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    proc = Lab(args.dir).start_daemon(args.daemon)
    print(f"{args.daemon} started (pid {proc.pid})")
    return 0
