"""What the tuner measures: the size classes, and the candidate plans a group of a given shape
can run, each written as the tuning-table lines that force it (pure; no torch).

A candidate is forced on a group of its own by creating that group while the table source
answers a table whose one entry per collective covers every size ([0, inf)) with the
candidate's route, algorithm and chunk (xccl.tuning.override). The XCCL_* variables cannot do
it: the backend reads each of them once per process, so a group created after the first one sees
the values the first one saw. The table is also exactly what a tuned group will plan from, so
what is measured is what the written table makes the planner run.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .. import vocabulary as V

KiB, MiB = 1 << 10, 1 << 20
QUICK_SIZES = (1 * KiB, 16 * KiB, 256 * KiB, 4 * MiB, 16 * MiB)
FULL_SIZES = tuple(256 * 4**k for k in range(10))  # 256 B .. 64 MiB
QUICK_CHUNKS = (512 * KiB,)
FULL_CHUNKS = (128 * KiB, 512 * KiB, 2 * MiB)

# The names and which collective has what: the plan vocabulary (csrc/common/vocabulary.h).
# By default the collectives a GPU kernel runs; on CPUs also those with a shared-memory choice.
DEFAULT_OPS = V.GPU_COLLECTIVES
CPU_OPS = (*DEFAULT_OPS, *(op for op in V.SHM_REDUCTIONS if op not in DEFAULT_OPS))
GPU_OPS = DEFAULT_OPS
RING_OPS = V.RING_OPS  # collectives whose network transport has a ring
SHM_REDUCTIONS = V.SHM_REDUCTIONS
# The planner sees no size for all_to_all (ranks' lengths may differ), so only an entry over
# every size ([0, inf)) applies to it: its table entry is all or nothing.
WHOLE_RANGE_OPS = V.WHOLE_RANGE_OPS
# GPU kernel families per collective: what XCCL_GPU_ALGO's kernel choices map to.
GPU_KERNELS = V.KERNELS_BY_COLLECTIVE
LOCALITIES = V.LOCALITIES


@dataclass(frozen=True)
class Candidate:
    """One forced plan. cpu: (route, algorithm, chunk); gpu: (route, kernel) with chunk 0."""

    device: str
    route: str
    algorithm: str
    chunk: int = 0
    ops: tuple = field(default=())

    @property
    def name(self) -> str:
        if self.device == "gpu":
            return V.VENDOR if self.route == V.VENDOR else f"{V.KERNEL}_{self.algorithm}"
        base = f"{self.route}_{self.algorithm}"
        return f"{base}_{size_label(self.chunk)}" if self.chunk else base

    @property
    def label(self) -> str:
        """As the summary and the table's "rule" field write plans: "tcp ring 512K"."""
        if self.device == "gpu":
            return V.VENDOR if self.route == V.VENDOR else f"{V.KERNEL} {self.algorithm}"
        words = [self.route, self.algorithm] + ([size_label(self.chunk)] if self.chunk else [])
        return " ".join(words)

    def line(self, collective: str, low: int = 0, high: int | None = None) -> str:
        top = "inf" if high is None else str(high)
        if self.device == "gpu":
            kernel = V.NONE if self.route == V.VENDOR else self.algorithm
            return f"gpu {collective} {low} {top} {self.route} {kernel} 0 0"
        return f"cpu {collective} {low} {top} {self.route} {self.algorithm} {self.chunk} 0 0"


def size_label(size: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", MiB), ("K", KiB)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{unit}"
    return f"{size}B"


def sizes_for(quick: bool, override=None) -> list:
    sizes = list(override) if override else list(QUICK_SIZES if quick else FULL_SIZES)
    return sorted(dict.fromkeys(sizes))


def cpu_candidates(locality: str, world: int, ops, quick: bool) -> list:
    """The forced plans worth measuring on a group of this shape, besides the rule's own."""
    if locality not in LOCALITIES:
        raise ValueError(f"unknown locality {locality!r}")
    ops = tuple(ops)
    chunks = QUICK_CHUNKS if quick else FULL_CHUNKS
    ring_ops = tuple(op for op in ops if op in RING_OPS)
    found = []
    if locality == V.ONE_HOST:
        # Two-shot saves nothing below 3 ranks (cpu_plan.h), but measuring it costs little and
        # shows what a user's forcing would do.
        reductions = tuple(op for op in ops if op in SHM_REDUCTIONS)
        if reductions:
            found += [Candidate("cpu", V.SHM, a, 0, reductions) for a in (V.ONE_SHOT, V.TWO_SHOT)]
    if locality == V.PER_HOST and not quick:
        # The rules' hierarchical plan with another pipelining chunk (algorithm shm: the rules'
        # steps).
        chunked = tuple(op for op in ops if op not in WHOLE_RANGE_OPS)  # all_to_all: no chunks
        if chunked:
            found += [Candidate("cpu", V.HIERARCHICAL, V.SHM_ALGORITHM, c, chunked) for c in chunks]
    found.append(Candidate("cpu", V.TCP, V.DIRECT, 0, ops))
    if world > 1 and ring_ops:
        found += [Candidate("cpu", V.TCP, V.RING, c, ring_ops) for c in chunks]
    return found


def gpu_candidates(ops) -> list:
    ops = tuple(op for op in ops if op in GPU_KERNELS)
    found = [Candidate("gpu", V.VENDOR, V.NONE, 0, ops)]
    kernels = sorted({k for op in ops for k in GPU_KERNELS[op]})
    for kernel in kernels:
        found.append(
            Candidate("gpu", V.KERNEL, kernel, 0, tuple(o for o in ops if kernel in GPU_KERNELS[o]))
        )
    return found


def forcing_text(candidate: Candidate, world: dict) -> str:
    """The table that makes a group of `world` run `candidate` for every size of its ops."""
    lines = ["xccl-tuning 1", f"world {world['size']} {world['hosts']} {world['locality']}"]
    lines += [candidate.line(op) for op in candidate.ops]
    return "\n".join(lines) + "\n"


def parse_rule(route: str, algorithm: str) -> tuple:
    """(route, algorithm, chunk) of a plan row: ("tcp", "ring (512 KiB chunks)") or
    ("hierarchical", "in-host shm, between hosts direct (512 KiB chunks)"), whose algorithm is
    the rules' own ("shm", as its table entry names it)."""
    match = re.search(r"\((\d+) (B|KiB|MiB) chunks\)", algorithm)
    chunk = int(match[1]) * {"B": 1, "KiB": KiB, "MiB": MiB}[match[2]] if match else 0
    if route == V.HIERARCHICAL:
        return route, V.SHM_ALGORITHM, chunk
    words = algorithm.split()
    return route, (words[0] if words else ""), chunk


def same_plan(candidate: Candidate, rule: tuple) -> bool:
    """Whether the candidate runs what the rule's plan row says (then measuring it is waste)."""
    route, algorithm, chunk = rule
    if candidate.device == "gpu":
        if candidate.route == V.VENDOR:
            return route == V.VENDOR
        return route == V.KERNEL and algorithm == candidate.algorithm
    if candidate.route == V.HIERARCHICAL:
        return route == V.HIERARCHICAL and chunk == candidate.chunk
    return (route, algorithm, chunk) == (candidate.route, candidate.algorithm, candidate.chunk)


def class_bounds(sizes) -> list:
    """(low, high) per measured size: each size's class ends at the geometric mean with the next
    (rounded down, but past the smaller size), the first starts at 0 and the last has no end
    (None)."""
    sizes = sorted(sizes)
    edges = [max(a + 1, math.isqrt(a * b)) for a, b in zip(sizes, sizes[1:])]
    return list(zip([0, *edges], [*edges, None]))
