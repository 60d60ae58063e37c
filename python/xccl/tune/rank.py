"""One tuner rank under any launcher (local, torchrun, a namespace host): a gloo default group
for the control traffic, then xccl.tune.run on it; and the options file namespace-host ranks
read their command line from."""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import timedelta

from ..bench.rank import EXIT_USAGE


def rank_main(args, rank: int, world: int, init_method: str, quiet_errors: bool = False) -> int:
    """One rank: a gloo default group (control traffic), then the tuner on it."""
    import torch
    import torch.distributed as dist

    from .measure import run

    if args.device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: torch sees no CUDA device")
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
    dist.init_process_group(
        "gloo",
        init_method=init_method,
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=args.timeout),
    )
    try:
        run(
            None,
            device=args.device,
            ops=args.ops,
            sizes=args.sizes,
            quick=args.quick,
            out=args.out,
            command=args.command,
            progress=not args.no_progress,
        )
    except ValueError as error:
        if quiet_errors:
            args.usage_error = f"{error}\n"
            return EXIT_USAGE
        sys.stderr.write(f"{error}\n")
        return EXIT_USAGE
    finally:
        dist.destroy_process_group()
    return 0


def options_file(args, folder: str) -> str:
    path = os.path.join(folder, "tune-options.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(vars(args), f)
    return path


def load_options(path: str) -> argparse.Namespace:
    with open(path, encoding="utf-8") as f:
        return argparse.Namespace(**json.load(f))
