"""What the benchmark prints and writes: progress bar, tables, CSV, JSON and the plot.

Everything works on plain records (dicts) so it is testable without torch. One record per op
and size:

    {"op", "bytes", "count", "dtype", "nranks",
     "backend": {"name", "iters", "warmup", "median_us", "p10_us", "p90_us", "mean_us",
                 "min_us", "max_us", "algbw_gbps", "busbw_gbps", "check", "rank_median_us"},
     "reference": same keys, or None,
     "more_references": with several --reference names only: the second and later ones,
     "speedup": reference median / backend median, or None,
     "loaded": with --load N only: {"load": N, and the keys above measured with the load}}
"""

from __future__ import annotations

import csv
import json
import sys
import time

from . import method
from .options import format_size

CSV_FIELDS = (
    "op",
    "dtype",
    "nranks",
    "device",
    "bytes",
    "count",
    "role",
    "backend",
    "iters",
    "warmup",
    "median_us",
    "p10_us",
    "p90_us",
    "mean_us",
    "min_us",
    "max_us",
    "algbw_gbps",
    "busbw_gbps",
    "speedup",
    "check",
    "load",
)


class Progress:
    """A one-line text bar on a terminal; on a pipe or file, one line per finished op instead
    (carriage-return redraws would fill a log with garbage).

    Not tqdm or rich: the package depends on torch alone, so that it installs on cluster nodes
    where only the job's own wheels are allowed, and a bar is this short class."""

    WIDTH = 24

    def __init__(self, total: int, stream=None, enabled: bool = True):
        self.total = max(1, total)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self.shown = ""

    def line(self, label: str) -> str:
        filled = self.WIDTH * self.done // self.total
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        elapsed = time.monotonic() - self.start
        return f"[{bar}] {self.done}/{self.total} {elapsed:5.0f}s {label}"

    def step(self, label: str) -> None:
        """Called as a size starts (label) or after one finishes (advance with advance())."""
        if self.tty:
            self._draw(self.line(label))

    def advance(self, label: str = "") -> None:
        self.done += 1
        self.step(label)

    def note(self, text: str) -> None:
        """A line that stays: on a terminal it replaces the bar, which is redrawn after."""
        if not self.enabled:
            return
        bar = self.shown
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()
        if bar:
            self._draw(bar)

    def clear(self) -> None:
        if self.tty and self.shown:
            self.stream.write("\r" + " " * len(self.shown) + "\r")
            self.stream.flush()
            self.shown = ""

    def _draw(self, text: str) -> None:
        pad = " " * max(0, len(self.shown) - len(text))
        self.stream.write("\r" + text + pad)
        self.stream.flush()
        self.shown = text


def _us(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}" if value < 10000 else f"{value:.0f}"


def _gbps(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _speedup(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def references(record: dict) -> list:
    """The record's reference sides in --reference's order (absent ones included)."""
    return [side for side in [record.get("reference"), *record.get("more_references", [])] if side]


def sides_of(record: dict) -> list:
    """The tested side, then the references."""
    return [side for side in [record.get("backend"), *references(record)] if side]


def _check(record: dict) -> str | None:
    """PASS, FAIL naming who failed, or None when nothing was checked."""
    sources = [("", record)] + ([(" loaded", record["loaded"])] if record.get("loaded") else [])
    checked = [
        (label, side)
        for label, source in sources
        for side in sides_of(source)
        if side.get("check") is not None
    ]
    if not checked:
        return None
    failed = [side["name"] + label for label, side in checked if side["check"] != "PASS"]
    return "FAIL " + ",".join(failed) if failed else "PASS"


def format_table(records: list, title: str = "") -> str:
    """One op's rows as an aligned text table (times in microseconds, bandwidths in GB/s).

    Per reference: its p50, p90, busbw and the speedup over it; the floor (peers.py) instead
    gets the tested p50 minus the floor's p50, the tested backend's own time above torch's
    dispatch. A reference without the op or dtype reads "absent"."""
    if not records:
        return ""
    name = records[0]["backend"]["name"]
    refs = [side["name"] for side in references(records[0])]
    checked = any(_check(r) is not None for r in records)
    header = ["size", "count", f"{name} p50", "p10", "p90", "algbw", "busbw"]
    units = ["", "elements", "us", "us", "us", "GB/s", "GB/s"]
    for ref in refs:
        if ref == FLOOR:
            header += [f"{ref} p50", "p90", f"{name}-{ref}"]
            units += ["us", "us", "us"]
        else:
            header += [f"{ref} p50", "p90", f"{ref} busbw", "speedup"]
            units += ["us", "us", "GB/s", ""]
    loaded = next((r["loaded"]["load"] for r in records if r.get("loaded")), None)
    if loaded is not None:
        # The same sizes with --load N busy processes beside the ranks (load.py).
        header += [f"load {loaded}: {name}", "p90"]
        units += ["us", "us"]
        for ref in refs:
            header += [f"{ref}", "p90", f"{name}-{ref}" if ref == FLOOR else "speedup"]
            units += ["us", "us", "us" if ref == FLOOR else ""]
    if checked:
        header.append("check")
        units.append("")
    rows = [header, units]
    for record in records:
        mine = record["backend"]
        cells = [
            format_size(record["bytes"]),
            str(record["count"]),
            _us(mine["median_us"]),
            _us(mine["p10_us"]),
            _us(mine["p90_us"]),
            _gbps(mine["algbw_gbps"]),
            _gbps(mine["busbw_gbps"]),
        ]
        for theirs in references(record):
            cells += _reference_cells(mine, theirs)
        if loaded is not None:
            cells += _loaded_cells(record.get("loaded"), len(refs))
        if checked:
            cells.append(_check(record) or "-")
        rows.append(cells)
    # Right-aligned, two spaces between columns, every column as wide as its widest cell.
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(len(header))]
    lines = [title] if title else []
    lines += ["".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
    return "\n".join(lines)


FLOOR = "floor"  # peers.py's name for torch's fake backend


def _reference_cells(mine: dict, theirs: dict) -> list:
    if theirs.get("absent"):
        return ["absent"] + ["-"] * (2 if theirs["name"] == FLOOR else 3)
    cells = [_us(theirs["median_us"]), _us(theirs["p90_us"])]
    if theirs["name"] == FLOOR:
        above = None
        if mine.get("median_us") is not None and theirs.get("median_us") is not None:
            above = mine["median_us"] - theirs["median_us"]
        return cells + [_us(above)]
    return cells + [
        _gbps(theirs["busbw_gbps"]),
        _speedup(method.speedup(theirs["median_us"], mine.get("median_us"))),
    ]


def _loaded_cells(loaded: dict | None, nrefs: int) -> list:
    if not loaded:
        return ["-"] * (2 + 3 * nrefs)
    mine = loaded["backend"]
    cells = [_us(mine["median_us"]), _us(mine["p90_us"])]
    for theirs in references(loaded):
        cells += _reference_cells(mine, theirs)
        if theirs["name"] != FLOOR:
            del cells[-2]  # no busbw among the loaded columns
    return cells


def op_title(op: str, meta: dict) -> str:
    names = meta.get("references") or ([meta["reference"]] if meta.get("reference") else [])
    versus = f" vs {', '.join(names)}" if names else ""
    return (
        f"# {op}  {meta['dtype']}, {meta['nranks']} ranks on {meta['device']}: "
        f"{meta['backend']}{versus} (slowest rank; p50 (median), p10, p90 of per-call times)"
    )


def summary_line(op: str, records: list, index: int = 0) -> str | None:
    """How the tested backend fared against the index-th reference across one op's sizes."""
    pairs = []
    for r in records:
        theirs = references(r)[index] if len(references(r)) > index else {}
        value = method.speedup(theirs.get("median_us"), r["backend"].get("median_us"))
        if value:
            pairs.append((value, r["bytes"]))
    if not pairs:
        return None
    name = records[0]["backend"]["name"]
    if index or len(references(records[0])) > 1:
        op = f"{op} vs {references(records[0])[index]['name']}"
    faster = sum(1 for s, _ in pairs if s > 1.0)
    low = min(pairs)
    high = max(pairs)
    return (
        f"{op}: {name} faster at {faster} of {len(pairs)} sizes; speedup geomean "
        f"{method.geomean([s for s, _ in pairs]):.2f}x, min {low[0]:.2f}x at "
        f"{format_size(low[1])}, max {high[0]:.2f}x at {format_size(high[1])}"
    )


def csv_rows(records: list, device: str = "") -> list:
    """One row per record and role; a --load record's loaded sides follow it, with "load"."""
    rows = []
    for record in (r for top in records for r in (top, top.get("loaded")) if r):
        # One-sided records (onesided_report.py) add their baselines, a row per role.
        roles = {"backend": record.get("backend"), "reference": record.get("reference")}
        for index, side in enumerate(record.get("more_references", []), start=2):
            roles[f"reference{index}"] = side
        for role, side in {**roles, **record.get("baselines", {})}.items():
            if not side:
                continue
            row = {
                "op": record["op"],
                "dtype": record["dtype"],
                "nranks": record["nranks"],
                "device": device,
                "bytes": record["bytes"],
                "count": record["count"],
                "role": role,
                "backend": side["name"],
                "speedup": record.get("speedup") if role == "backend" else None,
                "load": record.get("load", 0),
            }
            row.update({k: side.get(k) for k in CSV_FIELDS if k in side})
            rows.append({k: ("" if row.get(k) is None else row[k]) for k in CSV_FIELDS})
    return rows


def write_csv(path: str, records: list, device: str = "") -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(csv_rows(records, device))


def to_json(records: list, meta: dict) -> str:
    return json.dumps({"meta": meta, "results": records}, indent=2, sort_keys=False)


def write_json(path: str, records: list, meta: dict) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(to_json(records, meta) + "\n")


def write_plot(path: str, records: list, meta: dict) -> None:
    """Latency and busbw against size, one row per op, both backends (matplotlib, headless)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = list(dict.fromkeys(r["op"] for r in records))
    figure, axes = plt.subplots(len(ops), 2, figsize=(11, 3.2 * len(ops)), squeeze=False)
    for row, op in enumerate(ops):
        mine = [r for r in records if r["op"] == op]
        sizes = [r["bytes"] for r in mine]
        latency, bandwidth = axes[row]
        for role, style in (("backend", "o-"), ("reference", "s--")):
            sides = [r[role] for r in mine if r.get(role) and not r[role].get("absent")]
            if len(sides) != len(mine):
                continue
            label = sides[0]["name"]
            (line,) = latency.plot(sizes, [s["median_us"] for s in sides], style, label=label)
            latency.fill_between(
                sizes,
                [s["p10_us"] for s in sides],
                [s["p90_us"] for s in sides],
                alpha=0.2,
                color=line.get_color(),
            )
            bandwidth.plot(
                sizes, [s["busbw_gbps"] for s in sides], style, label=label, color=line.get_color()
            )
        latency.set(
            xscale="log",
            yscale="log",
            ylabel="time (us), median and p10-p90",
            title=f"{op} latency",
        )
        bandwidth.set(xscale="log", ylabel="busbw (GB/s)", title=f"{op} bus bandwidth")
        for axis in (latency, bandwidth):
            axis.set_xscale("log", base=2)
            axis.set_xlabel("message size (bytes)")
            axis.grid(True, which="both", alpha=0.3)
            axis.legend()
    figure.suptitle(
        f"{meta.get('backend')} vs {meta.get('reference')}: {meta.get('nranks')} "
        f"ranks, {meta.get('device')}, {meta.get('dtype')}"
    )
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
