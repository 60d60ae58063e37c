#!/usr/bin/env python3
"""Namespace hosts from the command line (docs/network.md, "Testing across hosts on one
machine"): N hosts, each a network namespace with its own hostname and two links (xnet0, xnet1)
to every other host. The code is python/xccl/bench/hosts.py, loaded by path: no xccl install
or torch needed.

    python scripts/netns_hosts.py up 2                   # prints the tag (default: cli)
    python scripts/netns_hosts.py run 1 -- hostname      # as host 1
    python scripts/netns_hosts.py link 1 1 down          # host 1's xnet1 down (then: up)
    python scripts/netns_hosts.py down
"""

import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "python", "xccl", "bench", "hosts.py")


def _load_hosts():
    spec = importlib.util.spec_from_file_location("xccl_netns_hosts", SOURCE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    hosts = _load_hosts()
    parser = argparse.ArgumentParser(prog="netns_hosts.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tag", default="cli", help="names this set of hosts (default cli)")
    verbs = parser.add_subparsers(dest="verb", required=True)
    verbs.add_parser("up", help="build N hosts").add_argument("count", type=int)
    run = verbs.add_parser("run", help="run a command as host I")
    run.add_argument("host", type=int)
    run.add_argument("argv", nargs=argparse.REMAINDER)
    link = verbs.add_parser("link", help="bring host I's link L down or up")
    link.add_argument("host", type=int)
    link.add_argument("link", type=int, choices=range(len(hosts.IFNAMES)))
    link.add_argument("state", choices=("up", "down"))
    verbs.add_parser("down", help="remove the hosts")
    args = parser.parse_args(argv)

    if args.verb == "up":
        reason = hosts.unavailable_reason()
        if reason:
            sys.stderr.write(f"netns_hosts: {reason}\n")
            return 1
        if hosts.existing(args.tag):
            sys.stderr.write(f"netns_hosts: hosts tagged {args.tag!r} exist; `down` first\n")
            return 1
        made = hosts.Hosts(args.count, args.tag)
        made.up()
        for host in range(args.count):
            links = ", ".join(
                f"{name} {hosts.address(host, i)}" for i, name in enumerate(hosts.IFNAMES)
            )
            print(
                f"host {host}: {hosts.hostname(host)}, namespace {made.namespaces[host]}: {links}"
            )
        return 0
    made = hosts.existing(args.tag)
    if made is None:
        sys.stderr.write(f"netns_hosts: no hosts tagged {args.tag!r} (run `up N` first)\n")
        return 1
    if args.verb == "down":
        made.down()
        return 0
    if not 0 <= args.host < made.count:
        sys.stderr.write(f"netns_hosts: host {args.host} out of range (0..{made.count - 1})\n")
        return 2
    if args.verb == "link":
        made.set_link(args.host, args.link, args.state == "up")
        return 0
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        parser.error("run: give a command after the host (e.g. run 0 -- hostname)")
    return made.run(args.host, argv).returncode


if __name__ == "__main__":
    sys.exit(main())
