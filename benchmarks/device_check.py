"""The stage plan of benchmarks/device_check.sh, the tallies of its test logs and its per-test
bound for GoogleTest: standard library only, so a machine without a GPU (or torch) can print the
plan, run the rehearsal and test both.

    python3 benchmarks/device_check.py plan [--gpus N] [--budget S] [--shell] [--rehearse]
    python3 benchmarks/device_check.py tally pytest|gtest LOG...
    python3 benchmarks/device_check.py fit --sms N --worlds 2,3,8
    python3 benchmarks/device_check.py watch --per-test S [--deadline-s S] -- GTEST-BINARY ARGS...

plan: the stages that run within the budget (XCCL_CHECK_BUDGET_S, default 420 s), most valuable
first, each with the seconds it is given, then the build's parts as measured (BUILD_PARTS) and
scaled to the GPU machine's cores, then the 15-minute window (the machine's start, the check, a
rerun of its longest stage); ends with `total N s`. --shell prints one
`name letter budget keep|dropped|needs-gpus` line per stage for the script instead.
tally: one line, "N passed, N failed, N skipped, N not run", from pytest -v or GoogleTest
output, also when the run was cut off (tests collected but never reported are "not run", and
the test running when it was cut off is named), then the tests that hung and what they waited
for, and the failed tests.
fit: whether spinning groups of those sizes may share one GPU (gpu_plan's block cap).
watch: runs a GoogleTest binary, bounding each test: a test without a result after S seconds is
reported (`device_check: HUNG ...`, and what it printed last), its process group is killed and
the tests it had not reached run in a fresh process.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace

DEFAULT_BUDGET_S = 420
# A stage given less than this is not started: start-up alone (torch's import, the CUDA
# context, the ranks' groups) takes about this long.
MIN_STAGE_S = 15

# -- the window --------------------------------------------------------------------------------
# The lent machine: 15 minutes of device time for everything, its start (1-2 minutes) and every
# command included; 10 minutes per command; it stays warm 30 s after a command, and a rerun on the
# warm machine (`--only STAGE`) finds the build folder there.
WINDOW_S = 900
MACHINE_START_S = 120
COMMAND_LIMIT_S = 600
TRANSFER_S = 15  # per command: the working tree there, the files back
GPU_MACHINE_CORES = 16

# -- the build, measured -------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    name: str
    what: str
    cpu_s: float  # CPU seconds (user + sys) of the whole part, one job at a time
    longest_s: float  # the longest single command in it: no number of cores makes it shorter
    commands: int
    serial: bool = False  # runs on one core whatever the machine has (CMake's configure)

    def wall_s(self, cores: int) -> float:
        """Seconds on `cores` idle cores: its CPU time spread over them, never less than its
        longest command (and all of it for a serial part). Cores as fast as the measuring
        machine's; the link of each binary waits for its objects, which the longest command of
        a part already bounds in practice (links are a few seconds)."""
        if self.serial:
            return self.cpu_s
        return max(self.cpu_s / max(1, cores), self.longest_s)


# Measured 2026-12-07 on the project's 2-core x86-64 VM (shared with other builds, so CPU time,
# user + sys from /usr/bin/time, is what counts, not wall time), gcc 12, nvcc 13.0, torch
# 2.14.1+cu130's headers, compiler cache off, XCCL_CUDA_ARCHS=90 (what the check builds for an
# H100/H200):
#   gtest      cmake -S /usr/src/googletest -B T -DBUILD_GMOCK=OFF; cmake --build T -j1;
#              cmake --install T (googletest 1.12; all of it, its own configure included);
#              longest: gtest-all.cc alone
#   configure  cmake -S . -B F -GNinja -DCMAKE_BUILD_TYPE=Release -DXCCL_TORCH_CUDA=13.0
#              -DXCCL_GPU=ON -DXCCL_CUDA_ARCHS=90 (torch-free: no XCCL_TORCH_ROOT)
#   tests,cuda ninja -C F -j1 test_gpu_kernels test_cuda_ipc xccl_kernel_bench: 120 commands,
#              231.2 CPU s; each .cu file compiled again alone for its own CPU time (cuda),
#              the rest is `tests`; its longest command (test_kernels.cc) from its share of
#              the build's wall time (.ninja_log)
#   configure_ext  the same configure with setup.py's arguments (XCCL_TORCH_ROOT, ...)
#   torch      every 5th (9 of 44, in path order) of the files whose compile command has torch's
#              include folders, each compiled alone; the part is their mean x 44, its longest
#              the longest of the 9
#   ext_rest   not measured again: the extension's torch-free objects are the same csrc files
#              (their share of `tests` by wall time, 145.3 s) and the same .cu files (60.9 s)
#              as the torch-free build; the link of _C is left to the margin
# PIP_OVERHEAD_S: `pip install --no-build-isolation --no-deps .` with nothing to rebuild (pip,
# setup.py, its configure run again, the copy), 7.7 CPU s.
BUILD_MEASURED = "2026-12-07 on a 2-core VM, compiler cache off, sm_90 only"
BUILD_COMMAND = (
    "/usr/bin/time (CPU = user + sys) around ninja -j1 of each part and around single compile "
    "commands (benchmarks/device_check.py, BUILD_PARTS, says which)"
)
BUILD_PARTS = (
    Part("gtest", "GoogleTest from source: configure, gtest, gtest_main", 22.4, 14.0, 5, True),
    Part("configure", "CMake configure, torch-free (its own build folder)", 8.8, 8.8, 1, True),
    Part("tests", "torch-free C++: csrc libraries, the GPU GoogleTests, links", 170.3, 14.4, 115),
    Part("cuda", "the 5 .cu files of csrc/kernels, sm_90 only", 60.9, 20.6, 5),
    Part("configure_ext", "CMake configure with torch (setup.py, pip)", 9.8, 9.8, 1, True),
    Part(
        "torch", "the extension's 44 files with torch's include folders (9 timed)", 574.4, 28.2, 44
    ),
    Part(
        "ext_rest", "the extension's torch-free objects and .cu files (as above)", 206.2, 20.6, 111
    ),
)
BUILD_SCALE_NOTE = (
    "a part's CPU s / 16, never less than its longest command; gtest and configure are serial; "
    "cores as fast as the VM's"
)
# The check's own allowance on top of the measured model: an unmeasured machine (its disk, its
# cores, the pip run around setup.py) gets half as much again.
BUILD_MARGIN = 1.5
PIP_OVERHEAD_S = 8  # pip itself, setup.py (its configure run again) and the copy (measured above)


def part(name: str) -> Part:
    return next(p for p in BUILD_PARTS if p.name == name)


def build_model(cores: int = GPU_MACHINE_CORES) -> dict:
    """Seconds on `cores` cores: `tests` (the torch-free GPU tests, built first and with
    priority), `ext` (the extension, built at the same time at lower priority, from the start of
    the build stage to its installed package)."""
    free = part("gtest").wall_s(cores) + part("configure").wall_s(cores)
    free += max(
        (part("tests").cpu_s + part("cuda").cpu_s) / cores,
        part("tests").longest_s,
        part("cuda").longest_s,
    )
    free_cpu = part("gtest").cpu_s + part("tests").cpu_s + part("cuda").cpu_s
    ext_cpu = part("torch").cpu_s + part("ext_rest").cpu_s
    ext = part("configure_ext").wall_s(cores) + PIP_OVERHEAD_S
    # Both builds share the cores: the extension ends when all of their work is done, or when
    # its own longest command allows (its configure is counted on top: conservative).
    ext += max(
        (free_cpu + ext_cpu) / cores,
        part("torch").longest_s,
        part("ext_rest").longest_s,
    )
    return {"tests": free, "ext": max(ext, free)}


@dataclass(frozen=True)
class Stage:
    name: str
    letter: str  # the (a)-(f); "" for finding the GPU
    budget_s: int
    what: str
    min_s: int = 0  # the least it is shortened to before it is dropped
    required: bool = False  # never dropped: every later stage needs it
    multi_gpu: bool = False  # runs only with two or more GPUs
    needs: tuple = ()  # what a rerun of it alone (--only) needs built first
    per_test_s: int = 0  # the bound on each test of the stage (0: the stage's limit alone)


def _build_budgets() -> tuple:
    model = build_model()
    tests = math.ceil(model["tests"] * BUILD_MARGIN / 5) * 5
    ext = math.ceil(model["ext"] * BUILD_MARGIN / 5) * 5
    return tests, ext


BUILD_TESTS_S, BUILD_EXT_S = _build_budgets()
KERNELS_S = 50
# The extension started with stage a; what it may still need after stages a and b.
EXT_WAIT_S = max(MIN_STAGE_S, BUILD_EXT_S - BUILD_TESTS_S - KERNELS_S)

# In the order they run, which is their value on one GPU. Budgets are for a one-GPU H100/H200
# machine with 16 cores.
STAGES = (
    # torch's first import on a fresh machine takes seconds, and a second one proves the MPS
    # daemon the stage starts (or the one a killed run left).
    Stage(
        "gpu",
        "",
        25,
        "find the GPU(s), driver and torch; MPS (a stale daemon used or stopped)",
        required=True,
    ),
    Stage(
        "build",
        "a",
        BUILD_TESTS_S,
        "torch-free GPU tests, their own CMake folder, all cores; the extension's pip build "
        "starts beside it (lower priority)",
        required=True,
    ),
    Stage(
        "kernels",
        "b",
        KERNELS_S,
        "test_gpu_kernels (virtual ranks), then test_cuda_ipc",
        30,
        needs=("build",),
        per_test_s=30,
    ),
    Stage(
        "ext", "a", EXT_WAIT_S, "the extension: waits for its pip build, imports it", required=True
    ),
    Stage(
        "shared",
        "c",
        115,
        "ranks sharing the GPU, kernel route: tests/python/test_gpu*.py (matrix, graphs, ...)",
        60,
        needs=("ext",),
        per_test_s=75,
    ),
    Stage(
        "doctor",
        "f",
        60,
        "python -m xccl doctor --gpu: every kernel case, then the stamp",
        30,
        needs=("ext",),
    ),
    Stage(
        "perf",
        "d",
        75,
        "gpu_bench.py --one-gpu: share2, share4, world1 (55 s of minimums); "
        "xccl_kernel_bench --quick with time left",
        60,
        needs=("ext",),
    ),
    Stage(
        "multi",
        "e",
        160,
        "several GPUs: gpu_bench.py (xccl vs NCCL) and the spread Python GPU tests",
        60,
        multi_gpu=True,
        needs=("ext",),
        per_test_s=75,
    ),
)
# Least valuable last. With several GPUs the table across GPUs is what a run is for: it comes
# right after the kernel tests and the extension.
ONE_GPU_ORDER = ("gpu", "build", "kernels", "ext", "shared", "doctor", "perf")
MULTI_GPU_ORDER = ("gpu", "build", "kernels", "ext", "multi", "shared", "doctor", "perf")

# The rehearsal on a CPU machine (device_check.sh --rehearse): the same stages, each command
# replaced by its CPU counterpart; limits for a loaded 2-core CI machine.
REHEARSAL_BUDGETS = {
    "gpu": 20,
    "build": 60,
    "kernels": 40,
    "ext": 30,
    "shared": 60,
    "doctor": 40,
    "perf": 40,
    "multi": 40,
}
REHEARSAL_BUDGET_S = sum(REHEARSAL_BUDGETS[n] for n in ONE_GPU_ORDER)
REHEARSAL_PER_TEST_S = {"kernels": 20, "shared": 40, "multi": 40}


def by_name(name: str, rehearse: bool = False) -> Stage:
    s = next(s for s in STAGES if s.name == name)
    if rehearse:
        s = replace(
            s,
            budget_s=REHEARSAL_BUDGETS[name],
            min_s=min(s.min_s, REHEARSAL_BUDGETS[name]),
            per_test_s=REHEARSAL_PER_TEST_S.get(name, 0),
        )
    return s


def plan(gpus: int, budget_s: int, rehearse: bool = False) -> tuple[list, list]:
    """(kept, dropped) stages for `gpus` GPUs within budget_s, kept in running order (value
    order). The least valuable optional stage gives way first: shortened down to its min_s,
    else dropped, then the next one; required stages are never cut, even when they alone exceed
    the budget. A shortened stage is a copy with the budget it is left."""
    order = MULTI_GPU_ORDER if gpus >= 2 else ONE_GPU_ORDER
    kept = [by_name(n, rehearse) for n in order]
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


def rerun_s(stage: Stage) -> int:
    """A rerun of `stage` alone on the warm machine (`--only NAME`): the gpu stage again, then
    the stage (its build is still there)."""
    return by_name("gpu").budget_s + stage.budget_s


def window(gpus: int, budget_s: int) -> dict:
    kept, _ = plan(gpus, budget_s)
    check = sum(s.budget_s for s in kept)
    longest = max((s for s in kept if s.name != "gpu"), key=rerun_s)
    total = MACHINE_START_S + check + TRANSFER_S + rerun_s(longest) + TRANSFER_S
    return {"check": check, "longest": longest, "rerun": rerun_s(longest), "total": total}


def format_plan(gpus: int, budget_s: int, rehearse: bool = False) -> str:
    kept, dropped = plan(gpus, budget_s, rehearse)
    total = sum(s.budget_s for s in kept)
    kind = "rehearsal on CPU" if rehearse else f"{gpus} GPU{'s' if gpus != 1 else ''}"
    lines = [
        f"device_check plan: {kind}, budget {budget_s} s (XCCL_CHECK_BUDGET_S), stages most "
        "valuable first",
        f"  {'stage':<11} {'budget':>7}  what",
    ]
    for s in kept:
        full = by_name(s.name, rehearse).budget_s
        cut = f" (shortened from {full} s)" if s.budget_s < full else ""
        bound = f"; {s.per_test_s} s per test" if s.per_test_s else ""
        name = (s.letter + " " if s.letter else "  ") + s.name
        lines.append(f"  {name:<11} {s.budget_s:>5} s  {s.what}{bound}{cut}")
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
    if not rehearse:
        lines += build_lines() + window_lines(gpus, budget_s)
    lines.append(f"total {total} s")
    return "\n".join(lines)


def build_lines() -> list:
    model = build_model()
    lines = [
        f"build parts, measured {BUILD_MEASURED}",
        f"  by {BUILD_COMMAND}",
        f"  on {GPU_MACHINE_CORES} cores: {BUILD_SCALE_NOTE}",
        f"  {'part':<14} {'CPU s':>7} {'longest':>8} {'cmds':>5} {'16 cores':>9}  what",
    ]
    for p in BUILD_PARTS:
        lines.append(
            f"  {p.name:<14} {p.cpu_s:>7.1f} {p.longest_s:>8.1f} {p.commands:>5} "
            f"{p.wall_s(GPU_MACHINE_CORES):>8.1f}s  {p.what}"
        )
    lines.append(
        f"  torch-free GPU tests ready after {model['tests']:.0f} s, the extension after "
        f"{model['ext']:.0f} s (both builds sharing the cores); budgets x{BUILD_MARGIN}: "
        f"a build {BUILD_TESTS_S} s, a ext {BUILD_EXT_S} s from the build's start"
    )
    return lines


def window_lines(gpus: int, budget_s: int) -> list:
    w = window(gpus, budget_s)
    fits = (
        "fits"
        if w["total"] <= WINDOW_S and w["check"] + TRANSFER_S <= COMMAND_LIMIT_S
        else ("DOES NOT FIT")
    )
    name = (w["longest"].letter + " " if w["longest"].letter else "") + w["longest"].name
    return [
        f"window: start {MACHINE_START_S} s + check {w['check']} s + rerun of the longest stage "
        f"({name}: --only {w['longest'].name} on the warm machine, gpu stage included, "
        f"{w['rerun']} s) + {2 * TRANSFER_S} s of transfers = {w['total']} s of {WINDOW_S} s: "
        f"{fits} (one command {w['check'] + TRANSFER_S} s of {COMMAND_LIMIT_S} s)"
    ]


def shell_plan(gpus: int, budget_s: int, rehearse: bool = False) -> str:
    """`name letter budget keep|dropped|needs-gpus per_test_s` per stage, in running order, for
    the script ("-" for no letter)."""
    kept, dropped = plan(gpus, budget_s, rehearse)
    order = MULTI_GPU_ORDER if gpus >= 2 else ONE_GPU_ORDER
    lines = []
    for name in order:
        s = next((k for k in kept if k.name == name), None)
        keep = "keep" if s else "dropped"
        s = s or by_name(name, rehearse)
        lines.append(f"{s.name} {s.letter or '-'} {s.budget_s} {keep} {s.per_test_s}")
    if gpus < 2:
        s = by_name("multi", rehearse)
        lines.append(f"{s.name} {s.letter} {s.budget_s} needs-gpus {s.per_test_s}")
    return "\n".join(lines)


def needs(name: str) -> list:
    """The stages a rerun of `name` alone runs first when their work is not there."""
    s = by_name(name)
    out = []
    for n in s.needs:
        out += [x for x in needs(n) + [n] if x not in out]
    return out


# -- which spinning groups may share the GPU -------------------------------------------------------

# csrc/common/gpu_limits.h kGpuDefaultMaxBlocks and csrc/algo/gpu_plan.cc sharedGpuMaxBlocks:
# each rank of a group whose GPU hosts n of its ranks launches at most min(32, resident / n)
# blocks, resident = blocks per SM x SMs; the kernels' 512-thread blocks at the register bound the
# plan assumes (residentBlocksPerSm: 64 K registers per SM, up to 128 per thread) are 1 per SM.
GPU_MAX_BLOCKS = 32
BLOCKS_PER_SM = 1
H100_SMS = 132


def group_blocks(world: int, sms: int = H100_SMS) -> int:
    """Blocks a spinning group of `world` ranks on one GPU keeps resident; 0 for one rank, whose
    kernels wait on no peer (they finish, so they cannot starve anyone)."""
    if world <= 1:
        return 0
    resident = BLOCKS_PER_SM * sms
    return world * min(GPU_MAX_BLOCKS, resident // world)


def fit(worlds: list, sms: int = H100_SMS) -> tuple[int, str]:
    """How many spinning groups of the largest of these sizes may run at once on one GPU (at
    least 1), and the clause that says why."""
    resident = BLOCKS_PER_SM * sms
    worst, largest = max(((group_blocks(w, sms), w) for w in worlds), default=(0, 1))
    if worst == 0:
        return 8, f"groups of {largest} rank never spin on a peer"
    return max(1, resident // worst), (
        f"a {largest}-rank group keeps {worst} of the {resident} resident blocks "
        f"({sms} SMs, gpu_plan's cap)"
    )


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
# What the per-test bounds write (watch below; benchmarks/device_check_pytest.py):
#   device_check: HUNG <test> after N s (...)        the test hung: a FAIL
#   device_check: WAITED <test>: <what it waited for>
#   device_check: DEADLINE <test> after N s          the stage's time ran out in it: not run
_MARK = re.compile(r"device_check: (HUNG|WAITED|DEADLINE) (\S+?):? (.*)$")


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    not_run: int = 0
    cut_off: str = ""  # the test that was running when the log ends, if any
    hung: dict = field(default_factory=dict)  # test -> what it waited for
    failed_names: list = field(default_factory=list)

    def line(self) -> str:
        text = (
            f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped, "
            f"{self.not_run} not run"
        )
        if self.cut_off:
            text += f" (cut off in {self.cut_off})"
        for test, why in self.hung.items():
            text += f"; HUNG {test}: {why or 'nothing said what it waited for'}"
        others = [n for n in self.failed_names if n not in self.hung]
        if others:
            shown = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if others[3:] else "")
            text += f"; failed: {shown}"
        return text

    def add(self, other: Tally) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.not_run += other.not_run
        self.cut_off = ", ".join(c for c in (self.cut_off, other.cut_off) if c)
        self.hung.update(other.hung)
        self.failed_names += [n for n in other.failed_names if n not in self.failed_names]


def _marks(text: str) -> tuple[dict, dict]:
    """(hung: test -> what it waited for, deadline: test -> True) from the bounds' lines."""
    hung, deadline = {}, {}
    for line in text.splitlines():
        m = _MARK.search(line)
        if not m:
            continue
        kind, test, rest = m.groups()
        if kind == "HUNG":
            hung.setdefault(test, "")
        elif kind == "WAITED":
            hung[test] = rest.strip()[:300]
        else:
            deadline[test] = True
    return hung, deadline


def tally_pytest(text: str) -> Tally:
    """pytest -v output (serial, or pytest-xdist's `[gwN] ... PASSED id` lines); several runs
    one after another add up."""
    collected, outcomes, started, continued = 0, {}, None, False
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("device_check: "):
            # The run after a hang that ended pytest collects only the tests it had not
            # reached, already counted.
            continued = continued or line.startswith("device_check: CONTINUE")
            continue
        m = _PYTEST_COLLECTED.search(line)
        x = None if m else _XDIST_COLLECTED.search(line)
        if m or x:
            count = int(m.group(1)) - int(m.group(2) or 0) if m else int(x.group(1))
            if not continued:
                collected += count
            continued = False
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
    # The bounds name a test by its node id, -v by its path from where pytest runs (the same
    # for tests under the root folder; "../" and more for one outside it).
    known = list(outcomes) + ([started] if started else [])

    def same(test):
        return next((k for k in known if k == test or k.endswith("/" + test)), test)

    hung, deadline = _marks(text)
    hung = {same(k): v for k, v in hung.items()}
    deadline = {same(k): v for k, v in deadline.items()}
    for test in hung:
        outcomes[test] = "FAILED"
    t = Tally(hung=hung)
    for test, outcome in outcomes.items():
        if outcome in ("PASSED", "XPASS"):
            t.passed += 1
        elif outcome in ("FAILED", "ERROR"):
            t.failed += 1
            t.failed_names.append(test)
        else:
            t.skipped += 1
    t.not_run = max(0, collected - len(outcomes))
    cut = [d for d in deadline if d not in outcomes]
    if started and started not in outcomes and started not in cut:
        cut.append(started)
    t.cut_off = ", ".join(cut)
    return t


def tally_gtest(text: str) -> Tally:
    """GoogleTest output: `[ RUN      ]` / `[       OK ]` / `[  FAILED  ]` / `[  SKIPPED ]` per
    test, `Running N tests` at the start. After a HUNG line (watch), the next `Running N` is the
    continuation of the same run (the tests not reached yet, already counted)."""
    total, done, running, continued = 0, {}, None, False
    hung, _ = _marks(text)
    for line in text.splitlines():
        m = re.match(r"^\[==========\] Running (\d+) tests?", line)
        if m:
            if not continued:
                total += int(m.group(1))
            continued = False
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
            continue
        m = _MARK.search(line)
        if m and m.group(1) == "HUNG":
            done[m.group(2)] = "FAILED"
            running = None if m.group(2) == running else running
            continued = True
    t = Tally(hung=hung)
    for name, outcome in done.items():
        t.passed += outcome == "OK"
        t.failed += outcome == "FAILED"
        t.skipped += outcome == "SKIPPED"
        if outcome == "FAILED":
            t.failed_names.append(name)
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


# -- what a hung test waited for ---------------------------------------------------------------

_WAITED = (
    # The GPU watchdog's verdict (csrc/backend/gpu/gpu_watchdog.cc) and the device-side timeout.
    re.compile(r"(xccl: GPU \S+ (?:timed out|failed|not completed)[^\n]{0,200})"),
    re.compile(r"(flight recorder dump written to \S+)"),
    # A harness bound (tests/python/dist_harness.py): a rank killed at the wall-clock bound...
    re.compile(r"(rank \d+: still running at the wall-clock bound)"),
    re.compile(r"(\S[^\n]{0,80} hung \(\d+ s\))"),
)
# ... whose Python stacks faulthandler wrote to its log on SIGUSR1: the innermost frame of the
# first thread listed (the current one) is where it waited.
_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')


def waited_for(text: str) -> str:
    """One line: what a hung test waited for, from its output (the watchdog's or the device's
    timeout message, the flight recorder's dump, a rank's innermost Python frame); "" when the
    output says nothing."""
    found = []
    for pattern in _WAITED:
        m = pattern.search(text)
        if m:
            found.append(m.group(1).strip())
    stacks = text.find("most recent call first")
    if stacks >= 0:
        m = _FRAME.search(text, stacks)
        if m:
            found.append(f"{os.path.basename(m.group(1))}:{m.group(2)} in {m.group(3)}")
    return "; ".join(dict.fromkeys(found))[:300]


# -- the per-test bound of a GoogleTest binary -------------------------------------------------


def list_gtests(command: list) -> list:
    """Full names of the tests `command --gtest_list_tests` lists (with the command's filter)."""
    done = subprocess.run(
        [*command, "--gtest_list_tests"], capture_output=True, text=True, timeout=60, check=False
    )
    names, suite = [], ""
    for line in done.stdout.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            suite = line.split("#")[0].strip()
        else:
            names.append(suite + line.split("#")[0].strip())
    return names


def _follow(proc, state: dict, lock) -> None:
    """Echoes a GoogleTest run's output and keeps `state`: the running test, since when, what it
    printed last, every test started."""
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        with lock:
            m = re.match(r"^\[ RUN      \] (\S+)", line)
            if m:
                state["running"], state["since"], state["last"] = m.group(1), time.monotonic(), ""
                state["seen"].append(m.group(1))
            elif re.match(r"^\[ *(OK|FAILED|SKIPPED) *\] ", line):
                state["running"] = None
            elif line.strip():
                state["last"] = line.strip()


def watch(command: list, per_test_s: float, deadline_s: float, max_hangs: int = 3) -> int:
    """Runs the GoogleTest `command`, echoing its output; a test without a result after
    per_test_s seconds is reported as HUNG (with the last thing it printed), its process group
    killed, and the tests not reached yet run in a fresh process (up to max_hangs hangs). At
    deadline_s (seconds from now) the running test is reported as DEADLINE and everything is
    killed. Exit status: the binary's, 1 if a test hung, 124 at the deadline."""
    end = time.monotonic() + deadline_s
    remaining = None  # None: the command's own selection
    status = 0
    hangs = 0
    stop = {"proc": None}

    def terminate(signum, frame):
        proc = stop["proc"]
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        sys.exit(124)

    signal.signal(signal.SIGTERM, terminate)
    while True:
        argv = list(command)
        if remaining is not None:
            if not remaining:
                return status
            argv.append("--gtest_filter=" + ":".join(remaining))
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # its forked ranks die with it
        )
        stop["proc"] = proc
        state = {"running": None, "since": time.monotonic(), "last": "", "seen": []}
        lock = threading.Lock()
        reader = threading.Thread(target=_follow, args=(proc, state, lock), daemon=True)
        reader.start()
        verdict = None
        while proc.poll() is None:
            time.sleep(0.2)
            now = time.monotonic()
            with lock:
                running, since, last = state["running"], state["since"], state["last"]
            if now >= end:
                verdict = "DEADLINE"
            elif running and now - since > per_test_s:
                verdict = "HUNG"
            if verdict:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
                reader.join(5)
                name = running or "(between tests)"
                if verdict == "HUNG":
                    print(
                        f"device_check: HUNG {name} after {now - since:.0f} s "
                        f"(per-test bound {per_test_s:g} s)",
                        flush=True,
                    )
                    print(
                        f"device_check: WAITED {name}: "
                        f"{waited_for(last) or 'its last output: ' + (last or 'none')}",
                        flush=True,
                    )
                else:
                    print(f"device_check: DEADLINE {name} after {now - since:.0f} s", flush=True)
                break
        reader.join(5)
        if verdict == "DEADLINE":
            return 124
        if verdict is None:
            rc = proc.returncode
            return rc if rc != 0 else status
        hangs += 1
        status = 1
        if hangs >= max_hangs:
            print(f"device_check: {hangs} tests hung; the rest is not run", flush=True)
            return status
        if remaining is None:
            remaining = list_gtests(command)
        seen = set(state["seen"])
        remaining = [n for n in remaining if n not in seen]


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
    p.add_argument("--rehearse", action="store_true", help="the CPU rehearsal's limits")
    p.add_argument("--needs", metavar="STAGE", help="the stages a rerun of STAGE needs first")
    b = sub.add_parser("budget", help="the budget in seconds the script uses")
    b.add_argument("--budget", type=int, default=None)
    b.add_argument("--rehearse", action="store_true")
    sub.add_parser("ext-build-s", help="seconds for the extension's build alone (a rerun)")
    t = sub.add_parser("tally", help="count a test log's outcomes")
    t.add_argument("kind", choices=("pytest", "gtest"))
    t.add_argument("logs", nargs="+")
    f = sub.add_parser("fit", help="how many spinning groups may share the GPU at once")
    f.add_argument("--sms", type=int, default=H100_SMS)
    f.add_argument("--worlds", required=True, help="comma-separated group sizes")
    w = sub.add_parser("watch", help="run a GoogleTest binary with a per-test bound")
    w.add_argument("--per-test", type=float, required=True)
    w.add_argument("--deadline-s", type=float, default=86400.0)
    w.add_argument("cmd", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command == "tally":
        print(tally_files(args.kind, args.logs).line())
        return 0
    if args.command == "ext-build-s":
        print(BUILD_EXT_S)
        return 0
    if args.command == "fit":
        worlds = [int(x) for x in args.worlds.split(",") if x.strip().isdigit()]
        n, why = fit(worlds, args.sms)
        print(f"{n} {why}")
        return 0
    if args.command == "watch":
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            parser.error("watch needs a command after --")
        return watch(cmd, args.per_test, args.deadline_s)
    if getattr(args, "needs", None):
        print(" ".join(needs(args.needs)))
        return 0
    budget = args.budget
    if budget is None:
        default = REHEARSAL_BUDGET_S if args.rehearse else DEFAULT_BUDGET_S
        text = os.environ.get("XCCL_CHECK_BUDGET_S", "") or str(default)
        if not text.isdigit():
            parser.error(f"XCCL_CHECK_BUDGET_S must be a number of seconds, not {text!r}")
        budget = int(text)
    if args.command == "budget":
        print(budget)
        return 0
    if budget < 1 or args.gpus < 0:
        parser.error("the budget must be positive and --gpus at least 0")
    if args.shell:
        print(shell_plan(args.gpus, budget, args.rehearse))
    else:
        print(format_plan(args.gpus, budget, args.rehearse))
    return 0


if __name__ == "__main__":
    sys.exit(main())
