"""The stage plan of benchmarks/device_check.sh and the tallies of its test logs: pure functions,
standard library only, so a machine without a GPU (or torch) can print the plan and test it.

    python3 benchmarks/device_check.py plan [--gpus N] [--budget S] [--shell]
    python3 benchmarks/device_check.py tally pytest|gtest LOG...

plan: the stages that run within the budget (XCCL_CHECK_BUDGET_S, default 420 s), most valuable
first, each with the seconds it is given; ends with `total N s`. --shell prints one
`name letter budget keep|dropped|needs-gpus` line per stage for the script instead.
tally: one line, "N passed, N failed, N skipped, N not run", from pytest -v or GoogleTest
output, also when the run was cut off (tests collected but never reported are "not run", and
the test running when it was cut off is named).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, replace

DEFAULT_BUDGET_S = 420
# A stage given less than this is not started: start-up alone (torch's import, the CUDA
# context, the ranks' groups) takes about this long.
MIN_STAGE_S = 15


@dataclass(frozen=True)
class Stage:
    name: str
    letter: str  # the (a)-(e); "" for finding the GPU
    budget_s: int
    what: str
    min_s: int = 0  # the least it is shortened to before it is dropped
    required: bool = False  # never dropped: every later stage needs it
    multi_gpu: bool = False  # runs only with two or more GPUs


# In the order they run, which is their value on one GPU. Budgets are for an H200 machine with
# 16 cores (the build: one CMake build of the extension and the GPU GoogleTests).
STAGES = (
    # torch's first import on a fresh machine takes seconds, and a second one proves the MPS
    # daemon the stage starts.
    Stage("gpu", "", 30, "find the GPU(s), driver and torch; start MPS", required=True),
    Stage(
        "build",
        "a",
        180,
        "one CMake build, all cores: the extension (pip) and the GPU GoogleTests",
        required=True,
    ),
    Stage("kernels", "b", 45, "virtual-rank kernel tests on the GPU, CUDA IPC test", 20),
    Stage(
        "shared",
        "c",
        105,
        "ranks sharing the GPU, kernel route: tests/python/test_gpu*.py (matrix, graphs, ...)",
        45,
    ),
    Stage(
        "perf",
        "d",
        50,
        "kernel-route latency, busbw 8 B-256 MiB, 2 and 4 ranks on the GPU vs copy rate",
        25,
    ),
    Stage(
        "multi",
        "e",
        160,
        "several GPUs: gpu_bench.py (xccl vs NCCL) and the spread Python GPU tests",
        60,
        multi_gpu=True,
    ),
)
# Least valuable last. With several GPUs the table across GPUs is what a run is for: it comes
# right after the kernel tests.
ONE_GPU_ORDER = ("gpu", "build", "kernels", "shared", "perf")
MULTI_GPU_ORDER = ("gpu", "build", "kernels", "multi", "shared", "perf")


def by_name(name: str) -> Stage:
    return next(s for s in STAGES if s.name == name)


def plan(gpus: int, budget_s: int) -> tuple[list, list]:
    """(kept, dropped) stages for `gpus` GPUs within budget_s, kept in running order (value
    order). The least valuable optional stage gives way first: shortened down to its min_s,
    else dropped, then the next one; required stages are never cut, even when they alone exceed
    the budget. A shortened stage is a copy with the budget it is left."""
    order = MULTI_GPU_ORDER if gpus >= 2 else ONE_GPU_ORDER
    kept = [by_name(n) for n in order]
    dropped = []
    total = sum(s.budget_s for s in kept)
    for s in reversed([s for s in kept if not s.required]):
        if total <= budget_s:
            break
        excess = total - budget_s
        index = kept.index(s)
        if s.budget_s - excess >= s.min_s:
            kept[index] = replace(s, budget_s=s.budget_s - excess)
            total = budget_s
        else:
            dropped.insert(0, kept.pop(index))
            total -= s.budget_s
    return kept, dropped


def stage_limit(left_s: float, reserved_after_s: float) -> int:
    """Seconds a stage may run: what is left of the budget less the budgets of the stages after
    it, so time an earlier stage saved goes to the next one and no stage eats a later one's."""
    return int(left_s - reserved_after_s)


def format_plan(gpus: int, budget_s: int) -> str:
    kept, dropped = plan(gpus, budget_s)
    total = sum(s.budget_s for s in kept)
    lines = [
        f"device_check plan: {gpus} GPU{'s' if gpus != 1 else ''}, budget {budget_s} s "
        "(XCCL_CHECK_BUDGET_S), stages most valuable first",
        f"  {'stage':<11} {'budget':>7}  what",
    ]
    for s in kept:
        full = by_name(s.name).budget_s
        cut = f" (shortened from {full} s)" if s.budget_s < full else ""
        name = (s.letter + " " if s.letter else "  ") + s.name
        lines.append(f"  {name:<11} {s.budget_s:>5} s  {s.what}{cut}")
    for s in dropped:
        lines.append(
            f"  {s.letter + ' ' + s.name:<11} {'-':>7}  not run: dropped to fit the budget "
            f"({s.budget_s} s)"
        )
    if gpus < 2:
        s = by_name("multi")
        lines.append(f"  {s.letter + ' ' + s.name:<11} {'-':>7}  not run: needs 2 or more GPUs")
    if total > budget_s:
        lines.append(f"  warning: the required stages alone need {total} s")
    lines.append(f"total {total} s")
    return "\n".join(lines)


def shell_plan(gpus: int, budget_s: int) -> str:
    """`name letter budget keep|dropped|needs-gpus` per stage, in running order, for the script
    ("-" for no letter)."""
    kept, dropped = plan(gpus, budget_s)
    order = MULTI_GPU_ORDER if gpus >= 2 else ONE_GPU_ORDER
    lines = []
    for name in order:
        s = next((k for k in kept if k.name == name), None)
        keep = "keep" if s else "dropped"
        s = s or by_name(name)
        lines.append(f"{s.name} {s.letter or '-'} {s.budget_s} {keep}")
    if gpus < 2:
        s = by_name("multi")
        lines.append(f"{s.name} {s.letter} {s.budget_s} needs-gpus")
    return "\n".join(lines)


# -- tallies -------------------------------------------------------------------------------------

# "collected 17 items", "collecting ... collected 17 items / 9 deselected / 8 selected"
_PYTEST_COLLECTED = re.compile(r"\bcollected (\d+) items?(?: / (\d+) deselected)?")
# pytest-xdist: "4 workers [17 items]" (also after "created: 4/4 workers").
_XDIST_COLLECTED = re.compile(r"(?:^|\s)\d+ workers \[(\d+) items?\]")
_PYTEST_RESULT = re.compile(
    r"(?:^(?P<id1>\S+::\S+) (?P<out1>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b)"
    r"|(?:\b(?P<out2>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (?P<id2>\S+::\S+))"
)
_PYTEST_STARTED = re.compile(r"^(\S+::\S+)(?:\s|$)")


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    not_run: int = 0
    cut_off: str = ""  # the test that was running when the log ends, if any

    def line(self) -> str:
        text = (
            f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped, "
            f"{self.not_run} not run"
        )
        return text + (f" (cut off in {self.cut_off})" if self.cut_off else "")

    def add(self, other: Tally) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.not_run += other.not_run
        self.cut_off = ", ".join(c for c in (self.cut_off, other.cut_off) if c)


def tally_pytest(text: str) -> Tally:
    """pytest -v output (serial, or pytest-xdist's `[gwN] ... PASSED id` lines)."""
    collected, outcomes, started = 0, {}, None
    for line in text.splitlines():
        line = line.strip()
        m = _PYTEST_COLLECTED.search(line)
        if m:
            collected = int(m.group(1)) - int(m.group(2) or 0)
            continue
        m = _XDIST_COLLECTED.search(line)
        if m:
            collected = int(m.group(1))
            continue
        m = _PYTEST_RESULT.search(line)
        if m:
            test = m.group("id1") or m.group("id2")
            outcome = m.group("out1") or m.group("out2")
            # A test reports twice on an error in teardown: the worst outcome counts.
            if outcomes.get(test) not in ("FAILED", "ERROR"):
                outcomes[test] = outcome
            if test == started:
                started = None
            continue
        m = _PYTEST_STARTED.match(line)
        if m and "::" in m.group(1):
            started = m.group(1)  # serial -v prints the id before the outcome
    t = Tally()
    for outcome in outcomes.values():
        if outcome in ("PASSED", "XPASS"):
            t.passed += 1
        elif outcome in ("FAILED", "ERROR"):
            t.failed += 1
        else:
            t.skipped += 1
    t.not_run = max(0, collected - len(outcomes))
    if started and started not in outcomes:
        t.cut_off = started
    return t


def tally_gtest(text: str) -> Tally:
    """GoogleTest output: `[ RUN      ]` / `[       OK ]` / `[  FAILED  ]` / `[  SKIPPED ]` per
    test, `Running N tests` at the start."""
    total, done, running = 0, {}, None
    for line in text.splitlines():
        m = re.match(r"^\[==========\] Running (\d+) tests?", line)
        if m:
            total += int(m.group(1))
            continue
        m = re.match(r"^\[ RUN      \] (\S+)", line)
        if m:
            running = m.group(1)
            continue
        # "[  FAILED  ] Suite/Test.Case/W2, where GetParam() = ... (5 ms)": the name is the
        # first word; the summary's repeated names come after the last RUN has finished.
        m = re.match(r"^\[ *(OK|FAILED|SKIPPED) *\] (\S+?),? ", line + " ")
        if m and m.group(2) == running:
            done[running] = m.group(1)
            running = None
    t = Tally()
    for outcome in done.values():
        t.passed += outcome == "OK"
        t.failed += outcome == "FAILED"
        t.skipped += outcome == "SKIPPED"
    t.not_run = max(0, total - len(done))
    if running:
        t.cut_off = running
    return t


def tally_files(kind: str, paths: list) -> Tally:
    parse = tally_pytest if kind == "pytest" else tally_gtest
    total = Tally()
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                total.add(parse(f.read()))
        except OSError:
            pass  # a log never written: its tests are counted by whoever knows them
    return total


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="benchmarks/device_check.py", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="the stages and their budgets")
    p.add_argument("--gpus", type=int, default=1, help="GPUs of the machine (default 1)")
    p.add_argument(
        "--budget",
        type=int,
        default=None,
        help=f"seconds (default XCCL_CHECK_BUDGET_S, else {DEFAULT_BUDGET_S})",
    )
    p.add_argument(
        "--shell", action="store_true", help="`name letter budget keep|dropped|needs-gpus` lines"
    )
    t = sub.add_parser("tally", help="count a test log's outcomes")
    t.add_argument("kind", choices=("pytest", "gtest"))
    t.add_argument("logs", nargs="+")
    args = parser.parse_args(argv)
    if args.command == "tally":
        print(tally_files(args.kind, args.logs).line())
        return 0
    budget = args.budget
    if budget is None:
        text = os.environ.get("XCCL_CHECK_BUDGET_S", "") or str(DEFAULT_BUDGET_S)
        if not text.isdigit():
            parser.error(f"XCCL_CHECK_BUDGET_S must be a number of seconds, not {text!r}")
        budget = int(text)
    if budget < 1 or args.gpus < 0:
        parser.error("the budget must be positive and --gpus at least 0")
    if args.shell:
        print(shell_plan(args.gpus, budget))
    else:
        print(format_plan(args.gpus, budget))
    return 0


if __name__ == "__main__":
    sys.exit(main())
