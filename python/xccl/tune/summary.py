"""The summary rank 0 prints at the end: per collective and size class, the rule's plan and
time, the tuned plan and time, the gain (pure; rows from verdict.summary_rows)."""

from __future__ import annotations

from . import candidates as cands
from . import verdict


def _range(low: int, high: int | None) -> str:
    top = "inf" if high is None else cands.size_label(high)
    return f"[{cands.size_label(low) if low else '0'}, {top})"


def _us(value: float) -> str:
    return f"{value:.1f}" if value < 10000 else f"{value:.0f}"


def format_summary(rows: list, world: dict, device: str) -> str:
    header = ("collective", "range", "size", "rule", "us", "tuned", "us", "gain", "")
    cells = [header]
    for row in rows:
        tuned = row["note"].startswith("tuned")
        cells.append(
            (
                row["collective"],
                _range(row["low"], row["high"]),
                cands.size_label(row["bytes"]),
                row["rule"],
                _us(row["rule_us"]),
                row["tuned"] if tuned else "-",
                _us(row["tuned_us"]) if tuned else "-",
                f"{row['gain'] * 100:+.0f}%" if tuned else "-",
                row["note"] if not tuned or "WRONG" in row["note"] else "",
            )
        )
    widths = [max(len(str(c[i])) for c in cells) for i in range(len(header))]
    lines = [
        f"xccl tune summary: {device}, world {world['size']} ranks / {world['hosts']} host(s) / "
        f"{world['locality']}; times are medians (max over ranks) in us; a plan is tuned only "
        f"when it is exact at every size and beats the rule's median by > "
        f"{verdict.MIN_GAIN:.0%}, its p90 no higher, in two interleaved timings"
    ]
    for c in cells:
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(c, widths)).rstrip())
    tuned = sum(1 for r in rows if r["note"].startswith("tuned"))
    lines.append(f"{tuned} of {len(rows)} sizes tuned; the rest follow the built-in rules")
    return "\n".join(lines)
