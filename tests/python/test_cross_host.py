"""Every collective across namespace hosts (python/xccl/bench/hosts.py): ranks on 2-3 hosts made
of network namespaces, each with its own hostname and two links to the others, rendezvous on a
TCPStore at host 0's xnet0 address. One process group per case runs every collective
(cross_host_rank.py); the link-down case takes one host's second link down mid-loop and up again.

Skipped with the reason where namespaces cannot be made (not root, no iproute2, no permission).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from xccl_modules import load

hosts_module = load("bench.hosts")
RANK_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cross_host_rank.py")
CASE_TIMEOUT_S = 150
LINKDOWN_ITERS = 200

_unavailable = hosts_module.unavailable_reason()
pytestmark = pytest.mark.skipif(_unavailable is not None, reason=str(_unavailable))


def _env(rank: int, world: int, local: int, local_world: int, extra: dict) -> dict:
    # The runner's own settings must not leak into the hosts.
    prefixes = ("XCCL_", "TORCHELASTIC_", "GLOO_")
    base = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env = hosts_module.rank_env(base, rank, world, local, local_world)
    return {**env, "OMP_NUM_THREADS": "1", "XCCL_LOG_LEVEL": "warn", **extra}


def start_ranks(hosts, layout: list, extra: dict, argv: list, folder, script=RANK_SCRIPT) -> list:
    """layout[h] ranks on host h, numbered host by host, each running `script` (by default
    cross_host_rank.py) with `argv`; each rank's output goes to files."""
    procs, rank = [], 0
    world = sum(layout)
    for host, count in enumerate(layout):
        for local in range(count):
            out = open(folder / f"rank{rank}.out", "w")  # noqa: SIM115 - closed in finish_ranks
            err = open(folder / f"rank{rank}.err", "w")  # noqa: SIM115
            proc = hosts.popen(
                host,
                [sys.executable, script, *argv],
                env=_env(rank, world, local, count, extra),
                stdout=out,
                stderr=err,
            )
            procs.append((proc, out, err))
            rank += 1
    return procs


def finish_ranks(procs: list, folder, deadline: float) -> list:
    """Waits for every rank (ending all of them at the deadline); returns each one's JSON
    result. Fails naming the ranks that failed, with their stderr."""
    try:
        for proc, _, _ in procs:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for proc, out, err in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
            out.close()
            err.close()
    results, problems = [], []
    for rank, (proc, _, _) in enumerate(procs):
        text = (folder / f"rank{rank}.out").read_text().strip().splitlines()
        stderr = (folder / f"rank{rank}.err").read_text()
        if proc.returncode != 0 or not text:
            problems.append(f"rank {rank}: exit {proc.returncode}\n{stderr[-3000:]}")
            continue
        results.append({**json.loads(text[-1]), "stderr": stderr})
    assert not problems, "\n".join(problems)
    return results


def assert_all_passed(results: list, layout: list) -> None:
    hostnames = [hosts_module.hostname(h) for h, count in enumerate(layout) for _ in range(count)]
    assert [r["host"] for r in results] == hostnames  # each rank ran as the host it was given
    for result in results:
        assert result["failures"] == [], f"rank {result['rank']}: {result['failures']}"
        assert result["checks"] > 0


@pytest.fixture
def make_hosts():
    made = []

    def make(count: int):
        hosts = hosts_module.Hosts(count)
        made.append(hosts)
        hosts.up()
        return hosts

    yield make
    for hosts in made:  # the ranks are already ended: nothing keeps a namespace alive
        hosts.down()


MULTI_LINK = {"XCCL_NET_IFNAMES": ",".join(hosts_module.IFNAMES)}


@pytest.mark.parametrize(
    "net, layout",
    [("tcp", [2, 2]), ("ofi", [2, 2]), ("tcp", [1, 2, 1])],
    ids=["tcp-2x2", "ofi-2x2", "tcp-3hosts-1-2-1"],
)
def test_every_collective_across_hosts(make_hosts, tmp_path, net, layout):
    """Every collective exact, and each rank's messages carried by the engine asked for (shared
    memory to a peer on its own host)."""
    hosts = make_hosts(len(layout))
    procs = start_ranks(hosts, layout, {"XCCL_NET": net, **MULTI_LINK}, ["all"], tmp_path)
    results = finish_ranks(procs, tmp_path, time.monotonic() + CASE_TIMEOUT_S)
    assert_all_passed(results, layout)
    ranks_on = [count for count in layout for _ in range(count)]
    expected = [f"shm+{net}" if count > 1 else net for count in ranks_on]
    assert [r["peer_transport"] for r in results] == expected


def _wait_for_iteration(path, at_least: int, procs: list, deadline: float) -> None:
    while time.monotonic() < deadline:
        if any(proc.poll() is not None for proc, _, _ in procs):
            return  # a rank ended early: finish_ranks reports why
        try:
            if int(path.read_text() or 0) >= at_least:
                return
        except (FileNotFoundError, ValueError):
            pass
        time.sleep(0.02)


def test_link_down_mid_loop_loses_nothing(make_hosts, tmp_path):
    """Host 1's xnet1 goes down a fifth of the way into the loop and comes back at three
    fifths: every result exact, no error, the longest call bounded, the failure logged."""
    hosts = make_hosts(2)
    progress = tmp_path / "progress"
    argv = ["linkdown", str(progress), str(LINKDOWN_ITERS)]
    procs = start_ranks(hosts, [2, 2], {"XCCL_NET": "tcp", **MULTI_LINK}, argv, tmp_path)
    deadline = time.monotonic() + CASE_TIMEOUT_S
    _wait_for_iteration(progress, LINKDOWN_ITERS // 5, procs, deadline)
    hosts.set_link(1, 1, up=False)
    _wait_for_iteration(progress, 3 * LINKDOWN_ITERS // 5, procs, deadline)
    hosts.set_link(1, 1, up=True)
    results = finish_ranks(procs, tmp_path, deadline)
    assert_all_passed(results, [2, 2])
    assert all(r["checks"] == LINKDOWN_ITERS for r in results)
    longest = max(r["max_call_s"] for r in results)
    print(f"link down mid-loop: longest all_reduce call {longest:.3f} s")  # for the record (-s)
    assert longest < 10.0, f"the longest all_reduce took {longest:.2f} s"
    logs = "".join(r["stderr"] for r in results)
    assert hosts_module.IFNAMES[1] in logs, f"no log names the failed link:\n{logs[-3000:]}"


def test_socket_ifname_alone_limits_links_to_it(make_hosts, tmp_path):
    """XCCL_SOCKET_IFNAME alone limits TCP's listeners and links to its interface, as
    XCCL_NET_IFNAMES does: every link runs over xnet1 although xnet0 reaches the peer too."""
    hosts = make_hosts(2)
    chosen, other = hosts_module.IFNAMES[1], hosts_module.IFNAMES[0]
    extra = {"XCCL_NET": "tcp", "XCCL_SOCKET_IFNAME": chosen, "XCCL_LOG_LEVEL": "debug"}
    procs = start_ranks(hosts, [1, 1], extra, ["all"], tmp_path)
    results = finish_ranks(procs, tmp_path, time.monotonic() + CASE_TIMEOUT_S)
    assert_all_passed(results, [1, 1])
    for result in results:
        # createPeers' debug line: "rank P: N link(s) over IF ADDR, IF ADDR".
        lines = [line for line in result["stderr"].splitlines() if "link(s) over" in line]
        assert lines, f"rank {result['rank']} logged no links:\n{result['stderr'][-2000:]}"
        assert all(chosen in line and other not in line for line in lines), "\n".join(lines)


def _cli(*args: str) -> subprocess.CompletedProcess:
    script = os.path.join(os.path.dirname(RANK_SCRIPT), "..", "..", "scripts", "netns_hosts.py")
    return subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_cli_builds_hosts_runs_as_them_takes_a_link_down_and_removes_them():
    tag = f"t{os.getpid()}"
    try:
        made = _cli("--tag", tag, "up", "2")
        assert made.returncode == 0, made.stderr
        assert "host 1: nshost1" in made.stdout and "xnet1 10.231.1.2" in made.stdout
        assert _cli("--tag", tag, "up", "2").returncode == 1  # exists already
        # Host 1 is another host: its own hostname, and host 0 reachable over both links.
        probe = (
            "import socket\nprint(socket.gethostname())\n"
            "for a in ('10.231.0.1', '10.231.1.1'):\n"
            "    try: socket.create_connection((a, 9), timeout=5)\n"
            "    except ConnectionRefusedError: print('refused', a)\n"  # reached; port 9 is shut
        )
        ran = _cli("--tag", tag, "run", "1", "--", sys.executable, "-c", probe)
        assert ran.stdout.split("\n")[:3] == ["nshost1", "refused 10.231.0.1", "refused 10.231.1.1"]
        assert _cli("--tag", tag, "link", "1", "1", "down").returncode == 0
        state = _cli("--tag", tag, "run", "1", "--", "cat", "/sys/class/net/xnet1/operstate")
        assert state.stdout.strip() == "down"
        assert _cli("--tag", tag, "link", "1", "1", "up").returncode == 0
    finally:
        assert _cli("--tag", tag, "down").returncode == 0
    assert hosts_module.existing(tag) is None
