"""Shared pytest configuration for the multi-process suite (see dist_harness.py)."""

import multiprocessing

import pytest


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "gpus(n): needs n GPUs; not collected (deselected) where fewer are visible, so that a "
        "machine with one GPU reports nothing skipped (benchmarks/device_check.sh reads a skip "
        "on a GPU machine as a failure)",
    )


def pytest_collection_modifyitems(config, items):
    """Drops the items marked gpus(n) that this machine cannot run: a case that cannot apply
    is absent, not skipped. An empty parameter set (e.g. the spread placements on one GPU) is
    dropped with its test this way, where pytest would report it skipped."""
    wanting = [item for item in items if item.get_closest_marker("gpus") is not None]
    if not wanting:
        return
    import torch

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    dropped = [i for i in wanting if i.get_closest_marker("gpus").args[0] > visible]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]


def pytest_report_header(config):
    import torch

    try:
        import xccl

        where = f"xccl {xccl.__version__} from {xccl.__file__}"
    except ImportError as e:  # reported here; the tests that need it fail with the reason
        where = f"xccl not importable: {e}"
    return [f"torch {torch.__version__}; {where}"]


@pytest.fixture(autouse=True)
def no_leftover_ranks():
    """Every test leaves no rank process behind: the harness joins or kills what it starts."""
    yield
    leftover = [p for p in multiprocessing.active_children() if p.name.startswith("xccl-rank")]
    assert not leftover, f"rank processes still alive after the test: {leftover}"
