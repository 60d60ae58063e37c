"""Command-line options of `python -m xccl.bench`: parsing and validation only (no torch)."""

from __future__ import annotations

import argparse
import re

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce")
# One-sided ops (bench/onesided.py): rank 0 writes into the last rank's window. Only when named:
# the default and "all" stay the collectives, whose runs and tables they would change.
ONE_SIDED = ("put", "put_pages")

# Bytes per element of each dtype the tool accepts (checked against torch at run time).
DTYPES = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "int64": 8,
    "int8": 1,
    "uint8": 1,
}

# 8 B x 4^k up to 64 MiB is 12 sizes, 8 B .. 32 MiB: a default run takes one to two minutes on
# an idle 2-core VM (each 128 MiB step would add about as much as all smaller sizes together),
# and its top reaches the 16-256 MiB range of real DDP/FSDP buckets. Fuller
# sweeps: --max 256M --factor 2; peak bandwidth: --max 1G.
DEFAULT_MIN = "8"
DEFAULT_MAX = "64M"
DEFAULT_FACTOR = 4

# put's own default sweep when no size option is given: 4 KiB to 64 MiB, the range of KV-cache
# pages and layers that one-sided transfers move (issue 12's targets start at 1 MiB).
PUT_MIN = "4K"
PUT_MAX = "64M"
# put_pages: page sizes, and the bytes of pages per size when --pages does not fix the count
# (64 MiB: 1024 pages of 64 KiB, next to the target case of 1000).
PAGE_SIZES = "16K,64K,256K"
PAGES_TOTAL = "64M"

# --timing: "batch" synchronises the device once per BATCH_CALLS calls, so a GPU call's time
# excludes the host round trip of a synchronize that an application would not pay per call.
TIMINGS = ("call", "batch")
BATCH_CALLS = 10
# --load: more busy processes than this is a typo, not a measurement.
MAX_LOAD = 1024

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'8' -> 8, '4K' -> 4096, '1M', '256MiB', '1.5K' -> bytes (binary units, as nccl-tests)."""
    match = _SIZE.match(str(text))
    if not match:
        raise ValueError(f"not a size: {text!r} (examples: 8, 4K, 1M, 256M, 1G)")
    value = float(match.group(1)) * _UNITS[match.group(2).upper()]
    if value != int(value):
        raise ValueError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def format_size(nbytes: int) -> str:
    """The largest binary unit that divides exactly, else one decimal: 8 B, 4 KiB, 1.5 MiB."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if nbytes % scale == 0 else f"{value:.1f} {unit}"
    return f"{nbytes} B"


def size_series(low: int, high: int, factor: int) -> list:
    """low, low*factor, ... up to and including high (geometric, as nccl-tests -b/-e/-f)."""
    if low < 1 or high < low:
        raise ValueError(f"need 1 <= --min <= --max, got {low} and {high}")
    if factor < 2:
        raise ValueError(f"--factor must be at least 2, got {factor}")
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size *= factor
    return sizes


def parse_sizes(text: str) -> list:
    """'8,1K,256M' -> [8, 1024, 268435456]: an explicit list, ascending, repeats dropped."""
    sizes = sorted({parse_size(part) for part in str(text).split(",") if part.strip()})
    if not sizes or sizes[0] < 1:
        raise ValueError(f"not a list of positive sizes: {text!r}")
    return sizes


def parse_ops(text: str) -> list:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if names == ["all"]:
        return list(OPS)
    known = OPS + ONE_SIDED
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(f"unknown op(s) {', '.join(unknown) or text!r}; known: {', '.join(known)}")
    return list(dict.fromkeys(names))  # drop repeats, keep the order given


def parse_nets(text: str) -> list:
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    unknown = [name for name in names if name not in ("tcp", "ofi")]
    if unknown or not names:
        raise ValueError(f"unknown net(s) {', '.join(unknown) or text!r}; known: tcp, ofi")
    return names


def parse_references(text: str) -> list:
    """'mpi,deepspeed,floor' -> ['mpi', 'deepspeed', 'floor']: the references to time beside the
    tested backend, in the order given, repeats dropped. 'auto' and 'none' stand alone."""
    names = list(dict.fromkeys(name.strip().lower() for name in str(text).split(",")))
    names = [name for name in names if name]
    if not names:
        raise ValueError(f"not a list of references: {text!r}")
    if len(names) > 1 and ({"auto", "none"} & set(names)):
        raise ValueError("'auto' and 'none' cannot be combined with other references")
    return names


def _argparse_type(parse):
    def convert(text):
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    convert.__name__ = parse.__name__.replace("parse_", "")
    return convert


def _add_size(group, *names: str, dest: str, help: str) -> None:
    """A message-size option (SIZE, suffixes K, M, G). Its default is None, filled in by
    parse_args, which needs to know whether any size was given (put has sizes of its own)."""
    group.add_argument(
        *names, dest=dest, type=_argparse_type(parse_size), default=None, metavar="SIZE", help=help
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m xccl.bench",
        description="Collective benchmark, nccl-tests method: xccl against a reference backend "
        "(gloo on CPU, nccl on GPU) in the same processes, interleaved per size. "
        "Without a launcher it starts --nranks local CPU ranks itself; under "
        "torchrun it uses the launcher's ranks.",
        epilog="Sizes are message sizes in the nccl-tests convention (all_reduce, broadcast and "
        "reduce (to rank 0): the buffer; all_gather: the output; reduce_scatter and all_to_all: "
        "the input). "
        "Times are the slowest rank's statistic. See benchmarks/README.md.",
    )
    what = parser.add_argument_group("what to measure")
    what.add_argument(
        "--ops",
        type=_argparse_type(parse_ops),
        default=list(OPS),
        help=f"comma list (default all: {','.join(OPS)}); also the one-sided "
        f"{' and '.join(ONE_SIDED)}, only when named (rank 0 writes into the last rank's window; "
        "compared with send/recv, the reference's send/recv, one core's memcpy and one "
        "contiguous put of the same bytes)",
    )
    _add_size(
        what,
        "--min",
        "--minbytes",
        "-b",
        dest="min_bytes",
        help=f"smallest message (default {DEFAULT_MIN}, put {PUT_MIN}; suffixes K, M, G)",
    )
    # --maxbytes and -e (nccl-tests' names) also work after torchrun, whose parser rejects
    # --max as an ambiguous abbreviation of its own --max-restarts.
    _add_size(
        what,
        "--max",
        "--maxbytes",
        "-e",
        dest="max_bytes",
        help=f"largest message (default {DEFAULT_MAX}, put {PUT_MAX}; under torchrun spell it "
        "--maxbytes or -e)",
    )
    what.add_argument(
        "--factor",
        "--stepfactor",
        "-f",
        type=int,
        default=DEFAULT_FACTOR,
        help=f"size multiplier between steps (default {DEFAULT_FACTOR})",
    )
    what.add_argument(
        "--sizes",
        type=_argparse_type(parse_sizes),
        default=None,
        metavar="LIST",
        help="explicit comma list of sizes (e.g. 8,1K,256M), instead of --min, --max and --factor",
    )
    what.add_argument(
        "--page-sizes",
        type=_argparse_type(parse_sizes),
        default=parse_sizes(PAGE_SIZES),
        metavar="LIST",
        help=f"put_pages: page sizes, comma list (default {PAGE_SIZES})",
    )
    what.add_argument(
        "--pages",
        type=int,
        default=None,
        metavar="N",
        help=f"put_pages: pages per call (default: {format_size(parse_size(PAGES_TOTAL))} of "
        "pages per page size; the target case of docs/p2p.md: --pages 1000 --page-sizes 64K)",
    )
    what.add_argument(
        "--dtype", choices=sorted(DTYPES), default="float32", help="element type (default float32)"
    )
    who = parser.add_argument_group("who takes part")
    who.add_argument("--backend", default="xccl", help="backend under test (default xccl)")
    who.add_argument(
        "--reference",
        default="auto",
        help="backend(s) to compare with, comma list, all timed in the same run: gloo on CPU, "
        "nccl on GPU (default), any backend name, the CPU peers 'mpi' (Open MPI through mpi4py, "
        "ranks started under mpirun) and 'deepspeed' (DeepSpeed's CPU shm all_reduce), 'floor' "
        "(torch's fake backend: the dispatch cost every c10d backend pays), or 'none' to skip; "
        "e.g. mpi,deepspeed,floor,gloo",
    )
    who.add_argument(
        "--tuning",
        metavar="FILE|off",
        help="the tested xccl group plans from FILE's tuning table (python -m xccl tune, "
        "docs/tuning.md), 'off': from the built-in rules; an xccl reference plans from the rules, "
        "so --reference xccl --tuning FILE measures tuned against untuned in one run (default: "
        "every group plans from the table in force)",
    )
    who.add_argument(
        "--nranks",
        "-n",
        type=int,
        default=2,
        help="local ranks to start when not under a launcher (default 2)",
    )
    who.add_argument(
        "--simulate-hosts",
        type=int,
        default=1,
        metavar="N",
        help="local ranks only: split them into N simulated hosts, consecutive ranks per host "
        "(XCCL_SHM_HOST_ID per rank, docs/network.md), so xccl runs its cross-host paths over "
        "loopback (default 1: one host)",
    )
    who.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="auto: cuda:LOCAL_RANK under a launcher when GPUs exist, else cpu",
    )
    who.add_argument(
        "--share-gpu",
        action="store_true",
        help="with --device cuda: every rank on cuda:0 (xccl's kernels over CUDA IPC within one "
        "device); no reference unless named, since NCCL cannot run two ranks on one GPU",
    )
    # Across hosts made of network namespaces on this machine (bench/netns.py, needs root).
    hosts = parser.add_argument_group("across namespace hosts (root)")
    hosts.add_argument(
        "--netns-hosts",
        type=int,
        default=0,
        metavar="N",
        help="spread --nranks ranks over N hosts made of network namespaces on this machine "
        "(2 links each) and measure xccl over each of --nets against gloo; one table",
    )
    hosts.add_argument(
        "--nets",
        type=_argparse_type(parse_nets),
        default=["tcp"],
        metavar="LIST",
        help="with --netns-hosts: network engines to measure, comma list of tcp, ofi (default tcp)",
    )
    how = parser.add_argument_group("how to measure")
    how.add_argument(
        "--iters",
        type=int,
        default=None,
        help="timed iterations per size and backend (default: adapted to the "
        "size, see --target-time)",
    )
    how.add_argument(
        "--warmup",
        type=int,
        default=5,
        help="warm-up iterations per size and backend (default 5; fewer when one call is long)",
    )
    how.add_argument(
        "--target-time",
        type=float,
        default=0.25,
        metavar="S",
        help="seconds of timed iterations per size and backend when --iters is "
        "not given (default 0.25)",
    )
    how.add_argument(
        "--timing",
        choices=TIMINGS,
        default="call",
        help="call: each call timed alone, with a device synchronize after it on "
        f"CUDA (default); batch: {BATCH_CALLS} calls back to back per "
        "synchronize, the time divided among them (nccl-tests' way; on CPU the "
        "same as call, except that put and put_pages signal once per batch)",
    )
    how.add_argument(
        "--graph",
        type=int,
        default=0,
        metavar="K",
        help="CUDA only: capture K calls of each size in a CUDA graph per backend "
        "and time its replays (per-call time = replay time / K)",
    )
    how.add_argument(
        "--check",
        action="store_true",
        help="verify every size against an exact expectation (integer-valued "
        "inputs); exit 1 on any failure",
    )
    how.add_argument(
        "--load",
        type=int,
        default=0,
        metavar="N",
        help="also measure every collective size with N CPU-bound processes running beside "
        "the ranks (paused for the quiet measurement, resumed for the loaded one: both "
        "columns come from the same run; default 0: quiet only)",
    )
    how.add_argument("--seed", type=int, default=1234, help="input seed (default 1234)")
    how.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="bound on process-group set-up and on each collective (default 120)",
    )
    how.add_argument(
        "--time-limit",
        type=float,
        default=1800.0,
        metavar="S",
        help="bound on the whole self-started run (default 1800)",
    )
    # Set by the bench itself on the ranks it starts under mpirun (--reference mpi): take the
    # ranks from MPI, never start mpirun again.
    who.add_argument("--under-mpirun", action="store_true", help=argparse.SUPPRESS)
    out = parser.add_argument_group("output")
    out.add_argument("--csv", metavar="FILE", help="write one row per op, size and backend")
    out.add_argument("--json", metavar="FILE", help="write the results and run metadata")
    out.add_argument(
        "--plot", metavar="FILE.png", help="plot latency and busbw against size (needs matplotlib)"
    )
    out.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return parser


def _check_peers(parser, args) -> None:
    """The references that are not process groups of one backend (bench/peers.py) run on CPU
    tensors, eagerly, on one machine's ranks."""
    from .peers import CPU_PEERS, PEERS

    peers = [name for name in args.references if name in PEERS]
    if not peers and len(args.references) == 1:
        return
    named = ", ".join(peers) or ", ".join(args.references)
    if any(op in ONE_SIDED for op in args.ops):
        parser.error(
            f"--reference {args.reference}: {' and '.join(ONE_SIDED)} compare against one process "
            "group reference, not several or a peer"
        )
    if args.netns_hosts:
        parser.error(f"--reference {named}: --netns-hosts compares with gloo only")
    if args.graph and peers:
        parser.error(f"--reference {named}: no --graph (the peers are not captured)")
    cpu = [name for name in peers if name in CPU_PEERS]
    if cpu:
        if args.device == "cuda":
            parser.error(f"--reference {', '.join(cpu)} measures CPU tensors: no --device cuda")
        args.device = "cpu"


def parse_args(argv) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    sized = any(v is not None for v in (args.sizes, args.min_bytes, args.max_bytes))
    args.min_bytes = parse_size(DEFAULT_MIN) if args.min_bytes is None else args.min_bytes
    args.max_bytes = parse_size(DEFAULT_MAX) if args.max_bytes is None else args.max_bytes
    try:
        if args.sizes is None:
            args.sizes = size_series(args.min_bytes, args.max_bytes, args.factor)
        # put sweeps its own range unless a size option says otherwise (then both use it).
        args.put_sizes = (
            args.sizes
            if sized
            else size_series(parse_size(PUT_MIN), parse_size(PUT_MAX), args.factor)
        )
    except ValueError as error:
        parser.error(str(error))
    try:
        args.references = parse_references(args.reference)
    except ValueError as error:
        parser.error(f"--reference: {error}")
    _check_peers(parser, args)
    if args.pages is not None and args.pages < 1:
        parser.error("--pages must be positive")
    if any(op in ONE_SIDED for op in args.ops) and (args.graph or args.device == "cuda"):
        parser.error(
            f"{' and '.join(ONE_SIDED)} measure windows on CPU tensors: no --graph, "
            "no --device cuda"
        )
    if args.graph < 0:
        parser.error("--graph must be >= 0")
    if args.share_gpu and args.device != "cuda":
        parser.error("--share-gpu puts the ranks on one GPU: it needs --device cuda")
    if args.share_gpu and {"auto", "nccl", "rccl"} & set(args.references):
        if args.references != ["auto"]:
            parser.error("--share-gpu: NCCL/RCCL cannot run several ranks on one GPU")
        args.reference, args.references = "none", ["none"]
    if args.graph and args.device == "cpu":
        parser.error("--graph captures CUDA graphs: it needs --device cuda (or auto with GPUs)")
    for name in ("nranks", "warmup", "iters"):
        value = getattr(args, name)
        if value is not None and value < (0 if name == "warmup" else 1):
            parser.error(f"--{name} must be {'>= 0' if name == 'warmup' else 'positive'}")
    if not 1 <= args.simulate_hosts <= args.nranks:
        parser.error("--simulate-hosts must be between 1 and --nranks")
    if not 0 <= args.load <= MAX_LOAD:
        parser.error(f"--load must be between 0 and {MAX_LOAD}")
    if args.target_time <= 0 or args.timeout <= 0 or args.time_limit <= 0:
        parser.error("--target-time, --timeout and --time-limit must be positive")
    if args.netns_hosts:
        if not 2 <= args.netns_hosts <= args.nranks:
            parser.error("--netns-hosts needs 2 to --nranks hosts (every host runs a rank)")
        if args.csv or args.plot or args.graph or args.device == "cuda":
            parser.error("--netns-hosts measures CPU ranks and writes --json only")
    from . import tuned  # torch and the table's checks: only once the options parsed

    try:
        args.tuning_text = tuned.table_text(args.tuning, here=not args.netns_hosts)
    except ValueError as error:
        parser.error(f"--tuning: {error}")
    args.argv = list(argv)
    return args
