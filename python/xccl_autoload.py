"""The `torch.backends` entry point, and the registration of the name "xccl" with torch.

torch loads the entry point at the end of every `import torch`, distributed or not, so it does
only what a name needs: it registers "xccl" with a creator that imports xccl the first time a
group is created with the backend (`create_backend` below). The package, its extensions and its
environment defaults (docs/environment.md) load then, or at `import xccl`, never at
`import torch`. `import xccl` runs the same registration (xccl/_registration.py).

It must never make `import torch` fail, so every problem becomes a warning; users can turn
autoloading off with TORCH_DEVICE_BACKEND_AUTOLOAD=0 (torch's switch) or XCCL_NO_AUTOLOAD=1.
A module of its own, outside the xccl package: loading an entry point imports its module, and a
module inside the package would import the whole package first.

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

import functools
import os
import warnings

BACKEND_NAME = "xccl"
DEVICES = ["cpu", "cuda"]

_state = {"registered": False, "reason": ""}


def _true(name: str) -> bool:
    # A boolean as csrc/common/env.cc declares it (1/true/yes/on).
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def autoload() -> None:
    if _true("XCCL_NO_AUTOLOAD"):
        return
    try:
        register()
    except Exception as err:  # noqa: BLE001 - import torch must survive any failure here
        warnings.warn(
            f"xccl: not registered at torch import ({err}); `import xccl` to retry", stacklevel=2
        )


def create_backend(dist_opts, pg_options=None):
    """The creator torch calls (extended API): loads xccl on first use, then builds the group.

    `import xccl` applies the environment defaults, loads the extensions and gives the C++ side
    its Python hooks; a failure to load raises here, at group creation, with its own message."""
    import xccl  # noqa: F401
    from xccl import _registration

    return _registration.create_backend(dist_opts, pg_options)


def _helper_has_hardcoded_branch(c10d, helper) -> bool:
    import inspect

    try:
        source = inspect.getsource(helper)
    except (OSError, TypeError):
        # No source to read: the lazy-registration era has no such branch.
        return not hasattr(c10d.Backend, "_ensure_backend_registered")
    return "== Backend.XCCL" in source


def _patch_helper(c10d) -> None:
    """Wraps `_new_process_group_helper`; its first call reads the helper's source (tens of
    milliseconds, too much for `import torch`) and keeps the wrapper only where the hard-coded
    branch is, putting the original back elsewhere."""
    original = c10d._new_process_group_helper
    if getattr(original, "_xccl_patched", False):
        return
    decided = []

    @functools.wraps(original)
    def helper(*args, **kwargs):
        if not decided:
            decided.append(_helper_has_hardcoded_branch(c10d, original))
            if not decided[0] and c10d._new_process_group_helper is helper:
                c10d._new_process_group_helper = original
        if not decided[0]:
            return original(*args, **kwargs)
        saved = c10d.Backend.XCCL
        c10d.Backend.XCCL = c10d.Backend.UNDEFINED
        try:
            return original(*args, **kwargs)
        finally:
            c10d.Backend.XCCL = saved

    helper._xccl_patched = True
    c10d._new_process_group_helper = helper


def _guard_against_builtin_registrar(c10d) -> None:
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


def _answer_availability(c10d) -> None:
    # torch.distributed.is_backend_available resolves this module-level helper at each call, so
    # replacing it also serves code that imported is_backend_available before xccl. Without it
    # (a torch that asks is_xccl_available directly) the answer stays torch's, as documented.
    original = getattr(c10d, "_check_single_backend_availability", None)
    if original is None or getattr(original, "_xccl_patched", False):
        return

    @functools.wraps(original)
    def check(backend_name):
        if str(backend_name).lower() == BACKEND_NAME:
            return _loads()  # installed only once register() has registered the name
        return original(backend_name)

    check._xccl_patched = True
    c10d._check_single_backend_availability = check


def _loads() -> bool:
    """Whether xccl loads: asked about the backend, not only the name, so the first question
    imports xccl (as the first group would), and a build that cannot load answers False."""
    if "loads" not in _state:
        try:
            import xccl  # noqa: F401
        except Exception as err:  # noqa: BLE001 - the answer is False, and says why once
            warnings.warn(f"xccl: registered, but it cannot be loaded: {err}", stacklevel=4)
            _state["loads"] = False
        else:
            _state["loads"] = True
    return _state["loads"]


def register() -> bool:
    """Registers "xccl" with torch; idempotent. Returns whether xccl owns the name.

    Loads nothing of xccl's: the creator does that when the first group is created."""
    if _state["registered"]:
        return True
    disable = os.environ.get("XCCL_DISABLE_ALIAS", "")
    if _true("XCCL_DISABLE_ALIAS"):
        _state["reason"] = f"XCCL_DISABLE_ALIAS={disable}"
        return False
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    if dist.is_xccl_available():
        _state["reason"] = "this torch has Intel's native XCCL backend"
        return False
    c10d.Backend.register_backend(BACKEND_NAME, create_backend, extended_api=True, devices=DEVICES)
    _patch_helper(c10d)
    if hasattr(c10d.Backend, "_ensure_backend_registered"):
        _guard_against_builtin_registrar(c10d)
    _answer_availability(c10d)
    _state["registered"] = True
    return True


def status() -> str:
    """Why the name is or is not ours (for `python -m xccl env` and error messages)."""
    return "registered" if _state["registered"] else f"not registered: {_state['reason']}"
