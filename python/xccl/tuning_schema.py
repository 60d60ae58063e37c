"""The schema of a tuning table file (python/xccl/tuning.py): every field's type and range.

The file is hostile input: any value out of its range, of another type, a name outside the
allowed sets, overlapping ranges or too many entries make `check_table` raise `BadTable` naming the
field, and the loader turns that into "no table".
"""

from __future__ import annotations

import math

from . import vocabulary

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
# The names come from the plan vocabulary (csrc/common/vocabulary.h, through vocabulary.py).
LOCALITIES = vocabulary.LOCALITIES
CPU_COLLECTIVES = vocabulary.CPU_COLLECTIVES
CPU_ROUTES = vocabulary.CPU_ROUTES
CPU_ALGORITHMS = vocabulary.CPU_ALGORITHMS
GPU_COLLECTIVES = vocabulary.GPU_COLLECTIVES
GPU_ROUTES = vocabulary.GPU_ROUTES
GPU_KERNELS = vocabulary.GPU_KERNELS
MACHINE_FIELDS = ("topology", "cpu_model", "cores", "gpu_model", "driver", "nics", "xccl", "torch")
ENTRY_FIELDS = {
    "cpu": ("collective", "min_bytes", "max_bytes", "route", "algorithm", "ring_chunk_bytes"),
    "gpu": ("collective", "min_bytes", "max_bytes", "route", "kernel"),
}
MEASURED_FIELDS = ("collective", "bytes", "candidate", "median_us", "p10_us", "p90_us", "verified")


class BadTable(ValueError):
    """What is wrong with a table (the loader turns it into its `why`)."""


def short(value) -> str:
    text = repr(value)
    return text if len(text) <= 64 else text[:60] + "...'"


# ---------------------------------------------------------------------------------------------


def _int(value, low: int, high: int, what: str) -> int:
    if type(value) is not int or not low <= value <= high:
        raise BadTable(f"{what} must be an integer from {low} to {high}, not {short(value)}")
    return value


def _us(value, what: str) -> float:
    ok = type(value) in (int, float) and math.isfinite(value) and 0 <= value <= MAX_US
    if not ok:
        raise BadTable(f"{what} must be a finite number of microseconds >= 0, not {short(value)}")
    return value


def _name(value, allowed, what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise BadTable(f"{what} must be one of {', '.join(allowed)}, not {short(value)}")
    return value


def _text(value, what: str, limit: int = MAX_TEXT) -> str:
    if not isinstance(value, str) or len(value) > limit:
        raise BadTable(f"{what} must be text of at most {limit} characters")
    return value


def _object(value, required, optional, what: str) -> dict:
    if not isinstance(value, dict):
        raise BadTable(f"{what} must be an object")
    missing = [k for k in required if k not in value]
    unknown = sorted(str(k) for k in value if k not in required and k not in optional)
    if missing or unknown:
        raise BadTable(
            f"{what}: "
            + ("missing " + ", ".join(missing) if missing else "unknown " + ", ".join(unknown))
        )
    return value


def _list(value, limit: int, what: str) -> list:
    if not isinstance(value, list):
        raise BadTable(f"{what} must be a list")
    if len(value) > limit:
        raise BadTable(f"{what} holds {len(value)} items, at most {limit} are read")
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
        raise BadTable(f"{what}: max_bytes {high} is not above min_bytes {low}")
    if section == "cpu":
        _name(entry["route"], CPU_ROUTES, f"{what}.route")
        _name(entry["algorithm"], CPU_ALGORITHMS, f"{what}.algorithm")
        chunk = entry["ring_chunk_bytes"]
        if chunk != 0:
            _int(chunk, CHUNK_MIN, CHUNK_MAX, f"{what}.ring_chunk_bytes (when not 0)")
        elif type(chunk) is not int:
            raise BadTable(f"{what}.ring_chunk_bytes must be an integer")
    else:
        route = _name(entry["route"], GPU_ROUTES, f"{what}.route")
        kernel = _name(entry["kernel"], GPU_KERNELS, f"{what}.kernel")
        if (kernel == vocabulary.NONE) != (route == vocabulary.VENDOR):
            raise BadTable(
                f"{what}: kernel is {vocabulary.NONE} exactly when route is {vocabulary.VENDOR}"
            )
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
            raise BadTable(f"{what}: {c1} ranges from {low1} and from {low2} bytes overlap")
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
            raise BadTable(f"{where}.verified must be true or false")
    return len(ranges)


def check_table(table) -> None:
    top = ("format", "version", "created", "command", "machine", "world", "cpu", "gpu")
    _object(table, top, (), "the table")
    if table["format"] != FORMAT:
        raise BadTable(f"not an {FORMAT} file")
    if type(table["version"]) is not int or table["version"] != VERSION:
        raise BadTable(f"version {short(table['version'])}, this xccl reads {VERSION}")
    _text(table["created"], "created", 64)
    _text(table["command"], "command")
    _check_machine_fields(table["machine"], "machine")
    world = _object(table["world"], ("size", "hosts", "locality"), (), "world")
    size = _int(world["size"], 1, (1 << 31) - 1, "world.size")
    _int(world["hosts"], 1, size, "world.hosts")
    _name(world["locality"], LOCALITIES, "world.locality")
    if table["cpu"] is None and table["gpu"] is None:
        raise BadTable("neither a cpu nor a gpu section")
    count = sum(_check_section(table[s], s, s) for s in SECTIONS.values())
    if count > MAX_ENTRIES:
        raise BadTable(f"{count} entries, at most {MAX_ENTRIES} in all")
