"""Exact verification of a candidate's result: integer-valued float32 inputs whose every sum over
the ranks is exact in float32 (|value| <= 5, so up to 2**24 / 5 ranks), and the result each rank
must hold, computed locally from every rank's input. Compared element for element: a plan that
loses, duplicates or misplaces one element, or adds one wrong value, fails.
"""

from __future__ import annotations

import torch

ROOT = 0  # broadcast's and reduce's root in every measurement
SENTINEL = 99.0  # no exact result equals it: an output left untouched fails


def rank_input(rank: int, count: int, salt: int) -> torch.Tensor:
    """Small integers in [-5, 5] that differ per rank, element and size."""
    i = torch.arange(count, dtype=torch.int64)
    return ((i * 7 + rank * 5 + salt * 3 + 3) % 11 - 5).to(torch.float32)


def expected(op: str, shape: dict, rank: int, world: int, salt: int) -> torch.Tensor | None:
    """What `rank`'s output must hold after `op` (None: reduce on a rank other than the root,
    whose buffer holds nothing defined)."""
    inputs = [rank_input(r, shape["input"], salt) for r in range(world)]
    chunk = shape["count"] // world
    mine = slice(rank * chunk, (rank + 1) * chunk)
    if op == "broadcast":
        return inputs[ROOT]
    if op in ("all_reduce", "reduce"):
        if op == "reduce" and rank != ROOT:
            return None
        return torch.stack(inputs).sum(0)
    if op == "reduce_scatter":
        return torch.stack(inputs).sum(0)[mine]
    if op == "all_gather":
        return torch.cat(inputs)
    if op == "all_to_all":
        return torch.cat([x[mine] for x in inputs])
    raise ValueError(f"unknown op {op!r}")


def first_mismatch(got: torch.Tensor, want: torch.Tensor) -> str:
    """ "" when equal element for element, else where and what differs."""
    got = got.detach().to("cpu").reshape(-1)
    if got.shape != want.shape:
        return f"{got.numel()} elements instead of {want.numel()}"
    bad = (got != want).nonzero()
    if bad.numel() == 0:
        return ""
    first = int(bad[0])
    return (
        f"{bad.numel()} of {want.numel()} elements wrong, element {first} is "
        f"{got[first].item()} instead of {want[first].item()}"
    )
