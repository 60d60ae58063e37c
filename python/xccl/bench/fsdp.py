"""`python -m xccl.bench.fsdp`: what backend-allocated buffers save FSDP2 on CPU.

Times the pair FSDP2 runs per layer, all_gather_into_tensor (input = this rank's part of the
output) then reduce_scatter_tensor (AVG), on buffers allocated the ordinary way and with
`allocate_tensor` (xccl's shared-memory pool, docs/shm.md "Tensors in the pool"), alternating
the two in every repetition; then FSDP2 training steps of two copies of a 4-layer MLP, one with
`set_allocate_memory_from_process_group_for_comm` off and one with it on, alternating step by
step. Prints the slowest rank's medians and, from `memory_stats()`, the bytes copied into the
segment's slots and read in place per pair or step, summed over the ranks.

    python -m xccl.bench.fsdp --ranks 4 --reps 11 --width 2048 --steps 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def _parse(argv):
    parser = argparse.ArgumentParser(
        prog="python -m xccl.bench.fsdp", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--ranks", type=int, default=2, help="local ranks (default 2)")
    parser.add_argument(
        "--numel", type=int, default=1 << 22, help="fp32 elements per all-gather output"
    )
    parser.add_argument("--reps", type=int, default=11, help="timed repetitions per variant")
    parser.add_argument(
        "--width", type=int, default=2048, help="MLP width for the FSDP2 steps (0: skip)"
    )
    parser.add_argument("--steps", type=int, default=7, help="timed FSDP2 steps per variant")
    return parser.parse_args(argv)


def _pair(backend, dist, torch, numel, world, rank, pooled):
    cpu = torch.device("cpu")
    alloc = (
        (lambda n: backend.allocate_tensor(n, dtype=torch.float32, device=cpu))
        if pooled
        else (lambda n: torch.empty(n))
    )
    out = alloc(numel)
    part = out[rank * (numel // world) : (rank + 1) * (numel // world)]
    part.fill_(rank)
    grads = alloc(numel)
    grads.fill_(1.0)
    reduced = torch.empty(numel // world)
    dist.barrier()
    start = time.perf_counter()
    dist.all_gather_into_tensor(out, part)
    dist.reduce_scatter_tensor(reduced, grads, op=dist.ReduceOp.AVG)
    return time.perf_counter() - start


def _fsdp_step(dist, torch, width, rank, pooled):
    """A step function of a fresh FSDP2 model (the same weights for both variants)."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(4)])
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_allocate_memory_from_process_group_for_comm(pooled)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(16, width, generator=torch.Generator().manual_seed(rank))

    def step():
        dist.barrier()
        start = time.perf_counter()
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()
        return time.perf_counter() - start

    return step


def _measure(variants, reps, stats):
    """Runs variants[False] and variants[True] alternately, reps times after one warm-up each:
    {pooled: (median seconds, staged bytes per run, direct bytes per run)}."""
    times = {False: [], True: []}
    moved = {False: [0, 0], True: [0, 0]}
    for rep in range(reps + 1):
        for pooled in (False, True):
            before = stats()
            elapsed = variants[pooled]()
            after = stats()
            if rep:
                times[pooled].append(elapsed)
                moved[pooled][0] += after["shm_bytes_staged"] - before["shm_bytes_staged"]
                moved[pooled][1] += after["shm_bytes_direct"] - before["shm_bytes_direct"]
    return {
        pooled: (statistics.median(times[pooled]), moved[pooled][0] / reps, moved[pooled][1] / reps)
        for pooled in (False, True)
    }


def _rank(rank, world, port, args, results):
    import warnings

    import torch
    import torch.distributed as dist

    import xccl  # noqa: F401 - registers the backend

    torch.set_num_threads(1)
    # torch 2.14 deprecates the *_tensor spellings that FSDP2 itself still calls.
    warnings.filterwarnings("ignore", category=FutureWarning)
    dist.init_process_group(
        "xccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))

    def stats():
        return dict(backend.memory_stats())

    pairs = {
        pooled: lambda pooled=pooled: _pair(backend, dist, torch, args.numel, world, rank, pooled)
        for pooled in (False, True)
    }
    rows = {("pair", k): v for k, v in _measure(pairs, args.reps, stats).items()}
    if args.width:
        steps = {
            pooled: _fsdp_step(dist, torch, args.width, rank, pooled) for pooled in (False, True)
        }
        rows.update({("fsdp", k): v for k, v in _measure(steps, args.steps, stats).items()})
    results.put((rank, rows))
    dist.destroy_process_group()


def main(argv=None) -> int:
    import socket

    from .. import _procs

    args = _parse(sys.argv[1:] if argv is None else argv)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = _procs.rank_context()
    results = context.Queue()
    procs = [
        context.Process(target=_rank, args=(r, args.ranks, port, args, results))
        for r in range(args.ranks)
    ]
    for p in procs:
        p.start()
    gathered = [results.get(timeout=1800) for _ in procs]
    for p in procs:
        p.join()
    # Per row: the slowest rank's median time; bytes per pair or per step, summed over ranks.
    print(
        f"{args.ranks} ranks, all-gather output {args.numel} fp32 "
        f"({args.numel * 4 / 2**20:.1f} MiB)"
    )
    print(
        f"{'what (bytes: per pair or step, all ranks)':<36}{'median ms':>11}"
        f"{'staged MiB':>12}{'direct MiB':>12}"
    )
    for what, label in (
        ("pair", "all_gather+reduce_scatter"),
        ("fsdp", f"FSDP2 step (width {args.width})"),
    ):
        for pooled in (False, True):
            key = (what, pooled)
            if key not in gathered[0][1]:
                continue
            ms = max(rows[key][0] for _, rows in gathered) * 1e3
            staged = sum(rows[key][1] for _, rows in gathered) / 2**20
            direct = sum(rows[key][2] for _, rows in gathered) / 2**20
            name = f"{label} {'pool' if pooled else 'ordinary'}"
            print(f"{name:<36}{ms:>11.2f}{staged:>12.2f}{direct:>12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
