"""`python -m xccl.bench` (also `xccl bench`, `xccl-bench`): collective benchmarks of xccl
against a reference backend, nccl-tests method. See benchmarks/README.md.

    python -m xccl.bench                              # 2 local CPU ranks, all five ops
    python -m xccl.bench --ops all_reduce --check --json out.json
    torchrun --nproc-per-node 8 -m xccl.bench         # the launcher's ranks, GPUs if present
    python -m xccl.bench --netns-hosts 2 -n 4 --nets tcp,ofi   # across namespace hosts (root)
    python -m xccl.bench --ops all_reduce --reference mpi,deepspeed,floor,gloo   # the peers

Modules: options (command line), method (the measurement rules, pure), runner (one rank),
peers (the references that are not a torch backend: Open MPI, DeepSpeed, the floor; pure) and
sides (each measured side's calls, those peers included),
launch (torchrun or self-started ranks), report (progress, table, CSV, JSON, plot), markdown
(xccl-vs-NCCL markdown tables from --json files: `python -m xccl.bench.markdown`), hooks
(xccl.hooks' backend call against torch's fp16 hook steps: `python -m xccl.bench.hooks`), hosts
(hosts made of network namespaces) and netns (--netns-hosts: the run across them). Only
runner and sides import torch (hooks only inside its ranks), so the others load fast and test
without the extension.
"""


def main(argv=None) -> int:
    from .launch import main as launch_main

    return launch_main(argv)


__all__ = ["main"]
