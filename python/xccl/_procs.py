"""How xccl's tools start local ranks (bench, doctor self-test).

Ranks come from a forkserver that imported torch once: each rank is a fork of that clean
server, so it starts without re-importing torch, yet inherits nothing from the calling process.
Forking the caller directly is unsafe: once it has run a parallel torch op, its OpenMP pool's
threads are gone in the child and the child's first parallel region hangs; CUDA likewise cannot
be used in a forked child. The server itself never touches a GPU.
"""

from __future__ import annotations

import multiprocessing

_PRELOAD = ["torch", "torch.distributed"]


def rank_context():
    """The multiprocessing context to start ranks with (same for CPU and CUDA ranks)."""
    context = multiprocessing.get_context("forkserver")
    # Only takes effect when this process has not started its forkserver yet; a server started
    # earlier with other preloads serves just as well.
    context.set_forkserver_preload(_PRELOAD)
    return context
