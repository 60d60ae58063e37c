"""The backend's side of the name "xccl": the creator that builds a ProcessGroupXccl, and the
policy it hands each group: the callables the C++ side calls back into Python through
(csrc/backend/core/group_policy.h).

Registering the name with torch (and what each torch version needs for it) lives outside the
package, in python/xccl_autoload.py, so that torch's autoload at `import torch` can register the
name without loading xccl; its creator imports xccl on first use and calls `create_backend` here.
`install()` (run by `import xccl`) registers the name the same way.
"""

from __future__ import annotations

import os
from datetime import timedelta

import torch.distributed as dist
import xccl_autoload
from xccl_autoload import BACKEND_NAME, DEVICES  # noqa: F401 - the package's names for them

_state = {"installed": False, "policy": None}


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
    if options.policy is None:
        options.policy = group_policy()
    return _C.ProcessGroupXccl(dist_opts.store, dist_opts.group_rank, dist_opts.group_size, options)


def _vendor_group(store, rank, size, timeout, group_name):
    """The inner NCCL/RCCL group of a GPU group (csrc/backend/core/group_policy.h), built on
    first need.

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


def group_policy():
    """The package's GroupPolicy, which `create_backend` gives every group whose options carry
    none: the vendor group's factory above, verify.kernels_verified (asked at each GPU side's
    creation) and tuning.source (asked at each membership's creation). Built once: it holds no
    state of its own."""
    if _state["policy"] is None:
        from xccl import _C, tuning, verify

        _state["policy"] = _C.GroupPolicy(
            vendor_factory=_vendor_group,
            kernel_check=verify.kernels_verified,
            tuning_source=tuning.source,
        )
    return _state["policy"]


def install() -> bool:
    """Registers "xccl"; idempotent. Returns whether xccl owns the name."""
    if _state["installed"]:
        return True
    if not xccl_autoload.register():
        return False
    _state["installed"] = True
    return True


def status() -> str:
    """Why the name is or is not ours (for `python -m xccl env` and error messages)."""
    return xccl_autoload.status()
