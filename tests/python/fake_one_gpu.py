"""A pytest plugin (``-p fake_one_gpu``) for test_one_gpu_collection.py: torch sees one CUDA GPU
(an H100, no MIG) and no test body runs, so a CPU machine collects the GPU test files as a
one-GPU machine would and evaluates their skip marks at setup, without touching a device."""

import pytest
import torch

torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 1
torch.cuda.get_device_name = lambda device=None: "NVIDIA H100 80GB HBM3"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    return True  # the body needs the GPU: only collection and the skip marks are under test
