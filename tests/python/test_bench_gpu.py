"""The GPU parts of the benchmarks that a CPU can check: xccl.bench's --sizes/--timing/--graph
options, the markdown tables of xccl.bench.markdown (from synthetic results, not measurements),
and the commands benchmarks/gpu_bench.py runs. The numbers themselves need GPUs
(benchmarks/device_check.sh).
"""

import importlib.util
import json
import os

import pytest
from xccl_modules import load

options = load("bench.options")
markdown = load("bench.markdown")

KiB, MiB = 1 << 10, 1 << 20
GPU_BENCH = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks", "gpu_bench.py"
)


def gpu_bench():
    spec = importlib.util.spec_from_file_location("gpu_bench", GPU_BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# xccl.bench options


def test_explicit_sizes_replace_the_geometric_series():
    args = options.parse_args(["--sizes", "256M,8,1K,8", "--min", "4K"])
    assert args.sizes == [8, KiB, 256 * MiB]
    assert options.parse_args([]).sizes == options.size_series(8, 64 * MiB, 4)


@pytest.mark.parametrize(
    "argv",
    [
        ["--sizes", ""],
        ["--sizes", "8,x"],
        ["--graph", "-1"],
        ["--graph", "4", "--device", "cpu"],
        ["--timing", "loop"],
    ],
)
def test_bad_gpu_options_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        options.parse_args(argv)
    assert stop.value.code == 2
    assert "error" in capsys.readouterr().err


def test_timing_and_graph_default_to_todays_method():
    args = options.parse_args([])
    assert (args.timing, args.graph) == ("call", 0)
    args = options.parse_args(["--timing", "batch", "--graph", "20", "--device", "cuda"])
    assert (args.timing, args.graph) == ("batch", 20)


def test_batch_timing_gives_one_sample_per_batch_and_makes_every_call():
    pytest.importorskip("xccl._C")
    runner = load("bench.runner")
    args = options.parse_args(["--timing", "batch"])
    me = runner.Rank(args, 0, 1, runner.torch.device("cpu"), [runner.Side("backend", "x", None)])
    assert me.batch == 1  # CPU calls complete on return: nothing to batch
    me.batch = 4
    calls = []
    times = me.time_calls(lambda: calls.append(1), 10)
    assert len(calls) == 10 and len(times) == 3  # 4 + 4 + 2


# ---------------------------------------------------------------------------------------------
# Markdown tables (synthetic results)


def side(name, nbytes, median_us, check="PASS"):
    algbw = nbytes / median_us / 1e3  # GB/s
    return {
        "name": name,
        "median_us": median_us,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * 1.75,
        "check": check,
    }  # 2(n-1)/n at 8 ranks


def record(op, nbytes, xccl_us, nccl_us, check="PASS"):
    return {
        "op": op,
        "bytes": nbytes,
        "count": nbytes // 4,
        "dtype": "float32",
        "nranks": 8,
        # The bench's route counters: every call of the size on xccl's kernels.
        "backend": {**side("xccl", nbytes, xccl_us, check), "routes": {"kernel": 80}},
        "reference": side("nccl", nbytes, nccl_us),
    }


META = {
    "xccl_version": "0.1",
    "torch_version": "2.14.1",
    "nranks": 8,
    "device": "NVIDIA H200",
    "dtype": "float32",
    "host": "h",
    "created": "2026-12-01T00:00:00+00:00",
    "method": {"timing": "batch", "batch_calls": 10, "graph_calls": 0},
    "xccl_gpu_algo": "kernel",
}


def test_rows_give_both_times_the_ratio_and_both_busbw():
    rows = markdown.table(
        [record("all_reduce", 8, 10.0, 25.0), record("all_gather", 256 * MiB, 2000.0, 1600.0)]
    ).splitlines()
    assert rows[0] == (
        "| op | size | NCCL us | xccl us | xccl/NCCL | NCCL algbw | xccl algbw "
        "| NCCL busbw | xccl busbw | check |"
    )
    assert rows[1].count("|") == 11
    assert rows[2] == "| all_reduce | 8 B | 25.0 | 10.0 | 0.40 | 0.0 | 0.0 | 0.0 | 0.0 | PASS |"
    # 256 MiB in 2000 us: 134.2 GB/s algbw, x 1.75 = 234.9 GB/s busbw (NCCL: 167.8, 293.6).
    assert rows[3] == (
        "| all_gather | 256 MiB | 1600 | 2000 | 1.25 | 167.8 | 134.2 | 293.6 | 234.9 | PASS |"
    )


def test_verdicts_follow_issue_9s_targets():
    met = markdown.verdicts(
        [
            record("all_reduce", 8, 10.0, 25.0),
            record("all_reduce", 256 * KiB, 20.0, 50.0),
            record("all_reduce", 1 * MiB, 90.0, 100.0),
        ]
    )
    assert met[0] == "all_reduce <= 256 KiB: worst xccl/NCCL 0.40 at 256 KiB (target <= 0.5: met)"
    assert met[1] == "xccl slower than NCCL at 0 of 3 sizes"
    missed = markdown.verdicts(
        [
            record("all_reduce", 8, 15.0, 25.0),
            record("reduce_scatter", 8 * MiB, 120.0, 100.0, check="FAIL"),
        ]
    )
    assert missed[0].endswith("0.60 at 8 B (target <= 0.5: NOT met)")
    assert missed[1] == "xccl slower than NCCL at 1 of 2 sizes: reduce_scatter 8 MiB (1.20)"
    assert missed[2] == "check FAILED at 1 sizes: reduce_scatter 8 MiB"


def test_headings_name_the_backends_measured():
    entry = record("all_reduce", 8, 10.0, 20.0)
    entry["reference"]["name"] = "gloo"
    assert (
        markdown.table([entry])
        .splitlines()[0]
        .startswith("| op | size | gloo us | xccl us | xccl/gloo | gloo algbw | xccl algbw |")
    )
    # The small-message target is stated against NCCL: no verdict against another reference.
    assert markdown.verdicts([entry]) == ["xccl slower than gloo at 0 of 1 sizes"]


def test_a_row_without_a_reference_time_has_no_ratio():
    entry = record("all_reduce", 64, 5.0, 5.0)
    entry["reference"]["median_us"] = None
    assert markdown.ratio(entry) is None
    assert "| - | 5.0 | - |" in markdown.table([entry])  # NCCL us, xccl us, ratio
    assert markdown.verdicts([entry]) == []


def test_document_has_a_header_a_section_per_run_and_the_runs_that_did_not_finish():
    graph_meta = {
        **META,
        "xccl_gpu_algo": None,
        "method": {"timing": "batch", "batch_calls": 10, "graph_calls": 20},
    }
    text = markdown.document(
        [
            ("kernel", {"meta": META, "results": [record("all_reduce", 8, 10.0, 25.0)]}),
            ("graph", {"meta": graph_meta, "results": [record("all_reduce", 8, 4.0, 9.0)]}),
        ],
        missing=[("vendor", "the 200 s budget is spent")],
    )
    assert text.startswith("xccl 0.1: xccl vs NCCL, torch 2.14.1, 8 x NVIDIA H200")
    assert "### kernel\n\n8 ranks on NVIDIA H200, float32, XCCL_GPU_ALGO=kernel, eager" in text
    assert "XCCL_GPU_ALGO=auto (xccl's own plan), CUDA graph of 20 calls per replay" in text
    assert "batch of 10 calls per synchronize" in text
    assert "| all_reduce | 8 B | 9.0 | 4.0 | 0.44 |" in text
    assert text.endswith("### vendor\n\nnot run: the 200 s budget is spent\n")
    assert markdown.document([]) == "No GPU benchmark run produced results.\n"


def test_command_line_writes_the_table_and_fails_on_a_missing_run(tmp_path, capsys):
    path = tmp_path / "kernel.json"
    path.write_text(json.dumps({"meta": META, "results": [record("all_reduce", 8, 10.0, 25.0)]}))
    out = tmp_path / "table.md"
    assert markdown.main([f"{path}=kernel route", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert out.read_text() == printed and "### kernel route" in printed
    assert markdown.main([str(path), str(tmp_path / "absent.json") + "=vendor"]) == 1
    assert "### vendor\n\nnot run: " in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# benchmarks/gpu_bench.py


def test_gpu_bench_sweeps_8_bytes_to_256_mib_on_three_ops_with_checks():
    bench = gpu_bench()
    command = bench.bench_command("auto", 8, "/out", 100)
    text = " ".join(command)
    assert "--nranks 8" in text and "--reference nccl" in text and "--timing batch" in text
    assert "--check" in command and "--json /out/auto.json" in text
    sizes = options.parse_sizes(command[command.index("--sizes") + 1])
    assert sizes[0] == 8 and sizes[-1] == 256 * MiB and 256 * KiB in sizes
    assert options.parse_ops(command[command.index("--ops") + 1]) == [
        "all_reduce",
        "all_gather",
        "reduce_scatter",
    ]
    graph = bench.bench_command("graph", 8, "/out", 100)
    assert graph[graph.index("--graph") + 1] == str(bench.GRAPH_CALLS)
    assert options.parse_sizes(graph[graph.index("--sizes") + 1])[-1] <= MiB
    # Every mode's options parse as xccl.bench's own.
    for mode in bench.MODES:
        options.parse_args(bench.bench_command(mode, 2, "/o", 60)[3:])


def test_gpu_bench_forces_each_route_through_the_environment():
    bench = gpu_bench()
    base = {
        "XCCL_GPU_ALGO": "two_shot",
        "RANK": "0",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "0",
        "PATH": "/bin",
    }
    assert bench.bench_env("auto", base) == {"PATH": "/bin"}
    assert bench.bench_env("kernel", base)["XCCL_GPU_ALGO"] == "kernel"
    assert bench.bench_env("vendor", base)["XCCL_GPU_ALGO"] == "nccl"


def test_gpu_bench_keeps_time_for_the_later_runs():
    bench = gpu_bench()
    kept = ["kernel", "graph", "auto", "vendor"]
    assert bench.run_limit(200, kept[1:]) == 200 - 3 * bench.DEFAULT_MIN_RUN_S
    assert bench.run_limit(40, []) == 40


def test_gpu_bench_leaves_out_the_least_valuable_modes_first():
    bench = gpu_bench()
    modes = list(bench.MULTI_GPU_MODES)
    # A short budget runs the first, most valuable mode with all of it.
    kept, dropped = bench.keep_modes(modes, 40)
    assert kept == ["kernel"] and dropped == ["graph", "auto", "vendor"]
    assert bench.run_limit(40, kept[1:]) == 40
    assert bench.keep_modes(modes, 4 * bench.DEFAULT_MIN_RUN_S) == (modes, [])
    assert bench.keep_modes(modes, 10) == ([], modes)
    one = list(bench.ONE_GPU_MODES)
    assert bench.keep_modes(one, 45) == (["share2", "share4"], ["world1"])
    assert bench.keep_modes(one, 30) == (["share2"], ["share4", "world1"])


def test_gpu_bench_one_gpu_modes_share_the_gpu_on_the_kernel_route_without_nccl():
    bench = gpu_bench()
    for mode, ranks in (("share2", 2), ("share4", 4)):
        command = bench.bench_command(mode, 1, "/out", 60)
        assert command[command.index("--nranks") + 1] == str(ranks)
        assert "--share-gpu" in command and "--check" in command
        assert command[command.index("--reference") + 1] == "none"
        assert bench.bench_env(mode, {})["XCCL_GPU_ALGO"] == "kernel"
        sizes = options.parse_sizes(command[command.index("--sizes") + 1])
        assert sizes[0] == 8 and sizes[-1] == 256 * MiB
        parsed = options.parse_args(command[3:])
        assert parsed.share_gpu and parsed.reference == "none"
    world1 = bench.bench_command("world1", 1, "/out", 60)
    assert world1[world1.index("--nranks") + 1] == "1"
    assert world1[world1.index("--reference") + 1] == "nccl"
    # NCCL cannot be the reference of ranks sharing a GPU: a usage error, not a hang.
    with pytest.raises(SystemExit):
        options.parse_args(["--device", "cuda", "--share-gpu", "--reference", "nccl"])
    with pytest.raises(SystemExit):
        options.parse_args(["--share-gpu"])


def test_gpu_bench_dry_run_prints_one_command_per_mode(capsys, tmp_path):
    bench = gpu_bench()
    assert (
        bench.main(
            ["--dry-run", "--nranks", "4", "--out", str(tmp_path), "--modes", "vendor,graph"]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("XCCL_GPU_ALGO=nccl ") and "--graph" in lines[1]
    # One rank: the one-GPU modes.
    assert bench.main(["--dry-run", "--nranks", "1", "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.count("--share-gpu") for line in lines] == [1, 1, 0]
    with pytest.raises(SystemExit):
        bench.parse_args(["--out", str(tmp_path), "--modes", "auto,fast"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--out", str(tmp_path), "--dry-run"])


def test_one_gpu_tables_say_nccl_cannot_run_and_world_one_is_no_comparison():
    shared = record("all_reduce", 256 * MiB, 1000.0, 1.0)
    shared["reference"] = None
    meta = {**META, "nranks": 2, "reference": None, "share_gpu": True}
    one = {**META, "nranks": 1}
    text = markdown.document(
        [
            ("2 ranks", {"meta": meta, "results": [shared]}),
            ("world 1", {"meta": one, "results": [record("all_reduce", 8, 10.0, 5.0)]}),
        ],
        copy_gbps=2000.0,
    )
    assert "| op | size | xccl us | xccl algbw | xccl busbw | busbw/copy | NCCL | check |" in text
    # 256 MiB in 1000 us: 268.4 GB/s algbw; busbw x 1.75 (the record's factor) = 469.8 GB/s.
    assert "| all_reduce | 256 MiB | 1000 | 268.4 | 469.8 | 0.23 | n/a | PASS |" in text
    assert "NCCL cannot run several ranks on one GPU" in text
    assert "2 ranks sharing one NVIDIA H200, float32" in text
    assert "Copy roofline of this GPU, measured in the same run: 2000 GB/s" in text
    assert "world size 1: no byte crosses a link" in text and "not a comparison" in text
    # No issue-9 verdicts against NCCL at world size 1.
    assert "target <= 0.5" not in text and "slower than NCCL" not in text


def test_a_short_time_limit_runs_the_most_valuable_mode(tmp_path, monkeypatch, capsys):
    bench = gpu_bench()
    ran = []

    def fake_run(command, **kwargs):
        ran.append(command[command.index("--json") + 1].rsplit("/", 1)[-1].split(".")[0])
        with open(command[command.index("--json") + 1], "w", encoding="utf-8") as f:
            json.dump({"meta": META, "results": [record("all_reduce", 8, 10.0, 25.0)]}, f)
        return bench.subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(bench.subprocess, "run", fake_run)
    monkeypatch.setattr(bench, "markdown_module", lambda: markdown)
    status = bench.main(["--nranks", "8", "--out", str(tmp_path), "--time-limit", "40"])
    assert ran == ["kernel"]  # not the least valuable one
    assert status == 4  # nothing failed; modes were left out for lack of time
    table = (tmp_path / "gpu_bench.md").read_text()
    assert "### eager, kernel route forced" in table and "left out: 40 s cannot give it" in table


def test_a_kernel_run_claims_only_the_rows_its_route_counters_prove():
    # A forced kernel that cannot run falls back with exact results: the check passes, the
    # counters say host (or nothing was counted), and the row must not read as the kernels'.
    fell_back = record("all_gather", 2 * MiB, 30.0, 20.0)
    fell_back["backend"]["routes"] = {"kernel": 0, "host": 80, "vendor": 0, "local": 0}
    uncounted = record("all_reduce", 8, 9.0, 4.0)
    del uncounted["backend"]["routes"]
    doc = {"meta": META, "results": [record("all_reduce", 2 * MiB, 9.0, 4.0), fell_back, uncounted]}
    text = markdown.document([("kernel route", doc)])
    assert "| all_reduce | 2 MiB | 4.0 | 9.0 | 2.25 | " in text
    assert "| PASS; not kernel: host 80 |" in text
    assert "| PASS; not kernel: route not counted |" in text
    assert (
        "- route: NOT xccl's kernels at 2 of 3 rows: all_gather 2 MiB (host 80), "
        "all_reduce 8 B (route not counted)" in text
    )
    proven = {"meta": META, "results": [record("all_reduce", 8, 9.0, 4.0)]}
    assert "- route: all 1 rows counted on xccl's kernels" in markdown.document([("k", proven)])
    # A run on NCCL claims no kernel: no route marks.
    vendor = {"meta": {**META, "xccl_gpu_algo": "nccl"}, "results": [fell_back]}
    assert "not kernel" not in markdown.document([("v", vendor)])
