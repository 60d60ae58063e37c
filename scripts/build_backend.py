"""The build backend of pyproject.toml: setuptools', stopping a wheel build at once when torch
cannot be imported.

xccl's extension is compiled against the torch that is installed (its headers, libraries and C++
ABI), so the build must see that torch. pip builds in an isolated environment unless given
`--no-build-isolation`, and that environment holds only pyproject.toml's `requires`: without
this check `pip install .` would get as far as setup.py's CMake step and fail there with a
traceback about a missing module. An sdist needs no torch and is left alone.
"""

import functools
import importlib.util

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every hook not wrapped below

NO_TORCH = """
xccl: torch cannot be imported by this build.
xccl compiles its extension against the torch that is installed (its headers and C++ ABI), so
the build must run where that torch is. pip builds in an isolated environment that has no
torch unless told otherwise: install torch first, then

    pip install --no-build-isolation .

(with `python -m build`: --no-isolation).
"""


def _require_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise SystemExit(NO_TORCH)


def _needing_torch(hook):
    """setuptools' `hook`, stopping first with NO_TORCH when torch cannot be imported."""

    @functools.wraps(hook)
    def checked(*args, **kwargs):
        _require_torch()
        return hook(*args, **kwargs)

    return checked


# pip's first call is get_requires_for_build_wheel: the message comes before anything is built.
get_requires_for_build_wheel = _needing_torch(_setuptools.get_requires_for_build_wheel)
prepare_metadata_for_build_wheel = _needing_torch(_setuptools.prepare_metadata_for_build_wheel)
build_wheel = _needing_torch(_setuptools.build_wheel)
get_requires_for_build_editable = _needing_torch(_setuptools.get_requires_for_build_editable)
prepare_metadata_for_build_editable = _needing_torch(
    _setuptools.prepare_metadata_for_build_editable
)
build_editable = _needing_torch(_setuptools.build_editable)
