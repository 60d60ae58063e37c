"""Registers the xccl backend with torch.distributed under the name "xccl".

PyTorch also knows a native "xccl" (Intel XPU, oneCCL). This module claims the name only when
that native backend is not built into the installed torch, and never touches a torch where it
is. How each torch version handles the name:

- 2.11-2.13 hard-code a `backend_str == Backend.XCCL` branch in `_new_process_group_helper`
  ahead of the plugin branch; it raises "Distributed package doesn't have XCCL built in". We
  neutralise only that branch, only for the duration of each call, by making `Backend.XCCL`
  compare unequal (`Backend("xccl")` still yields "xccl" because `Backend.__new__` maps an
  attribute equal to UNDEFINED back to the lower-cased name).
- 2.14+ register built-ins lazily through the `torch.distributed.backends` entry-point group
  and skip a name already in `Backend._plugins`; registering first is enough, and a guard
  refuses torch's own xccl registrar should it run later.

`dist.is_backend_available("xccl")` (2.13-2.15) asks `dist.is_xccl_available()` first, which
reports Intel's native backend and so answers False with ours registered; once registered we
answer for the name ourselves (`_answer_availability`), leaving `is_xccl_available` as it is.

All three are detected from the installed code, not from version numbers.
"""

from __future__ import annotations

import functools
import inspect
import os
from datetime import timedelta

import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

BACKEND_NAME = "xccl"
DEVICES = ["cpu", "cuda"]

_state = {"installed": False, "reason": ""}


def _store_host(store) -> str:
    """The host of the TCPStore under (possibly nested) prefix stores, or MASTER_ADDR."""
    seen = 0
    while store is not None and seen < 16:
        host = getattr(store, "host", None)
        if isinstance(host, str) and host:
            return host
        store = getattr(store, "underlying_store", None)
        seen += 1
    return os.environ.get("MASTER_ADDR", "")


def create_backend(dist_opts, pg_options=None):
    """The creator torch calls (extended API): builds one ProcessGroupXccl for the group."""
    from xccl import _C

    if pg_options is not None and not isinstance(pg_options, _C.Options):
        raise TypeError(f"xccl: pg_options must be xccl.Options, got {type(pg_options).__name__}")
    options = _C.Options() if pg_options is None else pg_options.__copy__()
    timeout = dist_opts.timeout
    if not isinstance(timeout, timedelta):
        timeout = timedelta(seconds=float(timeout.total_seconds()))
    options.timeout = timeout
    options.group_name = dist_opts.group_id
    options.global_ranks_in_group = list(dist_opts.global_ranks_in_group)
    if getattr(dist_opts, "enable_reconfigure", False):
        options.enable_reconfigure = True  # torch 2.14+: reconfigure forms the membership
    if not options.store_host:
        options.store_host = _store_host(dist_opts.store)
    return _C.ProcessGroupXccl(dist_opts.store, dist_opts.group_rank, dist_opts.group_size, options)


def _vendor_group(store, rank, size, timeout, group_name):
    """The inner NCCL/RCCL group of a GPU group (csrc/backend/core/gpu_side.h), built on first need.

    Called from C++ with the group's store already prefixed for it; returns None when this
    torch has no NCCL (then GPU collectives without a kernel go through host memory)."""
    if not dist.is_nccl_available():
        return None
    options = dist.ProcessGroupNCCL.Options()
    options.is_high_priority_stream = False
    options._timeout = timeout
    if hasattr(options, "group_name"):
        options.group_name = f"{group_name}:xccl_vendor"
    return dist.ProcessGroupNCCL(store, rank, size, options)


def _helper_has_hardcoded_branch() -> bool:
    try:
        source = inspect.getsource(c10d._new_process_group_helper)
    except (OSError, TypeError):
        # No source to read: the lazy-registration era has no such branch.
        return not hasattr(c10d.Backend, "_ensure_backend_registered")
    return "== Backend.XCCL" in source


def _patch_helper() -> None:
    original = c10d._new_process_group_helper
    if getattr(original, "_xccl_patched", False):
        return

    @functools.wraps(original)
    def helper(*args, **kwargs):
        saved = c10d.Backend.XCCL
        c10d.Backend.XCCL = c10d.Backend.UNDEFINED
        try:
            return original(*args, **kwargs)
        finally:
            c10d.Backend.XCCL = saved

    helper._xccl_patched = True
    c10d._new_process_group_helper = helper


def _guard_against_builtin_registrar() -> None:
    backend = c10d.Backend
    original = backend.register_backend.__func__
    if getattr(original, "_xccl_guard", False):
        return
    builtin = getattr(c10d, "_create_xccl_process_group", None)

    def register_backend(cls, name, func, *args, **kwargs):
        if str(name).lower() == BACKEND_NAME and func is builtin and builtin is not None:
            return  # torch's native-XCCL registrar: this torch has no native XCCL, keep ours
        return original(cls, name, func, *args, **kwargs)

    register_backend._xccl_guard = True
    backend.register_backend = classmethod(register_backend)


def _answer_availability() -> None:
    # torch.distributed.is_backend_available resolves this module-level helper at each call, so
    # replacing it also serves code that imported is_backend_available before xccl. Without it
    # (a torch that asks is_xccl_available directly) the answer stays torch's, as documented.
    original = getattr(c10d, "_check_single_backend_availability", None)
    if original is None or getattr(original, "_xccl_patched", False):
        return

    @functools.wraps(original)
    def check(backend_name):
        if str(backend_name).lower() == BACKEND_NAME:
            return True  # installed only once install() has registered the name
        return original(backend_name)

    check._xccl_patched = True
    c10d._check_single_backend_availability = check


def install() -> bool:
    """Registers "xccl"; idempotent. Returns whether xccl owns the name."""
    if _state["installed"]:
        return True
    # A boolean as csrc/common/env.cc declares it (1/true/yes/on).
    disable = os.environ.get("XCCL_DISABLE_ALIAS", "")
    if disable.strip().lower() in ("1", "true", "yes", "on"):
        _state["reason"] = f"XCCL_DISABLE_ALIAS={disable}"
        return False
    if dist.is_xccl_available():
        _state["reason"] = "this torch has Intel's native XCCL backend"
        return False
    c10d.Backend.register_backend(BACKEND_NAME, create_backend, extended_api=True, devices=DEVICES)
    from xccl import _C, tuning, verify

    _C._set_vendor_factory(_vendor_group)
    _C._set_kernel_check(verify.kernels_verified)
    if hasattr(_C, "_set_tuning_source"):  # until the planners' table lands in this branch
        _C._set_tuning_source(tuning.source)
    if _helper_has_hardcoded_branch():
        _patch_helper()
    if hasattr(c10d.Backend, "_ensure_backend_registered"):
        _guard_against_builtin_registrar()
    _answer_availability()
    _state["installed"] = True
    return True


def status() -> str:
    """Why the name is or is not ours (for `python -m xccl env` and error messages)."""
    return "registered" if _state["installed"] else f"not registered: {_state['reason']}"
