"""Strangers' connections against the TCP listeners of a group being created.

    python stranger_flood.py IDLE SLOW PID [PID ...]   (test_tcp_strangers.py)

Notes the listening sockets there are (left alone) and prints "ready". Once each of the
processes has a new listening socket on 127.0.0.1 (a group's creation is under way there), it
opens IDLE connections that never send a byte and SLOW ones that send one byte every 100 ms to
every new listener and prints "flooded TIME" (time.time()). It keeps them open, and writing,
until stdin closes, then prints one JSON line of counts. Only 127.0.0.1 is dialled.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import selectors
import socket
import sys
import time

LISTEN = "0A"
LOOPBACK = "0100007F"  # 127.0.0.1 as /proc/net/tcp prints it
SLOW_EVERY = 0.1
WITHIN = 10.0  # seconds from the first new listener to the last


def listening() -> dict[int, int]:
    """inode -> port of every listening TCP socket on 127.0.0.1 (this network namespace)."""
    found = {}
    with open("/proc/net/tcp") as table:
        for row in table.read().splitlines()[1:]:
            fields = row.split()
            host, port = fields[1].split(":")
            if fields[3] == LISTEN and host == LOOPBACK:
                found[int(fields[9])] = int(port, 16)
    return found


def socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def main() -> None:
    idle, slow = int(sys.argv[1]), int(sys.argv[2])
    pids = [int(p) for p in sys.argv[3:]]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    known = set(listening())
    print("ready", flush=True)
    counts = flood(idle, slow, pids, known)
    print(f"flooded {time.time()}", flush=True)
    counts["closed_by_peer"] = 0
    stdin = selectors.DefaultSelector()
    stdin.register(sys.stdin, selectors.EVENT_READ)
    held, writers = counts.pop("held"), counts.pop("writers")
    while not stdin.select(timeout=SLOW_EVERY):
        alive = []
        for s in writers:
            try:
                counts["slow_bytes"] += s.send(b"\x5a", socket.MSG_DONTWAIT)
                alive.append(s)
            except (BlockingIOError, InterruptedError):
                alive.append(s)  # still connecting, or a full buffer
            except OSError as e:
                if e.errno == errno.ENOTCONN:
                    alive.append(s)
                else:
                    counts["closed_by_peer"] += 1
                    held.append(s)  # closed with the rest
        writers = alive
    for s in held + writers:
        s.close()
    print(json.dumps(counts), flush=True)


def flood(idle: int, slow: int, pids: list, known: set) -> dict:
    """Waits for every process's new listener, then connects to all of them."""
    ports: list[int] = []
    seen: list[int] = []
    first = None
    give_up = time.monotonic() + 30
    while len(seen) < len(pids):
        now = time.monotonic()
        assert now < give_up and (first is None or now - first < WITHIN), (seen, ports)
        new = {inode: port for inode, port in listening().items() if inode not in known}
        if not new:
            time.sleep(0.002)
            continue
        for pid in pids:
            if pid in seen:
                continue
            mine = socket_inodes(pid) & new.keys()
            if mine:
                seen.append(pid)
                first = first or time.monotonic()
                ports += [new[inode] for inode in mine]
        known |= new.keys()  # the rest are other processes'
    counts = {"listeners": len(ports), "opened": 0, "failed_to_open": 0, "slow_bytes": 0}
    held: list[socket.socket] = []
    writers: list[socket.socket] = []
    for port in ports:
        for i in range(idle + slow):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            err = s.connect_ex(("127.0.0.1", port))
            if err not in (0, errno.EINPROGRESS):
                counts["failed_to_open"] += 1
                s.close()
                continue
            counts["opened"] += 1
            (writers if i >= idle else held).append(s)
    return {**counts, "held": held, "writers": writers}


if __name__ == "__main__":
    main()
