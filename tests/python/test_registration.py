"""`import xccl` makes backend "xccl" usable through every init method (env://, tcp://,
file://, an explicit store, and torchrun), its Options deep-copy and are honoured
(algorithm, timeout), and the group reports itself as "xccl"."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from collective_cases import Op, expected_reduction, rank_input
from dist_harness import HOST, Checker, free_port, result, run_checks, run_job, spawn, torchrun

CPU = torch.device("cpu")


def _check_group(chk: Checker, rank: int, world: int, label: str) -> None:
    import xccl

    chk.equal(f"{label}: dist.get_backend()", dist.get_backend(), "xccl")
    chk.equal(f"{label}: rank", dist.get_rank(), rank)
    chk.equal(f"{label}: world size", dist.get_world_size(), world)
    backend = dist.distributed_c10d._get_default_group()._get_backend(CPU)
    chk.true(
        f"{label}: CPU backend is ProcessGroupXccl",
        isinstance(backend, xccl.ProcessGroupXccl),
        repr(backend),
    )
    chk.equal(f"{label}: backend name", backend.name(), "xccl")
    x = rank_input(torch.float32, 1001, rank)
    dist.all_reduce(x)
    chk.equal(f"{label}: all_reduce", x, expected_reduction(Op("SUM"), torch.float32, 1001, world))


def _init_and_check(rank, world, method, where):
    chk = Checker(rank)
    timeout = timedelta(seconds=60)
    if method == "env":
        os.environ.update(
            MASTER_ADDR=HOST, MASTER_PORT=str(where), RANK=str(rank), WORLD_SIZE=str(world)
        )
        dist.init_process_group("xccl", init_method="env://", timeout=timeout)
    elif method == "env-default":  # no init_method at all: env:// is the default
        os.environ.update(
            MASTER_ADDR=HOST, MASTER_PORT=str(where), RANK=str(rank), WORLD_SIZE=str(world)
        )
        dist.init_process_group(backend="xccl", timeout=timeout)
    elif method == "tcp":
        dist.init_process_group(
            "xccl",
            init_method=f"tcp://{HOST}:{where}",
            rank=rank,
            world_size=world,
            timeout=timeout,
        )
    elif method == "file":
        dist.init_process_group(
            "xccl", init_method=f"file://{where}", rank=rank, world_size=world, timeout=timeout
        )
    elif method == "store":
        store = dist.FileStore(where, world)
        dist.init_process_group("xccl", store=store, rank=rank, world_size=world, timeout=timeout)
    else:
        raise ValueError(method)
    _check_group(chk, rank, world, method)
    dist.destroy_process_group()
    chk.true("destroy_process_group", not dist.is_initialized())
    return result(chk)


@pytest.mark.parametrize("method", ("env", "env-default", "tcp", "file", "store"))
def test_init_methods(method, tmp_path):
    where = free_port() if method in ("env", "env-default", "tcp") else str(tmp_path / "store")
    run_checks(_init_and_check, 2, method, where, init=False, min_checks=6)


TORCHRUN_SCRIPT = """
import os, sys
import torch
import torch.distributed as dist
import xccl

dist.init_process_group("xccl")
rank, world = dist.get_rank(), dist.get_world_size()
x = torch.arange(5, dtype=torch.float32) + rank
dist.all_reduce(x)
expected = sum(torch.arange(5, dtype=torch.float32) + r for r in range(world))
gathered = [None] * world
dist.all_gather_object(gathered, os.environ["LOCAL_RANK"])
with open(os.path.join(sys.argv[1], f"rank{rank}.txt"), "w") as f:
    f.write(f"{dist.get_backend()} {world} {torch.equal(x, expected)} {','.join(gathered)}")
dist.destroy_process_group()
"""


def test_torchrun(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(TORCHRUN_SCRIPT))
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = "1"
    run_job(torchrun(2, 0, str(script), str(tmp_path)), env, timeout=400, what="torchrun")
    for rank in range(2):
        text = (tmp_path / f"rank{rank}.txt").read_text()
        assert text == "xccl 2 True 0,1", f"rank {rank} wrote {text!r}"


def test_options_are_deep_copyable():
    import xccl

    options = xccl.Options()
    options.algorithm = "ring"
    options.timeout = timedelta(seconds=7)
    options.store_host = "127.0.0.1"
    for clone in (copy.deepcopy(options), copy.copy(options)):
        assert type(clone) is xccl.Options
        assert clone is not options
        assert clone.algorithm == "ring"
        assert clone.timeout == timedelta(seconds=7)
        assert clone.store_host == "127.0.0.1"
        clone.algorithm = "direct"
        clone.timeout = timedelta(seconds=9)
        assert options.algorithm == "ring" and options.timeout == timedelta(seconds=7)
    # A structure holding options, as DeviceMesh/FSDP configurations do.
    holder = copy.deepcopy({"pg_options": options, "n": 1})
    assert holder["pg_options"].algorithm == "ring"
    assert holder["pg_options"] is not options


def _group_options(rank, world, algorithm):
    import xccl

    chk = Checker(rank)
    backend = dist.distributed_c10d._get_default_group()._get_backend(CPU)
    options = backend.options
    chk.true("backend options are xccl.Options", isinstance(options, xccl.Options), repr(options))
    chk.equal("pg_options algorithm reaches the backend", options.algorithm, algorithm)
    chk.equal(
        "init_process_group timeout reaches the backend", options.timeout, timedelta(seconds=42)
    )
    clone = copy.deepcopy(options)
    chk.equal(
        "deep copy of the live group's options",
        (clone.algorithm, clone.timeout),
        (algorithm, timedelta(seconds=42)),
    )
    # Results stay exact with the algorithm forced, on sizes either side of the small-message
    # threshold (64 KiB) and with a partial last ring chunk (512 KiB).
    for n in (1, 7, 1001, 40_000, 300_001):
        for dtype in (torch.float32, torch.int8):
            x = rank_input(dtype, n, rank)
            out = x.clone()
            dist.all_reduce(out)
            chk.equal(
                f"{algorithm}: all_reduce {dtype} n={n}",
                out,
                expected_reduction(Op("SUM"), dtype, n, world),
            )
            gathered = torch.empty(n * world, dtype=dtype)
            dist.all_gather_into_tensor(gathered, x)
            chk.equal(
                f"{algorithm}: all_gather_into_tensor {dtype} n={n}",
                gathered,
                torch.cat([rank_input(dtype, n, r) for r in range(world)]),
            )
            scattered = torch.empty(n, dtype=dtype)
            dist.reduce_scatter_tensor(
                scattered, rank_input(dtype, n * world, rank), op=dist.ReduceOp.MAX
            )
            expected = expected_reduction(Op("MAX"), dtype, n * world, world)
            chk.equal(
                f"{algorithm}: reduce_scatter_tensor MAX {dtype} n={n}",
                scattered,
                expected[rank * n : (rank + 1) * n],
            )
            for root in sorted({0, world - 1}):
                b = x.clone() if rank == root else torch.zeros(n, dtype=dtype)
                dist.broadcast(b, src=root)
                chk.equal(
                    f"{algorithm}: broadcast root={root} {dtype} n={n}",
                    b,
                    rank_input(dtype, n, root),
                )
                r = x.clone()
                dist.reduce(r, dst=root, op=dist.ReduceOp.MIN)
                if rank == root:
                    chk.equal(
                        f"{algorithm}: reduce MIN root={root} {dtype} n={n}",
                        r,
                        expected_reduction(Op("MIN"), dtype, n, world),
                    )
    return result(chk)


@pytest.mark.parametrize("world_size", (3, 4))
@pytest.mark.parametrize("algorithm", ("ring", "direct"))
def test_pg_options_algorithm_is_honoured(algorithm, world_size):
    run_checks(
        _group_options,
        world_size,
        algorithm,
        pg_options={"algorithm": algorithm},
        pg_timeout=42.0,
        min_checks=50,
    )


def _env_algorithm(rank, world):
    chk = Checker(rank)
    chk.equal("XCCL_ALGO reached the rank", os.environ.get("XCCL_ALGO"), "ring")
    for n in (7, 300_001):
        x = rank_input(torch.bfloat16, n, rank)
        dist.all_reduce(x)
        chk.equal(
            f"XCCL_ALGO=ring all_reduce bfloat16 n={n}",
            x,
            expected_reduction(Op("SUM"), torch.bfloat16, n, world),
        )
    return result(chk)


def test_xccl_algo_environment_variable():
    run_checks(_env_algorithm, 3, env={"XCCL_ALGO": "ring"}, min_checks=3)


def _noop(rank, world):
    return rank


@pytest.mark.parametrize("source", ("pg_options", "XCCL_ALGO"))
def test_unknown_algorithm_is_rejected_at_group_creation(source):
    kwargs = (
        {"pg_options": {"algorithm": "bogus"}}
        if source == "pg_options"
        else {"env": {"XCCL_ALGO": "bogus"}}
    )
    outcomes = spawn(_noop, 2, pg_timeout=20.0, timeout=120, **kwargs)
    for o in outcomes:
        assert o.error_type in ("ValueError", "RuntimeError", "DistBackendError"), o.describe()
        assert "bogus" in o.error, o.describe()


def test_registration_status():
    import xccl
    from xccl import _registration

    assert xccl.BACKEND_NAME == "xccl"
    assert _registration.status() == "registered"
    assert "xccl" in dist.Backend.backend_list
    assert dist.Backend("xccl") == "xccl"
    assert issubclass(xccl.ProcessGroupXccl, torch._C._distributed_c10d.Backend)
    # Registered for both device types, so one group serves CPU and CUDA tensors.
    assert dist.Backend.backend_capability["xccl"] == ["cpu", "cuda"]


AUTOLOAD_PROBE = """
import json, sys
import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

loaded = lambda: sorted(m for m in sys.modules if m == "xccl" or m.startswith("xccl."))
seen = {"registered": "XCCL" in c10d.Backend._plugins, "loaded": loaded()}
if seen["registered"]:
    seen["available"] = dist.is_backend_available("xccl")
    dist.init_process_group("xccl", init_method=sys.argv[1], rank=0, world_size=1)
    backend = c10d._get_default_group()._get_backend(torch.device("cpu"))
    seen["backend"] = type(backend).__name__
    x = torch.ones(3)
    dist.all_reduce(x)
    seen["all_reduce"] = x.tolist()
    dist.destroy_process_group()
    import xccl.env
    seen["after"] = [m for m in ("xccl", "xccl._native", "xccl._C") if m in sys.modules]
    seen["defaults_applied"] = xccl.env.last_report() is not None
print(json.dumps(seen))
"""


def test_autoload_registers_the_name_and_loads_xccl_on_first_use(tmp_path):
    """torch loads the `torch.backends` entry point at every `import torch`, distributed or not:
    it registers the name "xccl" and nothing else; xccl itself (its extensions, the environment
    defaults) loads when the first group is created with it. With XCCL_NO_AUTOLOAD=1 nothing of
    xccl is imported and the name is not registered (the entry point lives outside the package,
    python/xccl_autoload.py, so loading it does not import the package)."""
    unset = ("TORCH_DEVICE_BACKEND_AUTOLOAD", "XCCL_NO_ENV_DEFAULTS", "XCCL_DISABLE_ALIAS")
    environ = {k: v for k, v in os.environ.items() if k not in unset}

    def probe(switch):
        run = subprocess.run(
            [sys.executable, "-c", AUTOLOAD_PROBE, f"file://{tmp_path / switch}.store"],
            env=dict(environ, XCCL_NO_AUTOLOAD=switch, OMP_NUM_THREADS="1"),
            cwd=tmp_path,  # not the repository: only the installed package counts
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        return json.loads(run.stdout.strip().splitlines()[-1])

    assert probe("1") == {"registered": False, "loaded": []}
    assert probe("0") == {
        "registered": True,
        "loaded": [],  # at `import torch`: neither the package nor xccl._native nor xccl._C
        "available": True,
        "backend": "ProcessGroupXccl",
        "all_reduce": [1.0, 1.0, 1.0],
        "after": ["xccl", "xccl._native", "xccl._C"],  # loaded by the first group's creation
        "defaults_applied": True,
    }


def test_import_xccl_loads_no_tooling(tmp_path):
    """`import xccl` loads what a job needs (the backend, its environment defaults, windows, the
    flight recorder), not the command-line tooling: bench, tune, doctor, plan, the CLI."""
    code = "import json, sys, xccl; print(json.dumps(sorted(sys.modules)))"
    run = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,  # not the repository: only the installed package counts
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert "xccl._C" in loaded  # the probe sees the package's modules
    tooling = ("xccl.bench", "xccl.tune", "xccl.doctor", "xccl.plan", "xccl.cli", "xccl.__main__")
    found = [m for m in loaded if any(m == t or m.startswith(t + ".") for t in tooling)]
    assert not found, f"`import xccl` loaded tooling a job never uses: {found}"


BROKEN_PROBE = """
import json, sys, warnings
import torch
import torch.distributed as dist

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    seen = {"available": dist.is_backend_available("xccl")}
seen["warned"] = [str(w.message) for w in caught if "xccl" in str(w.message)]
try:
    dist.init_process_group("xccl", init_method=sys.argv[1], rank=0, world_size=1)
    seen["error"] = None
except Exception as err:
    seen["error"] = f"{type(err).__name__}: {err}"
print(json.dumps(seen))
"""


def test_a_build_that_cannot_load_says_so_at_first_use(tmp_path):
    """The entry point registers the name without loading xccl, so a build that cannot load (a
    stand-in package raising ImportError, found first on the path) shows at first use:
    `dist.is_backend_available("xccl")` answers False with one warning naming the cause, and
    creating a group raises that ImportError, not torch's "doesn't have XCCL built in"."""
    broken = tmp_path / "broken" / "xccl"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("stand-in: xccl._C cannot load")\n')
    unset = ("TORCH_DEVICE_BACKEND_AUTOLOAD", "XCCL_NO_AUTOLOAD", "XCCL_DISABLE_ALIAS")
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    environ["PYTHONPATH"] = str(tmp_path / "broken")
    run = subprocess.run(
        [sys.executable, "-c", BROKEN_PROBE, f"file://{tmp_path / 'store'}"],
        env=environ,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen == {
        "available": False,
        "warned": ["xccl: registered, but it cannot be loaded: stand-in: xccl._C cannot load"],
        "error": "ImportError: stand-in: xccl._C cannot load",
    }
