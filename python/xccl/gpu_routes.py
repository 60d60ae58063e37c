"""The CUDA calls per route an xccl group ran (csrc/backend/core/gpu_side.h, GpuRouteCounts):
"kernel" (xccl's kernels), "vendor" (NCCL/RCCL), "host" (through host memory) and "local"
(world size 1), counted by the backend where each call takes its route. Every route gives the
same exact results, so a correct result does not show that a kernel ran: these counts do.
`python -m xccl doctor --gpu`, benchmarks/gpu_bench.py (through xccl.bench) and
`python -m xccl tune` read them before claiming the kernel route."""

from __future__ import annotations

from collections.abc import Mapping


def counts(group=None) -> dict[str, int]:
    """{route: calls} of `group`'s GPU side (a torch.distributed group of backend xccl; all zero
    before its first CUDA call), or of every xccl group of this process with None."""
    import torch

    from . import _C

    backend = None if group is None else group._get_backend(torch.device("cpu"))
    return {str(k): int(v) for k, v in _C._gpu_route_counts(backend).items()}


def taken(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The calls per route between two counts, routes with none left out."""
    grown = {r: int(after.get(r, 0)) - int(before.get(r, 0)) for r in after}
    return {r: n for r, n in grown.items() if n}


def describe(routes: Mapping[str, int]) -> str:
    """ "host 3, kernel 1", or "no GPU call" for none."""
    return ", ".join(f"{r} {n}" for r, n in sorted(routes.items())) or "no GPU call"


def off_kernel(routes: Mapping[str, int]) -> str:
    """ "" when the calls counted in `routes` (taken's answer) ran on xccl's kernels only, and at
    least one did; otherwise what ran instead, for a message ("host 3", "no GPU call")."""
    if routes.get("kernel", 0) > 0 and all(n == 0 for r, n in routes.items() if r != "kernel"):
        return ""
    return describe(routes)
