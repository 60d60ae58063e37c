"""One rank of the tuner: the rule's group and one group per candidate, every (collective, size)
checked exactly and then timed with xccl.bench's method, the table built from what every rank
measured (the same on every rank), and rank 0's summary.

Every rank runs this same code in the same order; what changes the calls a rank makes (which
candidates run at a size, iteration counts) comes from values every rank computes alike or
reduces over the control group.
"""

from __future__ import annotations

import argparse
import os
import re
import time

import torch
import torch.distributed as dist

import xccl  # noqa: F401 - registers the backend
from xccl import _C, gpu_routes, tuning

from .. import vocabulary as V
from ..bench import method, report, runner
from ..bench.sides import torch_call
from . import candidates as cands
from . import exact, summary, verdict

# A kernel candidate's result is also checked in these dtypes (every dtype the reduction kernels
# serve; the copy kernels move bytes, which float32 covers), untimed: the stamp it may write lets
# every dtype run on the kernels. Inputs are integers in [-5, 5], so every sum of up to 51 ranks
# is exact in bfloat16 (8 significant bits) and the kernels take at most 8.
KERNEL_CHECK_DTYPES = (torch.float16, torch.bfloat16)
# Timed seconds per candidate and size (bench's --target-time; a full run takes bench's default):
# a median over hundreds of calls at small sizes; the largest get bench's minimum of 10 calls.
TARGET_S = {True: 0.1, False: 0.25}
WARMUP = 5
# The group's transport (its CPU route's name) -> the locality its table is made for.
LOCALITY = {V.SHM: V.ONE_HOST, V.HIERARCHICAL: V.PER_HOST, V.TCP: V.NO_SHARING}
FORCED_BY_ENV = ("XCCL_ALGO", "XCCL_GPU_ALGO")  # they win over any table: nothing to measure


class _Timer(runner.Rank):
    """xccl.bench's timed loop (probe, warm-up, interleaved rounds) with its barriers and
    agreement on the tuner's control group instead of the default group."""

    def __init__(self, rank, world, device, control, target_s):
        args = argparse.Namespace(
            dtype="float32", timing="call", seed=0, target_time=target_s, iters=None, warmup=WARMUP
        )
        super().__init__(args, rank, world, device, [])
        self.control = control

    def barrier(self) -> None:
        dist.barrier(group=self.control)

    def agreed_max(self, values: list) -> list:
        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self.control)
        return tensor.tolist()


def _call(op: str, group, inp, out):
    if op == "reduce":
        return lambda: dist.reduce(inp, dst=exact.ROOT, group=group)
    return torch_call(op, group, inp, out)


def _layout(op: str, size: int, world: int) -> dict | None:
    return method.layout("all_reduce" if op == "reduce" else op, size, 4, world)


def _backend(group):
    return group._get_backend(torch.device("cpu"))


def _new_group(text: str, device: str = "cpu"):
    """An xccl group planning from `text`. On GPUs its GPU side, which asks whether kernels
    may run when it is created at the group's first CUDA call, is created here too: a candidate's
    group runs its kernels unverified (tune checks every result), the rules' group as this
    machine's verification says."""
    with tuning.override(text, kernels_under_test=device == "cuda" and bool(text)):
        group = dist.new_group(backend="xccl")
        if device == "cuda":
            dist.all_reduce(torch.zeros(1, device=torch.cuda.current_device()), group=group)
            torch.cuda.synchronize()
        return group


def _forced_group(candidate, world: dict, device: str = "cpu"):
    """(group, None) with the candidate's table in force; else (None, the group's own world
    read from the reason, for a retry) or (None, the reason) when the table was refused."""
    text = cands.forcing_text(candidate, world)
    group = _new_group(text, device)
    in_force, why = _C._tuning_in_force(_backend(group))
    if in_force.split("\n") == text.split("\n") or in_force.split() == text.split():
        return group, None
    dist.destroy_process_group(group)
    match = re.search(r"group is (\d+)/(\d+)/(\w+)", why)
    if match:
        return None, {"size": int(match[1]), "hosts": int(match[2]), "locality": match[3]}
    return None, why or "no table in force"


def _rule_plans(device: str, world: dict, sizes: list, ops) -> dict:
    """(collective, bytes) -> (route, algorithm, chunk) of the rules' plan, where the plan rows
    model this group (one host with shared memory, or every host alike); {} where they do not."""
    size, hosts, locality = world["size"], world["hosts"], world["locality"]
    modelled = V.ONE_HOST if hosts == 1 else (V.NO_SHARING if size == hosts else V.PER_HOST)
    if device == "cpu" and (locality != modelled or size % hosts):
        return {}
    verified = False
    if device == "cuda":
        from .. import verify

        verified = verify.kernels_verified()[0]
    rows = _C._plan_rows(device, size, hosts, sizes, None, verified)
    return {(r[0], r[1]): cands.parse_rule(r[2], r[3]) for r in rows if r[0] in ops}


def run(
    group=None,
    device: str = "cpu",
    ops=cands.DEFAULT_OPS,
    sizes=None,
    quick: bool = False,
    out: str | None = None,
    write: bool = True,
    command: str = "",
    progress: bool = True,
    summary_table: bool = True,
) -> dict:
    """Tunes xccl for `group` (default: the world) and returns the table on every rank; rank 0
    writes it to `out` (default xccl.tuning.default_path()) unless write is False. Call it on
    every rank of the default group, which `group` must span. Rank 0 shows its progress on
    stderr and prints the summary on stdout (progress, summary_table: False to leave out)."""
    group = group or dist.group.WORLD
    world_size = dist.get_world_size(group)
    if world_size != dist.get_world_size():
        raise ValueError(
            f"xccl tune: the group has {world_size} of the {dist.get_world_size()} ranks; "
            "tune a group of every rank"
        )
    for name in FORCED_BY_ENV:
        if os.environ.get(name, V.AUTO) not in ("", V.AUTO):
            raise ValueError(f"xccl tune: {name}={os.environ[name]} forces every plan; unset it")
    ops = list(ops)
    allowed = cands.GPU_OPS if device == "cuda" else cands.CPU_OPS
    unknown = [op for op in ops if op not in allowed]
    if unknown:
        raise ValueError(f"xccl tune: cannot tune {', '.join(unknown)} on {device}")
    sizes = cands.sizes_for(quick, sizes)
    rank = dist.get_rank(group)
    tensor_device = torch.device("cpu")
    if device == "cuda":
        tensor_device = torch.device("cuda", torch.cuda.current_device())
    job = argparse.Namespace(
        rank=rank,
        world_size=world_size,
        device=device,
        tensor_device=tensor_device,
        ops=ops,
        sizes=sizes,
        quick=quick,
        out=out,
        write=write,
        command=command,
        progress=progress,
        summary=summary_table,
        control=dist.new_group(backend="gloo"),
        groups=[],
    )
    try:
        return _tune(job)
    finally:
        for made in job.groups:
            dist.destroy_process_group(made)
        dist.destroy_process_group(job.control)


def _tune(job) -> dict:
    """run()'s body; job holds its arguments, the control group and the groups it made."""
    rank, world_size, device, ops, sizes = job.rank, job.world_size, job.device, job.ops, job.sizes
    lead = rank == 0
    rule_group = _new_group("", device)
    job.groups.append(rule_group)
    transport = _backend(rule_group).transport
    world = {"size": world_size, "hosts": 1, "locality": LOCALITY.get(transport, V.NO_SHARING)}
    # Hosts: the first candidate's group says how many it counts (its table is refused with
    # "group is W/H/L" unless they match), and every later candidate follows that shape.
    options = (
        cands.gpu_candidates(ops)
        if device == "cuda"
        else cands.cpu_candidates(world["locality"], world_size, ops, job.quick)
    )
    forced, refused = [], []
    for candidate in options:
        made, why = _forced_group(candidate, world, device)
        if isinstance(why, dict):  # the group counts its hosts otherwise: follow the group
            world = why
            made, why = _forced_group(candidate, world, device)
        if made is None:
            refused.append(f"{candidate.label}: {why}")
            continue
        job.groups.append(made)
        forced.append((candidate, made))
    plan = [(op, shape) for op in ops for s in sizes if (shape := _layout(op, s, world_size))]
    rules = _rule_plans(device, world, sorted({shape["bytes"] for _, shape in plan}), ops)
    progress = report.Progress(len(plan), enabled=lead and job.progress)
    progress.note(
        f"xccl tune: {device}, {world_size} ranks on {world['hosts']} host(s) "
        f"({world['locality']}), {len(plan)} sizes x up to {len(forced) + 1} plans"
    )
    for line in refused:  # the same on every rank: each group's table was agreed
        progress.note(f"xccl tune: not measured, the group did not take the plan ({line})")
    timer = _Timer(rank, world_size, job.tensor_device, job.control, TARGET_S[job.quick])
    # GPU kernel candidates: verified only where their route counters show the kernel ran.
    kernels = {c.name for c, _ in forced if device == "cuda" and c.route == "kernel"}
    measured, salt, started = [], 0, time.monotonic()
    for op in ops:
        for shape in (shape for name, shape in plan if name == op):
            progress.step(f"{op} {cands.size_label(shape['bytes'])}")
            rule = rules.get((op, shape["bytes"]))
            sides = [(verdict.RULE, rule_group)] + [
                (c.name, g)
                for c, g in forced
                if op in c.ops and not (rule and cands.same_plan(c, rule))
            ]
            salt += 1
            rows = _measure(timer, op, shape, sides, salt, job.control, kernels)
            won = verdict.winners(rows)
            if won:  # a win counts only when a second interleaved timing repeats it
                again = [s for s in sides if s[0] == verdict.RULE or s[0] in won]
                rows = verdict.confirmed(
                    rows, _measure(timer, op, shape, again, salt, job.control, kernels)
                )
            measured += rows
            progress.advance()
        progress.note(f"xccl tune: {op} done ({time.monotonic() - started:.0f} s)")
    progress.clear()
    by_name = {c.name: c for c, _ in forced}
    labels = {key: " ".join(_rule_words(plan)) for key, plan in rules.items()}
    entries = verdict.build_entries(measured, by_name, labels, device)
    table = tuning.new_table(device, world, entries, job.command, measured)
    if lead and job.summary:
        rows = verdict.summary_rows(measured, labels, by_name)
        print(summary.format_summary(rows, world, device), flush=True)
    if device == "cuda" and lead:
        _stamp(measured, forced, progress)
    if job.write and lead:
        path = job.out or tuning.default_path()
        tuning.save(path, table)
        if job.summary:
            print(f"wrote {path}", flush=True)
    dist.barrier(group=job.control)  # nobody destroys a group while rank 0 still writes
    return table


def _rule_words(plan: tuple) -> list:
    route, algorithm, chunk = plan
    # "shm" and "hierarchical", not "shm shm" and "hierarchical shm"
    words = [route] if route == V.HIERARCHICAL or algorithm == route else [route, algorithm]
    return words + ([cands.size_label(chunk)] if chunk else [])


def _measure(timer, op, shape, sides, salt, control, kernels=frozenset()) -> list:
    """Checks every side's result exactly, then times them interleaved; returns the rows of the
    table's "measured" list (statistics: each one's maximum over ranks). A side named in
    `kernels` counts as verified only when its checked calls, in float32 and in every
    KERNEL_CHECK_DTYPES, were exact and its group's route counters show that xccl's kernels
    ran each of them (a kernel that cannot run here falls back to exact NCCL or host results)."""
    rank, world, device = timer.rank, timer.world, timer.device
    inp = torch.empty(shape["input"], dtype=torch.float32, device=device)
    out = (
        inp
        if op in ("all_reduce", "broadcast", "reduce")
        else torch.empty(shape["output"], dtype=torch.float32, device=device)
    )
    calls = {name: _call(op, g, inp, out) for name, g in sides}
    want = exact.expected(op, shape, rank, world, salt)
    problems = {}
    for name, group in sides:
        out.fill_(exact.SENTINEL)
        inp.copy_(exact.rank_input(rank, shape["input"], salt))
        before = gpu_routes.counts(group) if name in kernels else {}
        calls[name]()
        timer.sync()
        problems[name] = "" if want is None else exact.first_mismatch(out, want)
        if name in kernels:
            for dtype in KERNEL_CHECK_DTYPES:
                problems[name] = problems[name] or _check_in(dtype, timer, op, shape, group, salt)
            went = gpu_routes.off_kernel(gpu_routes.taken(before, gpu_routes.counts(group)))
            problems[name] = problems[name] or (went and f"not on the kernel route: {went}")
    timed = timer.interleave({name: (call, None, None) for name, call in calls.items()})
    mine = {
        name: {
            "stats": method.summarize(result["times"]),
            "iters": result["iters"],
            "warmup": result["warmup"],
            "check": not problems[name],
        }
        for name, result in timed.items()
    }
    gathered = [None] * world
    dist.all_gather_object(gathered, mine, group=control)
    rows = []
    for name, _ in sides:
        side = method.side_record(
            "all_reduce" if op == "reduce" else op, shape, name, [g[name] for g in gathered]
        )
        rows.append(
            {
                "collective": op,
                "bytes": shape["bytes"],
                "candidate": name,
                "median_us": side["median_us"],
                "p10_us": side["p10_us"],
                "p90_us": side["p90_us"],
                "verified": side["check"] == "PASS",
            }
        )
    return rows


def _check_in(dtype, timer, op, shape, group, salt) -> str:
    """ "" when `op` on `group` is exact in `dtype` with the same integer inputs, else what
    differs (named with the dtype)."""
    rank, world, device = timer.rank, timer.world, timer.device
    inp = exact.rank_input(rank, shape["input"], salt).to(device=device, dtype=dtype)
    out = (
        inp
        if op in ("all_reduce", "broadcast", "reduce")
        else torch.full((shape["output"],), exact.SENTINEL, dtype=dtype, device=device)
    )
    _call(op, group, inp, out)()
    timer.sync()
    want = exact.expected(op, shape, rank, world, salt)
    wrong = "" if want is None else exact.first_mismatch(out.to(torch.float32), want)
    return wrong and f"{str(dtype).removeprefix('torch.')}: {wrong}"


def _stamp(measured: list, forced: list, progress) -> None:
    """The GPU verification stamp (python/xccl/verify.py), written only when every kernel
    candidate's result was exact at every size it ran, in float32, float16 and bfloat16, and
    counted on the kernel route (_measure): kernels then run by default here."""
    from .. import topo, verify

    kernel_rows = [r for r in measured if r["candidate"].startswith(f"{V.KERNEL}_")]
    ran = {r["candidate"] for r in kernel_rows}
    expected = {c.name for c, _ in forced if c.route == V.KERNEL}
    if not kernel_rows or ran != expected or not all(r["verified"] for r in kernel_rows):
        progress.note(
            "xccl tune: not every kernel result was exact and counted on the kernel route: "
            "no verification stamp"
        )
        return
    cases = [f"tune:{r['candidate']}:{r['collective']}:{r['bytes']}" for r in kernel_rows]
    path = verify.stamp_path()
    verify.write_stamp(path, verify.machine_key(topo.load(topo.topology_json())), cases)
    progress.note(
        f"xccl tune: {len(cases)} kernel results exact in float32, float16 and bfloat16, each "
        f"counted on the kernel route; stamp written to {path}"
    )


__all__ = ["run"]
