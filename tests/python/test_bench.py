"""`python -m xccl.bench`: the measurement rules, the formatting, and one small run end to end.

The pure modules load from the source tree without torch (xccl_modules); the end-to-end runs
start the real package in a subprocess with the built extension.
"""

import csv
import io
import json
import os
import subprocess
import sys
import time
from functools import partial

import pytest
from xccl_modules import installed, load

options = load("bench.options")
method = load("bench.method")
report = load("bench.report")
launch = load("bench.launch")
bench_load = load("bench.load")

KiB, MiB = 1 << 10, 1 << 20


# ---------------------------------------------------------------------------------------------
# Options


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8", 8),
        ("4K", 4 * KiB),
        ("4k", 4 * KiB),
        ("1M", MiB),
        ("256M", 256 * MiB),
        ("1G", 1 << 30),
        ("64MiB", 64 * MiB),
        ("2KB", 2 * KiB),
        ("1.5K", 1536),
        (" 16 ", 16),
    ],
)
def test_parse_size_accepts_plain_and_suffixed_sizes(text, expected):
    assert options.parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "K", "-8", "4X", "1.3", "0.5K1", "one"])
def test_parse_size_rejects_nonsense(text):
    with pytest.raises(ValueError):
        options.parse_size(text)


def test_format_size_uses_the_largest_exact_unit():
    assert [options.format_size(n) for n in (8, 1023, 4 * KiB, 1536, 32 * MiB, 1 << 30)] == [
        "8 B",
        "1023 B",
        "4 KiB",
        "1.5 KiB",
        "32 MiB",
        "1 GiB",
    ]


def test_size_series_is_geometric_and_never_passes_max():
    assert options.size_series(8, 4 * KiB, 2) == [8 << i for i in range(10)]
    assert options.size_series(8, 4 * KiB, 4) == [8, 32, 128, 512, 2048]
    assert options.size_series(64, 64, 4) == [64]
    for low, high, factor in ((0, 8, 2), (16, 8, 2), (8, 64, 1)):
        with pytest.raises(ValueError):
            options.size_series(low, high, factor)


def test_parse_ops_keeps_order_drops_repeats_and_names_unknown_ones():
    assert options.parse_ops("broadcast,all_reduce,broadcast") == ["broadcast", "all_reduce"]
    assert options.parse_ops("all") == list(options.OPS)
    with pytest.raises(ValueError, match="allreduce"):
        options.parse_ops("allreduce")


def test_defaults_are_all_ops_float32_xccl_against_auto_reference():
    args = options.parse_args([])
    assert args.ops == list(options.OPS) and args.dtype == "float32"
    assert args.backend == "xccl" and args.reference == "auto" and args.nranks == 2
    # The documented default sweep: 8 B x 4^k up to 64 MiB, i.e. 12 sizes ending at 32 MiB.
    assert args.sizes[0] == 8 and args.sizes[-1] == 32 * MiB and len(args.sizes) == 12
    assert args.iters is None and not args.check
    assert args.simulate_hosts == 1


def test_bad_options_are_usage_errors(capsys):
    for argv in (
        ["--min", "1M", "--max", "1K"],
        ["--nranks", "0"],
        ["--ops", "nope"],
        ["--dtype", "complex64"],
        ["--iters", "0"],
        ["--factor", "1"],
        ["--simulate-hosts", "0"],
        ["--nranks", "2", "--simulate-hosts", "3"],
        ["--load", "-1"],
        ["--load", str(options.MAX_LOAD + 1)],
    ):
        with pytest.raises(SystemExit) as stop:
            options.parse_args(argv)
        assert stop.value.code == 2, argv
    capsys.readouterr()


# ---------------------------------------------------------------------------------------------
# Method


def test_busbw_factors_follow_nccl_tests():
    assert method.busbw_factor("all_reduce", 2) == 1.0
    assert method.busbw_factor("all_reduce", 8) == pytest.approx(1.75)
    for op in ("all_gather", "reduce_scatter", "all_to_all"):
        assert method.busbw_factor(op, 4) == pytest.approx(0.75)
    assert method.busbw_factor("broadcast", 8) == 1.0
    assert method.busbw_factor("reduce", 8) == 1.0
    assert method.busbw_factor("all_reduce", 1) == 0.0
    with pytest.raises(ValueError):
        method.busbw_factor("gather", 2)


def test_bandwidths_are_bytes_over_time_in_gb_per_second():
    algbw, busbw = method.bandwidths("all_reduce", 10**6, 1e-3, 4)
    assert algbw == pytest.approx(1.0) and busbw == pytest.approx(1.5)
    assert method.bandwidths("broadcast", 100, 0.0, 2) == (0.0, 0.0)


def test_layout_uses_the_nccl_tests_meaning_of_bytes():
    # all_reduce/broadcast/reduce: the buffer; all_gather: the output; reduce_scatter/all_to_all:
    # the input.
    assert method.layout("all_reduce", 64, 4, 4) == {
        "count": 16,
        "bytes": 64,
        "input": 16,
        "output": 16,
    }
    assert method.layout("reduce", 64, 4, 4) == method.layout("all_reduce", 64, 4, 4)
    assert method.layout("all_gather", 64, 4, 4)["input"] == 4
    assert method.layout("all_gather", 64, 4, 4)["output"] == 16
    assert method.layout("reduce_scatter", 64, 4, 4)["output"] == 4
    assert method.layout("all_to_all", 64, 4, 4)["input"] == 16


def test_layout_rounds_chunked_ops_to_whole_chunks_and_skips_empty_ones():
    shape = method.layout("all_gather", 32, 4, 3)  # 8 elements -> 6, two per rank
    assert shape["count"] == 6 and shape["bytes"] == 24 and shape["input"] == 2
    assert method.layout("all_reduce", 32, 4, 3)["count"] == 8  # not chunked: not rounded
    assert method.layout("all_to_all", 8, 4, 3) is None  # 2 elements cannot go to 3 ranks
    assert method.layout("all_reduce", 2, 4, 2) is None  # less than one element


def test_size_plan_drops_sizes_that_round_to_the_previous_one():
    plan = method.size_plan(["all_reduce", "all_gather"], [8, 12, 16], 4, 3)
    assert [(op, s["bytes"]) for op, s in plan] == [
        ("all_reduce", 8),
        ("all_reduce", 12),
        ("all_reduce", 16),
        ("all_gather", 12),
    ]


def test_percentile_interpolates_like_numpy():
    values = list(range(10, 0, -1))  # unsorted on purpose
    assert method.percentile(values, 50) == pytest.approx(5.5)
    assert method.percentile(values, 10) == pytest.approx(1.9)
    assert method.percentile(values, 90) == pytest.approx(9.1)
    assert method.percentile([3.0], 90) == 3.0
    with pytest.raises(ValueError):
        method.percentile([], 50)


def test_statistics_take_each_statistics_maximum_over_ranks():
    fast, slow = method.summarize([1.0, 2.0, 3.0]), method.summarize([2.0, 2.0, 10.0])
    assert fast["median"] == 2.0 and fast["mean"] == 2.0 and fast["max"] == 3.0
    worst = method.max_across_ranks([fast, slow])
    assert worst["median"] == 2.0 and worst["p90"] == slow["p90"] and worst["min"] == 2.0
    assert worst["p10"] == slow["p10"] and worst["max"] == 10.0


def test_iteration_counts_fit_the_target_time_within_bounds():
    assert method.plan_iterations(1e-3, 0.25) == 250
    assert method.plan_iterations(1e-7, 0.25) == method.MAX_ITERS
    assert method.plan_iterations(2.0, 0.25) == method.MIN_ITERS
    assert method.plan_iterations(2.0, 0.25, forced=3) == 3
    assert method.plan_warmup(1e-3, 0.25, 5) == 5
    assert method.plan_warmup(0.5, 0.25, 5) == 0  # the estimate's calls were the warm-up


def test_interleaving_rounds_split_every_backend_evenly():
    assert method.round_count([1000, 40]) == 4 and method.round_count([5, 300]) == 1
    blocks = method.split_rounds(23, 4)
    assert blocks == [6, 6, 6, 5] and sum(blocks) == 23
    assert method.split_rounds(2, 4) == [1, 1]


def test_speedup_and_geomean():
    assert method.speedup(30.0, 10.0) == 3.0
    assert method.speedup(None, 10.0) is None and method.speedup(1.0, 0.0) is None
    assert method.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert method.geomean([]) is None


# ---------------------------------------------------------------------------------------------
# Report


def side(name, median, check=None):
    return {
        "name": name,
        "iters": 10,
        "warmup": 5,
        "median_us": median,
        "p10_us": median * 0.9,
        "p90_us": median * 1.2,
        "mean_us": median,
        "min_us": median * 0.8,
        "max_us": median * 2,
        "algbw_gbps": 1.5,
        "busbw_gbps": 1.5,
        "check": check,
        "rank_median_us": [median, median],
    }


def record(op, nbytes, mine, theirs=None):
    return {
        "op": op,
        "bytes": nbytes,
        "count": nbytes // 4,
        "dtype": "float32",
        "nranks": 2,
        "backend": mine,
        "reference": theirs,
        "speedup": theirs["median_us"] / mine["median_us"] if theirs else None,
    }


RECORDS = [
    record("all_reduce", 8, side("xccl", 10.0, "PASS"), side("gloo", 400.0, "PASS")),
    record("all_reduce", 32 * MiB, side("xccl", 40000.0, "FAIL"), side("gloo", 30000.0, "PASS")),
]


def test_table_has_both_backends_aligned_columns_and_the_check_verdict():
    text = report.format_table(RECORDS, "# all_reduce")
    lines = text.splitlines()
    assert lines[0] == "# all_reduce"
    assert "xccl p50" in lines[1] and "gloo p50" in lines[1] and "speedup" in lines[1]
    assert len({len(line) for line in lines[1:]}) == 1  # every row as wide as the header
    assert "8 B" in lines[3] and "40.00x" in lines[3] and lines[3].endswith("PASS")
    assert "32 MiB" in lines[4] and "0.75x" in lines[4] and "FAIL xccl" in lines[4]


def test_table_without_reference_or_check_has_no_such_columns():
    rows = [record("broadcast", 1024, side("xccl", 12.5))]
    text = report.format_table(rows)
    assert "speedup" not in text and "check" not in text and "12.5" in text


def loaded(nbytes, mine, theirs, load=2):
    return {"load": load, **record("all_reduce", nbytes, mine, theirs)}


def test_a_loaded_run_shows_its_columns_beside_the_quiet_ones_and_checks_both():
    rows = [dict(r) for r in RECORDS]
    rows[0]["loaded"] = loaded(8, side("xccl", 20.0, "PASS"), side("gloo", 500.0, "FAIL"))
    text = report.format_table(rows, "# all_reduce")
    lines = text.splitlines()
    assert "load 2: xccl" in lines[1]
    assert len({len(line) for line in lines[1:]}) == 1
    assert "25.00x" in lines[3] and "40.00x" in lines[3]  # loaded and quiet speedups
    assert lines[3].endswith("FAIL gloo loaded")
    assert lines[4].count(" - ") >= 4  # a size measured quiet only: dashes, same width
    assert "FAIL xccl" in lines[4]


def test_csv_gives_loaded_sides_their_own_rows_with_the_load(tmp_path):
    rows = [dict(RECORDS[0], loaded=loaded(8, side("xccl", 20.0), side("gloo", 500.0), 3))]
    path = tmp_path / "out.csv"
    report.write_csv(str(path), rows)
    written = list(csv.DictReader(path.open()))
    assert [(r["backend"], r["load"]) for r in written] == [
        ("xccl", "0"),
        ("gloo", "0"),
        ("xccl", "3"),
        ("gloo", "3"),
    ]
    assert written[2]["speedup"] == "25.0"


def _state(pid: int) -> str:
    """The process state letter of /proc/PID/stat (R running, S sleeping, T stopped), or "gone"
    (a zombie counts as gone: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"
    return "gone" if state in ("Z", "X") else state


def _until(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


def test_load_processes_start_paused_run_when_resumed_and_end_with_close():
    with bench_load.Load.start(2) as busy:
        assert len(busy.pids) == 2
        assert _until(lambda: all(_state(p) == "T" for p in busy.pids))
        busy.on()
        assert _until(lambda: all(_state(p) in ("R", "S") for p in busy.pids))
        busy.off()
        assert _until(lambda: all(_state(p) == "T" for p in busy.pids))
        pids = list(busy.pids)
    assert _until(lambda: all(_state(p) == "gone" for p in pids))


def test_load_processes_die_with_their_owner_even_when_paused():
    code = (
        "import sys; sys.path[:0] = sys.argv[1:]; "
        "from xccl_modules import load; busy = load('bench.load').Load.start(1); "
        "print(busy.pids[0], flush=True)"  # then exits without closing it
    )
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [sys.executable, "-c", code, here], capture_output=True, text=True, timeout=60, check=True
    )
    pid = int(out.stdout.split()[0])
    assert _until(lambda: _state(pid) == "gone"), f"load process {pid} outlived its owner"


def test_a_busy_rank_gets_no_load_of_its_own_unless_local_rank_0():
    import argparse

    args = argparse.Namespace(load=1)
    assert bench_load.Load.for_rank(args, 1, 1).pids == []
    given = argparse.Namespace(load=2, load_pids=[11, 12])  # --netns-hosts: the parent's
    assert bench_load.Load.for_rank(given, 0, 0).pids == [11, 12]
    assert bench_load.Load.for_rank(given, 1, 0).pids == []


def test_summary_line_counts_wins_and_names_extremes():
    line = report.summary_line("all_reduce", RECORDS)
    assert "faster at 1 of 2 sizes" in line and "min 0.75x at 32 MiB" in line
    assert "max 40.00x at 8 B" in line
    assert report.summary_line("x", [record("x", 8, side("xccl", 1.0))]) is None


def test_csv_has_one_row_per_backend_and_size(tmp_path):
    path = tmp_path / "out.csv"
    report.write_csv(str(path), RECORDS, device="cpu")
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 4 and list(rows[0]) == list(report.CSV_FIELDS)
    assert [r["backend"] for r in rows] == ["xccl", "gloo", "xccl", "gloo"]
    assert rows[0]["speedup"] == "40.0" and rows[1]["speedup"] == ""
    assert rows[2]["check"] == "FAIL" and float(rows[2]["median_us"]) == 40000.0


def test_json_round_trips_results_and_metadata(tmp_path):
    path = tmp_path / "out.json"
    report.write_json(str(path), RECORDS, {"backend": "xccl", "reference": "gloo"})
    loaded = json.loads(path.read_text())
    assert loaded["meta"]["reference"] == "gloo" and loaded["results"] == RECORDS


def test_progress_redraws_on_a_terminal_and_prints_only_notes_elsewhere():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    bar = report.Progress(4, stream=tty)
    bar.step("all_reduce 8 B")
    bar.advance()
    bar.note("done")
    assert "\r[" in tty.getvalue() and "0/4" in tty.getvalue() and "1/4" in tty.getvalue()
    assert "done\n" in tty.getvalue()

    log = io.StringIO()
    bar = report.Progress(4, stream=log)
    bar.step("all_reduce 8 B")
    bar.advance()
    bar.note("all_reduce done")
    assert log.getvalue() == "all_reduce done\n"

    quiet = io.StringIO()
    bar = report.Progress(4, stream=quiet, enabled=False)
    bar.step("x")
    bar.note("y")
    assert quiet.getvalue() == ""


def test_plot_draws_both_backends_when_matplotlib_is_installed(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "out.png"
    report.write_plot(str(path), RECORDS, {"backend": "xccl", "reference": "gloo"})
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_is_a_clear_usage_error(monkeypatch, capsys):
    monkeypatch.setattr(
        launch.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else object(),
    )
    assert launch.main(["--plot", "out.png"]) == 2
    assert "--plot needs matplotlib" in capsys.readouterr().err


def test_launcher_detection_needs_all_three_variables():
    assert launch.launched_by({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"})
    assert not launch.launched_by({"RANK": "0", "WORLD_SIZE": "2"})


# ---------------------------------------------------------------------------------------------
# Checks (torch, no process group)


def make_rank(rank, world, dtype="float32"):
    pytest.importorskip("xccl._C")
    runner = load("bench.runner")
    args = options.parse_args(["--dtype", dtype, "--check"])
    return runner, runner.Rank(
        args, rank, world, runner.torch.device("cpu"), [runner.Side("backend", "fake", None)]
    )


@pytest.mark.parametrize("op", options.OPS)
def test_expected_outputs_match_the_collectives_definition(op):
    world, count = 3, 12
    shape = method.layout(op, count * 4, 4, world)
    ranks = [make_rank(r, world)[1] for r in range(world)]
    inputs = [ranks[0].check_input(r, shape["input"], salt=7) for r in range(world)]
    chunk = count // world
    for r, me in enumerate(ranks):
        if op == "all_reduce":
            want = sum(inputs)
        elif op == "broadcast":
            want = inputs[0]
        elif op == "reduce":  # to rank 0; the others' buffers are undefined afterwards
            want = sum(inputs) if r == 0 else None
        elif op == "all_gather":
            want = [x for i in inputs for x in i.tolist()]
        elif op == "reduce_scatter":
            want = sum(inputs)[r * chunk : (r + 1) * chunk]
        else:  # all_to_all: chunk i of my output is chunk r of rank i's input
            want = [x for i in inputs for x in i[r * chunk : (r + 1) * chunk].tolist()]
        got = me.expected(op, shape, salt=7)
        if want is None:
            assert got is None, (op, r)
            continue
        assert got.tolist() == (want if isinstance(want, list) else want.tolist()), (op, r)


def test_reduce_is_checked_on_the_root_and_called_everywhere():
    shape = method.layout("reduce", 64, 4, 2)
    for rank in (0, 1):
        runner, me = make_rank(rank, 2)
        torch = runner.torch
        inp = torch.empty(shape["input"])
        calls = []
        result = me.check("reduce", shape, {"backend": partial(calls.append, 1)}, inp, inp, 3)
        assert calls == [1], rank  # the collective runs on every rank
        # The root's buffer left as its own input is wrong; a non-root's is undefined.
        assert result == {"backend": rank != 0}, rank
    runner, root = make_rank(0, 2)
    correct = root.expected("reduce", shape, 3).float()
    inp = runner.torch.empty(shape["input"])
    fill = {"backend": lambda: inp.copy_(correct)}
    assert root.check("reduce", shape, fill, inp, inp, 3) == {"backend": True}


def test_check_inputs_are_never_all_zero_and_sum_exactly_in_bfloat16():
    runner, me = make_rank(0, 64, "bfloat16")
    values = me.check_input(5, 1000, salt=1)
    assert values.abs().max() <= 4 and values.abs().sum() > 0
    total = sum(me.check_input(r, 1000, salt=1) for r in range(64))
    assert runner.torch.equal(total.to(runner.torch.bfloat16).to(runner.torch.int32), total)


def test_check_fails_a_backend_that_leaves_the_output_alone_and_passes_a_correct_one():
    runner, me = make_rank(1, 2)
    torch = runner.torch
    shape = method.layout("all_gather", 64, 4, 2)
    inp, out = torch.empty(shape["input"]), torch.empty(shape["output"])
    assert me.check("all_gather", shape, {"backend": lambda: None}, inp, out, 3) == {
        "backend": False
    }
    correct = me.expected("all_gather", shape, 3).float()
    assert me.check("all_gather", shape, {"backend": lambda: out.copy_(correct)}, inp, out, 3) == {
        "backend": True
    }


# ---------------------------------------------------------------------------------------------
# End to end (needs the built extension)


def run_bench(tmp_path, *argv, timeout=240):
    xccl = pytest.importorskip("xccl")
    pytest.importorskip("xccl._C")
    environ = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(xccl.__file__)))
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, environ.get("PYTHONPATH")]))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):  # self-started ranks, even under a launcher
        environ.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "xccl.bench", *argv],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_bench_json(tmp_path, command: str, timeout=240):
    """`python -m xccl.bench COMMAND --json out.json` in tmp_path (COMMAND is split at spaces):
    the finished process, which must have succeeded, and the JSON it wrote."""
    proc = run_bench(tmp_path, *command.split(), "--json", "out.json", timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc, json.loads((tmp_path / "out.json").read_text())


def test_small_run_compares_xccl_with_gloo_and_checks_results(tmp_path):
    start = time.monotonic()
    proc, result = run_bench_json(
        tmp_path,
        "--nranks 2 --ops all_reduce,all_gather --min 8 --max 4K --iters 5 --check --csv out.csv",
    )
    assert result["meta"]["backend"] == "xccl" and result["meta"]["reference"] == "gloo"
    assert result["meta"]["nranks"] == 2
    records = result["results"]
    assert {(r["op"], r["bytes"]) for r in records} == {
        (op, size) for op in ("all_reduce", "all_gather") for size in (8, 32, 128, 512, 2048)
    }
    for r in records:
        assert r["backend"]["name"] == "xccl" and r["reference"]["name"] == "gloo"
        for side_ in (r["backend"], r["reference"]):
            assert side_["iters"] == 5 and side_["check"] == "PASS"
            assert 0 < side_["p10_us"] <= side_["median_us"] <= side_["p90_us"]
            assert side_["busbw_gbps"] > 0 and len(side_["rank_median_us"]) == 2
        assert r["speedup"] > 0
    assert len(list(csv.DictReader((tmp_path / "out.csv").open()))) == 2 * len(records)
    assert "xccl p50" in proc.stdout and "check: PASS (10 sizes)" in proc.stdout
    assert time.monotonic() - start < 240


def test_a_loaded_run_measures_every_size_twice_and_leaves_no_load_behind(tmp_path):
    proc, result = run_bench_json(
        tmp_path, "--nranks 2 --ops all_reduce --sizes 4K,64K --iters 5 --load 2 --check"
    )
    assert result["meta"]["method"]["load"] == 2
    for r in result["results"]:
        busy = r["loaded"]
        assert busy["load"] == 2 and busy["bytes"] == r["bytes"]
        assert busy["backend"]["check"] == "PASS" and busy["reference"]["check"] == "PASS"
        assert busy["backend"]["iters"] == 5 and busy["speedup"] > 0
    assert "load 2: xccl" in proc.stdout and "all_reduce (load 2):" in proc.stdout
    assert "check: PASS (2 sizes)" in proc.stdout
    assert _until(lambda: not _busy_loops()), f"load processes left running: {_busy_loops()}"


def _busy_loops() -> list:
    """Pids of live load processes (load.py's program in their command line)."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if b"while os.getppid() == parent" in f.read() and _state(int(name)) != "gone":
                    found.append(int(name))
        except (OSError, ValueError):
            continue
    return found


def _launcher_fails(capfd, argv: str):
    """Runs the launcher in this process on `argv` (words split at spaces, no progress bar),
    checks that it exits with EXIT_RANK_FAILED; returns its stderr and the seconds it took."""
    launch = installed("bench.launch")
    start = time.monotonic()
    status = launch.main(argv.split() + ["--no-progress"])
    err = capfd.readouterr().err
    assert status == launch.EXIT_RANK_FAILED, err
    return err, time.monotonic() - start


def test_a_backend_that_cannot_start_fails_promptly_naming_it(capfd):
    """In this process: the launcher reports each rank that failed to create its group."""
    err, took = _launcher_fails(
        capfd, "--backend no_such_backend --ops broadcast --max 8 --timeout 30"
    )
    assert "rank 0" in err and "rank 1" in err and "no_such_backend" in err
    assert took < 60


def test_the_parent_stops_ranks_that_outlive_the_time_limit(capfd):
    err, took = _launcher_fails(
        capfd, "--ops all_reduce --min 64M --max 64M --iters 1000 --time-limit 3"
    )
    assert "--time-limit 3 s" in err
    assert took < 30


# ---------------------------------------------------------------------------------------------
# Several runs folded (bench/repeats.py)


def test_repeats_fold_runs_into_medians_and_mark_the_tuned_sizes():
    repeats = load("bench.repeats")

    def run(times):
        return {
            "results": [
                {
                    "op": op,
                    "bytes": nbytes,
                    "backend": {"median_us": mine},
                    "reference": {"median_us": theirs},
                }
                for (op, nbytes), (mine, theirs) in times.items()
            ]
        }

    runs = [
        run({("broadcast", 1024): (10.0, 40.0), ("broadcast", 1 << 20): (100.0, 90.0)}),
        run({("broadcast", 1024): (20.0, 40.0), ("broadcast", 1 << 20): (100.0, 110.0)}),
        run({("broadcast", 1024): (10.0, 50.0), ("broadcast", 1 << 20): (100.0, 100.0)}),
    ]
    table = {"cpu": {"entries": [{"collective": "broadcast", "min_bytes": 0, "max_bytes": 65536}]}}
    folded = repeats.rows(repeats.speedups(runs), repeats.tuned_ranges(table))
    assert [(r["bytes"], r["median"], r["mark"]) for r in folded] == [
        (1024, 4.0, "tuned"),
        (1 << 20, 1.0, "same plan"),
    ]
    assert folded[0]["runs"] == [4.0, 2.0, 5.0]
    assert "4.00x  4.00 2.00 5.00  tuned" in repeats.format_rows(folded)
