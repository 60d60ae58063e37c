"""Backend "xccl" resolves to xccl whatever order torch's registrations happen in.

torch 2.14 and later ship their own "xccl" entry in the `torch.distributed.backends` entry-point
group (a registrar for Intel's native backend, which a CUDA or CPU torch lacks), loaded lazily
the first time a group names the backend; xccl registers itself from its `torch.backends`
autoload entry point at `import torch` (the name only; xccl itself loads when the first group
is created), or at `import xccl`. Each scenario runs in a fresh interpreter, with the entry
points as discovered or in reverse order, torch's registrar run before or after xccl's
registration, and xccl registered by autoload or by `import xccl`; each creates a one-rank group
and checks which backend serves it and what `dist.is_backend_available("xccl")` says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

SCENARIO = r"""
import importlib.metadata as metadata, json, sys

load, order, registrar, init_method = sys.argv[1:5]
if order == "reversed":  # every lookup of the two groups torch reads sees them back to front
    discovered = metadata.entry_points

    def entry_points(**params):
        found = discovered(**params)
        if params.get("group") in ("torch.backends", "torch.distributed.backends"):
            return metadata.EntryPoints(reversed(list(found)))
        return found

    metadata.entry_points = entry_points

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d


def run_torch_registrar():
    # What torch runs when a group first names "xccl" (2.14+); absent in older torch.
    if hasattr(c10d.Backend, "_ensure_backend_registered"):
        c10d.Backend._ensure_backend_registered("xccl")
    if hasattr(c10d, "_register_builtin_xccl_backend"):
        c10d._register_builtin_xccl_backend()  # as if another lookup ran it again


# What `import torch` left: xccl's entry point registers the name and imports nothing of xccl's.
seen = {"autoloaded": "XCCL" in c10d.Backend._plugins, "imported": "xccl" in sys.modules}
if registrar == "before":
    run_torch_registrar()
if load == "import":
    import xccl  # noqa: F401
if registrar == "after":
    run_torch_registrar()
seen["available"] = dist.is_backend_available("xccl")
try:
    dist.init_process_group("xccl", init_method=init_method, rank=0, world_size=1)
    backend = c10d._get_default_group()._get_backend(torch.device("cpu"))
    seen["backend"] = type(backend).__name__
    x = torch.arange(5, dtype=torch.float32)
    dist.all_reduce(x)
    seen["all_reduce"] = x.tolist()
    dist.destroy_process_group()
except Exception as err:  # reported to the test, which decides whether it was expected
    seen["error"] = f"{type(err).__name__}: {err}"
print(json.dumps(seen))
"""

# (load, order, registrar): load "autoload" leaves xccl to the `torch.backends` entry point,
# "import" turns that off (XCCL_NO_AUTOLOAD=1) and imports xccl; "none" does neither.
CASES = [
    ("autoload", "discovered", "after"),
    ("autoload", "reversed", "after"),
    ("import", "discovered", "before"),
    ("import", "reversed", "before"),
    ("import", "discovered", "after"),
    ("import", "reversed", "after"),
    ("none", "discovered", "before"),
]


def test_xccl_wins_in_every_registration_order(tmp_path):
    environ = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    environ["OMP_NUM_THREADS"] = "1"
    started = {}
    # All scenarios at once: each is mostly `import torch`, and the wall time is what CI pays.
    for case in CASES:
        load = case[0]
        name = "-".join(case)
        started[case] = subprocess.Popen(
            [sys.executable, "-c", SCENARIO, *case, f"file://{tmp_path / name}.store"],
            env=dict(environ, XCCL_NO_AUTOLOAD="0" if load == "autoload" else "1"),
            cwd=tmp_path,  # not the repository: only the installed package counts
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    failures = []
    for case, process in started.items():
        try:
            out, err = process.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        lines = out.strip().splitlines()
        if process.returncode != 0 or not lines:
            failures.append(f"{case}: exit {process.returncode}\n{err[-2000:]}")
            continue
        seen = json.loads(lines[-1])
        load = case[0]
        if load == "none":
            # Nothing loaded xccl: torch's own registrar owns the name, and says truthfully
            # that this torch cannot serve it.
            expected = {"autoloaded": False, "imported": False, "available": False}
            got = {k: seen.get(k) for k in expected}
            if got != expected or "XCCL" not in seen.get("error", ""):
                failures.append(f"{case}: expected torch's refusal, got {seen}")
            continue
        expected = {
            "autoloaded": load == "autoload",
            "imported": False,
            "available": True,
            "backend": "ProcessGroupXccl",
            "all_reduce": [0.0, 1.0, 2.0, 3.0, 4.0],
        }
        got = {k: seen.get(k) for k in expected}
        if got != expected:
            failures.append(f"{case}: got {seen}, expected {expected}\n{err[-2000:]}")
    assert not failures, "\n".join(failures)
