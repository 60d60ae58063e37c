"""The recipes of docs/training.md for Hugging Face's Trainer (on accelerate) and Lightning.

Each runs its example script under torchrun with 2 ranks on CPU, when its packages are installed
(they are not xccl's dependencies; without them the test skips and says which is missing). The
scripts import only torch and the framework: the backend name comes from xccl's entry point.
Each script checks itself that every rank ends with the same weights; the test checks the line
it prints, which names the backend that served.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
from dist_harness import run_job, torchrun

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _require(*packages: str) -> None:
    missing = [p for p in packages if importlib.util.find_spec(p) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: this recipe of docs/training.md not run")


def _run_example(name: str, tmp_path) -> str:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("XCCL_NO_AUTOLOAD", "TORCH_DEVICE_BACKEND_AUTOLOAD")
    }
    # One thread a rank; no network (nothing here downloads, and nothing may try).
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env["HF_HOME"] = str(tmp_path / "hf")
    script = os.path.join(REPO, "examples", name)
    command = torchrun(2, 0, script, "--steps", "4")
    return run_job(command, env, timeout=400, what=name)


def _done_line(output: str) -> str:
    lines = [line for line in output.splitlines() if line.startswith("done:")]
    assert len(lines) == 1, f"expected one 'done:' line from rank 0:\n{output[-4000:]}"
    return lines[0]


def test_hf_trainer_on_cpu_with_the_group_created_first(tmp_path):
    _require("transformers", "accelerate")
    done = _done_line(_run_example("hf_trainer_cpu.py", tmp_path))
    expected = (
        "done: 2 ranks, DistributedDataParallel on backend 'xccl', 4 steps, parameters identical"
    )
    assert done == expected


def test_lightning_ddp_strategy_with_xccl(tmp_path):
    _require("lightning")
    done = _done_line(_run_example("lightning_ddp.py", tmp_path))
    assert done == "done: 2 ranks, DDPStrategy on backend 'xccl', 4 steps, parameters identical"
