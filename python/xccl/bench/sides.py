"""The measured sides of a benchmark rank: a torch process group (the tested backend, gloo,
nccl, the floor's fake backend) or a peer that is not one (Open MPI through mpi4py, DeepSpeed's
CPU shared-memory all_reduce). See peers.py for what each peer is and lacks.

A side gives, per op, a no-argument call on the rank's own buffers (the timed loop pays only
for the call), or says why it has none (absent). Every rank builds its sides in the same order
and asks the same questions, so absent sides are skipped on every rank alike.
"""

from __future__ import annotations

import os
import socket
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

from . import peers

# torch >= 2.14 renamed the tensor-in/tensor-out collectives; older torch has only the old names.
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


class Side:
    """One measured backend: its process group and its name, under a role (backend,
    reference, reference2, ...). `checked`: --check compares its outputs (not the floor's,
    which moves no data)."""

    checked = True

    def __init__(self, role: str, name: str, group):
        self.role, self.name, self.group = role, name, group

    def absent(self, op: str, dtype: str) -> str | None:
        return None

    def call(self, op: str, inp, out):
        return torch_call(op, self.group, inp, out)


def torch_call(op: str, group, inp, out):
    """The collective on a process group as a no-argument callable."""
    if op == "all_reduce":
        return lambda: dist.all_reduce(inp, group=group)
    if op == "broadcast":
        return lambda: dist.broadcast(inp, src=0, group=group)  # groups span all ranks
    if op == "reduce":
        return lambda: dist.reduce(inp, dst=0, group=group)
    if op == "all_gather":
        return lambda: _all_gather(out, inp, group=group)
    if op == "reduce_scatter":
        return lambda: _reduce_scatter(out, inp, group=group)
    if op == "all_to_all":
        return lambda: dist.all_to_all_single(out, inp, group=group)
    raise ValueError(f"unknown op {op!r}")


class FloorSide(Side):
    """torch's fake backend: every collective returns a completed Work without moving a byte,
    so its time is torch's own dispatch of the call."""

    checked = False

    def __init__(self, role: str, timeout: timedelta):
        import torch.testing._internal.distributed.fake_pg  # noqa: F401 - registers "fake"

        super().__init__(role, "floor", dist.new_group(backend="fake", timeout=timeout))


class MpiSide(Side):
    """Open MPI through mpi4py on numpy views of the rank's tensors (no copy: the results land
    in the buffers --check reads). Ranks are MPI's, so the bench must run under mpirun."""

    def __init__(self, role: str, rank: int, world: int):
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_size() != world or MPI.COMM_WORLD.Get_rank() != rank:
            raise RuntimeError(
                "--reference mpi: this rank is not MPI's rank "
                f"{rank} of {world} (MPI says {MPI.COMM_WORLD.Get_rank()} of "
                f"{MPI.COMM_WORLD.Get_size()}); start the bench without a launcher (it starts "
                "its ranks under mpirun) or under mpirun"
            )
        super().__init__(role, "mpi", None)
        self.mpi = MPI
        self.comm = MPI.COMM_WORLD.Dup()  # its own context: no match with anyone else's calls

    def absent(self, op: str, dtype: str) -> str | None:
        return peers.absent("mpi", op, dtype)

    def call(self, op: str, inp, out):
        comm, a, b = self.comm, inp.numpy(), out.numpy()
        if op == "all_reduce":
            in_place = self.mpi.IN_PLACE
            return lambda: comm.Allreduce(in_place, a)
        if op == "broadcast":
            return lambda: comm.Bcast(a, root=0)
        if op == "reduce":  # in place on the root, as torch's reduce
            if comm.Get_rank() == 0:
                in_place = self.mpi.IN_PLACE
                return lambda: comm.Reduce(in_place, a, root=0)
            return lambda: comm.Reduce(a, None, root=0)
        if op == "all_gather":
            return lambda: comm.Allgather(a, b)
        if op == "reduce_scatter":
            return lambda: comm.Reduce_scatter_block(a, b)
        if op == "all_to_all":
            return lambda: comm.Alltoall(a, b)
        raise ValueError(f"unknown op {op!r}")


class DeepSpeedSide(Side):
    """deepspeed.comm.inference_all_reduce with DeepSpeed's CPU accelerator: its shared-memory
    all_reduce, for ranks all on this host (with LOCAL_SIZE below the world size DeepSpeed
    0.19.8's op crashes the process, so ranks on several hosts are refused before it runs).
    DeepSpeed falls back to torch.distributed.all_reduce (here: the bench's gloo control group)
    when its op did not load or the CPU lacks its kernel's ISA; that fallback is refused
    loudly, so a deepspeed column is always DeepSpeed's own path."""

    def __init__(self, role: str, rank: int, world: int, local_rank: int, timeout: timedelta):
        hosts = [None] * world
        dist.all_gather_object(hosts, socket.gethostname())  # the control group
        if len(set(hosts)) != 1:
            raise RuntimeError(
                "--reference deepspeed: DeepSpeed's CPU shared-memory all_reduce needs every "
                f"rank on one host (the ranks are on {len(set(hosts))})"
            )
        # DeepSpeed reads these: its accelerator, and whether all ranks are local. Its
        # shared-memory segments are named after MASTER_ADDR and MASTER_PORT: rank 0's pid
        # keeps two runs on one host apart when no launcher set them.
        token = [os.getpid()]
        dist.broadcast_object_list(token, src=0)
        os.environ["DS_ACCELERATOR"] = "cpu"
        os.environ["LOCAL_SIZE"] = str(world)
        os.environ["LOCAL_RANK"] = str(local_rank)
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(token[0]))
        import deepspeed
        import deepspeed.comm

        # The default group exists (the bench's gloo control group): DeepSpeed keeps it, and
        # loads (on first use: builds) its shm op and maps the shared memory here, untimed.
        sys.stdout.flush()
        deepspeed.init_distributed(dist_backend="gloo", timeout=timeout, verbose=False)
        backend = deepspeed.comm.comm.cdb
        if not hasattr(getattr(torch.ops, "deepspeed", None), "inference_all_reduce_"):
            raise RuntimeError(
                "--reference deepspeed: DeepSpeed's CPU shared-memory op did not load "
                "(torch.ops.deepspeed.inference_all_reduce_ is missing; its build needs a C++ "
                "compiler and ninja)"
            )
        super().__init__(role, "deepspeed", None)
        self.level = int(getattr(backend, "shm_vector_kernel_level", 0) or 0)
        self.all_reduce = deepspeed.comm.inference_all_reduce

    def absent(self, op: str, dtype: str) -> str | None:
        why = peers.absent("deepspeed", op, dtype)
        if why is None and self.level < (1 if dtype == "float32" else 2):
            isa = "AVX2" if dtype == "float32" else "AVX-512BW"
            why = f"DeepSpeed's shm kernel for {dtype} needs {isa}, which this CPU lacks"
        return why

    def call(self, op: str, inp, out):
        if op != "all_reduce":
            raise ValueError(f"deepspeed has no {op}")
        all_reduce = self.all_reduce
        with refusing_torch_all_reduce():  # one untimed call: proves the shm path is taken
            all_reduce(inp)
        return lambda: all_reduce(inp)


class _Refused(RuntimeError):
    pass


class refusing_torch_all_reduce:
    """Within it any call of torch.distributed.all_reduce raises: DeepSpeed's fallback."""

    def __enter__(self):
        self.saved = dist.all_reduce

        def refuse(*args, **kwargs):
            raise _Refused(
                "--reference deepspeed: deepspeed.comm.inference_all_reduce reached "
                "torch.distributed.all_reduce, so DeepSpeed's shared-memory all_reduce is not "
                "in use here (its op did not load, or this CPU lacks the ISA its kernel needs)"
            )

        dist.all_reduce = refuse
        return self

    def __exit__(self, *exc):
        dist.all_reduce = self.saved


def mpi_store(timeout: timedelta):
    """The control group's store for ranks started by mpirun: rank 0 opens a TCP store on a
    port the system picks and tells the others its address over MPI."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, world = comm.Get_rank(), comm.Get_size()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    all_local = local.Get_size() == world
    local.Free()
    store, where = None, None
    if rank == 0:
        host = os.environ.get("MASTER_ADDR") or ("127.0.0.1" if all_local else socket.getfqdn())
        try:
            store = dist.TCPStore(
                host, 0, world, is_master=True, timeout=timeout, wait_for_workers=False
            )
            where = (host, store.port)
        except Exception as error:  # noqa: BLE001 - told to every rank, raised on each
            where = ("", f"{type(error).__name__}: {error}")
    host, port = comm.bcast(where, root=0)
    if not isinstance(port, int):
        raise RuntimeError(f"rank 0 could not open the bench's store: {port}")
    if store is None:
        store = dist.TCPStore(host, port, world, is_master=False, timeout=timeout)
    return store
