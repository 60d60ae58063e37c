"""Moves KV-cache pages from a prefill worker into decode workers' caches with one-sided writes,
and grows the group by a decode worker that joins later, without restarting anyone.

    python examples/kv_transfer.py

This one command is the whole job: it starts a TCPStore on loopback and three processes, a
"prefill" worker and a "decode" worker at once and a second decode worker later, and exits 0
when every decode worker found exactly the pages it was sent (non-zero otherwise). Each worker
is this file run with --role; on a cluster they would be separate jobs sharing the store.
Needs torch 2.14 or later (its window and reconfigure APIs).

Each worker owns one KV cache, [NUM_PAGES, PAGE_ELEMS] bfloat16, and registers it as its window
(torch.distributed._new_window): peers' puts land in that tensor itself. A transfer is
  1. decode picks free pages of its cache and sends their numbers to prefill (plain send/recv);
  2. prefill writes its pages of the request into those pages: xccl.window.put_pages, one call
     for all pages, neither side's pages contiguous;
  3. prefill signals decode; decode's wait_signal returns once every page put before the
     signal is in its cache (the signal orders the puts before it, docs/p2p.md).
Membership changes through torch's reconfigure API: every worker starts alone
(enable_reconfigure=True), publishes its handle in the store, and the members call
dist._reconfigure with the same fresh uuid and the same ordered handle list, which makes them
ranks 0, 1, ... of the new group. Windows belong to a membership: each is deregistered before a
change and registered again after it (the cache, and the pages already in it, stay).
"""

import argparse
import math
import os
import subprocess
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
from xccl.window import put_pages  # importing xccl registers backend="xccl"

# One page holds the keys and values of PAGE_TOKENS tokens for every layer (the page layout of
# paged attention, all layers in one flat cache); 32 KiB per page in bfloat16.
LAYERS, KV_HEADS, HEAD_DIM, PAGE_TOKENS = 2, 4, 64, 16
PAGE_SHAPE = (LAYERS, 2, PAGE_TOKENS, KV_HEADS, HEAD_DIM)  # 2: keys, then values
PAGE_ELEMS = math.prod(PAGE_SHAPE)
NUM_PAGES = 64
DTYPE = torch.bfloat16
TIMEOUT = timedelta(seconds=60)

# Who serves what: (request id, pages, decode worker). The first decode worker gets request 1
# before the second exists, then each gets one more request in the group of three.
BEFORE_JOIN = [(1, 5, "decode0")]
AFTER_JOIN = [(2, 7, "decode0"), (3, 4, "decode1")]
FIRST, GROWN = ["prefill", "decode0"], ["prefill", "decode0", "decode1"]


def request_kv(request: int, pages: int) -> torch.Tensor:
    """The KV pages prefill computes for `request` (deterministic, so decode can check them)."""
    generator = torch.Generator().manual_seed(request)
    return torch.randn(pages, PAGE_ELEMS, generator=generator).to(DTYPE)


def free_pages(cache: torch.Tensor, count: int, seed: int) -> torch.Tensor:
    """`count` unused pages of `cache` (all zeros), in a scattered order as an allocator's."""
    unused = (cache == 0).all(dim=1).nonzero().flatten()
    order = torch.randperm(len(unused), generator=torch.Generator().manual_seed(seed))
    return unused[order[:count]]


def reconfigure(store, step: int, me: str, members: list) -> None:
    """Makes the group exactly `members`, in that order. Every member calls this with the same
    step; the step doubles as the uuid, which must be fresh for every reconfigure of a job."""
    store.set(f"kv/{step}/handle/{me}", dist._get_reconfigure_handle())
    handles = [store.get(f"kv/{step}/handle/{name}").decode() for name in members]  # waits
    dist._reconfigure(uuid=step, handles=handles, timeout=TIMEOUT).wait()
    assert dist.get_rank() == members.index(me) and dist.get_world_size() == len(members)


def serve(window, cache, request: int, pages: int, decode: int) -> None:
    """Prefill's side of one transfer to rank `decode`."""
    dst_pages = torch.empty(pages, dtype=torch.int64)
    dist.recv(dst_pages, src=decode)  # 1. where decode wants the pages
    # Where this request's KV sits in prefill's own cache (scattered too), filled as prefill
    # would have computed it.
    src_pages = free_pages(cache, pages, seed=100 + request)
    cache[src_pages] = request_kv(request, pages)
    # 2. one call for all pages; 3. the signal publishes them. Synchronous calls return Work
    # that is already complete; async_op=True would return Work to wait on later instead.
    put_pages(window, cache, src_pages, decode, dst_pages, PAGE_ELEMS)
    window.signal(decode, False)


def receive(window, cache, request: int, pages: int, expected_used: int) -> int:
    """Decode's side of one transfer from rank 0; checks the pages, returns pages in use."""
    dst_pages = free_pages(cache, pages, seed=200 + request)
    dist.send(dst_pages, dst=0)
    window.wait_signal(0, False)
    if not torch.equal(cache[dst_pages], request_kv(request, pages)):
        raise SystemExit(f"request {request}: the pages differ from those prefill sent")
    used = int((cache != 0).any(dim=1).sum())  # nothing written outside the pages asked for
    if used != expected_used + pages:
        raise SystemExit(
            f"request {request}: {used} pages in use, expected {expected_used + pages}"
        )
    return used


def worker(role: str, port: int) -> None:
    store = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=TIMEOUT)
    # Alone at first: the group is formed by reconfigure, whoever comes first or later.
    dist.init_process_group(
        "xccl", store=store, rank=0, world_size=1, timeout=TIMEOUT, enable_reconfigure=True
    )
    cache = torch.zeros(NUM_PAGES, PAGE_ELEMS, dtype=DTYPE)
    used = 0
    for step, members, plan in ((1, FIRST, BEFORE_JOIN), (2, GROWN, AFTER_JOIN)):
        if role not in members:
            continue  # decode1 joins at step 2
        reconfigure(store, step, role, members)
        window = dist._new_window(cache)  # collective over the new membership
        for request, pages, decode in plan:
            if role == "prefill":
                serve(window, cache, request, pages, members.index(decode))
            elif role == decode:
                used = receive(window, cache, request, pages, used)
                print(f"{role} (rank {dist.get_rank()}): request {request}, {pages} pages OK")
                store.set(f"kv/done/{request}", "1")
        window.tensor_deregister()  # collective; before the membership changes
    dist.destroy_process_group()


def launch() -> int:
    """The job: the store, prefill and decode0 now, decode1 once request 1 has arrived."""
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=TIMEOUT)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def start(role: str) -> subprocess.Popen:
        argv = [
            sys.executable,
            os.path.abspath(__file__),
            "--role",
            role,
            "--port",
            str(store.port),
        ]
        return subprocess.Popen(argv, env=env)

    def running(until) -> bool:
        """Waits until `until()` or a worker fails or the time is up; True on `until()`."""
        while time.monotonic() < deadline:
            if until():
                return True
            if any(p.poll() not in (None, 0) for p in procs.values()):
                return False  # the others would wait for the failed one until their timeout
            time.sleep(0.05)
        return False

    deadline = time.monotonic() + TIMEOUT.total_seconds()
    procs = {role: start(role) for role in FIRST}
    if running(lambda: store.check([f"kv/done/{BEFORE_JOIN[-1][0]}"])):
        procs["decode1"] = start("decode1")  # the newcomer
        running(lambda: all(p.poll() is not None for p in procs.values()))
    for p in procs.values():
        if p.poll() is None:
            p.kill()
        p.wait()
    failed = {role: p.returncode for role, p in procs.items() if p.returncode != 0}
    if len(procs) < len(GROWN):
        failed["decode1"] = "not started"
    print(f"kv_transfer: {f'FAILED {failed}' if failed else 'every page arrived intact'}")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--role", choices=GROWN, help="(set by the launcher) run one worker")
    parser.add_argument("--port", type=int, help="(set by the launcher) the store's port")
    args = parser.parse_args()
    if args.role:
        worker(args.role, args.port)
    else:
        sys.exit(launch())
