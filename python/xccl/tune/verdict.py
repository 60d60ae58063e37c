"""From measurements to a table (pure; no torch): which candidate beat the rule beyond the noise
at each measured size, which results were wrong, and the table entries that follow.

A measurement is a dict as the table's "measured" list holds it: collective, bytes, candidate
(its name; "rule" for the group planned by the built-in rules), median_us, p10_us, p90_us (each
the maximum over ranks of the rank's statistic over its timed calls) and verified (its result
was exact at that size).
"""

from __future__ import annotations

from .. import vocabulary as V
from . import candidates as cands

RULE = "rule"
# A candidate beats the rule at a size only when both hold:
#  - its median is at least MIN_GAIN below the rule's (smaller wins are not worth a table entry
#    that may age badly), and
#  - its p90 is not above the rule's: its slow calls are no slower than the rule's, so the win
#    is not bought with a worse tail;
# and only when a second interleaved timing repeats it (confirmed(): the rule's faster run
# against the candidate's slower). Replication is the noise test: with ranks oversubscribed on
# a busy host one run's p90 is 1.5-2.5x its median (benchmarks/RESULTS.md), so a test within
# one run (the candidate's p90 below the rule's median) would reject even clear wins.
MIN_GAIN = 0.05


def gain(rule: dict, candidate: dict) -> float:
    """How much faster the candidate is: rule median / candidate median - 1 (0.25 = 25%)."""
    if candidate["median_us"] <= 0:
        return 0.0
    return rule["median_us"] / candidate["median_us"] - 1.0


def beats(candidate: dict, rule: dict) -> bool:
    return (
        candidate["median_us"] < rule["median_us"] * (1.0 - MIN_GAIN)
        and candidate["p90_us"] <= rule["p90_us"]
    )


def winners(rows: list) -> list:
    """The candidates that beat the rule in one size's rows (verified ones only)."""
    rule = next((r for r in rows if r["candidate"] == RULE), None)
    return [
        r["candidate"]
        for r in rows
        if rule and r["candidate"] != RULE and r["verified"] and beats(r, rule)
    ]


def confirmed(first: list, again: list) -> list:
    """One size's rows after a second timing of the rule and the first run's winners (`again`):
    the rule keeps its faster run and each candidate its slower, so a candidate beats the rule
    only where it did in both runs (one run's gap on oversubscribed cores can be noise). A
    result wrong in either run stays wrong."""
    by_name = {r["candidate"]: dict(r) for r in first}
    for row in again:
        before = by_name[row["candidate"]]
        faster = row["median_us"] < before["median_us"]
        if faster == (row["candidate"] == RULE):
            by_name[row["candidate"]] = dict(row, verified=row["verified"] and before["verified"])
        else:
            before["verified"] = before["verified"] and row["verified"]
    return [by_name[r["candidate"]] for r in first]


def wrong(measured: list) -> dict:
    """(collective, candidate) -> sorted sizes whose result was not exact."""
    found = {}
    for row in measured:
        if not row["verified"]:
            found.setdefault((row["collective"], row["candidate"]), set()).add(row["bytes"])
    return {key: sorted(sizes) for key, sizes in found.items()}


def per_size(measured: list, collective: str) -> list:
    """[(bytes, rule row, {candidate: row})] in size order, for the sizes the rule was measured."""
    rows = [r for r in measured if r["collective"] == collective]
    rules = {r["bytes"]: r for r in rows if r["candidate"] == RULE}
    out = []
    for size in sorted(rules):
        others = {r["candidate"]: r for r in rows if r["bytes"] == size and r["candidate"] != RULE}
        out.append((size, rules[size], others))
    return out


def decide(measured: list, collective: str) -> list:
    """[(bytes, rule row, winner row or None)] per measured size: the fastest candidate that
    beats the rule there, among those whose results were exact at EVERY size of the collective
    (one wrong result disqualifies the candidate for the whole collective)."""
    bad = {name for (op, name) in wrong(measured) if op == collective}
    if not rule_ok(measured, collective):
        return [(size, rule, None) for size, rule, _ in per_size(measured, collective)]
    decided, previous = [], None
    for size, rule, others in per_size(measured, collective):
        winners = [r for name, r in others.items() if name not in bad and beats(r, rule)]
        best = min(winners, key=lambda r: r["median_us"], default=None)
        # The previous size's winner stays where it also won and the fastest is not faster
        # beyond its noise: plans that differ only in noise (ring chunks on small messages)
        # would otherwise cut the table into alternating entries.
        kept = next((r for r in winners if r["candidate"] == previous), None)
        if kept is not None and not beats(best, kept):
            best = kept
        decided.append((size, rule, best))
        previous = best["candidate"] if best else None
    if collective in cands.WHOLE_RANGE_OPS:
        return whole_range(decided, measured, collective, bad)
    return decided


def rule_ok(measured: list, collective: str) -> bool:
    """A wrong result from the rule's own group means the measurement itself is suspect: nothing
    is tuned for that collective (the summary names it)."""
    return (collective, RULE) not in wrong(measured)


def whole_range(decided: list, measured: list, collective: str, bad: set) -> list:
    """For collectives whose entry must cover every size: one candidate everywhere, chosen only
    if it beat the rule somewhere and the rule beat it nowhere (same test, roles swapped)."""
    sizes = per_size(measured, collective)
    best, best_key = None, None
    names = {name for _, _, others in sizes for name in others} - bad
    for name in sorted(names):
        rows = [others.get(name) for _, _, others in sizes]
        if any(r is None for r in rows):
            continue  # not measured at every size: no evidence for the sizes it skipped
        wins = sum(beats(r, rule) for r, (_, rule, _) in zip(rows, sizes))
        losses = sum(beats(rule, r) for r, (_, rule, _) in zip(rows, sizes))
        key = (-wins, sum(r["median_us"] for r in rows))
        if wins and not losses and (best_key is None or key < best_key):
            best, best_key = name, key
    if best is None:
        return [(size, rule, None) for size, rule, _ in decided]
    return [(size, rule, others[best]) for size, rule, others in sizes]


def build_entries(measured: list, candidates: dict, rule_labels: dict, device: str) -> list:
    """Table entries (the JSON shape of xccl.tuning) for the ranges where a verified candidate
    won: each measured size's class reaches to the geometric mean with its neighbours, adjacent
    classes won by the same candidate merge, and ranges the rule keeps are left out.
    candidates: name -> Candidate; rule_labels: (collective, bytes) -> "shm one_shot"."""
    entries = []
    for collective in dict.fromkeys(r["collective"] for r in measured):
        decided = decide(measured, collective)
        bounds = cands.class_bounds([size for size, _, _ in decided])
        runs = []  # [name, low, high, rule row, winner row]: adjacent wins of one candidate
        for (_, rule, won), (low, high) in zip(decided, bounds):
            name = won["candidate"] if won else None
            if runs and runs[-1][0] == name:
                runs[-1][2:] = [high, rule, won]  # the display numbers: the largest size's
            else:
                runs.append([name, low, high, rule, won])
        for name, low, high, rule, won in runs:
            if name is None:
                continue
            entries.append(
                _entry(candidates[name], collective, low, high, rule, won, rule_labels, device)
            )
    return entries


def _entry(candidate, collective, low, high, rule, won, rule_labels, device) -> dict:
    entry = {
        "collective": collective,
        "min_bytes": low,
        "max_bytes": high,
        "route": candidate.route,
    }
    if device == "cpu":
        entry["algorithm"] = candidate.algorithm
        entry["ring_chunk_bytes"] = candidate.chunk
    else:
        entry["kernel"] = V.NONE if candidate.route == V.VENDOR else candidate.algorithm
    entry["tuned_us"] = won["median_us"]
    entry["rule_us"] = rule["median_us"]
    entry["rule"] = rule_labels.get((collective, rule["bytes"]), RULE)
    return entry


def summary_rows(measured: list, rule_labels: dict, candidates: dict) -> list:
    """One row per collective and measured size for the summary: collective, range, size, the
    rule's plan and median, the tuned plan and median (the rule's own where nothing beat it),
    the gain, and a note (wrong results, "same as rule", or the best loser's gain)."""
    rows = []
    for collective in dict.fromkeys(r["collective"] for r in measured):
        decided = decide(measured, collective)
        bad = wrong(measured)
        bounds = cands.class_bounds([size for size, _, _ in decided])
        for (size, rule, won), (low, high) in zip(decided, bounds):
            label = rule_labels.get((collective, size), RULE)
            row = {
                "collective": collective,
                "low": low,
                "high": high,
                "bytes": size,
                "rule": label,
                "rule_us": rule["median_us"],
                "tuned": label,
                "tuned_us": rule["median_us"],
                "gain": 0.0,
                "note": "same as rule",
            }
            if won:
                name = won["candidate"]
                row.update(tuned=candidates[name].label, tuned_us=won["median_us"])
                row.update(gain=gain(rule, won), note="tuned")
            wrongs = [
                candidates[name].label if name in candidates else name
                for (op, name), sizes in bad.items()
                if op == collective and size in sizes
            ]
            if wrongs:
                row["note"] += "; WRONG RESULT: " + ", ".join(sorted(wrongs))
            rows.append(row)
    return rows
