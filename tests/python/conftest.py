"""Shared pytest configuration for the multi-process suite (see dist_harness.py)."""

import multiprocessing

import pytest


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
