"""`python -m xccl.bench --netns-hosts`: the merging and the table (pure, from the source tree),
the options, and one tiny run across two namespace hosts end to end (skipped, saying why, where
namespaces cannot be made)."""

import os
import subprocess
import sys

import pytest
from xccl_modules import load

options = load("bench.options")
netns = load("bench.netns")
hosts = load("bench.hosts")


def _side(name: str, median_us: float, busbw: float, check=None) -> dict:
    return {"name": name, "median_us": median_us, "busbw_gbps": busbw, "check": check}


def _record(op, size, backend, reference) -> dict:
    return {
        "op": op,
        "bytes": size,
        "count": size // 4,
        "dtype": "float32",
        "nranks": 4,
        "backend": backend,
        "reference": reference,
    }


def test_layout_spreads_ranks_host_by_host():
    assert netns.layout(4, 2) == [2, 2]
    assert netns.layout(5, 3) == [2, 2, 1]
    assert netns.layout(3, 3) == [1, 1, 1]


def test_merge_puts_every_engine_beside_the_best_gloo():
    tcp = _record("all_reduce", 1024, _side("xccl", 10, 2.0), _side("gloo", 40, 0.5))
    ofi = _record("all_reduce", 1024, _side("xccl", 20, 1.0), _side("gloo", 30, 0.7))
    runs = {"tcp": {"results": [tcp]}, "ofi": {"results": [ofi]}}
    (row,) = netns.merge(runs)
    assert list(row["nets"]) == ["tcp", "ofi"]
    assert row["gloo"]["median_us"] == 30  # the faster of gloo's two runs
    assert row["speedup"] == {"tcp": 3.0, "ofi": 1.5}
    table = netns.format_table([row], "title")
    lines = table.splitlines()
    assert lines[0] == "title"
    assert lines[1].split() == ["size", "xccl/tcp", "x", "gloo", "xccl/ofi", "x", "gloo", "gloo"]
    assert lines[2].split() == ["1", "KiB", "2.00", "3.00x", "1.00", "1.50x", "0.700"]


def test_merge_table_has_a_check_column_that_fails_when_any_side_failed():
    runs = {
        "tcp": {
            "results": [
                _record("broadcast", 8, _side("xccl", 5, 1, "PASS"), _side("gloo", 9, 1, "PASS")),
                _record("broadcast", 16, _side("xccl", 5, 1, "FAIL"), _side("gloo", 9, 1, "PASS")),
            ]
        }
    }
    lines = netns.format_table(netns.merge(runs)).splitlines()
    assert lines[0].split()[-1] == "check"
    assert [line.split()[-1] for line in lines[1:]] == ["PASS", "FAIL"]


def test_merge_puts_the_loaded_measurements_beside_the_quiet_ones():
    def measured(xccl_us, gloo_us, check="PASS"):
        busbw = 1024 / xccl_us / 1e3
        return _record(
            "all_reduce",
            1024,
            _side("xccl", xccl_us, busbw, check),
            _side("gloo", gloo_us, 0.01, "PASS"),
        )

    tcp = {**measured(10, 40), "loaded": {"load": 2, **measured(20, 100, "FAIL")}}
    ofi = {**measured(20, 30), "loaded": {"load": 2, **measured(50, 90)}}
    (row,) = netns.merge({"tcp": {"results": [tcp]}, "ofi": {"results": [ofi]}})
    assert row["loaded"]["load"] == 2
    assert row["loaded"]["speedup"] == {"tcp": 4.5, "ofi": 1.8}  # against the best loaded gloo
    lines = netns.format_table([row]).splitlines()
    assert "load 2: xccl/tcp" in lines[0] and "load 2: xccl/ofi" in lines[0]
    assert "4.50x" in lines[1] and "1.80x" in lines[1] and "3.00x" in lines[1]
    assert lines[1].split()[-1] == "FAIL"  # a loaded side failed its check


@pytest.mark.parametrize(
    "argv, problem",
    [
        (["--netns-hosts", "3", "--nranks", "2"], "2 to --nranks"),
        (["--netns-hosts", "1"], "2 to --nranks"),
        (["--netns-hosts", "2", "--csv", "x.csv"], "--json only"),
        (["--netns-hosts", "2", "--nets", "tcp,rdma"], "unknown net"),
    ],
)
def test_options_refuse_what_namespace_hosts_cannot_do(argv, problem, capsys):
    with pytest.raises(SystemExit):
        options.parse_args(argv)
    assert problem in capsys.readouterr().err


def test_options_default_to_tcp_and_drop_repeats():
    args = options.parse_args(["--netns-hosts", "2", "--nranks", "4", "--nets", "tcp,ofi,tcp"])
    assert (args.netns_hosts, args.nets) == (2, ["tcp", "ofi"])
    assert options.parse_args([]).netns_hosts == 0


_unavailable = hosts.unavailable_reason()


@pytest.mark.skipif(_unavailable is not None, reason=str(_unavailable))
def test_bench_runs_across_two_namespace_hosts_and_prints_one_table(tmp_path):
    pytest.importorskip("xccl._C")
    out = tmp_path / "out.json"
    argv = ["--netns-hosts", "2", "--nranks", "3", "--ops", "all_reduce,all_gather"]
    argv += ["--sizes", "1K,64K", "--iters", "3", "--warmup", "1", "--check", "--json", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "xccl.bench", *argv],
        capture_output=True,
        text=True,
        timeout=240,
        env={k: v for k, v in os.environ.items() if not k.startswith("XCCL_")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for op in ("all_reduce", "all_gather"):
        assert f"# {op}  float32, 3 ranks on 2 namespace hosts [2, 1]" in done.stdout
    rows = [line.split() for line in done.stdout.splitlines() if line.strip().endswith("PASS")]
    assert len(rows) == 4  # two ops x two sizes, every side checked
    assert all(float(row[3].rstrip("x")) > 0 for row in rows)  # xccl/tcp's speedup over gloo
    assert out.exists()
    assert not [
        ns for ns in os.listdir("/run/netns") if "xccl-ns-" in ns and str(os.getpid()) in ns
    ]
