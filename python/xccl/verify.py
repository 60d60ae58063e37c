"""Whether xccl's GPU kernels were verified on this machine (docs/gpu.md, "Verified kernels").

An unverified machine runs CUDA/HIP collectives on the vendor library (NCCL/RCCL) unless
XCCL_GPU_ALGO names a kernel. `python -m xccl doctor --gpu` runs every kernel against a host
reference on this machine's GPUs and, when all agree, leaves a stamp in the cache folder keyed to
what could change the kernels' behaviour: the GPU model, the driver version, the topology (which
GPUs, which links) and the xccl version. Any of them different: not verified.

The stamp is a file anyone with access to the cache folder could have written: it is read as a
regular file only (files.read_capped: no link followed, no FIFO waited on) with a size cap, as
JSON of one exact shape, and anything else counts as "not verified" with a warning, never an
exception. The default cache folder is the user's own, else a private one (cache_dir).

Each rank answers for itself (``kernels_verified``); the backend takes rank 0's answer for the
whole group (net/rendezvous/agree.h, agreeOnRankZero), so every rank plans alike.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping

from . import files

STAMP_NAME = "kernels-verified.json"
STAMP_FORMAT = "xccl-kernel-stamp"
STAMP_VERSION = 1
MAX_STAMP_BYTES = 64 << 10  # a real stamp is under 4 KiB; anything larger is not one
KEY_FIELDS = ("gpu_model", "driver", "topology", "xccl")

# Machines whose kernels count as verified without a stamp: (GPU model as the topology names it,
# driver major version, xccl version). An entry is earned only by a `benchmarks/device_check.sh`
# run on that GPU model and driver whose kernel-route stages all passed exactly, recorded with its
# date and command in benchmarks/RESULTS.md; the entry cites that record. None has run yet.
KNOWN_GOOD: tuple[tuple[str, str, str], ...] = ()

HOW_TO_VERIFY = "python -m xccl doctor --gpu"


def cache_dir(environ: Mapping[str, str] | None = None) -> str:
    """XCCL_CACHE_DIR as given; else $XDG_CACHE_HOME/xccl (XDG_CACHE_HOME when absolute), else
    ~/.cache/xccl (the password database's home when HOME is unset), when that folder is this
    user's alone (files.folder_problem); else a private folder made once per process, with one
    warning saying why: never a folder relative to the working directory, nor one another user
    made or can write."""
    environ = os.environ if environ is None else environ
    if environ.get("XCCL_CACHE_DIR"):
        return environ["XCCL_CACHE_DIR"]
    base = environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = files.home_folder(environ)
        base = os.path.join(home, ".cache") if home else ""
    if not base:
        return _private_cache_dir(
            "", "cannot be chosen: no home folder (HOME unset, none in the password database)"
        )
    folder = os.path.join(base, "xccl")
    why = files.folder_problem(folder)
    if why:
        return _private_cache_dir(folder, why)
    _default_dirs.add(folder)
    return folder


_default_dirs: set[str] = set()  # the folders cache_dir chose by default: writers check again
_private_dir: list[str] = []  # the private folder, once made


def _private_cache_dir(folder: str, why: str) -> str:
    if not _private_dir:
        _private_dir.append(files.private_folder("xccl-cache-"))
        named = f"{folder} " if folder else ""
        warnings.warn(
            f"xccl: the cache folder {named}{why}: using the private folder {_private_dir[0]}, "
            "which lasts as long as this process (no kernel stamp or tuning table is kept; set "
            "XCCL_CACHE_DIR to a folder of yours)",
            stacklevel=3,
        )
    return _private_dir[0]


def stamp_path(environ: Mapping[str, str] | None = None) -> str:
    return os.path.join(cache_dir(environ), STAMP_NAME)


def _read_small(path: str, limit: int = 4096) -> str:
    try:
        return files.read_capped(path, limit).decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""


def driver_version(root: str = "/") -> str:
    """The kernel driver's version ("570.86.15" from NVIDIA's /proc/driver/nvidia/version, or
    amdgpu's module version); "" when neither is there."""
    text = _read_small(os.path.join(root, "proc/driver/nvidia/version"))
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9]+(?:\.[0-9]+)*)", text)
    if match:
        return match.group(1)
    amd = _read_small(os.path.join(root, "sys/module/amdgpu/version")).strip()
    return amd if re.fullmatch(r"[0-9][0-9A-Za-z.\-]{0,63}", amd) else ""


def gpu_model(topology: Mapping) -> str:
    """The distinct GPU names of the topology, sorted, "; "-joined ("" without GPUs)."""
    names = {str(g.get("name") or "?") for g in topology.get("gpus", [])}
    return "; ".join(sorted(names))


def topology_fingerprint(topology: Mapping) -> str:
    """sha256 over the facts the kernels depend on: each GPU (vendor, name, architecture, bus
    id, NVSwitch links) and each GPU link (ends, type, count); not host names, NICs or CPUs."""
    gpus = [
        [g.get(k) for k in ("vendor", "name", "arch", "pciBusId", "nvswitchLinks")]
        for g in topology.get("gpus", [])
    ]
    links = sorted(
        [sorted(link.get("gpus", [])), link.get("type"), link.get("count")]
        for link in topology.get("gpuLinks", [])
    )
    text = json.dumps({"gpus": gpus, "links": links}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def machine_key(topology: Mapping, root: str = "/", version: str | None = None) -> dict:
    if version is None:
        from . import __version__ as version
    return {
        "gpu_model": gpu_model(topology),
        "driver": driver_version(root),
        "topology": topology_fingerprint(topology),
        "xccl": version,
    }


def write_stamp(path: str, key: Mapping, cases: list[str]) -> None:
    """Writes the stamp for `key` atomically (a reader sees the old file or the new one)."""
    stamp = {
        "format": STAMP_FORMAT,
        "version": STAMP_VERSION,
        "key": {k: str(key[k]) for k in KEY_FIELDS},
        "verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cases": len(cases),
    }
    write_json_atomically(path, stamp, ".stamp-")


def write_json_atomically(path: str, value, prefix: str) -> None:
    """Writes `value` as JSON to `path` through a temporary file (mode 0600) in the same folder
    and a rename, creating the folder (mode 0700): a reader sees the old file or the new one,
    never a part, and a link planted at `path` is replaced, never followed. The folder cache_dir
    chose by default is checked again once made: OSError when someone else made it first."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, mode=0o700, exist_ok=True)
    if folder in _default_dirs:
        why = files.folder_problem(folder)
        if why:
            raise PermissionError(f"xccl: not writing {path}: the cache folder {folder} {why}")
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_json_capped(path: str, limit: int):
    """The JSON value in a file anyone may have written: FileNotFoundError when there is none,
    ValueError saying what is wrong (a symbolic link, not a regular file, unreadable, over
    `limit` bytes, not JSON) otherwise. Read by files.read_capped: a FIFO never blocks it."""
    data = files.read_capped(path, limit)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ValueError("not JSON") from None


def check_stamp(path: str, key: Mapping) -> tuple[bool, str, bool]:
    """(verified, why, damaged): damaged is True for a file that is not a stamp at all."""

    def damaged(why: str) -> tuple[bool, str, bool]:
        return False, f"the stamp {path} is not valid ({why})", True

    try:
        stamp = read_json_capped(path, MAX_STAMP_BYTES)
    except FileNotFoundError:
        return False, f"no stamp at {path}", False
    except ValueError as error:
        return damaged(str(error))
    if not isinstance(stamp, dict) or stamp.get("format") != STAMP_FORMAT:
        return damaged(f"not a {STAMP_FORMAT}")
    if stamp.get("version") != STAMP_VERSION or isinstance(stamp.get("version"), bool):
        return damaged(f"stamp version {stamp.get('version')!r}, this xccl reads {STAMP_VERSION}")
    stored = stamp.get("key")
    if not isinstance(stored, dict) or not all(isinstance(stored.get(k), str) for k in KEY_FIELDS):
        return damaged("no key of " + ", ".join(KEY_FIELDS))
    for field in KEY_FIELDS:
        if stored[field] != str(key[field]):
            return False, f"the stamp is for another {field.replace('_', ' ')}", False
    when = stamp.get("verified_at")
    when = when if isinstance(when, str) and len(when) <= 32 else "?"
    return True, f"verified by {HOW_TO_VERIFY} at {when}", False


def known_good(key: Mapping, entries=KNOWN_GOOD) -> bool:
    major = str(key["driver"]).split(".")[0]
    return any(
        (model, driver, version) == (key["gpu_model"], major, key["xccl"])
        for model, driver, version in entries
    )


def verdict(
    topology: Mapping, environ: Mapping[str, str] | None = None, root: str = "/"
) -> tuple[bool, str]:
    """(verified, why) for this machine, warning about a damaged stamp; never raises."""
    key = machine_key(topology, root)
    if not topology.get("gpus"):
        return False, "the topology lists no GPU"
    if known_good(key):
        return True, "on xccl's known-good list"
    ok, why, damaged = check_stamp(stamp_path(environ), key)
    if damaged:
        warnings.warn(f"xccl: {why}; kernels count as not verified", stacklevel=2)
    return ok, why


@functools.lru_cache(maxsize=1)
def _this_machine() -> tuple[bool, str]:
    try:
        from . import topo

        return verdict(topo.load(topo.topology_json()))
    except Exception as error:  # noqa: BLE001 - an unreadable machine is an unverified one
        return False, f"could not read this machine's facts ({type(error).__name__}: {error})"


_trusted: list = []  # one entry per active trusting_kernels(): whether it trusts them


@contextlib.contextmanager
def trusting_kernels(trust: bool) -> Iterator[None]:
    """While active with trust, GPU sides created in this process count xccl's kernels as
    verified: only `python -m xccl tune`'s candidate groups (tuning.override's
    kernels_under_test), which run the kernels to verify them and check every result exactly."""
    _trusted.append(trust)
    try:
        yield
    finally:
        _trusted.pop()


def kernels_trusted() -> bool:
    return bool(_trusted) and _trusted[-1]


def kernels_verified() -> tuple[bool, str]:
    """This machine's answer, once per process (what the backend asks at a GPU side's creation),
    except inside trusting_kernels(True)."""
    if kernels_trusted():
        return True, "under test by python -m xccl tune, which checks every result exactly"
    return _this_machine()
