"""xccl.hooks: the compressed all_reduce behind the DDP communication hooks, against exact values
(integers bf16/fp16 hold exactly; a sum that bf16 accumulation would get wrong) on shared memory,
TCP and two simulated hosts, in place, with its documented error bound and fallbacks; and DDP
trained with each xccl hook against torch's hooks of the same kind (docs/training.md)."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import Checker, checks_test, group_transport, result, run, transport_cases
from train_steps import seeded_batches, sgd_losses

WIRES = (torch.bfloat16, torch.float16)
# Element counts: empty, tiny, one slot's chunk, and several chunks and both shm algorithms
# (above the two-shot threshold, and more than one TCP chunk per peer for 3 ranks).
COUNTS = (0, 1, 7, 1000, 1_600_000)
EPS = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}


def _wire(x: torch.Tensor, wire: torch.dtype) -> torch.Tensor:
    return x.to(wire).to(x.dtype)


def _hosts(world: int, transport: str) -> list[list[int]]:
    """The ranks of each host as the harness simulates them (rank % 2 for "hierarchical")."""
    if transport == "hierarchical":
        return [list(range(h, world, 2)) for h in range(2)]
    return [[r] for r in range(world)] if transport == "tcp" else [list(range(world))]


def _expected(contribs, wire, transport, between_hosts_only):
    """The documented result, in fp32: per host the sum (each contribution wire-rounded unless
    only inter-host traffic is compressed), host sums wire-rounded and summed in fp32 in host
    order, divided by the group size. Returns the accepted values: one-shot shared memory keeps
    the fp32 average, every path that moves the average again rounds it to the wire type."""
    world = len(contribs)
    if world == 1:
        return [contribs[0]]  # nothing to exchange: the buffer is left as it is
    hosts = _hosts(world, transport)
    if transport == "shm" and between_hosts_only:
        return [sum(contribs[1:], contribs[0].clone()) / world]
    total = torch.zeros_like(contribs[0])
    for ranks in hosts:
        host = torch.zeros_like(contribs[0])
        for r in ranks:
            host += contribs[r] if between_hosts_only else _wire(contribs[r], wire)
        total += _wire(host, wire) if len(hosts) > 1 else host
    avg = total / world
    return [avg, _wire(avg, wire)] if len(hosts) == 1 else [_wire(avg, wire)]


def _matches(got: torch.Tensor, accepted: list[torch.Tensor]) -> bool:
    return any(torch.equal(got, a) for a in accepted)


@checks_test(transport_cases(tcp_worlds=(2, 3), hierarchical_worlds=(3, 4)), min_checks=20)
def test_compressed_all_reduce_exact(chk, rank, world):
    from xccl.hooks import compressed_all_reduce

    transport = group_transport()
    for wire in WIRES:
        for between in (False, True):
            for n in COUNTS:
                what = f"{wire} between_hosts_only={between} n={n}"
                # Small integers: every contribution, sum and average is exact in the wire type.
                base = (torch.arange(n) % 64).float()
                contribs = [base + r for r in range(world)]
                x = contribs[rank].clone()
                ptr = x.data_ptr()
                work = compressed_all_reduce(x, wire, between_hosts_only=between, async_op=True)
                value = work.get_future().wait()[0]
                chk.true(f"{what}: in place", value.data_ptr() == ptr and x.data_ptr() == ptr)
                chk.equal(f"{what}: average", x, base + (world - 1) / 2)
        # 256 + 1 + 1 + ...: bf16 accumulation would round every "+ 1" away (256 + 1 ties to 256).
        contribs = [torch.full((5,), 256.0 if r == 0 else 1.0) for r in range(world)]
        x = contribs[rank].clone()
        compressed_all_reduce(x, wire)
        accepted = _expected(contribs, wire, transport, False)
        chk.true(
            f"{wire} fp32 accumulation: {x[0].item()} in {[a[0].item() for a in accepted]}",
            _matches(x, accepted),
        )
        if world >= 3 and wire == torch.bfloat16:
            chk.true(f"not bf16 accumulation: {x[0].item()}", x[0].item() != 256.0 / world)
    # Random data: the exact documented result, the error bound of docs/training.md, float64.
    g = torch.Generator().manual_seed(7)
    contribs = [torch.randn(3001, generator=g) * 10 for _ in range(world)]
    exact = sum(contribs[1:], contribs[0].clone()) / world
    scale = sum(c.abs() for c in contribs) / world
    for wire in WIRES:
        for between in (False, True):
            x = contribs[rank].clone()
            compressed_all_reduce(x, wire, between_hosts_only=between)
            chk.true(
                f"random {wire} between={between}: documented result",
                _matches(x, _expected(contribs, wire, transport, between)),
            )
            bound = 2 * EPS[wire] * scale + EPS[wire] * exact.abs()
            chk.true(f"random {wire}: error bound", bool(((x - exact).abs() <= bound).all()))
        y = contribs[rank].double()
        compressed_all_reduce(y, wire)
        chk.close(f"float64 {wire}", y, exact.double(), rtol=0, atol=float(3 * EPS[wire] * 40))
    if transport == "shm":
        # Compressing only between hosts, on one host: the plain fp32 average, bit for bit.
        x, plain = contribs[rank].clone(), contribs[rank].clone()
        compressed_all_reduce(x, torch.bfloat16, between_hosts_only=True)
        dist.all_reduce(plain, op=dist.ReduceOp.AVG)
        chk.equal("between hosts only on one host == all_reduce AVG", x, plain)


class _Bucket:
    """What the hooks read of a dist.GradBucket (its flat buffer)."""

    def __init__(self, buffer: torch.Tensor):
        self._buffer = buffer

    def buffer(self) -> torch.Tensor:
        return self._buffer


@checks_test((2,), min_checks=8)
def test_bad_input_and_fallbacks(chk, rank, world):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from xccl import hooks
    from xccl.hooks import compressed_all_reduce

    for dtype in (torch.int32, torch.bool, torch.complex64):
        bucket = _Bucket(torch.ones(4, dtype=dtype))
        chk.raises(
            f"hook on a {dtype} bucket",
            lambda bucket=bucket: hooks.bf16_compress_hook(None, bucket),
            ValueError,
            "cannot compress",
        )
    chk.raises(
        "int32 tensor to the backend call",
        lambda: compressed_all_reduce(torch.ones(3, dtype=torch.int32)),
        ValueError,
        "float32 or float64",
    )
    chk.raises(
        "wire float32", lambda: compressed_all_reduce(torch.ones(3), torch.float32), ValueError
    )
    # The refusals sent nothing: the group still works.
    x = torch.full((3,), float(rank))
    compressed_all_reduce(x)
    chk.equal("usable after refusals", x, torch.full((3,), (world - 1) / 2))
    # A bf16 bucket needs no compression: the plain average.
    b = torch.tensor([1.0, 2.0, 3.0], dtype=torch.bfloat16) * (rank + 1)
    out = hooks.bf16_compress_hook(None, _Bucket(b)).wait()
    chk.equal("bf16 bucket averaged", out, torch.tensor([1.5, 3.0, 4.5], dtype=torch.bfloat16))
    # A group whose CPU backend is not xccl: torch's hook, same result as calling it directly.
    gloo = dist.new_group(backend="gloo")
    values = torch.arange(6, dtype=torch.float32) * (rank + 1) / 3
    ours = hooks.fp16_compress_hook(gloo, _Bucket(values.clone())).wait()
    theirs = default_hooks.fp16_compress_hook(gloo, _Bucket(values.clone())).wait()
    chk.equal("gloo group falls back to torch's hook", ours, theirs)


# DDP: each xccl hook against torch's hook of the same kind (torch's on a gloo group).
STEPS = 4
LR = 0.1
PAIRS = (
    ("bf16_compress_hook", "bf16_compress_hook"),
    ("fp16_compress_hook", "fp16_compress_hook"),
    ("hierarchical_bf16_compress_hook", "allreduce_hook"),
)
# docs/training.md's tolerance of a few training steps against torch's hooks.
TOLERANCE = {"bf16": (2e-2, 2e-3), "fp16": (2e-3, 2e-4)}


def _model() -> torch.nn.Module:
    torch.manual_seed(1234)
    return torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.Tanh(), torch.nn.Linear(32, 5))


def _train(model, rank):
    losses = sgd_losses(model, seeded_batches(STEPS, lambda step: 1000 * step + rank, 6, 12, 5), LR)
    return losses, [p.detach().clone() for p in model.parameters()]


def _torch_hook(hook):
    """torch's hook under another name: DDP refuses one named bf16_compress_hook on a torch
    without CUDA and NCCL, although it runs on gloo."""

    def call(state, bucket):
        return hook(state, bucket)

    return call


def _ddp(rank, world):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    from xccl import hooks

    chk = Checker(rank)
    gloo = dist.new_group(backend="gloo")
    digests = []
    for ours, theirs in PAIRS:
        model = DDP(_model())
        model.register_comm_hook(None, getattr(hooks, ours))
        x_losses, x_params = _train(model, rank)
        model = DDP(_model(), process_group=gloo)
        model.register_comm_hook(gloo, _torch_hook(getattr(default_hooks, theirs)))
        t_losses, t_params = _train(model, rank)
        rtol, atol = TOLERANCE["fp16" if "fp16" in ours else "bf16"]
        chk.close(f"{ours}: losses vs torch's {theirs}", x_losses, t_losses, rtol, atol)
        chk.close(f"{ours}: parameters vs torch's {theirs}", x_params, t_params, rtol, atol)
        initial = list(_model().parameters())
        chk.true(
            f"{ours} moved the weights",
            any(not torch.equal(p, q) for p, q in zip(x_params, initial)),
        )
        digests.append(hashlib.sha256(b"".join(p.numpy().tobytes() for p in x_params)).hexdigest())
    failures, checks = result(chk)
    return failures, checks, digests, group_transport()


@pytest.mark.parametrize(
    "world_size,transport",
    [(2, None), (4, None), (3, "tcp"), (4, "hierarchical")],
    ids=["2", "4", "3-tcp", "4-hierarchical"],
)
def test_ddp_with_xccl_hooks_matches_torch_hooks(world_size, transport):
    values = run(_ddp, world_size, timeout=240, transport=transport)
    failures = [f"rank {rank}: {f}" for rank, (fs, _, _, _) in enumerate(values) for f in fs]
    assert not failures, "\n".join(failures)
    assert all(checks == 3 * len(PAIRS) for _, checks, _, _ in values)
    # DDP keeps replicas identical: the compressed all_reduce gives every rank the same bits.
    assert len({tuple(d) for _, _, d, _ in values}) == 1, "replicas differ after training"
    assert {t for _, _, _, t in values} == {transport or "shm"}


@checks_test(transport_cases(tcp_worlds=(3,), hierarchical_worlds=(4,), worlds=(3,)), min_checks=4)
def test_interleaves_with_other_collectives(chk, rank, world):
    """The backend call takes the group's next sequence number: queued between other async
    collectives, each gets its own operands."""
    from xccl.hooks import compressed_all_reduce

    a, b, c = torch.full((999,), float(rank)), torch.full((5,), rank + 1.0), torch.full((77,), 2.0)
    works = [
        compressed_all_reduce(a, async_op=True),
        dist.all_reduce(b, async_op=True),
        compressed_all_reduce(c, torch.float16, between_hosts_only=True, async_op=True),
        dist.broadcast(torch.zeros(3) if rank else torch.ones(3), src=0, async_op=True),
    ]
    for w in works:
        w.wait()
    chk.equal("first compressed", a, torch.full((999,), (world - 1) / 2))
    chk.equal("all_reduce between", b, torch.full((5,), world * (world + 1) / 2))
    chk.equal("second compressed", c, torch.full((77,), 2.0))
    seq = dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))
    chk.true("sequence numbers", seq._get_sequence_number_for_group() >= 4)


TIMEOUT_S = 3.0


def _absent(rank, world):
    from xccl.hooks import compressed_all_reduce

    store = dist.distributed_c10d._get_default_store()
    dist.all_reduce(torch.ones(8))  # connects everyone
    if rank == world - 1:  # stays away until the others reported
        store.wait([f"failed/{r}" for r in range(world - 1)], timedelta(seconds=60))
        return None
    try:
        compressed_all_reduce(torch.ones(1001))
        message = None
    except Exception as e:  # noqa: BLE001 - the point of the test
        message = f"{type(e).__name__}: {e}"
    store.set(f"failed/{rank}", "1")
    return message


@pytest.mark.parametrize("transport", [None, "tcp"], ids=["shm", "tcp"])
def test_absent_rank_times_out_named(transport):
    values = run(_absent, 3, timeout=90, pg_timeout=TIMEOUT_S, transport=transport)
    for rank, message in enumerate(values[:-1]):
        assert message is not None, f"rank {rank}: the compressed all_reduce did not fail"
        assert "compressed_allreduce #2" in message, message
        assert "rank(s) 2" in message and "never entered #2" in message, message


def test_hooks_benchmark_runs():
    """`python -m xccl.bench.hooks` prints one row per size with both ratios (timings are not
    checked: the machine running the tests may be busy)."""
    import subprocess
    import sys

    argv = ["--nranks", "2", "--sizes", "64K,256K", "--iters", "1", "--warmup", "0"]
    out = subprocess.run(
        [sys.executable, "-m", "xccl.bench.hooks", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [
        line
        for line in out.stdout.splitlines()
        if line.startswith("| 64 KiB") or line.startswith("| 256 KiB")
    ]
    assert len(rows) == 2, out.stdout
    assert all(row.count("x |") == 2 for row in rows), out.stdout
