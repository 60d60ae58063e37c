"""all_reduce of sparse COO tensors on backend "xccl" (the backend's allreduce_sparse): exact
against a dense reference for overlapping, disjoint and empty index sets, hybrid tensors
(embedding-gradient shaped), uncoalesced inputs and several dtypes, on shared memory and TCP;
refusals of what it does not do; and DDP with nn.Embedding(sparse=True) matching gloo."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from collective_cases import check_sum
from dist_harness import Checker, checks_test, result, run, transport_cases

DTYPES = (torch.float64, torch.float32, torch.int64, torch.int32)
ROWS = 13  # the first dimension: where the index sets live
CASES = ("overlapping", "disjoint", "empty-on-odd", "all-empty", "uncoalesced")


def _sparse(case: str, dtype: torch.dtype, rank: int) -> torch.Tensor:
    """Rank `rank`'s input for `case`; small integer values, so every sum is exact."""
    g = torch.Generator().manual_seed(1000 * CASES.index(case) + rank)
    if case == "disjoint":
        rows = [r for r in range(ROWS) if r % 4 == rank % 4]
    elif case == "overlapping":
        rows = sorted({0, 5, (rank * 3) % ROWS, (rank * 7 + 1) % ROWS})
    elif case == "empty-on-odd":
        rows = [] if rank % 2 else [1, 2, rank % ROWS]
    elif case == "all-empty":
        rows = []
    elif case == "uncoalesced":  # repeated and unsorted indices, summed by coalescing
        rows = [9, 3, 9, rank % ROWS, 3]
    else:
        raise ValueError(case)
    index = torch.tensor([rows], dtype=torch.long)
    if case in ("overlapping", "uncoalesced"):
        values = torch.randint(-9, 10, (len(rows), 3), generator=g).to(dtype)
        size = (ROWS, 3)  # one dense dimension: an embedding gradient's layout
    else:
        values = torch.randint(-9, 10, (len(rows),), generator=g).to(dtype)
        size = (ROWS,)
    return torch.sparse_coo_tensor(index, values, size, check_invariants=True)


@checks_test(transport_cases(tcp_worlds=(2, 4), worlds=(1, 2, 4)), min_checks=40)
def test_sparse_all_reduce_matches_dense_reference(chk, rank, world):
    for case in CASES:
        for dtype in DTYPES:
            what = f"{case} {dtype}"
            t = _sparse(case, dtype, rank)
            reference = sum(_sparse(case, dtype, r).to_dense() for r in range(world))
            if case == "overlapping" and dtype == torch.float32:
                work = dist.all_reduce(t, async_op=True)  # the Work's result is the tensor
                work.wait()
                chk.true(f"{what}: the Work's result is the tensor", work.result()[0] is t)
            else:
                dist.all_reduce(t)
            chk.true(f"{what}: still sparse and coalesced", t.is_sparse and t.is_coalesced())
            chk.equal(f"{what}: sum", t.to_dense(), reference)
    # Dense collectives keep working after, in step.
    check_sum(chk, "all_reduce after the sparse ones", torch.float32, 1001, rank, world)


@checks_test((2,), min_checks=4)
def test_sparse_all_reduce_refusals(chk, rank, world):
    t = _sparse("overlapping", torch.float32, rank)
    chk.raises(
        "MAX on a sparse tensor",
        lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX),
        (ValueError,),
        match="only SUM",
    )
    b = torch.sparse_coo_tensor([[0, 1]], torch.tensor([True, False]), (4,))
    chk.raises("bool values", lambda: dist.all_reduce(b), (ValueError,), match="bool")
    # Refused before anything moved: the group still works.
    check_sum(chk, "all_reduce after the refusals", torch.int32, 7, rank, world)
    # Ranks disagreeing on the shape all fail alike (found only once the headers are in).
    odd = torch.sparse_coo_tensor([[0]], [1.0], (4 + rank,))
    chk.raises(
        "shapes that differ across ranks",
        lambda: dist.all_reduce(odd),
        (ValueError, RuntimeError),
        match="differ in their shape",
    )


def _embedding_model() -> torch.nn.Module:
    torch.manual_seed(4321)  # identical initial weights on every rank and for every copy

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(40, 6, sparse=True)
            self.head = torch.nn.Linear(6, 1)

        def forward(self, ids):
            return self.head(self.embedding(ids).mean(dim=1))

    return Model()


def _ddp_sparse(rank, world):
    from torch.nn.parallel import DistributedDataParallel as DDP

    chk = Checker(rank)
    gloo = dist.new_group(backend="gloo")
    trained = {}
    for name, group in (("xccl", None), ("gloo", gloo)):
        model = DDP(_embedding_model(), process_group=group)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        for step in range(4):
            g = torch.Generator().manual_seed(100 * step + rank)
            # Overlapping rows across ranks (0..19), and rows only some ranks touch.
            ids = torch.randint(0, 20 + 5 * rank, (5, 3), generator=g)
            target = torch.randn(5, 1, generator=g)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(ids), target)
            loss.backward()
            chk.true(
                f"{name} step {step}: the embedding's gradient is sparse",
                model.module.embedding.weight.grad.is_sparse,
            )
            optimizer.step()
        trained[name] = [p.detach().clone() for p in model.parameters()]
    chk.close("parameters xccl vs gloo", trained["xccl"], trained["gloo"], 1e-5, 1e-6)
    initial = [p.detach() for p in _embedding_model().parameters()]
    chk.true(
        "training moved the embedding",
        not torch.allclose(trained["xccl"][0], initial[0]),
    )
    return result(chk)


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_with_sparse_embedding_matches_gloo(world):
    values = run(_ddp_sparse, world, timeout=240)
    failures = [f"rank {r}: {f}" for r, (fs, _) in enumerate(values) for f in fs]
    assert not failures, "\n".join(failures)
    assert all(checks >= 10 for _, checks in values)
