"""Hosts made of network namespaces on one machine, for tests and benchmarks across hosts.

Each host is a network namespace with two interfaces, xnet0 and xnet1 (the same names on every
host), and runs its commands under a hostname of its own (`unshare --uts`): xccl tells hosts
apart by hostname and boot id (csrc/topo/host.cc), so ranks on different namespace hosts talk
over the network, and ranks on one host over shared memory. Each link is a Linux bridge in a
"switch" namespace of its own with one veth pair from every host into it, so every pair of
hosts is joined by two independent links, and `set_link` brings one host's end down or up as a
pulled cable would (the carrier drops on both sides of that veth pair).

    10.231.<link>.<host + 1>/24 on xnet<link> of host <host>

The addresses exist only inside the namespaces made here, so nothing leaves the machine and
runs made at the same time (their namespace names carry a per-run tag) cannot collide.
Needs root, iproute2 (`ip`) and util-linux (`unshare`). Standard library only: the test suite
and scripts/netns_hosts.py load this file without importing xccl.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

IFNAMES = ("xnet0", "xnet1")
PREFIX = "xccl-ns"
STORE_PORT = 29500
_IP_TIMEOUT_S = 20


def address(host: int, link: int = 0) -> str:
    """Host `host`'s address on link `link` (without the /24)."""
    return f"10.231.{link}.{host + 1}"


def hostname(host: int) -> str:
    return f"nshost{host}"


def rank_env(base: dict, rank: int, world: int, local: int, local_world: int) -> dict:
    """`base` plus what a launcher gives a rank on these hosts: torchrun's variables, the store
    at host 0's xnet0 address (STORE_PORT is free: the namespace is new) and gloo on xnet0."""
    return {
        **base,
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(local),
        "LOCAL_WORLD_SIZE": str(local_world),
        "MASTER_ADDR": address(0, 0),
        "MASTER_PORT": str(STORE_PORT),
        "GLOO_SOCKET_IFNAME": IFNAMES[0],
    }


def unavailable_reason() -> str | None:
    """Why namespace hosts cannot be made here, or None when they can (tried for real: a
    container without CAP_SYS_ADMIN passes every other check and fails at `ip netns add`)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "namespace hosts need root (ip netns add, veth pairs)"
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return f"namespace hosts need `{tool}` (package {package}), which is not installed"
    probe = f"{PREFIX}-probe-{uuid.uuid4().hex[:8]}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"cannot make a network namespace: {made.stderr.strip() or 'ip netns add failed'}"
    _ip("netns", "del", probe, check=False)
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=_IP_TIMEOUT_S, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


class Hosts:
    """`count` namespace hosts joined by len(IFNAMES) links. A context manager: leaving it (a
    failure included) deletes every namespace it made, and with them their veths and bridges."""

    def __init__(self, count: int, tag: str | None = None):
        if not 1 <= count <= 200:
            raise ValueError(f"namespace hosts: need 1 to 200 hosts, got {count}")
        self.count = count
        self.tag = tag or f"{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.switch = f"{PREFIX}-{self.tag}-sw"
        self.namespaces = [f"{PREFIX}-{self.tag}-h{i}" for i in range(count)]

    def __enter__(self) -> Hosts:
        self.up()
        return self

    def __exit__(self, *exc) -> None:
        self.down()

    def up(self) -> None:
        """Builds the switch and the hosts; on any failure removes what it made and raises."""
        try:
            _ip("netns", "add", self.switch)
            for link in range(len(IFNAMES)):
                _ip("-n", self.switch, "link", "add", f"br{link}", "type", "bridge")
                _ip("-n", self.switch, "link", "set", f"br{link}", "up")
            for host, ns in enumerate(self.namespaces):
                _ip("netns", "add", ns)
                _ip("-n", ns, "link", "set", "lo", "up")
                for link, ifname in enumerate(IFNAMES):
                    port = f"h{host}l{link}"  # the switch's end, named only inside its namespace
                    # Both ends are made directly in their namespaces: no name is ever taken
                    # in the caller's namespace, where another run could hold it.
                    _ip(
                        "link",
                        "add",
                        ifname,
                        "netns",
                        ns,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        port,
                        "netns",
                        self.switch,
                    )
                    _ip("-n", self.switch, "link", "set", port, "master", f"br{link}", "up")
                    _ip("-n", ns, "addr", "add", f"{address(host, link)}/24", "dev", ifname)
                    _ip("-n", ns, "link", "set", ifname, "up")
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Deletes the namespaces (idempotent). A namespace's veths go with it; processes still
        running in one keep it alive until they exit, so callers end their processes first."""
        for ns in [*self.namespaces, self.switch]:
            _ip("netns", "del", ns, check=False)

    def command(self, host: int, argv: list) -> list:
        """argv run as host `host`: in its namespace, under its own hostname."""
        return [
            "ip",
            "netns",
            "exec",
            self.namespaces[host],
            "unshare",
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            hostname(host),
            *argv,
        ]

    def popen(self, host: int, argv: list, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(self.command(host, argv), **kwargs)

    def run(self, host: int, argv: list, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(host, argv), **kwargs)

    def set_link(self, host: int, link: int, up: bool) -> None:
        """Brings host `host`'s interface xnet<link> down or up (carrier lost on both ends)."""
        _ip("-n", self.namespaces[host], "link", "set", IFNAMES[link], "up" if up else "down")


def existing(tag: str) -> Hosts | None:
    """The hosts a CLI `up` made under `tag` (counted from `ip netns list`), or None."""
    listed = _ip("netns", "list").stdout.split()
    count = 0
    while f"{PREFIX}-{tag}-h{count}" in listed:
        count += 1
    if count == 0 and f"{PREFIX}-{tag}-sw" not in listed:
        return None
    return Hosts(max(count, 1), tag)
