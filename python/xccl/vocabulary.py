"""The plan vocabulary as Python sees it: the names of collectives, routes, algorithms and GPU
kernels, and which (collective, route, algorithm) triples a tuning table may name.

The one declaration is C++'s (csrc/common/vocabulary.h), read here once through the native
module (``xccl._native.vocabulary()``), so that the tuning schema (tuning_schema.py) and the
tuner (tune/) spell no name of their own. tests/python/test_vocabulary.py fails when a name is
spelled anywhere else. The unpackings below follow the C++ enums' order: a value added there
fails here at import until it is given a name.
"""

from __future__ import annotations

from . import _native

_ROWS = _native.vocabulary()

# ---- CPU: collectives, routes, algorithms ----
CPU_COLLECTIVES = tuple(name for name, *_ in _ROWS["collectives"])
# The collectives whose network transport has a ring (else only direct).
RING_OPS = tuple(name for name, ring, *_ in _ROWS["collectives"] if ring)
# The collectives that reduce over one host's segment one-shot or two-shot.
SHM_REDUCTIONS = tuple(name for name, _, shm, *_ in _ROWS["collectives"] if shm)
# Planned without a size: only a tuning entry over every size applies to them.
WHOLE_RANGE_OPS = tuple(name for name, *_, whole in _ROWS["collectives"] if whole)
CPU_ROUTES = _ROWS["cpu_routes"]
# TCP names the network transport, whichever engine carries it.
TCP, SHM, HIERARCHICAL = CPU_ROUTES
AUTO, DIRECT, RING, ONE_SHOT, TWO_SHOT, SHM_ALGORITHM = (row[0] for row in _ROWS["algorithms"])
# What XCCL_ALGO accepts, and what a tuning table may name (all but auto).
FORCEABLE_ALGORITHMS = tuple(name for name, forceable, _ in _ROWS["algorithms"] if forceable)
CPU_ALGORITHMS = tuple(name for name, _, named in _ROWS["algorithms"] if named)
CPU_LEGAL = frozenset(_ROWS["cpu_legal"])


def cpu_legal(collective: str, route: str, algorithm: str) -> bool:
    """Whether a tuning table may say that `collective` runs `algorithm` over `route`."""
    return (collective, route, algorithm) in CPU_LEGAL


# ---- GPU: collectives, routes, kernels, XCCL_GPU_ALGO ----
# The collectives a kernel runs: the only ones with a choice to tune.
GPU_COLLECTIVES = tuple(name for name, kernel in _ROWS["gpu_collectives"] if kernel)
KERNEL, VENDOR, HOST, LOCAL = (name for name, _ in _ROWS["gpu_routes"])
GPU_ROUTES = tuple(name for name, tunable in _ROWS["gpu_routes"] if tunable)
# The kernel families (what plans print and tables write) per collective, in kernel order;
# NONE is the family of "no kernel" (a vendor entry's).
NONE = _ROWS["gpu_kernels"][0][1]
KERNELS_BY_COLLECTIVE: dict = {}
for _name, _family, _collective in _ROWS["gpu_kernels"][1:]:
    KERNELS_BY_COLLECTIVE[_collective] = (*KERNELS_BY_COLLECTIVE.get(_collective, ()), _family)
del _name, _family, _collective
GPU_KERNELS = (*dict.fromkeys(f for fs in KERNELS_BY_COLLECTIVE.values() for f in fs), NONE)
# XCCL_GPU_ALGO's choices, each a tuple of its name and synonyms.
GPU_FORCES = _ROWS["gpu_forces"]
NCCL, RCCL = _ROWS["vendors"]

# ---- The tuning table's world line ----
LOCALITIES = _ROWS["localities"]
NO_SHARING, ONE_HOST, PER_HOST = LOCALITIES
