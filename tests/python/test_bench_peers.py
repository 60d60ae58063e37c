"""`python -m xccl.bench --reference mpi,deepspeed,floor,...`: the peers beside xccl.

The options, the tables, the mpirun line and the floor run everywhere; the Open MPI and
DeepSpeed runs only where those optional installs are present (CI has neither: they skip and
say so).
"""

import importlib.util
import shutil

import pytest
from test_bench import record, run_bench_json, side
from xccl_modules import load

options = load("bench.options")
peers = load("bench.peers")
report = load("bench.report")
launch = load("bench.launch")
method = load("bench.method")

KiB = 1 << 10

# ---------------------------------------------------------------------------------------------
# Options


def test_references_are_a_list_in_the_order_given_without_repeats():
    assert options.parse_references("mpi, deepspeed,floor,gloo,mpi") == [
        "mpi",
        "deepspeed",
        "floor",
        "gloo",
    ]
    assert options.parse_references("auto") == ["auto"]
    for text in ("", " , ", "auto,gloo", "mpi,none"):
        with pytest.raises(ValueError):
            options.parse_references(text)


def test_default_reference_stays_auto_and_a_list_is_parsed():
    assert options.parse_args([]).references == ["auto"]
    args = options.parse_args(["--reference", "mpi,deepspeed,floor,gloo"])
    assert args.references == ["mpi", "deepspeed", "floor", "gloo"]
    # The CPU peers measure CPU tensors: auto resolves to the CPU even under a GPU launcher.
    assert args.device == "cpu"
    assert options.parse_args(["--reference", "floor"]).device == "auto"
    # Several process-group references are captured like one.
    assert options.parse_args(["--reference", "nccl,xccl", "--device", "cuda", "--graph", "4"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--reference", "mpi", "--device", "cuda"], "no --device cuda"),
        (["--reference", "floor,nccl", "--device", "cuda", "--graph", "4"], "no --graph"),
        (["--reference", "deepspeed", "--ops", "put"], "compare against one process"),
        (["--reference", "gloo,mpi", "--netns-hosts", "2"], "compares with gloo only"),
        (["--reference", "auto,mpi"], "cannot be combined"),
    ],
)
def test_peers_refuse_what_they_cannot_measure(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        options.parse_args(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# What each peer has, what to install, how mpirun starts the ranks


def test_absent_collectives_and_dtypes_are_named_not_faked():
    assert peers.absent("mpi", "all_to_all", "float32") is None
    assert peers.absent("mpi", "reduce_scatter", "int8") is None
    assert "bfloat16" in peers.absent("mpi", "all_reduce", "bfloat16")
    assert "float16" in peers.absent("mpi", "broadcast", "float16")
    assert peers.absent("deepspeed", "all_reduce", "float32") is None
    for op in ("all_gather", "reduce_scatter", "all_to_all", "broadcast"):
        assert "all_reduce (sum) only" in peers.absent("deepspeed", op, "float32")
    assert "int32" in peers.absent("deepspeed", "all_reduce", "int32")
    assert peers.absent("floor", "all_to_all", "bfloat16") is None


def test_a_missing_install_is_named_with_its_commands():
    nothing = lambda name: None  # noqa: E731
    everything = lambda name: object()  # noqa: E731
    why = peers.missing(["mpi", "deepspeed"], find_spec=nothing, which=lambda name: None)
    assert "apt-get install openmpi-bin libopenmpi-dev" in why and "pip install mpi4py" in why
    assert "pip install deepspeed" in why
    # mpi4py without an mpirun on PATH is still missing Open MPI.
    assert "openmpi-bin" in peers.missing(["mpi"], find_spec=everything, which=lambda n: None)
    assert peers.missing(["mpi", "deepspeed"], find_spec=everything, which=lambda n: n) is None
    assert peers.missing(["floor", "gloo"], find_spec=nothing, which=lambda n: None) is None


def test_the_bench_refuses_to_start_without_the_peer_and_says_what_to_install(monkeypatch, capsys):
    monkeypatch.setattr(launch.peers, "missing", lambda refs: "--reference mpi needs X")
    assert launch.main(["--reference", "mpi"]) == 2
    assert "--reference mpi needs X" in capsys.readouterr().err


def test_mpi_takes_its_ranks_from_mpi_not_from_torchrun(monkeypatch, capsys):
    monkeypatch.setattr(launch.peers, "missing", lambda refs: None)
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0")):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("OMPI_COMM_WORLD_SIZE", raising=False)
    assert launch.main(["--reference", "mpi"]) == 2
    assert "takes its ranks from MPI" in capsys.readouterr().err


def test_mpirun_line_uses_the_shared_memory_transport_and_marks_its_ranks():
    line = peers.mpirun_command(2, "/py", ["--ops", "all_reduce"], euid=1000, cores=2)
    assert line[:3] == ["mpirun", "-n", "2"]
    text = " ".join(line)
    assert "--bind-to none" in text and "--mca btl self,vader" in text and "--mca pml ob1" in text
    assert "--mca btl_vader_single_copy_mechanism cma" in text
    assert line[-5:] == ["-m", "xccl.bench", "--ops", "all_reduce", "--under-mpirun"]
    assert "--allow-run-as-root" not in line and "--oversubscribe" not in line
    as_root = peers.mpirun_command(4, "/py", [], euid=0, cores=2)
    assert "--allow-run-as-root" in as_root and "--oversubscribe" in as_root
    assert peers.under_mpirun(options.parse_args(["--under-mpirun"]), {})
    assert peers.under_mpirun(options.parse_args([]), {"OMPI_COMM_WORLD_SIZE": "2"})
    assert not peers.under_mpirun(options.parse_args([]), {})


# ---------------------------------------------------------------------------------------------
# Tables with several references


def several(nbytes, xccl_us, mpi_us=None, floor_us=5.0, gloo_us=500.0, check="PASS"):
    """A record of xccl against mpi (absent when mpi_us is None), floor and gloo."""
    entry = record("all_reduce", nbytes, side("xccl", xccl_us, check))
    entry["reference"] = (
        side("mpi", mpi_us, check) if mpi_us else method.absent_record("mpi", "no float16")
    )
    entry["more_references"] = [side("floor", floor_us), side("gloo", gloo_us, check)]
    return entry


def test_every_reference_has_p50_p90_and_the_floor_its_difference():
    rows = [several(4 * KiB, 12.0, 3.0), several(64 * KiB, 40.0, None, check="FAIL")]
    lines = report.format_table(rows, "# all_reduce").splitlines()
    header = lines[1].split()
    for name in ("xccl", "mpi", "floor", "gloo"):
        assert f"{name} p50".split() == header[header.index(name) : header.index(name) + 2]
    assert header.count("p90") == 4 and header.count("speedup") == 2  # none for the floor
    assert "xccl-floor" in header
    assert len({len(line) for line in lines[1:]}) == 1  # aligned
    first = lines[3].split()
    assert first[first.index("12.0") :][:3] == ["12.0", "10.8", "14.4"]  # p50, p10, p90
    assert "0.25x" in first and "41.67x" in first  # mpi 3/12, gloo 500/12
    assert "7.0" in first  # xccl 12.0 minus floor 5.0
    second = lines[4].split()
    assert "absent" in second and "FAIL" in lines[4]
    assert "mpi" not in lines[4].split("FAIL")[1]  # an absent side is never blamed


def test_a_loaded_run_gives_every_reference_its_loaded_columns():
    rows = [several(4 * KiB, 12.0, 3.0), several(64 * KiB, 40.0, None)]
    rows[0]["loaded"] = {"load": 2, **several(4 * KiB, 24.0, 6.0)}
    rows[1]["loaded"] = {"load": 2, **several(64 * KiB, 80.0, None)}
    lines = report.format_table(rows, "# all_reduce").splitlines()
    assert "load 2: xccl" in lines[1] and len({len(line) for line in lines[1:]}) == 1
    assert lines[1].split()[-4:] == ["gloo", "p90", "speedup", "check"]
    # xccl loaded p50, p90; mpi p50, p90, speedup; floor p50, p90, xccl-floor; gloo likewise.
    assert lines[3].split()[-12:] == (
        "24.0 28.8 6.0 7.2 0.25x 5.0 6.0 19.0 500.0 600.0 20.83x PASS".split()
    )
    assert lines[4].split().count("absent") == 2  # quiet and loaded


def test_summary_has_a_line_per_reference_and_csv_a_row_per_side():
    rows = [several(4 * KiB, 12.0, 3.0), several(64 * KiB, 40.0, 20.0)]
    assert report.summary_line("all_reduce", rows, 0).startswith(
        "all_reduce vs mpi: xccl faster at 0 of 2 sizes"
    )
    assert report.summary_line("all_reduce", rows, 2).startswith(
        "all_reduce vs gloo: xccl faster at 2 of 2 sizes"
    )
    csv = report.csv_rows(rows)
    assert [r["role"] for r in csv[:4]] == ["backend", "reference", "reference2", "reference3"]
    assert [r["backend"] for r in csv[:4]] == ["xccl", "mpi", "floor", "gloo"]
    assert report.op_title("all_reduce", {**META, "references": ["mpi", "floor"]}).count("vs mpi")


META = {"dtype": "float32", "nranks": 2, "device": "cpu", "backend": "xccl", "reference": "mpi"}


def test_deepspeed_fallback_to_torch_all_reduce_is_refused_loudly():
    pytest.importorskip("torch")
    sides = load("bench.sides")
    dist = sides.dist
    before = dist.all_reduce
    with pytest.raises(RuntimeError, match="shared-memory all_reduce is not in use"):
        with sides.refusing_torch_all_reduce():
            dist.all_reduce(None)  # what deepspeed.comm does when its op is not taken
    assert dist.all_reduce is before


# ---------------------------------------------------------------------------------------------
# End to end: the floor always; Open MPI and DeepSpeed where installed


def test_floor_and_gloo_beside_xccl_in_one_run(tmp_path):
    proc, result = run_bench_json(
        tmp_path,
        "--nranks 2 --ops all_reduce,broadcast --sizes 4K --iters 5 --check --reference floor,gloo",
    )
    assert result["meta"]["references"] == ["floor", "gloo"]
    for r in result["results"]:
        floor, gloo = r["reference"], r["more_references"][0]
        assert floor["name"] == "floor" and floor["check"] is None  # moves no data: unchecked
        assert 0 < floor["median_us"] <= floor["p90_us"]
        assert gloo["name"] == "gloo" and gloo["check"] == "PASS"
        assert r["backend"]["check"] == "PASS"
    assert "xccl-floor" in proc.stdout and "check: PASS (2 sizes)" in proc.stdout


def _installed(module: str, program: str | None = None) -> str | None:
    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed (an optional peer: benchmarks/README.md)"
    if program and shutil.which(program) is None:
        return f"{program} is not on PATH (Open MPI: benchmarks/README.md)"
    return None


@pytest.mark.skipif(
    bool(_installed("mpi4py", "mpirun")), reason=str(_installed("mpi4py", "mpirun"))
)
def test_open_mpi_runs_every_collective_correctly_beside_xccl(tmp_path):
    proc, result = run_bench_json(
        tmp_path, "--nranks 2 --ops all --sizes 4K --iters 5 --check --reference mpi"
    )
    assert {r["op"] for r in result["results"]} == set(options.OPS)
    for r in result["results"]:
        assert r["reference"]["name"] == "mpi" and r["reference"]["check"] == "PASS"
        assert r["reference"]["median_us"] > 0 and r["backend"]["check"] == "PASS"


@pytest.mark.skipif(bool(_installed("deepspeed")), reason=str(_installed("deepspeed")))
def test_deepspeed_shm_all_reduce_is_taken_and_correct(tmp_path):
    # The first run on a machine compiles DeepSpeed's shm op (minutes); later runs load it.
    proc, result = run_bench_json(
        tmp_path,
        "--nranks 2 --ops all_reduce,broadcast --sizes 4K,64K --iters 5 --check "
        "--reference deepspeed",
        timeout=900,
    )
    reduced = [r for r in result["results"] if r["op"] == "all_reduce"]
    assert len(reduced) == 2
    for r in reduced:
        assert r["reference"]["name"] == "deepspeed" and r["reference"]["check"] == "PASS"
        assert r["reference"]["median_us"] > 0
    for r in result["results"]:
        if r["op"] == "broadcast":
            assert "all_reduce (sum) only" in r["reference"]["absent"]
