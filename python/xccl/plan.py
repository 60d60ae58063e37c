"""`python -m xccl plan`: the route and algorithm xccl takes per collective and message size, and
why, as NCCL_DEBUG=INFO's tuning lines tell NCCL users, but before running anything.

The rows come from the C++ planners themselves (``xccl._C._plan_rows``: algo::planCpu and
algo::planGpu through csrc/algo/plan_rows.h), so what this prints is what a group created in this
process with the same world size would do. The tunables are read from this process's XCCL_*
variables. The GPU plan is pure: it needs no GPU, only a topology (``--topo`` or this machine's).
"""

from __future__ import annotations

import json
import os
import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
}


def parse_size(text: str) -> int:
    """ "4096", "64K", "1MiB", "2g": bytes (binary units); raises ValueError otherwise."""
    match = re.fullmatch(r"\s*([0-9]+)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"not a size: {text!r} (e.g. 4096, 64K, 1MiB, 2G)")
    return int(match.group(1)) * _UNITS[unit]


def format_size(size: int) -> str:
    """Sizes as the plan's reasons write them: "1 KiB", "8 MiB", "1000 B"."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def _gpu_count(topology_file: str | None) -> int:
    from . import topo

    if topology_file is None:
        return len(topo.load(topo.topology_json())["gpus"])
    return len(json.loads(topo.read_file(topology_file)).get("gpus", []))


def default_world(device: str, hosts: int, topology_file: str | None) -> int:
    """cuda: one rank per GPU of the topology on each host (2 when it lists none); cpu: 4 ranks
    per host."""
    if device == "cuda":
        return max(2, _gpu_count(topology_file)) * hosts
    return 4 * hosts


def plan_rows(
    device: str,
    world: int,
    hosts: int = 1,
    sizes: list[int] | None = None,
    topology_file: str | None = None,
    kernels_verified: bool = False,
    tuning: str = "",
) -> list[tuple]:
    """(collective, bytes, route, algorithm, reason, decision, tuned_ns, rule_ns) rows: decision
    "tuned" where the table `tuning` (canonical text, xccl.tuning) chose, else "rule"; raises
    ValueError for bad input."""
    from xccl import _C  # the compiled extension (imports torch)

    return _C._plan_rows(
        device, world, hosts, list(sizes or []), topology_file, kernels_verified, tuning=tuning
    )


def kernels_verdict(choice: str, topology_file: str | None) -> tuple[bool, str]:
    """--kernels: (verified, why) as asked, or (auto) as the stamp says for the topology planned
    (python/xccl/verify.py; a fixture topology is not this machine's, so not verified)."""
    if choice != "auto":
        return choice == "verified", f"--kernels {choice}"
    from . import topo, verify

    if topology_file is None:
        return verify.kernels_verified()
    return verify.verdict(topo.load(topo.read_file(topology_file)))


def _measured(tuned_ns: int, rule_ns: int) -> str:
    if not tuned_ns or not rule_ns:
        return "; not measured"
    gain = (rule_ns / tuned_ns - 1) * 100  # as tune's summary: rule time / tuned time - 1
    return f"; {tuned_ns / 1000:.1f} us vs rule {rule_ns / 1000:.1f} us, gain {gain:+.0f}%"


def format_table(rows: list[tuple], decisions: bool = False) -> str:
    """The rows as columns; `decisions` adds whether a table or the rules chose, and the times
    the table measured for both."""
    header = ("collective", "bytes", "route", "algorithm") + (("decision",) if decisions else ())
    cells = [header + ("reason",)]
    for c, b, r, a, why, decision, tuned_ns, rule_ns in rows:
        if decisions:
            extra = _measured(tuned_ns, rule_ns) if decision == "tuned" else ""
            cells.append((c, format_size(b), r, a, decision, why + extra))
        else:
            cells.append((c, format_size(b), r, a, why))
    n = len(header)
    widths = [max(len(row[i]) for row in cells) for i in range(n)]
    return "\n".join(
        "  ".join(row[i].ljust(widths[i]) for i in range(n)) + "  " + row[n] for row in cells
    )


def load_table(path: str) -> tuple[str, str, dict]:
    """(canonical text, a line about the table, its world) of `plan --tuning FILE`; ValueError
    when the file is not a table."""
    from . import tuning

    table, why = tuning.load(path)
    if table is None:
        raise ValueError(why)
    world = table["world"]
    fps = {}
    for device, section in tuning.SECTIONS.items():
        if table[section] is not None:
            try:
                fps[section] = tuning.fingerprint(device)
            except Exception:  # noqa: BLE001, S112 - this machine unreadable: nothing to compare
                continue
    elsewhere = tuning.check_machine(table, fps)
    note = f"; made on another machine ({elsewhere}), shown as if in force" if elsewhere else ""
    line = (
        f"tuning table {path}: made {table['created']} for world {world['size']}/"
        f"{world['hosts']}/{world['locality']}{note}"
    )
    return tuning.canonical(table), line, world


def main(args) -> int:
    if args.topo is not None and not os.path.isfile(args.topo):
        raise ValueError(f"no topology file {args.topo!r}")
    if args.hosts < 1 or (args.world is not None and args.world < 1):
        raise ValueError("--world and --hosts must be at least 1")
    sizes = [parse_size(s) for s in (args.sizes or [])]
    text, about, shape = (
        load_table(args.tuning) if getattr(args, "tuning", None) else ("", "", None)
    )
    if shape is not None and args.world is None:  # the world the table is for
        args.world, args.hosts = shape["size"], shape["hosts"]
    world = args.world or default_world(args.device, args.hosts, args.topo)
    verified, why = (False, "")
    if args.device == "cuda":
        verified, why = kernels_verdict(getattr(args, "kernels", "auto"), args.topo)
    rows = plan_rows(args.device, world, args.hosts, sizes, args.topo, verified, text)
    where = f"topology {args.topo}" if args.topo else "this machine's topology"
    print(
        f"xccl plan: {args.device}, {world} ranks on {args.hosts} host"
        f"{'s' if args.hosts > 1 else ''}, {where}; bytes in nccl-tests' convention "
        "(all_gather: output; reduce_scatter, all_to_all: input)"
    )
    print(format_table(rows, decisions=bool(text)))
    if about:
        print(about)
    if args.device == "cuda":
        state = "verified" if verified else "not verified"
        print(f"xccl's GPU kernels: {state} ({why}); --kernels verified|unverified shows either")
    return 0
