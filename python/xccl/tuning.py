"""Measured tuning tables (docs/tuning.md): what `python -m xccl tune` writes and every group
plans from.

A table is a JSON file in the cache folder (or XCCL_TUNING_FILE) holding, per device, the routes
that measured faster than the built-in rules on this machine, and what the table is valid for (the
machine's fingerprint, the world shape it was tuned with). The backend asks `source()` at each
group's creation and the group follows rank 0's answer (csrc/algo/tuning.h parses the canonical
text that `canonical()` writes).

Like the kernel stamp (verify.py), the file is something anyone with access to the cache folder
could have written: it is read with a size cap, as JSON of one exact shape with every number
range-checked, and anything else means "no table" with one warning, never an exception.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
import os
import sys
import time
import warnings
from collections.abc import Iterator, Mapping

from . import verify

FORMAT = "xccl-tuning"
VERSION = 1
FILE_NAME = "tuning.json"
MAX_FILE_BYTES = 4 << 20
MAX_ENTRIES = 4096  # the canonical text's limit, over both sections together
MAX_MEASURED = 4096  # per section
MAX_BYTES = (1 << 64) - 1
CHUNK_MIN, CHUNK_MAX = 4096, 1 << 30
MAX_US = 1e12  # ~11.6 days: its ns stay far inside uint64
MAX_TEXT = 4096
SECTIONS = {"cpu": "cpu", "cuda": "gpu"}  # device -> section of the file
LOCALITIES = ("none", "one_host", "per_host")
CPU_COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "all_to_all",
    "gather",
    "scatter",
    "barrier",
)
CPU_ROUTES = ("tcp", "shm", "hierarchical")
CPU_ALGORITHMS = ("direct", "ring", "one_shot", "two_shot", "shm")
GPU_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")
GPU_ROUTES = ("kernel", "vendor")
GPU_KERNELS = ("one_shot", "two_shot", "all_pairs", "broadcast", "none")
MACHINE_FIELDS = ("topology", "cpu_model", "cores", "gpu_model", "driver", "nics", "xccl", "torch")
ENTRY_FIELDS = {
    "cpu": ("collective", "min_bytes", "max_bytes", "route", "algorithm", "ring_chunk_bytes"),
    "gpu": ("collective", "min_bytes", "max_bytes", "route", "kernel"),
}
MEASURED_FIELDS = ("collective", "bytes", "candidate", "median_us", "p10_us", "p90_us", "verified")
OFF_SPELLINGS = ("0", "false", "no", "off")  # csrc/common/env.cc's false booleans
ON_SPELLINGS = ("", "1", "true", "yes", "on")


class _Bad(Exception):
    """What is wrong with a table (load turns it into its `why`)."""


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
            f"{field} differs: {_short(theirs.get(field))} in the table, "
            f"{_short(ours.get(field))} here"
            for field in MACHINE_FIELDS
            if theirs.get(field) != ours.get(field)
        ]
        if differ:
            reasons.append(f"{section}: " + "; ".join(differ))
    return " / ".join(reasons)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 64 else text[:60] + "...'"


# ---------------------------------------------------------------------------------------------
# The file: every value checked, nothing trusted


def _int(value, low: int, high: int, what: str) -> int:
    if type(value) is not int or not low <= value <= high:
        raise _Bad(f"{what} must be an integer from {low} to {high}, not {_short(value)}")
    return value


def _us(value, what: str) -> float:
    ok = type(value) in (int, float) and math.isfinite(value) and 0 <= value <= MAX_US
    if not ok:
        raise _Bad(f"{what} must be a finite number of microseconds >= 0, not {_short(value)}")
    return value


def _name(value, allowed, what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise _Bad(f"{what} must be one of {', '.join(allowed)}, not {_short(value)}")
    return value


def _text(value, what: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise _Bad(f"{what} must be text of at most {limit} characters")
    return value


def _object(value, required, optional, what: str) -> dict:
    if not isinstance(value, dict):
        raise _Bad(f"{what} must be an object")
    missing = [k for k in required if k not in value]
    unknown = sorted(str(k) for k in value if k not in required and k not in optional)
    if missing or unknown:
        raise _Bad(
            f"{what}: "
            + ("missing " + ", ".join(missing) if missing else "unknown " + ", ".join(unknown))
        )
    return value


def _list(value, limit: int, what: str) -> list:
    if not isinstance(value, list):
        raise _Bad(f"{what} must be a list")
    if len(value) > limit:
        raise _Bad(f"{what} holds {len(value)} items, at most {limit} are read")
    return value


def _check_machine_fields(value, what: str) -> None:
    machine = _object(value, MACHINE_FIELDS, (), what)
    for field in MACHINE_FIELDS:
        if field == "cores":
            _int(machine[field], 0, 1 << 24, f"{what}.cores")
        else:
            _text(machine[field], f"{what}.{field}")


def _check_entry(entry, section: str, what: str) -> tuple[str, int, int]:
    fields = ENTRY_FIELDS[section] + ("tuned_us", "rule_us")
    _object(entry, fields, ("rule",), what)
    collectives = CPU_COLLECTIVES if section == "cpu" else GPU_COLLECTIVES
    collective = _name(entry["collective"], collectives, f"{what}.collective")
    low = _int(entry["min_bytes"], 0, MAX_BYTES, f"{what}.min_bytes")
    high = entry["max_bytes"]
    high = MAX_BYTES + 1 if high is None else _int(high, 0, MAX_BYTES, f"{what}.max_bytes")
    if high <= low:
        raise _Bad(f"{what}: max_bytes {high} is not above min_bytes {low}")
    if section == "cpu":
        _name(entry["route"], CPU_ROUTES, f"{what}.route")
        _name(entry["algorithm"], CPU_ALGORITHMS, f"{what}.algorithm")
        chunk = entry["ring_chunk_bytes"]
        if chunk != 0:
            _int(chunk, CHUNK_MIN, CHUNK_MAX, f"{what}.ring_chunk_bytes (when not 0)")
        elif type(chunk) is not int:
            raise _Bad(f"{what}.ring_chunk_bytes must be an integer")
    else:
        route = _name(entry["route"], GPU_ROUTES, f"{what}.route")
        kernel = _name(entry["kernel"], GPU_KERNELS, f"{what}.kernel")
        if (kernel == "none") != (route == "vendor"):
            raise _Bad(f"{what}: kernel is none exactly when route is vendor")
    _us(entry["tuned_us"], f"{what}.tuned_us")
    _us(entry["rule_us"], f"{what}.rule_us")
    if "rule" in entry:
        _text(entry["rule"], f"{what}.rule", 256)
    return collective, low, high


def _check_section(value, section: str, what: str) -> int:
    if value is None:
        return 0
    body = _object(value, ("machine", "entries", "measured"), (), what)
    _check_machine_fields(body["machine"], f"{what}.machine")
    ranges = []
    for i, entry in enumerate(_list(body["entries"], MAX_ENTRIES, f"{what}.entries")):
        ranges.append(_check_entry(entry, section, f"{what}.entries[{i}]"))
    ranges.sort()
    for (c1, low1, high1), (c2, low2, _) in zip(ranges, ranges[1:]):
        if c1 == c2 and low2 < high1:
            raise _Bad(f"{what}: {c1} ranges from {low1} and from {low2} bytes overlap")
    collectives = CPU_COLLECTIVES if section == "cpu" else GPU_COLLECTIVES
    for i, m in enumerate(_list(body["measured"], MAX_MEASURED, f"{what}.measured")):
        where = f"{what}.measured[{i}]"
        _object(m, MEASURED_FIELDS, (), where)
        _name(m["collective"], collectives, f"{where}.collective")
        _int(m["bytes"], 0, MAX_BYTES, f"{where}.bytes")
        _text(m["candidate"], f"{where}.candidate", 128)
        for field in ("median_us", "p10_us", "p90_us"):
            _us(m[field], f"{where}.{field}")
        if not isinstance(m["verified"], bool):
            raise _Bad(f"{where}.verified must be true or false")
    return len(ranges)


def _check_table(table) -> None:
    top = ("format", "version", "created", "command", "machine", "world", "cpu", "gpu")
    _object(table, top, (), "the table")
    if table["format"] != FORMAT:
        raise _Bad(f"not an {FORMAT} file")
    if type(table["version"]) is not int or table["version"] != VERSION:
        raise _Bad(f"version {_short(table['version'])}, this xccl reads {VERSION}")
    _text(table["created"], "created", 64)
    _text(table["command"], "command")
    _check_machine_fields(table["machine"], "machine")
    world = _object(table["world"], ("size", "hosts", "locality"), (), "world")
    size = _int(world["size"], 1, (1 << 31) - 1, "world.size")
    _int(world["hosts"], 1, size, "world.hosts")
    _name(world["locality"], LOCALITIES, "world.locality")
    if table["cpu"] is None and table["gpu"] is None:
        raise _Bad("neither a cpu nor a gpu section")
    count = sum(_check_section(table[s], s, s) for s in SECTIONS.values())
    if count > MAX_ENTRIES:
        raise _Bad(f"{count} entries, at most {MAX_ENTRIES} in all")


def _load(path: str) -> tuple[dict | None, str, bool]:
    """(table, why, missing)."""
    try:
        table = verify.read_json_capped(path, MAX_FILE_BYTES)
    except FileNotFoundError:
        return None, f"no table at {path}", True
    except ValueError as error:
        return None, f"{path} is not a tuning table ({error})", False
    try:
        _check_table(table)
    except _Bad as error:
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
        _check_table(table)
    except _Bad as error:
        raise ValueError(f"not a valid tuning table: {error}") from None
    return table


def save(path: str, table: Mapping) -> None:
    """Writes `table` atomically. The file's section of the other device is kept when that file
    was made on the same machine (fingerprint) for the same world; otherwise replaced."""
    table = dict(table)
    try:
        _check_table(table)
    except _Bad as error:
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
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# What groups plan from

_overrides: list = []
_warned: set = set()


@contextlib.contextmanager
def override(text: str | None) -> Iterator[None]:
    """While active, groups created in this process get `text` ("" or None: no table) instead
    of the file: the tuner measures the rules and each candidate this way."""
    _overrides.append(text or "")
    try:
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
        return None, "", why, "" if missing else why
    try:
        fps = {s: _this_machine(d) for d, s in SECTIONS.items() if table[s] is not None}
    except Exception as error:  # noqa: BLE001 - an unreadable machine matches no table
        why = f"ignored {path}: this machine's facts are unreadable ({type(error).__name__})"
        return None, "", why, why
    reason = check_machine(table, fps)
    if reason:
        why = f"ignored {path}: made on another machine ({reason})"
        return None, "", why, why
    return table, canonical(table), f"table {path}", ""


def source() -> tuple[str, str]:
    """(canonical text, why) for a group being created: what `_C._set_tuning_source` calls on
    every rank. A bad or foreign file is warned about once per process per (file, reason)."""
    _, text, why, problem = _resolve()
    if problem:
        key = (default_path(), problem)
        if key not in _warned:
            _warned.add(key)
            warnings.warn(f"xccl: tuning table not used: {problem}; the rules plan", stacklevel=2)
    return text, why


def describe() -> str:
    """One line for `python -m xccl env` and doctor: the table in force here, or why none."""
    table, text, why, _ = _resolve()
    if table is None:
        return f"no table ({why})" if not text else f"a table {why}"
    world = table["world"]
    sections = ", ".join(
        f"{s} {len(table[s]['entries'])} entries" for s in SECTIONS.values() if table[s]
    )
    return (
        f"{why} made {table['created']} for world {world['size']}/{world['hosts']}/"
        f"{world['locality']} ({sections}); rank 0's table is the group's"
    )


def problem() -> str:
    """What is wrong with this process's table file ("" when nothing; for doctor's WARN)."""
    return _resolve()[3]
