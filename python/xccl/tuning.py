"""Measured tuning tables (docs/tuning.md): what `python -m xccl tune` writes and every group
plans from.

A table is a JSON file in the cache folder (or XCCL_TUNING_FILE) holding, per device, the routes
that measured faster than the built-in rules on this machine, and what the table is valid for (the
machine's fingerprint, the world shape it was tuned with). The backend asks `source()` at each
group's creation and the group follows rank 0's answer (csrc/algo/tuning.h parses the canonical
text that `canonical()` writes).

Like the kernel stamp (verify.py), the file is something anyone with access to the cache folder
could have written: it is read as a regular file only (files.read_capped, through
verify.read_json_capped: no link followed, no FIFO waited on) with a size cap, as JSON of one
exact shape with every number range-checked, and anything else means "no table" with one
warning, never an exception.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import time
import warnings
from collections.abc import Iterator, Mapping

from . import verify
from .tuning_schema import (  # noqa: F401 - the names are tuning's API too
    CHUNK_MAX,
    CHUNK_MIN,
    CPU_ALGORITHMS,
    CPU_COLLECTIVES,
    CPU_ROUTES,
    ENTRY_FIELDS,
    FILE_NAME,
    FORMAT,
    GPU_COLLECTIVES,
    GPU_KERNELS,
    GPU_ROUTES,
    LOCALITIES,
    MACHINE_FIELDS,
    MAX_BYTES,
    MAX_ENTRIES,
    MAX_FILE_BYTES,
    MAX_MEASURED,
    MAX_TEXT,
    MAX_US,
    MEASURED_FIELDS,
    SECTIONS,
    VERSION,
    BadTable,
    check_table,
    short,
)

OFF_SPELLINGS = ("0", "false", "no", "off")  # csrc/common/env.cc's false booleans
ON_SPELLINGS = ("", "1", "true", "yes", "on")


def default_path(environ: Mapping[str, str] | None = None) -> str:
    """XCCL_TUNING_FILE, else tuning.json in xccl's cache folder."""
    environ = os.environ if environ is None else environ
    return environ.get("XCCL_TUNING_FILE") or os.path.join(verify.cache_dir(environ), FILE_NAME)


# ---------------------------------------------------------------------------------------------
# What a table is valid for


def nic_set(topology: Mapping) -> str:
    """The physical NICs (virtual ones, such as a container's veth, come and go), sorted, with
    their speed where the topology knows it: "eth0 25000Mb/s, ib0"."""
    nics = []
    for nic in topology.get("nics", []):
        if nic.get("virtual"):
            continue
        speed = nic.get("speedMbps")
        known = isinstance(speed, int) and speed > 0
        nics.append(f"{nic.get('name') or '?'}" + (f" {speed}Mb/s" if known else ""))
    return ", ".join(sorted(nics))


def fingerprint(device: str, topology: Mapping | None = None, root: str = "/") -> dict:
    """What a table measured with `device` ("cpu" or "cuda") on this machine is valid for."""
    if device not in SECTIONS:
        raise ValueError(f"device must be one of {', '.join(SECTIONS)}, not {device!r}")
    if topology is None:
        from . import topo

        topology = topo.load(topo.topology_json())
    from . import __version__ as xccl_version

    torch = sys.modules.get("torch") or importlib.import_module("torch")
    gpu = device == "cuda"
    return {
        "topology": verify.topology_fingerprint(topology),
        "cpu_model": str(topology.get("cpuModel") or ""),
        "cores": os.cpu_count() or 0,
        "gpu_model": verify.gpu_model(topology) if gpu else "",
        "driver": verify.driver_version(root) if gpu else "",
        "nics": nic_set(topology),
        "xccl": str(xccl_version),
        "torch": str(torch.__version__),
    }


@functools.lru_cache(maxsize=2)
def _this_machine(device: str) -> dict:
    return fingerprint(device)


def check_machine(table: Mapping, device_fps: Mapping) -> str:
    """ "" when each section of `table` that `device_fps` ({"cpu": fingerprint("cpu"), "gpu":
    fingerprint("cuda")}; a section missing there is not compared) has was made on this machine,
    else the reason, naming each differing field."""
    reasons = []
    for section in SECTIONS.values():
        if table.get(section) is None or section not in device_fps:
            continue
        theirs, ours = table[section]["machine"], device_fps[section]
        differ = [
            f"{field} differs: {short(theirs.get(field))} in the table, "
            f"{short(ours.get(field))} here"
            for field in MACHINE_FIELDS
            if theirs.get(field) != ours.get(field)
        ]
        if differ:
            reasons.append(f"{section}: " + "; ".join(differ))
    return " / ".join(reasons)


# ---------------------------------------------------------------------------------------------
# The file (its schema: tuning_schema.py)


def _load(path: str) -> tuple[dict | None, str, bool]:
    """(table, why, missing)."""
    try:
        table = verify.read_json_capped(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return None, f"no table at {path}", True
    except ValueError as error:
        return None, f"{path} is not a tuning table ({error})", False
    try:
        check_table(table)
    except BadTable as error:
        return None, f"{path} is not a valid tuning table ({error})", False
    except RecursionError:
        return None, f"{path} is not a valid tuning table (nested too deeply)", False
    return table, "", False


def load(path: str) -> tuple[dict | None, str]:
    """(table, "") or (None, why); never raises for what the file holds."""
    table, why, _ = _load(path)
    return table, why


def new_table(device: str, world: Mapping, entries: list, command: str, measured: list) -> dict:
    """A table of one device's section; ValueError naming the first value `load` would refuse.
    Entries: cpu {collective, min_bytes, max_bytes (None: no end), route, algorithm,
    ring_chunk_bytes, tuned_us, rule_us[, rule]}; gpu the same with kernel for algorithm and
    ring_chunk_bytes."""
    section = SECTIONS.get(device)
    if section is None:
        raise ValueError(f"device must be one of {', '.join(SECTIONS)}, not {device!r}")
    body = {"machine": fingerprint(device), "entries": list(entries), "measured": list(measured)}
    table = {
        "format": FORMAT,
        "version": VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": command,
        "machine": body["machine"] if device == "cpu" else fingerprint("cpu"),
        "world": dict(world),
        "cpu": body if section == "cpu" else None,
        "gpu": body if section == "gpu" else None,
    }
    try:
        check_table(table)
    except BadTable as error:
        raise ValueError(f"not a valid tuning table: {error}") from None
    return table


def save(path: str, table: Mapping) -> None:
    """Writes `table` atomically. The file's section of the other device is kept when that file
    was made on the same machine (fingerprint) for the same world; otherwise replaced."""
    table = dict(table)
    try:
        check_table(table)
    except BadTable as error:
        raise ValueError(f"not a valid tuning table: {error}") from None
    old, _, _ = _load(path)
    if old is not None and old["machine"] == table["machine"] and old["world"] == table["world"]:
        for section in SECTIONS.values():
            if table[section] is None:
                table[section] = old[section]
    verify.write_json_atomically(path, table, ".tuning-")


def canonical(table: Mapping, sections=("cpu", "gpu")) -> str:
    """The text csrc/algo/tuning.h parses (docs/tuning.md): times as integer nanoseconds."""
    world = table["world"]
    lines = [f"{FORMAT} {VERSION}", f"world {world['size']} {world['hosts']} {world['locality']}"]
    for section in sections:
        body = table.get(section)
        for e in body["entries"] if body else []:
            end = "inf" if e["max_bytes"] is None else str(e["max_bytes"])
            plan = (
                [e["route"], e["algorithm"], str(e["ring_chunk_bytes"])]
                if section == "cpu"
                else [e["route"], e["kernel"]]
            )
            times = [str(round(e["tuned_us"] * 1000)), str(round(e["rule_us"] * 1000))]
            lines.append(
                " ".join([section, e["collective"], str(e["min_bytes"]), end, *plan, *times])
            )
    return "\n".join(lines) + "\n"  # as csrc/algo/tuning.cc formats it


# ---------------------------------------------------------------------------------------------
# What groups plan from

_overrides: list = []
_warned: set = set()


@contextlib.contextmanager
def override(text: str | None, kernels_under_test: bool = False) -> Iterator[None]:
    """While active, groups created in this process get `text` ("" or None: no table) instead
    of the file: the tuner measures the rules and each candidate this way. kernels_under_test:
    GPU sides created meanwhile may plan xccl's kernels on a machine where they were not
    verified (verify.kernels_verified), because the tuner checks every result they give exactly
    before one may win; nothing else sets it."""
    _overrides.append(text or "")
    try:
        with verify.trusting_kernels(kernels_under_test):
            yield
    finally:
        _overrides.pop()


def _resolve() -> tuple[dict | None, str, str, str]:
    """(table, text, why, problem): problem is what deserves a warning ("" when none)."""
    if _overrides:
        return None, _overrides[-1], "set by xccl.tune", ""
    switch = os.environ.get("XCCL_TUNING", "")
    if switch.strip().lower() in OFF_SPELLINGS:
        return None, "", f"XCCL_TUNING={switch}", ""
    if switch.strip().lower() not in ON_SPELLINGS:
        why = f"XCCL_TUNING={switch} is not a boolean (on or off)"
        return None, "", why, why
    path = default_path()
    table, why, missing = _load(path)
    if table is None:
        # No default file is normal (nothing tuned yet); a file the user named is expected.
        named = bool(os.environ.get("XCCL_TUNING_FILE"))
        return None, "", why, "" if missing and not named else why
    try:
        fps = {s: _this_machine(d) for d, s in SECTIONS.items() if table[s] is not None}
    except Exception as error:  # noqa: BLE001 - an unreadable machine matches no table
        why = f"ignored {path}: this machine's facts are unreadable ({type(error).__name__})"
        return None, "", why, why
    refused = {s: check_machine({s: table[s]}, fps) for s in fps}
    usable = [s for s in fps if not refused[s]]
    reason = " / ".join(r for r in refused.values() if r)
    if not usable:
        why = f"ignored {path}: made on another machine ({reason})"
        return None, "", why, why
    if reason:  # one device's section was measured elsewhere: the other still plans
        why = f"table {path} without its section made on another machine ({reason})"
        return table, canonical(table, usable), why, why
    return table, canonical(table), f"table {path}", ""


def source() -> tuple[str, str]:
    """(canonical text, why) for a group being created: the tuning source of the package's
    group policy (_registration.group_policy), called on every rank. A bad or foreign file is
    warned about once per process per (file, reason)."""
    _, text, why, problem = _resolve()
    if problem:
        key = (default_path(), problem)
        if key not in _warned:
            _warned.add(key)
            what = "tuning table not used" if not text else "tuning table used in part"
            plan = "; the rules plan" if not text else ""
            warnings.warn(f"xccl: {what}: {problem}{plan}", stacklevel=2)
    return text, why


def describe() -> str:
    """One line for `python -m xccl env` and doctor: the table in force here, or why none."""
    table, text, why, _ = _resolve()
    if table is None:
        return f"no table ({why})" if not text else f"a table {why}"
    world = table["world"]
    lines = text.split("\n")
    sections = ", ".join(
        f"{s} {sum(line.startswith(s + ' ') for line in lines)} entries"
        for s in SECTIONS.values()
        if table[s] is not None
    )
    return (
        f"{why} made {table['created']} for world {world['size']}/{world['hosts']}/"
        f"{world['locality']} ({sections}); rank 0's table is the group's"
    )


def problem() -> str:
    """What is wrong with this process's table file ("" when nothing; for doctor's WARN)."""
    return _resolve()[3]
