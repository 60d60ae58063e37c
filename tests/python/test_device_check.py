"""benchmarks/device_check.sh and its plan (benchmarks/device_check.py) on a machine without a
GPU: the plan fits one 420 s window, a short budget cuts the least valuable stage first, the
summary is written whatever happens to a stage, and the output stays within 8 files. The stages
themselves are replaced by fakes (XCCL_CHECK_STAGES_FILE); the real ones need a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "benchmarks", "device_check.sh")
WINDOW_S = 420  # the first GPU run's window: 15 minutes with the machine's start and a rerun
MAX_FILES = 8  # what comes back from such a run


def planner():
    path = os.path.join(ROOT, "benchmarks", "device_check.py")
    spec = importlib.util.spec_from_file_location("device_check", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run_script(*args, env=None, timeout=60):
    return subprocess.run(
        ["bash", SCRIPT, *args],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_plan_runs_without_a_gpu_and_fits_the_window():
    done = run_script("--plan", "--gpus", "1", env={"XCCL_CHECK_BUDGET_S": ""})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    total = int(lines[-1].removeprefix("total ").removesuffix(" s"))
    assert lines[-1] == f"total {total} s" and total <= WINDOW_S
    # Every stage of the one-GPU machine is there with a budget, the build included.
    budgets = dict(
        m.groups() for m in map(re.compile(r"^ +((?:[a-e] )?\w+) +(\d+) s  ").match, lines) if m
    )
    assert list(budgets) == ["gpu", "a build", "b kernels", "c shared", "d perf"]
    assert sum(int(b) for b in budgets.values()) == total
    assert "e multi" in done.stdout and "needs 2 or more GPUs" in done.stdout


def test_a_short_budget_cuts_the_least_valuable_stage_first():
    p = planner()
    full = [s.name for s in p.plan(1, WINDOW_S)[0]]
    assert full == ["gpu", "build", "kernels", "shared", "perf"]
    # A little short: perf is shortened, nothing else changes.
    kept, dropped = p.plan(1, 390)
    assert [s.name for s in kept] == full and not dropped
    assert kept[-1].budget_s == p.by_name("perf").budget_s - 20
    # Shorter: perf goes, shared keeps its whole budget.
    kept, dropped = p.plan(1, 360)
    assert [s.name for s in dropped] == ["perf"]
    assert kept[-1].name == "shared" and kept[-1].budget_s == p.by_name("shared").budget_s
    # Shorter still: shared is shortened next, then dropped; the build is never cut.
    kept, dropped = p.plan(1, 300)
    assert [s.name for s in dropped] == ["perf"] and kept[-1].name == "shared"
    kept, dropped = p.plan(1, 230)
    assert [s.name for s in dropped] == ["shared", "perf"]
    kept, dropped = p.plan(1, 60)
    assert [s.name for s in kept] == ["gpu", "build"]
    for budget in range(60, 500, 7):
        kept, _ = p.plan(1, budget)
        assert sum(s.budget_s for s in kept) <= max(budget, 210)
    # Several GPUs: the table across GPUs outranks the shared-GPU stages.
    kept, dropped = p.plan(8, WINDOW_S)
    assert "multi" in [s.name for s in kept] and [s.name for s in dropped][-1] == "perf"
    # The script prints the same plan.
    done = run_script("--plan", "--gpus", "1", env={"XCCL_CHECK_BUDGET_S": "350"})
    assert "d perf" in done.stdout and "dropped to fit the budget" in done.stdout
    assert done.stdout.strip().endswith(f"total {sum(s.budget_s for s in p.plan(1, 350)[0])} s")


def test_stage_limits_pass_saved_time_on_without_taking_later_stages_time():
    p = planner()
    # 420 s budget, 30 s gone, later stages hold 210 s: this stage may use the other 180 s.
    assert p.stage_limit(420 - 30, 210) == 180


FAKES = """
stage_gpu() { gpu_count=1; gpu_name=fake; state=ok note="1 x fake"; }
stage_build() { bounded echo building; ext_ok=1; state=ok note=built; }
stage_kernels() {
  bounded printf '%s\\n' '[==========] Running 3 tests from 1 test suite.' \\
    '[ RUN      ] K.a' '[       OK ] K.a (1 ms)' '[ RUN      ] K.b' '[  FAILED  ] K.b (2 ms)'
  verdict $? "$(planner tally gtest "$stage_log")"
}
stage_shared() {
  echo "$$" >"$FAKE_DIR/pid"
  bounded sleep "${FAKE_SLEEP:-0}"
  state=ok note=slept
}
stage_perf() {
  stage_deadline=$((SECONDS + 1))  # as if the budget ran out: its command is cut off
  bounded sleep 30
  timed_out $? && state=partial note="timed out" || state=ok
  echo "| perf table |" >"$out_dir/bench.md"
}
"""


@pytest.fixture
def fake(tmp_path):
    stages = tmp_path / "fake_stages.sh"
    stages.write_text(FAKES)
    return {
        "XCCL_CHECK_STAGES_FILE": str(stages),
        "XCCL_BUILD_DIR": str(tmp_path / "build"),
        "XCCL_CHECK_BUDGET_S": str(WINDOW_S),
        "FAKE_DIR": str(tmp_path),
    }, tmp_path / "out"


def rows(summary: str) -> dict:
    cells = [line.split("|") for line in summary.splitlines() if line.count("|") == 6]
    return {c[1].strip(): (c[2].strip(), c[5].strip()) for c in cells[1:]}


def files_under(folder) -> list:
    return [os.path.join(d, f) for d, _, names in os.walk(folder) for f in names]


def test_summary_records_a_failed_and_a_timed_out_stage_and_the_rest_still_runs(fake):
    env, out = fake
    started = time.monotonic()
    done = run_script("--out", str(out), env=env)
    assert time.monotonic() - started < 30
    assert done.returncode == 1, done.stdout + done.stderr  # a stage failed
    table = rows((out / "summary.md").read_text())
    assert table["b kernels"] == ("FAIL", "1 passed, 1 failed, 0 skipped, 1 not run")
    assert table["c shared"][0] == "ok"  # after the failed stage
    assert table["d perf"] == ("partial", "timed out")
    assert table["e multi"] == ("not run", "needs 2 or more GPUs")
    assert "| perf table |" in (out / "summary.md").read_text()
    log = (out / "device_check.log").read_text()
    assert log.index("building") < log.index("[  FAILED  ] K.b") < log.index("d perf")
    names = subprocess.run(
        ["tar", "tzf", str(out / "logs.tar.gz")], capture_output=True, text=True, check=True
    ).stdout
    assert "1.build.log" in names and "4.perf.log" in names


def test_summary_is_written_when_the_run_is_terminated_mid_stage(fake):
    env, out = fake
    # A duration no other process on the machine uses: the leftover check looks for it alone.
    sleep = f"60.{os.getpid()}{int(time.monotonic() * 1000) % 100000}"
    env["FAKE_SLEEP"] = sleep
    proc = subprocess.Popen(
        ["bash", SCRIPT, "--out", str(out)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid_file = fake[0]["FAKE_DIR"] + "/pid"
    deadline = time.monotonic() + 30
    while not os.path.exists(pid_file) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.path.exists(pid_file), "the fake shared stage never started"
    time.sleep(0.5)
    # Killed outright now, the summary written so far already shows the stage running.
    assert rows((out / "summary.md").read_text())["c shared"][0] == "running"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 143
    table = rows((out / "summary.md").read_text())
    assert table["c shared"][0] == "cut off" and "SIGTERM" in table["c shared"][1]
    assert table["d perf"] == ("not run", "terminated (SIGTERM) before it started")
    assert table["b kernels"][0] == "FAIL"  # what finished before stays
    # The stage's command (the sleep) was ended with it.
    leftover = subprocess.run(["pgrep", "-f", f"sleep {sleep}"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout


def test_output_stays_within_eight_files_two_folders_down(fake):
    env, out = fake
    run_script("--out", str(out), env=env)
    found = files_under(out)
    assert 0 < len(found) <= MAX_FILES, found
    for path in found:
        assert os.path.relpath(path, out).count(os.sep) <= 2
        assert all(c.isalnum() or c in "._-" for c in os.path.basename(path)), path
    assert {"summary.md", "device_check.log", "logs.tar.gz"} <= {os.path.basename(f) for f in found}


def test_tally_counts_tests_not_reached_as_not_run():
    p = planner()
    serial = "\n".join(
        [
            "collecting ... collected 7 items / 2 deselected / 5 selected",
            "",
            "tests/python/test_gpu.py::test_a[2-shared] PASSED    [ 20%]",
            "tests/python/test_gpu.py::test_b[2-shared] FAILED    [ 40%]",
            "tests/python/test_gpu.py::test_c SKIPPED (needs)     [ 60%]",
            "tests/python/test_gpu.py::test_d[4-shared] ",
        ]
    )
    t = p.tally_pytest(serial)
    assert t.line() == (
        "1 passed, 1 failed, 1 skipped, 2 not run "
        "(cut off in tests/python/test_gpu.py::test_d[4-shared])"
    )
    xdist = "\n".join(
        [
            "created: 4/4 workers",
            "4 workers [3 items]",
            "[gw1] [ 33%] PASSED tests/python/test_gpu.py::test_a[2-shared] ",
            "[gw0] [ 66%] ERROR tests/python/test_gpu.py::test_b[2-shared] ",
        ]
    )
    assert p.tally_pytest(xdist).line() == "1 passed, 1 failed, 0 skipped, 1 not run"
    gtest = "\n".join(
        [
            "[==========] Running 4 tests from 2 test suites.",
            "[ RUN      ] GpuTest.A",
            "[       OK ] GpuTest.A (5 ms)",
            "[ RUN      ] GpuTest.B",
            "[  SKIPPED ] GpuTest.B (0 ms)",
            "[ RUN      ] K/AllReduceTest.Bitwise/W2_OneShot_float32",
            "[  FAILED  ] K/AllReduceTest.Bitwise/W2_OneShot_float32, where GetParam() = "
            "(2, 4-byte object <00-00 00-00>, 4-byte object <00-00 00-00>) (7 ms)",
            "[ RUN      ] GpuTest.C",
        ]
    )
    t = p.tally_gtest(gtest)
    assert t.line() == "1 passed, 1 failed, 1 skipped, 1 not run (cut off in GpuTest.C)"


@pytest.mark.parametrize("context_works", [True, False])
def test_mps_is_started_for_the_check_and_stopped_or_left_alone(tmp_path, context_works):
    # start_mps/stop_mps with a fake nvidia-cuda-mps-control and a fake python3 (the context
    # probe): a daemon that serves a context is kept and exported, and stopped at the end; one
    # that does not is stopped at once and the check goes on without MPS; XCCL_CHECK_MPS=0
    # touches nothing.
    fake = tmp_path / "bin"
    fake.mkdir()
    calls = tmp_path / "calls"
    control = fake / "nvidia-cuda-mps-control"
    control.write_text(
        f'#!/bin/sh\nif [ "$1" = -d ]; then echo "start $CUDA_MPS_PIPE_DIRECTORY" >> {calls}\n'
        f'else read -r line; echo "$line" >> {calls}; fi\n'
    )
    probe = fake / "python3"
    probe.write_text(f"#!/bin/sh\nexit {0 if context_works else 1}\n")
    for f in (control, probe):
        f.chmod(0o755)
    stages = os.path.join(ROOT, "benchmarks", "device_check_stages.sh")
    script = f"""
        set -u
        work={tmp_path}/work; mkdir -p "$work"; stage_log={tmp_path}/stage.log
        stage_deadline=$((SECONDS + 30))
        source {stages}
        start_mps && echo started || echo without
        echo "pipe=${{CUDA_MPS_PIPE_DIRECTORY:-none}}"
        folder=$mps_dir
        stop_mps
        [ -e "$folder" ] && echo "left $folder" || echo cleaned
    """
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split()
    recorded = calls.read_text().splitlines()
    assert recorded[0].startswith("start /tmp/xccl-mps.")
    assert recorded[1:] == ["quit"]  # stopped once: at the end, or at once when it failed
    assert "cleaned" in lines
    if context_works:
        assert lines[0] == "started" and lines[1] == f"pipe={recorded[0].split()[1]}"
    else:
        assert lines[0] == "without" and lines[1] == "pipe=none"
    off = subprocess.run(
        ["bash", "-c", script], env={**env, "XCCL_CHECK_MPS": "0"}, capture_output=True, text=True
    )
    assert off.stdout.split()[:2] == ["without", "pipe=none"]
    assert calls.read_text().splitlines() == recorded  # nothing more was called
