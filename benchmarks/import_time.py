"""What installing xccl adds to `import torch`: wall-clock medians of fresh interpreters.

Each round starts `python -c "import torch"` once per setting, the settings alternated so that a
slow moment of the machine hits them alike:

  autoload off   TORCH_DEVICE_BACKEND_AUTOLOAD=0: torch loads no `torch.backends` entry point
  xccl off       XCCL_NO_AUTOLOAD=1: torch scans the entry points and loads xccl's, which returns
                 at once (what torch pays with the entry point scan but nothing of xccl's)
  xccl on        the default: xccl's entry point registers the backend

    python benchmarks/import_time.py [--rounds 10] [--python PYTHON] [--entry-point-only]

Prints one Markdown row per setting (median and spread, milliseconds) and the differences.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SETTINGS = {
    "autoload off": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    "xccl off": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1", "XCCL_NO_AUTOLOAD": "1"},
    "xccl on": {"TORCH_DEVICE_BACKEND_AUTOLOAD": "1", "XCCL_NO_AUTOLOAD": "0"},
}


# In one interpreter with autoload off: the time of exactly what torch does for xccl's entry point
# (import its module, call it), which a busy machine disturbs far less than a whole `import torch`.
# torch's scan of the installed distributions for the group comes before and is timed apart: it
# is paid whether or not xccl is installed.
ENTRY_POINT = """
import sys, time, torch
import importlib.metadata as m
start = time.perf_counter()
(point,) = [e for e in m.entry_points(group="torch.backends") if e.name == "xccl"]
scanned = time.perf_counter()
point.load()()
done = time.perf_counter()
print(done - scanned, scanned - start, "xccl._native" in sys.modules)
"""


def one(python: str, extra: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one `import torch` in a fresh interpreter."""
    env = dict(os.environ, **extra)
    start = time.perf_counter()
    child = subprocess.Popen([python, "-c", "import torch"], env=env, cwd=cwd)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"import torch failed ({child.returncode}) with {extra}")
    return wall, usage.ru_utime + usage.ru_stime


def entry_point(python: str, cwd: str) -> tuple[float, float, bool]:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", XCCL_NO_AUTOLOAD="0")
    out = subprocess.run(
        [python, "-c", ENTRY_POINT], env=env, cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.split()
    return float(out[0]), float(out[1]), out[2] == "True"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument(
        "--entry-point-only", action="store_true", help="time only xccl's entry point, in-process"
    )
    args = parser.parse_args()
    wall: dict[str, list[float]] = {name: [] for name in SETTINGS}
    cpu: dict[str, list[float]] = {name: [] for name in SETTINGS}
    point: list[float] = []
    scan: list[float] = []
    native = set()
    with tempfile.TemporaryDirectory() as cwd:  # not a source tree: the installed xccl only
        settings = {} if args.entry_point_only else SETTINGS
        for extra in settings.values():  # one warm-up each: the page cache, not the code
            one(args.python, extra, cwd)
        for _ in range(args.rounds):
            for name, extra in settings.items():
                seconds, used = one(args.python, extra, cwd)
                wall[name].append(seconds)
                cpu[name].append(used)
            took, scanned, loaded = entry_point(args.python, cwd)
            point.append(took)
            scan.append(scanned)
            native.add(loaded)

    def ms(values: list[float]) -> str:
        low, high = min(values) * 1e3, max(values) * 1e3
        return f"{statistics.median(values) * 1e3:.1f} ({low:.0f}-{high:.0f})"

    if settings:
        print(f"`import torch`, median of {args.rounds} (min-max), milliseconds:\n")
        print("| setting | wall | CPU (user + system) |")
        print("|---|---|---|")
        for name in settings:
            print(f"| {name} | {ms(wall[name])} | {ms(cpu[name])} |")
        for what, table in (("wall", wall), ("CPU", cpu)):
            on = statistics.median(table["xccl on"]) * 1e3
            off = statistics.median(table["xccl off"]) * 1e3
            print(f"\n{what}: xccl on - xccl off = {on - off:+.1f} ms", end="")
        print()
    print(f"\nxccl's entry point alone (import + call, in-process): {ms(point)} ms;")
    print(f"torch's scan for entry points before it (paid with or without xccl): {ms(scan)} ms;")
    print(f"xccl._native loaded by it: {sorted(native)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
