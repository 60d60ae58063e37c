"""DDP communication hooks of xccl's own: ``model.register_comm_hook(state, hook)``.

``bf16_compress_hook`` and ``fp16_compress_hook`` average a gradient bucket with its bytes on the
wire as bfloat16 / float16, like torch's hooks of the same names, but as one backend call: the
bucket is narrowed on its way into the transport (straight into the shared-memory slot), summed
in fp32, divided by the group size and widened back into the bucket in place, with no
half-precision copy of the bucket and no separate cast, divide and copy-back passes.

``hierarchical_bf16_compress_hook`` (and the fp16 one) compress only between hosts: the sum inside
a host is exact (fp32 over shared memory), the host sums travel compressed between the hosts'
leaders. On a group on one host they give the plain fp32 average; on a group without shared
memory (TCP only, e.g. ``XCCL_SHM_DISABLE=1``) every rank counts as its own host.

``state`` is the process group, or None for the default group, as for torch's default hooks.
Buckets the backend call does not serve take a documented fallback (docs/training.md):
CUDA buckets run torch's hook of the same dtype (cast, all_reduce, copy back) through the group;
bfloat16/float16 buckets need no compression and get a plain averaging all_reduce; groups whose
CPU backend is not xccl run torch's hook; integer, bool and complex buckets raise ValueError.
"""

# No `from __future__ import annotations`: DDP compares the hooks' annotations with the types
# themselves (dist.GradBucket, torch.futures.Future[torch.Tensor]), not with strings.
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from xccl import _C

__all__ = [
    "bf16_compress_hook",
    "compressed_all_reduce",
    "fp16_compress_hook",
    "hierarchical_bf16_compress_hook",
    "hierarchical_fp16_compress_hook",
]

_WIRE = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
_TORCH_HOOK = {
    torch.bfloat16: default_hooks.bf16_compress_hook,
    torch.float16: default_hooks.fp16_compress_hook,
}


def _group(process_group):
    return process_group if process_group is not None else dist.group.WORLD


def _xccl_backend(group):
    """The group's CPU backend when it is xccl's, else None."""
    try:
        backend = group._get_backend(torch.device("cpu"))
    except (RuntimeError, ValueError):
        return None
    return backend if isinstance(backend, _C.ProcessGroupXccl) else None


def compressed_all_reduce(
    tensor: torch.Tensor,
    wire: torch.dtype = torch.bfloat16,
    group=None,
    between_hosts_only: bool = False,
    async_op: bool = False,
):
    """Averages the float32/float64 CPU `tensor` in place over `group` (None: the default group)
    with its bytes on the wire as `wire` (torch.bfloat16 or torch.float16), in one xccl backend
    call; between_hosts_only compresses only the traffic between hosts. Returns the Work when
    async_op (its future's value is [tensor]), else None once done."""
    if wire not in _WIRE:
        raise ValueError(
            f"xccl compressed_all_reduce: wire must be bfloat16 or float16, not {wire}"
        )
    backend = _xccl_backend(_group(group))
    if backend is None:
        raise ValueError("xccl compressed_all_reduce: the group's CPU backend is not xccl")
    work = _C._compressed_allreduce(backend, tensor, _WIRE[wire], between_hosts_only)
    if async_op:
        return work
    work.wait()
    return None


def _averaged(group, tensor: torch.Tensor) -> torch.futures.Future[torch.Tensor]:
    work = dist.all_reduce(tensor, op=dist.ReduceOp.AVG, group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def _hook(wire: torch.dtype, between_hosts_only: bool, process_group, bucket):
    group = _group(process_group)
    buffer = bucket.buffer()
    if not buffer.is_floating_point():
        raise ValueError(
            f"xccl.hooks: cannot compress a gradient bucket of dtype {buffer.dtype}; "
            "register torch's allreduce_hook for non-floating gradients"
        )
    if buffer.dtype in _WIRE:
        return _averaged(group, buffer)  # already 16-bit: nothing to compress
    backend = _xccl_backend(group)
    if buffer.device.type != "cpu" or backend is None:
        return _TORCH_HOOK[wire](group, bucket)
    work = _C._compressed_allreduce(backend, buffer, _WIRE[wire], between_hosts_only)
    return work.get_future().then(lambda fut: fut.value()[0])


def _make_hook(name: str, wire: torch.dtype, between_hosts_only: bool, doc: str):
    def hook(process_group, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        return _hook(wire, between_hosts_only, process_group, bucket)

    # DDP refuses a hook whose __name__ is "bf16_compress_hook" unless CUDA and NCCL 2.10+ are
    # present (it takes it for torch's NCCL-only hook): ours run wherever xccl does.
    hook.__name__ = hook.__qualname__ = "xccl_" + name
    hook.__doc__ = doc
    return hook


bf16_compress_hook = _make_hook(
    "bf16_compress_hook",
    torch.bfloat16,
    False,
    "Averages the bucket with bfloat16 on the wire and fp32 accumulation, in one backend call.",
)
fp16_compress_hook = _make_hook(
    "fp16_compress_hook",
    torch.float16,
    False,
    "Averages the bucket with float16 on the wire and fp32 accumulation, in one backend call.",
)
hierarchical_bf16_compress_hook = _make_hook(
    "hierarchical_bf16_compress_hook",
    torch.bfloat16,
    True,
    "Exact fp32 average inside each host, bfloat16 only on the links between hosts.",
)
hierarchical_fp16_compress_hook = _make_hook(
    "hierarchical_fp16_compress_hook",
    torch.float16,
    True,
    "Exact fp32 average inside each host, float16 only on the links between hosts.",
)
