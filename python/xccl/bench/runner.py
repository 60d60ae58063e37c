"""One rank of the benchmark: process groups, buffers, the interleaved timed loop, checks.

Every rank runs this same code in the same order, so every decision that changes what a rank
calls (iteration counts, skipped sizes) is made from values all ranks agree on: options, or
numbers reduced over the control group.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from datetime import datetime, timedelta, timezone

import torch
import torch.distributed as dist

import xccl  # registers the "xccl" backend with torch.distributed

from .. import gpu_routes
from . import method, onesided, onesided_report, report, tuned
from .load import Load
from .options import BATCH_CALLS, DTYPES, ONE_SIDED, format_size
from .sides import DeepSpeedSide, FloorSide, MpiSide, Side, mpi_store

CONTROL_BACKEND = "gloo"  # barriers and result gathering: CPU tensors, works beside any backend
CHECK_SENTINEL = 99  # output buffers hold this before a checked call: no exact result equals it
# Largest integer each type sums exactly; check inputs stay within it over all ranks.
EXACT_LIMIT = {"bfloat16": 256, "float16": 2048, "int8": 127, "uint8": 255}


def resolve_device(
    choice: str, launched: bool, local_rank: int, share_gpu: bool = False
) -> torch.device:
    if choice == "cuda" or (choice == "auto" and launched and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no CUDA device")
        if share_gpu:
            return torch.device("cuda", 0)
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(
                f"local rank {local_rank} has no GPU ({torch.cuda.device_count()} visible)"
            )
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def resolve_references(choices: list, device: torch.device) -> list:
    """--reference's names with 'auto' resolved: gloo on CPU, nccl on GPU; 'none': none."""
    if choices == ["none"]:
        return []
    if choices == ["auto"]:
        return ["nccl" if device.type == "cuda" else "gloo"]
    return list(choices)


def reference_role(index: int) -> str:
    """The role of the index-th reference: "reference", then "reference2", "reference3"..."""
    return "reference" if index == 0 else f"reference{index + 1}"


class Rank:
    def __init__(self, args, rank: int, world: int, device: torch.device, sides: list):
        self.args, self.rank, self.world, self.device, self.sides = args, rank, world, device, sides
        self.dtype = getattr(torch, args.dtype)
        self.itemsize = DTYPES[args.dtype]
        if torch.tensor([], dtype=self.dtype).element_size() != self.itemsize:
            raise RuntimeError(f"torch's {args.dtype} is not {self.itemsize} bytes")
        self.floating = self.dtype.is_floating_point
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        # Calls per synchronize when timing (--timing batch); CPU calls complete on return.
        self.batch = BATCH_CALLS if args.timing == "batch" and device.type == "cuda" else 1

    # -- inputs ----------------------------------------------------------------------------

    def _generator(self, rank: int, salt: int, device) -> torch.Generator:
        generator = torch.Generator(device=device)
        generator.manual_seed(self.args.seed * 1_000_003 + salt * 1009 + rank)
        return generator

    def fill_random(self, tensor, salt: int) -> None:
        """Random normal floats, or random integers: never zeros, whose arithmetic and
        compression can be unrepresentatively fast."""
        generator = self._generator(self.rank, salt, tensor.device)
        if self.floating:
            tensor.normal_(generator=generator)
        else:
            low = 0 if self.dtype == torch.uint8 else -100
            tensor.random_(low, 101, generator=generator)

    def check_input(self, rank: int, count: int, salt: int):
        """Rank `rank`'s integer-valued check input (on CPU, int32): small enough that every
        sum over the world is exact in the tested dtype, so outputs compare bit for bit."""
        bound = max(1, min(4, EXACT_LIMIT.get(self.args.dtype, 4 * self.world) // self.world))
        low = 0 if self.dtype == torch.uint8 else -bound
        return torch.randint(
            low,
            bound + 1,
            (count,),
            dtype=torch.int32,
            generator=self._generator(rank, salt, "cpu"),
        )

    def expected(self, op: str, shape: dict, salt: int):
        """What this rank's output must hold after `op` on everyone's check_input; None where
        it is undefined (reduce: every rank but the root, rank 0)."""
        chunk, mine = shape["count"] // self.world, slice(None)
        if op in ("reduce_scatter", "all_to_all"):
            mine = slice(self.rank * chunk, (self.rank + 1) * chunk)
        if op == "broadcast":
            return self.check_input(0, shape["input"], salt)
        if op == "reduce" and self.rank != 0:
            return None
        if op in ("all_reduce", "reduce_scatter", "reduce"):
            total = torch.zeros(shape["output"], dtype=torch.int32)
            for rank in range(self.world):
                total += self.check_input(rank, shape["input"], salt)[mine]
            return total
        parts = [self.check_input(rank, shape["input"], salt)[mine] for rank in range(self.world)]
        return torch.cat(parts)  # all_gather, all_to_all: chunk r comes from rank r

    # -- one size ---------------------------------------------------------------------------

    def barrier(self) -> None:
        dist.barrier()  # the control group: a backend under test carries no control traffic

    def agreed_max(self, values: list) -> list:
        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return tensor.tolist()

    def check(self, op: str, shape: dict, calls: dict, inp, out, salt: int) -> dict:
        expected = self.expected(op, shape, salt)
        expected = None if expected is None else expected.to(self.dtype)
        passed = {}
        for side in self.sides:
            if side.role not in calls or not side.checked:
                continue
            out.fill_(CHECK_SENTINEL)
            inp.copy_(self.check_input(self.rank, shape["input"], salt).to(self.dtype))
            calls[side.role]()
            self.sync()
            # Every rank calls; a rank whose output is undefined has nothing to compare.
            passed[side.role] = expected is None or bool(torch.equal(out.cpu(), expected))
        return passed

    def time_calls(self, call, iters: int, close=None, batch: int | None = None) -> list:
        """Per-call wall times. On CUDA a device synchronize follows each call (--timing call)
        or each batch of calls (--timing batch: one sample per batch, its time / its calls),
        so a time covers the collective, not just its launch. `close` replaces the
        synchronize (one-sided ops: the signal that completes a put), `batch` the batch size."""
        close, batch = close or self.sync, batch or self.batch
        times, done = [], 0
        while done < iters:
            calls = min(batch, iters - done)
            start = time.perf_counter()
            for _ in range(calls):
                call()
            close()
            times.append((time.perf_counter() - start) / calls)
            done += calls
        return times

    def capture(self, call, count: int):
        """`count` calls captured in one CUDA graph; returns its replay. One eager call first:
        each backend sets itself up on its first call (xccl's workspace, NCCL's communicator),
        which cannot happen during capture (docs/gpu.md)."""
        call()
        self.sync()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(count):
                call()
        self.sync()
        return graph.replay  # holds the graph

    def measure(self, op: str, shape: dict, salt: int) -> dict:
        """Times every side on one size, interleaved; returns this rank's statistics and check
        results by role."""
        args = self.args
        inp = torch.empty(shape["input"], dtype=self.dtype, device=self.device)
        out = (
            inp
            if op in ("all_reduce", "broadcast", "reduce")
            else torch.empty(shape["output"], dtype=self.dtype, device=self.device)
        )
        absent = {side.role: side.absent(op, args.dtype) for side in self.sides}
        calls = {side.role: side.call(op, inp, out) for side in self.sides if not absent[side.role]}
        passed = self.check(op, shape, calls, inp, out, salt) if args.check else {}
        self.fill_random(inp, salt)
        if out is not inp:
            self.fill_random(out, salt + 1)
        # --graph K: a timed "call" is one replay of K captured calls (the check above ran the
        # eager calls); every rank captures the sides in the same order, and replays stay
        # matched because all ranks replay the same counts.
        per_call = 1
        if args.graph:
            calls = {role: self.capture(call, args.graph) for role, call in calls.items()}
            per_call = args.graph
        timed = self.interleave({role: (call, None, None) for role, call in calls.items()})
        gone = {role: {"absent": why} for role, why in absent.items() if why}
        return gone | {
            role: {
                "stats": method.summarize([t / per_call for t in result["times"]]),
                "iters": result["iters"],
                "warmup": result["warmup"],
                "check": passed.get(role),
            }
            for role, result in timed.items()
        }

    def interleave(self, loops: dict) -> dict:
        """Times each loop (role -> (call, close, batch), see time_calls) in interleaved
        blocks; returns role -> {"times", "iters", "warmup"}. Every rank passes the same roles
        in the same order, and the loop sizes come from values reduced over ranks."""
        args, roles = self.args, list(loops)

        def timing(i: int, iters: int) -> list:
            call, close, batch = loops[roles[i]]
            return self.time_calls(call, iters, close, batch)

        # Estimate one call's time to size the loops: two calls per side (the first pays for
        # lazy set-up), then, for calls short enough that one sample is mostly noise, the median
        # of a few more. The slowest rank's estimate sizes every rank's loops identically.
        estimates = []
        for i in range(len(roles)):
            self.barrier()
            timing(i, 1)
            estimates.append(timing(i, 1)[0])
        estimates = self.agreed_max(estimates)
        if any(e < args.target_time / 50 for e in estimates):
            for i in range(len(roles)):
                if estimates[i] < args.target_time / 50:
                    self.barrier()
                    estimates[i] = method.percentile(timing(i, method.PROBE_CALLS), 50)
            estimates = self.agreed_max(estimates)
        iters = [method.plan_iterations(e, args.target_time, args.iters) for e in estimates]
        warmups = [method.plan_warmup(e, args.target_time, args.warmup) for e in estimates]
        for i, warmup in enumerate(warmups):
            timing(i, warmup)

        rounds = method.round_count(iters)
        blocks = [method.split_rounds(n, rounds) for n in iters]
        times = {role: [] for role in roles}
        for index in range(rounds):
            # Alternate who goes first, so neither always runs right after the barrier.
            order = list(range(len(roles)))
            if index % 2:
                order.reverse()
            for i in order:
                if index < len(blocks[i]):
                    self.barrier()
                    times[roles[i]] += timing(i, blocks[i][index])
        return {
            role: {"times": times[role], "iters": n, "warmup": w}
            for role, n, w in zip(roles, iters, warmups)
        }

    def record(self, op: str, shape: dict, gathered: list) -> dict:
        """All ranks' results for one size as one record: each statistic's max over ranks."""
        entry = {
            "op": op,
            "bytes": shape["bytes"],
            "count": shape["count"],
            "dtype": self.args.dtype,
            "nranks": self.world,
            "reference": None,
        }
        for side in self.sides:
            mine = [r[side.role] for r in gathered]
            entry[side.role] = (
                method.absent_record(side.name, mine[0]["absent"])
                if "absent" in mine[0]
                else method.side_record(op, shape, side.name, mine)
            )
        # References after the first: a list, so the records of one-reference runs keep
        # their shape (markdown.py, repeats.py and older JSON read "reference").
        more = [entry.pop(side.role) for side in self.sides[2:]]
        if more:
            entry["more_references"] = more
        reference = entry["reference"]
        entry["speedup"] = method.round6(
            method.speedup(reference and reference["median_us"], entry["backend"]["median_us"])
        )
        return entry


def metadata(args, world: int, device: torch.device, sides: list) -> dict:
    names = {side.role: side.name for side in sides}
    return {
        "tool": "xccl.bench",
        "xccl_version": xccl.__version__,
        "torch_version": torch.__version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "device": (torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"),
        "backend": names["backend"],
        "reference": names.get("reference"),
        "references": [side.name for side in sides[1:]],
        "nranks": world,
        "dtype": args.dtype,
        "ops": args.ops,
        "sizes": args.sizes,
        "method": {
            "statistic": "per-rank median/p10/p90 of per-call times, then max over ranks",
            "warmup": args.warmup,
            "iters": args.iters,
            "target_time_s": args.target_time,
            "min_iters": method.MIN_ITERS,
            "max_iters": method.MAX_ITERS,
            "interleaved": "per size, alternating blocks of iterations",
            "busbw_factors": {op: method.busbw_factor(op, world) for op in args.ops},
            **onesided.metadata(args),
            "bytes": "all_reduce/broadcast/reduce buffer, all_gather output, "
            "reduce_scatter/all_to_all input",
            "check": args.check,
            "seed": args.seed,
            "timing": args.timing,
            "batch_calls": BATCH_CALLS if args.timing == "batch" else 1,
            "graph_calls": args.graph,
            "load": args.load,
        },
        # The GPU route xccl was told to take (docs/environment.md); None: its own plan.
        "xccl_gpu_algo": os.environ.get("XCCL_GPU_ALGO") or None,
        # --tuning: the table the tested xccl group planned from (None: the one in force).
        "tuning": args.tuning,
        # --share-gpu: every rank on cuda:0, so no reference can be NCCL.
        "share_gpu": bool(getattr(args, "share_gpu", False)),
        "argv": args.argv,
    }


def _side(args, role: str, name: str, timeout: timedelta, rank, world, local_rank) -> Side:
    """The `role` side: a peer (bench/peers.py) or a backend's group, planning from the table
    --tuning gives it (bench/tuned.py)."""
    if name == "floor":
        return FloorSide(role, timeout)
    if name == "mpi":
        return MpiSide(role, rank, world)
    if name == "deepspeed":
        return DeepSpeedSide(role, rank, world, local_rank, timeout)
    text = tuned.side_text(args.tuning_text, role, name)
    with tuned.planning_from(text):
        group = dist.new_group(backend=name, timeout=timeout)
    if text:
        why = tuned.in_force(group)
        if why != "rank 0's table":
            raise SystemExit(f"xccl bench: --tuning {args.tuning} does not apply here: {why}")
    return Side(role, tuned.side_name(args.tuning_text, role, name), group)


def run(args, rank: int, world: int, local_rank: int, init_method: str, launched: bool) -> int:
    """Runs the whole benchmark as one rank; returns the exit status (1 if a check failed)."""
    device = resolve_device(args.device, launched, local_rank, args.share_gpu)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    references = resolve_references(args.references, device)
    timeout = timedelta(seconds=args.timeout)
    # Ranks started by mpirun learn the store's address over MPI (sides.mpi_store).
    where = {"store": mpi_store(timeout)} if init_method == "mpi" else {"init_method": init_method}
    dist.init_process_group(CONTROL_BACKEND, rank=rank, world_size=world, timeout=timeout, **where)
    try:
        place = (rank, world, local_rank)
        sides = [_side(args, "backend", args.backend, timeout, *place)]
        for index, name in enumerate(references):
            sides.append(_side(args, reference_role(index), name, timeout, *place))
        with Load.for_rank(args, rank, local_rank) as load:
            return _run_sizes(
                Rank(args, rank, world, device, sides), metadata(args, world, device, sides), load
            )
    finally:
        dist.destroy_process_group()


def _run_sizes(me: Rank, meta: dict, load: Load) -> int:
    args, lead = me.args, me.rank == 0
    collectives = [op for op in args.ops if op not in ONE_SIDED]
    plan = method.size_plan(collectives, args.sizes, me.itemsize, me.world)
    plan += onesided.plan(args, me.itemsize)
    # Collective: the window every one-sided size writes into exists once, for the whole run.
    pair = (
        onesided.Pair(me, [shape for op, shape in plan if op in ONE_SIDED])
        if any(op in ONE_SIDED for op, _ in plan)
        else None
    )
    progress = report.Progress(len(plan), enabled=lead and not args.no_progress)
    versus = f" vs {', '.join(meta['references'])}" if meta["references"] else ""
    progress.note(
        f"xccl bench: {meta['backend']}{versus}, {me.world} ranks on {meta['device']}, "
        f"{args.dtype}, {len(plan)} runs over {', '.join(args.ops)}"
    )
    records, salt, started = [], 0, time.monotonic()
    # xccl on CUDA tensors: its group's route counters around each size, so a row claims the
    # kernel route only where the kernels ran (gpu_routes; markdown.py marks the others).
    counted = next(
        (s.group for s in me.sides if s.role == "backend" and args.backend == "xccl"), None
    )
    counted = counted if me.device.type == "cuda" else None
    for op in args.ops:
        mine = []
        for shape in (shape for name, shape in plan if name == op):
            progress.step(f"{op} {format_size(shape['bytes'])}")
            salt += 1
            owner = pair if op in ONE_SIDED else me
            watched = counted is not None and op not in ONE_SIDED
            before = gpu_routes.counts(counted) if watched else {}
            try:
                results = owner.measure(op, shape, salt)
            except Exception as error:
                raise RuntimeError(
                    f"{op} at {format_size(shape['bytes'])}: {type(error).__name__}: {error}"
                ) from error
            record = owner.record(op, shape, _gather(me.world, results))
            if watched:
                # Every rank's calls per route for this size, summed: the row's proof of route.
                routes = {}
                for ranks_routes in _gather(
                    me.world, gpu_routes.taken(before, gpu_routes.counts(counted))
                ):
                    for route, calls in ranks_routes.items():
                        routes[route] = routes.get(route, 0) + calls
                record["backend"]["routes"] = routes
            if args.load and op not in ONE_SIDED:
                record["loaded"] = _measure_loaded(me, load, op, shape, salt)
            mine.append(record)
            progress.advance()
        records += mine
        if lead:
            progress.clear()
            tables = onesided_report if op in ONE_SIDED else report
            print(tables.format_table(mine, tables.op_title(op, meta)) + "\n", flush=True)
            progress.note(f"xccl bench: {op} done ({time.monotonic() - started:.0f} s)")
    if pair:
        pair.close()
    if lead:
        progress.clear()
        _finish(args, records, meta)
    failed = any(
        side["check"] == "FAIL"
        for r in records + [r["loaded"] for r in records if "loaded" in r]
        for side in report.sides_of(r)
    )
    return 1 if failed else 0


def _gather(world: int, results: dict) -> list:
    gathered = [None] * world
    dist.all_gather_object(gathered, results)
    return gathered


def _measure_loaded(me: Rank, load: Load, op: str, shape: dict, salt: int) -> dict:
    """The same size again with the load running: a record of its own, plus how many
    processes ran."""
    load.on()
    try:
        me.barrier()  # nobody times a call before the load runs
        results = me.measure(op, shape, salt)
        me.barrier()
    finally:
        load.off()
    return {"load": me.args.load, **me.record(op, shape, _gather(me.world, results))}


def _finish(args, records: list, meta: dict) -> None:
    # One line per op and reference (not the floor, which does no work to be faster than).
    compared = [i for i, name in enumerate(meta["references"]) if name != report.FLOOR]
    lines = [
        line
        for op in args.ops
        if op not in ONE_SIDED
        for label, mine in (
            (op, [r for r in records if r["op"] == op]),
            (
                f"{op} (load {args.load})",
                [r["loaded"] for r in records if r["op"] == op and "loaded" in r],
            ),
        )
        for index in compared
        if (line := report.summary_line(label, mine, index))
    ]
    if lines:
        print("Summary (speedup = reference time / tested time; > 1 means faster):")
        print("\n".join("  " + line for line in lines))
    lines = onesided_report.summary_lines([r for r in records if r["op"] in ONE_SIDED])
    if lines:
        print("One-sided (bandwidth ratios, same bytes, same run):")
        print("\n".join("  " + line for line in lines))
    if args.check:
        failures = [
            f"{r['op']} {format_size(r['bytes'])} ({side['name']})"
            for r in records
            for side in report.sides_of(r)
            if side["check"] == "FAIL"
        ]
        print(
            "check: "
            + (
                f"FAIL {len(failures)}: " + ", ".join(failures)
                if failures
                else f"PASS ({len(records)} sizes)"
            )
        )
    for path, write in (
        (args.csv, lambda p: report.write_csv(p, records, meta["device"])),
        (args.json, lambda p: report.write_json(p, records, meta)),
        (args.plot, lambda p: report.write_plot(p, records, meta)),
    ):
        if path:
            write(path)
            print(f"wrote {path}")
    sys.stdout.flush()
