"""`python -m xccl <command>`: topo, env, plan, doctor, bench (the benchmark tool) and tune.

Each command's module is imported only when that command runs, so `xccl env` stays cheap and a
missing optional module (bench) fails with a message instead of breaking the other commands.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence


def _cmd_topo(args) -> int:
    from . import topo

    return topo.main(args)


def _cmd_env(args) -> int:
    from . import env

    report = env.last_report()
    preview = args.platform is not None or report is None or report.disabled
    if preview:
        # Nothing was applied in this process (disabled, or a platform asked for): show what
        # would be set for the current environment without changing it.
        disabled = report is not None and report.disabled
        would = env.decide_defaults(dict(os.environ), platform=args.platform)
        if disabled:
            print(env.format_report(report))
            print("What xccl would set without it:\n")
        report = would
    tuning = _tuning_line()
    if args.json:
        print(json.dumps({**env.report_to_dict(report), "tuning": tuning}, indent=2, default=str))
    else:
        print(env.format_report(report, show_all=args.all))
        print(f"\ntuning: {tuning}")
    return 0


def _tuning_line() -> str:
    """Which table of `python -m xccl tune` this process's groups would plan from, or why none."""
    try:
        from . import tuning
    except ImportError as error:  # a partial installation: the env report still prints
        return f"unknown ({error})"
    return tuning.describe()


def _cmd_plan(args) -> int:
    from . import plan

    return plan.main(args)


def _cmd_doctor(args) -> int:
    from . import doctor

    return doctor.run(args)


def _run_bench(argv: list) -> int:
    module = f"{__package__}.bench"
    try:
        bench = importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise  # bench exists but one of its own imports is missing: show that
        sys.stderr.write(
            "xccl bench: the benchmark module (xccl.bench) is not part of this installation\n"
        )
        return 2
    return bench.main(argv)


def _run_tune(argv: list) -> int:
    from . import tune

    return tune.main(argv)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m xccl", description="xccl: topology, environment and health checks"
    )
    commands = parser.add_subparsers(dest="command", metavar="command")
    commands.required = True

    topo = commands.add_parser("topo", help="print the machine topology xccl discovered")
    topo.add_argument("--json", action="store_true", help="print the JSON (docs/topology.md)")
    topo.add_argument(
        "--dump", metavar="FILE", help="also write the JSON to FILE (usable as XCCL_TOPO_FILE)"
    )
    topo.add_argument(
        "--file", metavar="FILE", help="read a topology JSON file instead of discovering"
    )
    topo.set_defaults(func=_cmd_topo)

    env = commands.add_parser(
        "env", help="show the environment defaults xccl set, left alone, or skipped, and why"
    )
    env.add_argument("--all", action="store_true", help="also list what xccl never sets")
    env.add_argument("--json", action="store_true", help="machine-readable output")
    env.add_argument(
        "--platform",
        choices=None,
        metavar="NAME",
        help="preview another platform's table (nvidia, nvidia_multinode, aws_efa, "
        "amd_mi300x, amd_mi250, cpu)",
    )
    env.set_defaults(func=_cmd_env)

    plan = commands.add_parser(
        "plan",
        help="print the route and algorithm xccl takes per collective and message size, and why",
    )
    plan.add_argument(
        "--device",
        default="cuda",
        choices=("cpu", "cuda"),
        help="plan for CPU or CUDA tensors (default cuda; needs no GPU)",
    )
    plan.add_argument(
        "--topo", metavar="FILE", help="plan for this topology JSON instead of this machine's"
    )
    plan.add_argument(
        "--world",
        type=int,
        metavar="N",
        help="ranks in the group (default: one per GPU per host; cpu: 4 per host)",
    )
    plan.add_argument(
        "--hosts",
        type=int,
        default=1,
        metavar="H",
        help="hosts the ranks are spread over, evenly (default 1)",
    )
    plan.add_argument(
        "--kernels",
        default="auto",
        choices=("auto", "verified", "unverified"),
        help="plan as on a machine where xccl's GPU kernels were verified or not (default auto: "
        "this machine's stamp from `python -m xccl doctor --gpu`)",
    )
    plan.add_argument(
        "--tuning",
        metavar="FILE",
        help="plan with this table of `python -m xccl tune` and mark each row tuned or rule "
        "with the measured times (default: the rules alone); --world defaults to the table's",
    )
    plan.add_argument(
        "sizes",
        nargs="*",
        metavar="SIZE",
        help="message sizes (4096, 64K, 1MiB; default 1 KiB to 1 GiB, x4)",
    )
    plan.set_defaults(func=_cmd_plan)

    doctor = commands.add_parser("doctor", help="check this host and self-test the backend")
    doctor.add_argument("--backend", default="xccl", help="backend to self-test (default xccl)")
    doctor.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    doctor.add_argument("--no-selftest", action="store_true", help="host checks only")
    doctor.add_argument(
        "--gpu",
        action="store_true",
        help="instead of the self-test, check every xccl GPU kernel against a host reference "
        "on this machine's GPUs and, when all are exact, record that they were verified here "
        "(they then run by default; docs/gpu.md)",
    )
    doctor.add_argument("--timeout", type=float, default=45.0, help="self-test bound, seconds")
    doctor.add_argument(
        "--topology-file", metavar="FILE", help="check this topology JSON instead of discovering"
    )
    doctor.set_defaults(func=_cmd_doctor)

    # Listed for --help; main() hands everything after "bench" to xccl.bench untouched.
    commands.add_parser("bench", help="collective benchmarks (xccl.bench)", add_help=False)
    commands.add_parser(
        "tune",
        help="measure and verify the best plan per collective and size here (xccl.tune)",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        return int(_run_bench(argv[1:]) or 0)
    if argv[:1] == ["tune"]:
        return int(_run_tune(argv[1:]) or 0)
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ValueError as error:  # bad input (an unknown platform, a malformed file)
        sys.stderr.write(f"xccl {args.command}: {error}\n")
        return 2
    except BrokenPipeError:  # `python -m xccl topo | head`
        return 0
