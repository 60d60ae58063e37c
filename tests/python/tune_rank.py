"""A tuner rank for test_tune.py (a module of its own: local ranks import their target)."""

from __future__ import annotations

from datetime import timedelta

FAKE_S = {"tcp_ring_512K": 1e-6, "tcp_direct": 2e-6}  # everything else 1 ms


def _fake_interleave(self, loops: dict) -> dict:
    """The measured calls are not timed: each plan gets a fixed time by name."""
    return {
        name: {"times": [FAKE_S.get(name, 1e-3)] * 10, "iters": 10, "warmup": 0} for name in loops
    }


def inject_ring(out, queue, rank, world, init_method) -> None:
    report = {"rank": rank, "error": "", "table": None}
    try:
        import torch.distributed as dist
        from xccl import _C
        from xccl.tune import measure

        _C._inject_wrong_result("ring")
        measure._Timer.interleave = _fake_interleave
        dist.init_process_group(
            "gloo",
            init_method=init_method,
            rank=rank,
            world_size=world,
            timeout=timedelta(seconds=60),
        )
        report["table"] = measure.run(
            None,
            ops=["all_reduce"],
            sizes=[256 << 10],
            quick=True,
            out=out,
            progress=False,
            summary_table=False,
        )
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001 - reported to the test
        report["error"] = f"{type(error).__name__}: {error}"
    queue.put(report)
