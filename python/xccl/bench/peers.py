"""The references of `--reference` that are not a torch backend's process group: the CPU peers
a user compares xccl with, and the floor every c10d backend stands on.

    mpi        Open MPI through mpi4py on numpy views of the bench's own CPU tensors (the ranks
               run under mpirun, with the shared-memory transport and its single-copy reads)
    deepspeed  DeepSpeed's CPU shared-memory all_reduce (deepspeed.comm.inference_all_reduce)
    floor      torch's "fake" backend, which moves no data: what torch's dispatch of one
               collective costs, paid by every c10d backend (xccl, gloo) but by neither peer

What each one lacks is reported as absent in the tables, never run through something else.
Pure functions and constants here (no torch, no mpi4py): options, launch and the tests use
them; the sides themselves are in sides.py.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

PEERS = ("mpi", "deepspeed", "floor")
CPU_PEERS = ("mpi", "deepspeed")  # CPU tensors only, eager calls

# What to install for each optional peer (benchmarks/README.md has the same commands).
INSTALL = {
    "mpi": "Open MPI and mpi4py (Debian/Ubuntu: apt-get install openmpi-bin libopenmpi-dev, "
    "then pip install mpi4py)",
    "deepspeed": "DeepSpeed (pip install deepspeed; its CPU shared-memory op compiles on first "
    "use, which needs a C++ compiler and ninja)",
}

# Open MPI's shared-memory transport on one host, as benchmarks/README.md describes: ob1 over
# the self and vader transports, vader reading large messages from the peer with one
# process_vm_readv (CMA). --bind-to none: the ranks move between cores like the bench's own
# ranks.
MPIRUN_OPTIONS = (
    "--bind-to",
    "none",
    "--mca",
    "pml",
    "ob1",
    "--mca",
    "btl",
    "self,vader",
    "--mca",
    "btl_vader_single_copy_mechanism",
    "cma",
)

# The dtypes mpi4py maps to an MPI datatype Open MPI reduces (numpy has no bfloat16, and Open
# MPI 4 has no float16 type).
MPI_DTYPES = ("float32", "float64", "int32", "int64", "int8", "uint8")
# DeepSpeed's shm op reduces these and silently leaves any other dtype alone; float16 and
# bfloat16 also need AVX-512BW, float32 AVX2 (checked at run time, sides.py).
DEEPSPEED_DTYPES = ("float32", "float16", "bfloat16")


def absent(peer: str, op: str, dtype: str) -> str | None:
    """Why `peer` has no `op` on `dtype` (a table says "absent"), or None when it has one."""
    if peer == "mpi" and dtype not in MPI_DTYPES:
        return f"mpi4py/Open MPI have no {dtype} datatype"
    if peer == "deepspeed":
        if op != "all_reduce":
            return "DeepSpeed's CPU shared-memory path has all_reduce (sum) only"
        if dtype not in DEEPSPEED_DTYPES:
            return f"DeepSpeed's CPU shared-memory all_reduce has no {dtype}"
    return None


def missing(references, find_spec=importlib.util.find_spec, which=shutil.which) -> str | None:
    """What to install before these references can run, or None when nothing is missing."""
    wanted = []
    if "mpi" in references and (find_spec("mpi4py") is None or which("mpirun") is None):
        wanted.append(f"--reference mpi needs {INSTALL['mpi']}")
    if "deepspeed" in references and find_spec("deepspeed") is None:
        wanted.append(f"--reference deepspeed needs {INSTALL['deepspeed']}")
    return "; ".join(wanted) or None


def mpirun_command(
    nranks: int, python: str, argv, euid: int | None = None, cores: int | None = None
) -> list:
    """The mpirun line that starts the bench's ranks for --reference mpi: every rank runs
    `python -m xccl.bench ARGV --under-mpirun` and takes its rank from MPI. As root Open MPI
    refuses to start without --allow-run-as-root. More ranks than cores (4 ranks on 2 cores)
    need --oversubscribe, which also makes Open MPI yield the core while it waits; with fewer
    ranks it is left out, since that yielding costs its small calls tens of milliseconds at
    p90 on a busy host (Open MPI's default there is to spin)."""
    euid = os.geteuid() if euid is None else euid
    cores = os.cpu_count() or 1 if cores is None else cores
    extra = ["--allow-run-as-root"] if euid == 0 else []
    if nranks > cores:
        extra.append("--oversubscribe")
    return [
        "mpirun",
        "-n",
        str(nranks),
        *extra,
        *MPIRUN_OPTIONS,
        python,
        "-m",
        "xccl.bench",
        *argv,
        "--under-mpirun",
    ]


def under_mpirun(args, environ) -> bool:
    """Ranks the bench started under mpirun, or ones a user started with `mpirun ... python -m
    xccl.bench` (Open MPI names every rank's place in OMPI_COMM_WORLD_SIZE)."""
    return bool(getattr(args, "under_mpirun", False)) or "OMPI_COMM_WORLD_SIZE" in environ
