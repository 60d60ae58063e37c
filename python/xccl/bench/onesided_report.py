"""Records, tables and target verdicts of the one-sided ops (put, put_pages): pure functions on
plain dicts, tested without torch. One record per op and size (report.py's shape, plus):

    {"op", "bytes", "count", "dtype", "nranks", "pages", "page_bytes",
     "backend": the tested op's side, "reference": the reference's send/recv side (put only),
     "baselines": {"send_recv", "memcpy"} (put) or {"put"} (put_pages), sides too,
     "ratios": {"put/memcpy", "put/send_recv", "put/gloo"} or {"put_pages/put"}: the other
               side's median time over the tested one's, i.e. tested GB/s / theirs,
     "speedup": the reference's ratio (report.py's meaning), or None}
"""

from __future__ import annotations

from . import method
from .options import format_size

# Issue 12's targets (docs/p2p.md, "Benchmarks"): the ratio, the least it may be, the smallest
# size it is stated for (or the page size), and where it holds.
TARGETS = (
    ("put/memcpy", 0.8, 1 << 20, "same host"),
    ("put_pages/put", 0.8, 64 << 10, "64 KiB pages, target case 1000 pages"),
    ("put/send_recv", 0.9, 1 << 20, "across hosts, per transport"),
)
LABELS = {"send_recv": "send/recv", "memcpy": "memcpy", "put": "put"}


def record(op: str, shape: dict, dtype: str, itemsize: int, names: dict, gathered: list) -> dict:
    """All ranks' results for one size (gathered: by rank, role -> measure's values) as one
    record; names: role -> backend name printed for it."""
    sides = {
        role: method.side_record(op, shape, names[role], [ranks[role] for ranks in gathered])
        for role in gathered[0]
    }
    entry = {
        "op": op,
        "bytes": shape["bytes"],
        "count": shape["count"],
        "dtype": dtype,
        "nranks": len(gathered),
        "pages": shape.get("pages"),
        "page_bytes": shape["page_elems"] * itemsize if "page_elems" in shape else None,
        "backend": sides.pop("backend"),
        "reference": sides.pop("reference", None),
        "baselines": sides,
    }
    # The reference is named by its backend ("put/gloo"), the other baselines by role.
    mine, reference = entry["backend"]["median_us"], entry["reference"]
    others = {**sides, **({reference["name"]: reference} if reference else {})}
    entry["ratios"] = {
        f"{op}/{name}": method.round6(method.speedup(side["median_us"], mine))
        for name, side in others.items()
    }
    entry["speedup"] = entry["ratios"][f"{op}/{reference['name']}"] if reference else None
    return entry


def _gbps(side: dict | None) -> str:
    """Three decimals below 1 GB/s, where small writes' bandwidth would read 0.00."""
    if not side or side.get("algbw_gbps") is None:
        return "-"
    value = side["algbw_gbps"]
    return f"{value:.3f}" if value < 1 else f"{value:.2f}"


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def _aligned(rows: list, title: str) -> str:
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(rows[0]))]
    lines = [title] if title else []
    lines += ["".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def _size_cells(record: dict) -> list:
    if record["pages"] is None:
        return [format_size(record["bytes"])]
    return [str(record["pages"]), format_size(record["page_bytes"]), format_size(record["bytes"])]


def format_table(records: list, title: str = "") -> str:
    """One op's rows: size (put_pages: pages, page size, bytes), every side's GB/s, the ratios
    and, when checked, the tested op's check."""
    if not records:
        return ""
    first = records[0]
    header = ["size"] if first["pages"] is None else ["pages", "page", "bytes"]
    header.append(first["op"])
    header += [LABELS.get(role, role) for role in first["baselines"]]
    if first["reference"]:
        header.append(f"{first['reference']['name']} send/recv")
    header += list(first["ratios"])
    checked = any(r["backend"].get("check") for r in records)
    header += ["check"] if checked else []
    rows = [header]
    for r in records:
        cells = _size_cells(r) + [_gbps(r["backend"])]
        cells += [_gbps(side) for side in r["baselines"].values()]
        cells += [_gbps(r["reference"])] if first["reference"] else []
        cells += [_ratio(r["ratios"].get(key)) for key in first["ratios"]]
        cells += [r["backend"].get("check") or "-"] if checked else []
        rows.append(cells)
    return _aligned(rows, title)


def op_title(op: str, meta: dict) -> str:
    n = meta["nranks"]
    return (
        f"# {op}  {meta['dtype']}, rank 0 -> rank {n - 1} of {n} on {meta['device']}, "
        f"{meta['backend']} window: GB/s of the same bytes (slowest rank's median); "
        "ratios = tested GB/s / the other's"
    )


def verdicts(records: list, ratio: str, least: float, floor: int, where: str) -> list:
    """The target line for one ratio over the records it is stated for (none: no line)."""
    op = ratio.split("/")[0]
    pages = op == "put_pages"
    measured = [
        (r["ratios"][ratio], r)
        for r in records
        if r["op"] == op
        and r["ratios"].get(ratio) is not None
        and ((r["page_bytes"] == floor) if pages else (r["bytes"] >= floor))
    ]
    if not measured:
        return []
    worst, at = min(measured, key=lambda pair: pair[0])
    size = f"{at['pages']} x {format_size(at['page_bytes'])}" if pages else format_size(at["bytes"])
    scope = "" if pages else f" at >= {format_size(floor)}"
    met = "met" if worst >= least else "NOT met"
    # Three decimals: 0.896 must not read as a target of 0.9 missed at "0.90".
    return [f"{ratio}{scope}: worst {worst:.3f} at {size} (target >= {least:g}, {where}: {met})"]


def summary_lines(records: list) -> list:
    """Every ratio's range over sizes, then the target lines that apply."""
    lines = []
    for op in dict.fromkeys(r["op"] for r in records):
        mine = [r for r in records if r["op"] == op]
        for key in mine[0]["ratios"]:
            values = [(r["ratios"][key], r) for r in mine if r["ratios"].get(key) is not None]
            if values:
                low, high = min(values, key=_first), max(values, key=_first)
                lines.append(
                    f"{key}: geomean {method.geomean([v for v, _ in values]):.2f}, min "
                    f"{low[0]:.2f} at {_where(low[1])}, max {high[0]:.2f} at {_where(high[1])}"
                )
    for ratio, least, floor, where in TARGETS[:2]:  # the cross-host one: netns_summary
        lines += verdicts(records, ratio, least, floor, where)
    return lines


def _first(pair):
    return pair[0]


def _where(record: dict) -> str:
    if record["pages"] is None:
        return format_size(record["bytes"])
    return f"{record['pages']} x {format_size(record['page_bytes'])}"


# -- across namespace hosts (netns.merge's rows: one side per network engine) ----------------


def netns_table(rows: list, title: str = "") -> str:
    """Per engine: the tested op's GB/s, its first baseline's (send/recv or put) and their
    ratio; then the reference's GB/s (put: gloo's send/recv, its best run)."""
    if not rows:
        return ""
    first = rows[0]
    nets, op = list(first["nets"]), first["op"]
    base = next(iter(first["baselines"][nets[0]]))
    header = ["size"] if first.get("pages") is None else ["pages", "page", "bytes"]
    for net in nets:
        header += [f"{op}/{net}", f"{LABELS.get(base, base)}/{net}", f"{op}/{base}"]
    header += ["gloo send/recv"] if first["gloo"] else []
    checked = any(side.get("check") for row in rows for side in row["nets"].values())
    header += ["check"] if checked else []
    table = [header]
    for row in rows:
        cells = _size_cells(row)
        for net in nets:
            cells += [
                _gbps(row["nets"].get(net)),
                _gbps((row["baselines"].get(net) or {}).get(base)),
                _ratio((row["ratios"].get(net) or {}).get(f"{op}/{base}")),
            ]
        cells += [_gbps(row["gloo"])] if first["gloo"] else []
        if checked:  # the tested op's check, over every engine
            passed = all(side.get("check") == "PASS" for side in row["nets"].values())
            cells.append("PASS" if passed else "FAIL")
        table.append(cells)
    return _aligned(table, title)


def netns_summary(rows: list) -> list:
    """The cross-host target per engine: put >= 90% of the same transport's send/recv."""
    ratio, least, floor, where = TARGETS[2]
    lines = []
    for net in dict.fromkeys(net for row in rows for net in row.get("ratios", {})):
        per_net = [
            {**row, "ratios": row["ratios"][net]} for row in rows if net in row.get("ratios", {})
        ]
        lines += [f"{net}: {line}" for line in verdicts(per_net, ratio, least, floor, where)]
    return lines
