"""benchmarks/device_check.sh and its plan (benchmarks/device_check.py) on a machine without a
GPU: the plan fits the 15-minute window with a rerun, prints the build's measured parts, a short
budget cuts the least valuable stage first, the summary is written whatever happens to a stage, a
hung test is a FAIL that names it and what it waited for, and the output stays within 7 files.
Most stages are replaced by fakes (XCCL_CHECK_STAGES_FILE); the rehearsal (--rehearse) runs the
real ones with CPU counterparts of their GPU commands.
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
WINDOW_S = 900  # the lent machine's 15 minutes: its start, the check and a rerun
BUDGET_S = 420  # XCCL_CHECK_BUDGET_S's default
MAX_FILES = 7  # what comes back from such a run (the lent machine brings back few files)
ONE_GPU = ["gpu", "a build", "b kernels", "a ext", "c shared", "f doctor", "d perf"]


def planner():
    path = os.path.join(ROOT, "benchmarks", "device_check.py")
    spec = importlib.util.spec_from_file_location("device_check", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run_script(*args, env=None, timeout=60):
    # python3 in the script is this interpreter (the one xccl is installed into).
    path = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
    return subprocess.run(
        ["bash", SCRIPT, *args],
        env={**os.environ, "PATH": path, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_plan_runs_without_a_gpu_and_fits_the_window_with_a_rerun():
    done = run_script("--plan", "--gpus", "1", env={"XCCL_CHECK_BUDGET_S": ""})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    total = int(lines[-1].removeprefix("total ").removesuffix(" s"))
    assert lines[-1] == f"total {total} s" and total <= BUDGET_S
    # Every stage of the one-GPU machine is there with a budget, the build included.
    budgets = dict(
        m.groups() for m in map(re.compile(r"^ +((?:[a-f] )?\w+) +(\d+) s  ").match, lines) if m
    )
    assert list(budgets) == ONE_GPU
    assert sum(int(b) for b in budgets.values()) == total
    assert "e multi" in done.stdout and "needs 2 or more GPUs" in done.stdout
    # The build's parts as measured, with the date and how they were measured, and the
    # torch-free tests ready before the extension.
    p = planner()
    assert "build parts, measured 2026-" in done.stdout and "\n  by /usr/bin/time" in done.stdout
    for part in p.BUILD_PARTS:
        assert part.cpu_s > 0 and part.longest_s > 0, part
        assert re.search(
            rf"^  {part.name} +{part.cpu_s:.1f} +{part.longest_s:.1f} ", done.stdout, re.M
        )
    model = p.build_model()
    assert 0 < model["tests"] <= model["ext"]
    assert p.by_name("build").budget_s >= model["tests"]
    assert p.BUILD_EXT_S >= model["ext"]
    # The window: the machine's start, the check, a rerun of its longest stage on the warm
    # machine, within 15 minutes, and the check within one command's 10 minutes.
    window = next(line for line in lines if line.startswith("window: "))
    m = re.search(r"= (\d+) s of (\d+) s: fits \(one command (\d+) s of 600 s\)", window)
    assert m, window
    assert int(m.group(1)) <= WINDOW_S == int(m.group(2)) and int(m.group(3)) <= 600
    w = p.window(1, BUDGET_S)
    longest = max(p.plan(1, BUDGET_S)[0][1:], key=lambda s: s.budget_s)
    assert w["rerun"] == p.by_name("gpu").budget_s + longest.budget_s
    assert w["total"] == 120 + total + w["rerun"] + 2 * p.TRANSFER_S == int(m.group(1))


def test_a_short_budget_cuts_the_least_valuable_stage_first():
    p = planner()
    full_plan = p.plan(1, BUDGET_S)[0]
    full = [s.name for s in full_plan]
    assert full == ["gpu", "build", "kernels", "ext", "shared", "doctor", "perf"]
    total = sum(s.budget_s for s in full_plan)
    perf, doctor, shared = (p.by_name(n) for n in ("perf", "doctor", "shared"))
    # A little short: perf is shortened, nothing else changes.
    kept, dropped = p.plan(1, total - 10)
    assert [s.name for s in kept] == full and not dropped
    assert kept[-1].budget_s == perf.budget_s - 10
    # Shorter: perf goes, the doctor keeps its whole budget.
    kept, dropped = p.plan(1, total - perf.budget_s + perf.min_s - 1)
    assert [s.name for s in dropped] == ["perf"]
    assert kept[-1].name == "doctor" and kept[-1].budget_s == doctor.budget_s
    # Shorter still: the doctor, then shared are cut; the build stages are never cut.
    kept, dropped = p.plan(1, total - perf.budget_s - doctor.budget_s - shared.budget_s)
    assert [s.name for s in dropped] == ["shared", "doctor", "perf"]
    kept, dropped = p.plan(1, 60)
    assert [s.name for s in kept] == ["gpu", "build", "ext"]
    required = sum(s.budget_s for s in kept)
    for budget in range(60, 600, 7):
        kept, _ = p.plan(1, budget)
        assert sum(s.budget_s for s in kept) <= max(budget, required)
    # Several GPUs: the table across GPUs outranks the shared-GPU stages.
    kept, dropped = p.plan(8, BUDGET_S)
    assert "multi" in [s.name for s in kept] and [s.name for s in dropped][-1] == "perf"
    # The script prints the same plan.
    short = total - perf.budget_s + perf.min_s - 1
    done = run_script("--plan", "--gpus", "1", env={"XCCL_CHECK_BUDGET_S": str(short)})
    assert "d perf" in done.stdout and "dropped to fit the budget" in done.stdout
    assert done.stdout.strip().endswith(f"total {sum(s.budget_s for s in p.plan(1, short)[0])} s")
    # Stage d as planned gives gpu_bench.py's three one-GPU modes their minimums (20+20+15 s)
    # and its 15 s for ending a run and writing its tables.
    assert perf.budget_s - 15 >= 55


def test_spinning_groups_share_the_gpu_only_when_their_blocks_fit():
    p = planner()
    # gpu_plan.cc's cap on a 132-SM H100: min(32, 132 / n) blocks per rank.
    assert [p.group_blocks(n) for n in (1, 2, 3, 4, 5, 8)] == [0, 64, 96, 128, 130, 128]
    assert p.fit([2])[0] == 2  # two 2-rank groups: 128 of 132
    assert p.fit([2, 3])[0] == 1 and p.fit([2, 4])[0] == 1
    assert "a 4-rank group keeps 128 of the 132 resident blocks" in p.fit([2, 4])[1]
    assert p.fit([4], sms=264)[0] == 2  # a GPU twice as large holds two 4-rank groups


def test_stage_limits_pass_saved_time_on_without_taking_later_stages_time():
    p = planner()
    # 420 s budget, 30 s gone, later stages hold 210 s: this stage may use the other 180 s.
    assert p.stage_limit(420 - 30, 210) == 180


FAKES = """
stage_gpu() { gpu_count=1; gpu_name=fake; state=ok note="1 x fake"; }
stage_build() { bounded echo building; state=ok note=built; }
stage_kernels() {
  bounded printf '%s\\n' '[==========] Running 3 tests from 1 test suite.' \\
    '[ RUN      ] K.a' '[       OK ] K.a (1 ms)' '[ RUN      ] K.b' '[  FAILED  ] K.b (2 ms)'
  verdict $? "$(planner tally gtest "$stage_log")"
}
stage_ext() { ext_ok=1; state=ok note=imported; }
stage_shared() {
  echo "$$" >"$FAKE_DIR/pid"
  bounded sleep "${FAKE_SLEEP:-0}"
  state=ok note=slept
}
stage_doctor() { echo "PASS  gpu.verify  fake" >"$out_dir/doctor_gpu.txt"; state=ok note=stamped; }
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
        "XCCL_CHECK_BUDGET_S": str(BUDGET_S),
        "FAKE_DIR": str(tmp_path),
    }, tmp_path / "out"


def rows(summary: str) -> dict:
    cells = [line.split("|") for line in summary.splitlines() if line.count("|") == 6]
    return {c[1].strip(): (c[2].strip(), c[5].strip()) for c in cells[2:]}


def files_under(folder) -> list:
    return [os.path.join(d, f) for d, _, names in os.walk(folder) for f in names]


def test_summary_records_a_failed_and_a_timed_out_stage_and_the_rest_still_runs(fake):
    env, out = fake
    started = time.monotonic()
    done = run_script("--out", str(out), env=env)
    assert time.monotonic() - started < 30
    assert done.returncode == 1, done.stdout + done.stderr  # a stage failed
    summary = (out / "summary.md").read_text()
    table = rows(summary)
    assert list(table) == ONE_GPU + ["e multi"]
    assert table["b kernels"] == ("FAIL", "1 passed, 1 failed, 0 skipped, 1 not run; failed: K.b")
    assert table["c shared"][0] == "ok"  # after the failed stage
    assert table["d perf"] == ("partial", "timed out")
    assert table["e multi"] == ("not run", "needs 2 or more GPUs")
    assert "| perf table |" in summary and summary.rstrip().endswith(
        "Exit status: 1 (a stage failed)"
    )
    log = (out / "device_check.log").read_text()
    assert log.index("building") < log.index("[  FAILED  ] K.b") < log.index("d perf")
    names = subprocess.run(
        ["tar", "tzf", str(out / "logs.tar.gz")], capture_output=True, text=True, check=True
    ).stdout
    assert "1.build.log" in names and "6.perf.log" in names


def test_only_reruns_the_stages_asked_for_and_resume_the_ones_that_did_not_pass(fake):
    env, out = fake
    run_script("--out", str(out), env=env)
    # --resume: what did not pass last time (b kernels FAIL, d perf partial), nothing else; the
    # builds are the last run's (the fake build leaves no binary, so stage a runs again).
    done = run_script("--resume", "--out", str(out), env=env)
    assert "--resume reruns: kernels,perf" in done.stdout, done.stdout + done.stderr
    table = rows((out / "summary.md").read_text())
    assert table["b kernels"][0] == "FAIL" and table["d perf"][0] == "partial"
    assert table["a build"] == ("ok", "built")  # needed by b, not there: run again
    assert table["a ext"][0] == "ok" and table["a ext"][1].startswith("reused from the last run")
    assert table["c shared"] == ("not run", "not asked for (--only kernels,perf)")
    assert table["f doctor"] == ("not run", "not asked for (--only kernels,perf)")
    # --only one stage; a name the plan lacks is bad usage.
    done = run_script("--only", "shared", "--out", str(out), env=env)
    table = rows((out / "summary.md").read_text())
    assert done.returncode == 0, done.stdout + done.stderr
    assert table["c shared"] == ("ok", "slept") and table["b kernels"][0] == "not run"
    # A stage rerun alone keeps to its own budget (what the window's rerun counts), not 420 s.
    header = (out / "summary.md").read_text().splitlines()[2]
    m = re.search(r"--only shared, budget of this rerun (\d+) s$", header)
    shared = planner().by_name("shared").budget_s
    assert m and shared <= int(m.group(1)) <= shared + 60 < BUDGET_S, header  # + gpu, reuse
    assert run_script("--only", "nosuch", "--out", str(out), env=env).returncode == 2


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
    assert table["f doctor"] == ("not run", "terminated (SIGTERM) before it started")
    assert table["b kernels"][0] == "FAIL"  # what finished before stays
    # The stage's command (the sleep) was ended with it.
    leftover = subprocess.run(["pgrep", "-f", f"sleep {sleep}"], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", leftover.stdout


ALLOWED = {
    "summary.md",
    "device_check.log",
    "running_stage.log",
    "logs.tar.gz",
    "doctor_gpu.txt",
    "bench.md",
    "bench_multi.md",
}


def check_files(out):
    found = files_under(out)
    assert 0 < len(found) <= MAX_FILES, found
    for path in found:
        assert os.path.relpath(path, out).count(os.sep) == 0, path
        assert os.path.basename(path) in ALLOWED, path
    assert {"summary.md", "device_check.log", "logs.tar.gz"} <= {os.path.basename(f) for f in found}
    return {os.path.basename(f) for f in found}


def test_output_stays_within_seven_named_files(fake):
    env, out = fake
    run_script("--out", str(out), env=env)
    assert "doctor_gpu.txt" in check_files(out)


# -- the per-test bounds ---------------------------------------------------------------------------

FAKE_GTEST = r"""#!/usr/bin/env bash
# A GoogleTest binary's output for K.a, K.b and K.c; K.b waits forever.
filter=""
for a in "$@"; do
  case $a in
    --gtest_list_tests) printf 'K.\n  a\n  b\n  c\n'; exit 0 ;;
    --gtest_filter=*) filter=${a#--gtest_filter=} ;;
  esac
done
tests="K.a K.b K.c"
[ -n "$filter" ] && tests=${filter//:/ }
echo "[==========] Running $(echo $tests | wc -w) tests from 1 test suite."
for t in $tests; do
  echo "[ RUN      ] $t"
  if [ "$t" = K.b ]; then echo "rank 1 waits for rank 0's flag"; sleep 600; fi
  echo "[       OK ] $t (1 ms)"
done
"""


def test_a_hung_googletest_is_a_fail_named_and_the_tests_after_it_still_run(tmp_path):
    binary = tmp_path / "fake_gtest"
    binary.write_text(FAKE_GTEST)
    binary.chmod(0o755)
    script = os.path.join(ROOT, "benchmarks", "device_check.py")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, script, "watch", "--per-test", "2", "--", str(binary)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - started < 20
    assert done.returncode == 1, done.stdout + done.stderr
    assert "device_check: HUNG K.b after 2 s (per-test bound 2 s)" in done.stdout
    log = tmp_path / "kernels.log"
    log.write_text(done.stdout)
    line = planner().tally_files("gtest", [str(log)]).line()
    assert line == (
        "2 passed, 1 failed, 0 skipped, 0 not run; "
        "HUNG K.b: its last output: rank 1 waits for rank 0's flag"
    )
    # The killed test's process group went with it.
    left = subprocess.run(["pgrep", "-f", str(binary)], capture_output=True, text=True)
    assert left.stdout.strip() == ""


HANG_TESTS = """
import time

from dist_harness import describe, spawn


def _wait_forever(rank, world):
    time.sleep(3600)


def test_passes():
    assert True


def test_ranks_hang():
    outcomes = spawn(_wait_forever, 2, timeout=600, init=False)
    assert all(o.ok for o in outcomes), describe(outcomes)
"""

REAL_SHARED = """
stage_gpu() { gpu_count=1; gpu_name=fake; state=ok note="1 x fake"; }
stage_build() { state=ok note=built; }
stage_kernels() { state=ok note=fake; }
stage_ext() { ext_ok=1; state=ok note=imported; }
stage_doctor() { state=ok note=fake; }
stage_perf() { state=ok note=fake; }
rehearse_test_files=("$FAKE_DIR/test_hang.py")
# The rehearsal's stage c, with a short per-test bound.
eval "$(declare -f stage_shared | sed '1s/stage_shared/real_shared/')"
stage_shared() { per_test_s=12; real_shared; }
"""


def rehearse_shared_stage(tmp_path, test_file: str, tests: str, stages: str, **env):
    """A rehearsal whose stage c runs `tests` (written as `test_file`) with the stage commands
    `stages`; returns the finished run and the output folder, after checking that stage c failed
    and the run said so (exit status 1)."""
    (tmp_path / test_file).write_text(tests)
    stages_file = tmp_path / "stages.sh"
    stages_file.write_text(stages)
    out = tmp_path / "out"
    env = {
        "XCCL_CHECK_STAGES_FILE": str(stages_file),
        "XCCL_BUILD_DIR": str(tmp_path / "build"),
        "FAKE_DIR": str(tmp_path),
        **env,
    }
    done = run_script("--rehearse", "--out", str(out), env=env, timeout=240)
    assert done.returncode == 1, done.stdout + done.stderr
    status, note = rows((out / "summary.md").read_text())["c shared"]
    assert status == "FAIL", note
    return done, out, note


def test_a_hung_python_test_is_a_fail_naming_it_and_what_it_waited_for(tmp_path):
    done, _, note = rehearse_shared_stage(tmp_path, "test_hang.py", HANG_TESTS, REAL_SHARED)
    # The hang is named: the harness killed the ranks at the per-test bound (12 s, not the test's
    # 600 s), after their stacks went to their logs, and the frame each waited in is said.
    assert re.fullmatch(
        r"1 passed, 1 failed, 0 skipped, 0 not run; HUNG \S*test_hang.py::test_ranks_hang: "
        r"rank \d: still running at the wall-clock bound; test_hang.py:\d+ in _wait_forever; "
        r"(one test at a time|2-rank tests two at a time).*; 12 s per test",
        note,
    ), note
    assert done.stdout.rstrip().endswith("(exit status 1)")


SLEEPS = """
import time


def test_before():
    pass


def test_sleeps():
    time.sleep(3600)


def test_after():
    pass
"""

SLEEPS_STAGES = REAL_SHARED.replace("test_hang.py", "test_sleeps.py").replace(
    "per_test_s=12", "per_test_s=1"
)


def test_a_test_hung_in_the_pytest_process_is_ended_named_and_the_rest_still_run(tmp_path):
    # The plugin's own bound: a test hung in the pytest process itself (not in the harness's
    # ranks) ends that process after its stacks, named with the frame it waited in; the stage
    # then runs the tests it had not reached.
    _, out, note = rehearse_shared_stage(
        tmp_path, "test_sleeps.py", SLEEPS, SLEEPS_STAGES, DEVICE_CHECK_BACKSTOP_S="1"
    )
    assert re.match(
        r"2 passed, 1 failed, 0 skipped, 0 not run; HUNG \S*test_sleeps.py::test_sleeps: "
        r"test_sleeps.py:10 in test_sleeps \(Python stacks follow\);",
        note,
    ), note
    log = (out / "device_check.log").read_text()
    assert 'test_sleeps.py", line 10 in test_sleeps' in log
    assert log.index("device_check: CONTINUE") < log.index("test_sleeps.py::test_after PASSED")


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
        "(cut off in tests/python/test_gpu.py::test_d[4-shared]); "
        "failed: tests/python/test_gpu.py::test_b[2-shared]"
    )
    xdist = "\n".join(
        [
            "created: 4/4 workers",
            "4 workers [3 items]",
            "[gw1] [ 33%] PASSED tests/python/test_gpu.py::test_a[2-shared] ",
            "[gw0] [ 66%] ERROR tests/python/test_gpu.py::test_b[2-shared] ",
        ]
    )
    assert p.tally_pytest(xdist).line() == (
        "1 passed, 1 failed, 0 skipped, 1 not run; "
        "failed: tests/python/test_gpu.py::test_b[2-shared]"
    )
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
    assert t.line() == (
        "1 passed, 1 failed, 1 skipped, 1 not run (cut off in GpuTest.C); "
        "failed: K/AllReduceTest.Bitwise/W2_OneShot_float32"
    )


def _mps_stages(tmp_path, control: str, probe: str, body: str, env: dict | None = None):
    """Runs `body` with device_check_stages.sh sourced, a fake nvidia-cuda-mps-control and a fake
    python3 (the context probe) first on PATH, their texts given. Returns a function that runs
    it again with extra environment variables (the completed process each time)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    for name, text in (("nvidia-cuda-mps-control", control), ("python3", probe)):
        (fake / name).write_text(text)
        (fake / name).chmod(0o755)
    stages = os.path.join(ROOT, "benchmarks", "device_check_stages.sh")
    script = f"""
        set -u
        work={tmp_path}/work; mkdir -p "$work"; stage_log={tmp_path}/stage.log
        stage_deadline=$((SECONDS + 30))
        source {stages}
        {body}
    """
    base = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", **(env or {})}

    def run(**extra):
        return subprocess.run(
            ["bash", "-c", script], env={**base, **extra}, capture_output=True, text=True
        )

    return run


@pytest.mark.parametrize("context_works", [True, False])
def test_mps_is_started_for_the_check_and_stopped_or_left_alone(tmp_path, context_works):
    # start_mps/stop_mps with a fake nvidia-cuda-mps-control and a fake python3 (the context
    # probe): a daemon that serves a context is kept and exported, and stopped at the end; one
    # that does not is stopped at once and the check goes on without MPS; XCCL_CHECK_MPS=0
    # touches nothing.
    calls = tmp_path / "calls"
    run = _mps_stages(
        tmp_path,
        control=(
            f'#!/bin/sh\nif [ "$1" = -d ]; then echo "start $CUDA_MPS_PIPE_DIRECTORY" >> {calls}\n'
            f'else read -r line; echo "$line" >> {calls}; fi\n'
        ),
        probe=f"#!/bin/sh\nexit {0 if context_works else 1}\n",
        body="""
        start_mps && echo started || echo without
        echo "pipe=${CUDA_MPS_PIPE_DIRECTORY:-none}"
        folder=$mps_dir
        stop_mps
        [ -e "$folder" ] && echo "left $folder" || echo cleaned
        """,
    )
    done = run()
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
    off = run(XCCL_CHECK_MPS="0")
    assert off.stdout.split()[:2] == ["without", "pipe=none"]
    assert calls.read_text().splitlines() == recorded  # nothing more was called


@pytest.mark.parametrize("stale", ["serves", "no-context", "gone"])
def test_an_mps_daemon_a_killed_run_left_is_used_or_stopped(tmp_path, stale):
    # A killed run leaves its daemon and pipe folder (<root>/xccl-mps.*/pipe). The next run asks
    # it for its servers: one that answers and serves a context is used (its pipe folder
    # exported, so no rank bypasses it) and stopped at the end; one that serves no context is
    # stopped and a fresh one started; a folder whose daemon is gone is removed.
    calls = tmp_path / "calls"
    root = tmp_path / "root"
    old = root / "xccl-mps.OLD"
    (old / "pipe").mkdir(parents=True)
    (old / "log").mkdir()
    (old / "pipe" / "control").write_text("")
    answers = "0" if stale != "gone" else "1"
    # The context probe works through the old daemon only when it "serves".
    serves = 0 if stale == "serves" else 1
    run = _mps_stages(
        tmp_path,
        control=(
            f'#!/bin/sh\nif [ "$1" = -d ]; then echo "start $CUDA_MPS_PIPE_DIRECTORY" >> {calls}; '
            f'exit 0; fi\nread -r line; echo "$line $CUDA_MPS_PIPE_DIRECTORY" >> {calls}\n'
            f'[ "$line" = get_server_list ] && exit {answers}\nexit 0\n'
        ),
        probe=f'#!/bin/sh\ncase "$CUDA_MPS_PIPE_DIRECTORY" in *OLD*) exit {serves} ;; esac\n',
        body="""
        if use_stale_mps; then echo used; elif start_mps; then echo started; else echo without; fi
        echo "pipe=${CUDA_MPS_PIPE_DIRECTORY:-none}"
        stop_mps
        """,
        env={"MPS_STALE_ROOT": str(root)},
    )
    done = run()
    assert done.returncode == 0, done.stderr
    verdict, pipe = done.stdout.split()
    recorded = calls.read_text().splitlines()
    assert recorded[0] == f"get_server_list {old}/pipe"
    if stale == "serves":
        assert (verdict, pipe) == ("used", f"pipe={old}/pipe")
        assert recorded[1:] == [f"quit {old}/pipe"]  # stopped at the end, as if started here
    else:
        assert verdict == "started" and pipe.startswith(f"pipe={root}/xccl-mps.")
        assert pipe != f"pipe={old}/pipe"
        fresh = pipe.removeprefix("pipe=")
        stopped_old = [f"quit {old}/pipe"] if stale == "no-context" else []
        assert recorded[1:] == stopped_old + [f"start {fresh}", f"quit {fresh}"]
    assert list(root.iterdir()) == []  # the old folder and any fresh one are gone at the end


REHEARSAL_OUT = os.path.join(ROOT, "build", "rehearsal")  # scripts/test.sh's rehearsal
SCRIPTS = ("device_check.sh", "device_check_stages.sh", "device_check.py", "device_check_pytest.py")


def test_a_clean_rehearsal_passes_every_stage(tmp_path):
    # scripts/test.sh runs the rehearsal before the Python tests (benchmarks/README.md); its
    # summary is read when these scripts have not changed since, else the rehearsal runs here.
    summary = os.path.join(REHEARSAL_OUT, "summary.md")
    newest = max(os.path.getmtime(os.path.join(ROOT, "benchmarks", f)) for f in SCRIPTS)
    out = REHEARSAL_OUT
    if not os.path.exists(summary) or os.path.getmtime(summary) < newest:
        out = str(tmp_path / "out")
        done = run_script(
            "--rehearse", "--out", out, env={"XCCL_BUILD_DIR": str(tmp_path / "build")}, timeout=600
        )
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    with open(os.path.join(out, "summary.md"), encoding="utf-8") as f:
        text = f.read()
    assert "REHEARSAL on CPU" in text.splitlines()[2]
    table = rows(text)
    assert list(table) == ONE_GPU + ["e multi"]
    for stage in ONE_GPU:
        assert table[stage][0] == "ok", (stage, table[stage])
    assert table["e multi"] == ("not run", "needs 2 or more GPUs")
    # Each stage's CPU counterpart did its work: tests passed, none skipped or hung.
    assert re.match(
        r"[1-9]\d* passed, 0 failed, 0 skipped, 0 not run; one binary", table["b kernels"][1]
    )
    assert re.match(
        r"[1-9]\d* passed, 0 failed, 0 skipped, 0 not run; (one|2-rank) test", table["c shared"][1]
    )
    assert "gpu.verify no CUDA/HIP GPU visible" in table["f doctor"][1]
    assert text.rstrip().endswith("Exit status: 0 (every stage that ran passed)")
    files = check_files(out)
    assert {"doctor_gpu.txt", "bench.md"} <= files and "running_stage.log" not in files
    with open(os.path.join(out, "doctor_gpu.txt"), encoding="utf-8") as f:
        doctor = f.read()
    assert "gpu.verify" in doctor and "# no stamp written" in doctor
