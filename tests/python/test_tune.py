"""xccl.tune: the verdict and table building on fixed measurements (pure), the candidates and
their forcing tables, and real runs of `python -m xccl tune` on 2 local CPU ranks: a valid table
and its summary, and a candidate whose result is wrong (injected in the backend) never winning.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import tune_rank
from xccl.tune import candidates as cands
from xccl.tune import summary, verdict

KiB, MiB = 1 << 10, 1 << 20
RING = cands.Candidate("cpu", "tcp", "ring", 512 * KiB, cands.RING_OPS)
DIRECT = cands.Candidate("cpu", "tcp", "direct", 0, cands.CPU_OPS)
TWO_SHOT = cands.Candidate("cpu", "shm", "two_shot", 0, ("all_reduce", "reduce"))
BY_NAME = {c.name: c for c in (RING, DIRECT, TWO_SHOT)}


def row(collective, size, candidate, median, spread=0.02, verified=True):
    return {
        "collective": collective,
        "bytes": size,
        "candidate": candidate,
        "median_us": median,
        "p10_us": median * (1 - spread),
        "p90_us": median * (1 + spread),
        "verified": verified,
    }


def test_verdict_needs_gain_and_a_p90_no_higher_than_the_rules():
    rule = row("all_reduce", 1024, "rule", 100.0)
    assert verdict.beats(row("all_reduce", 1024, RING.name, 80.0), rule)
    # Within noise: 3% faster is under MIN_GAIN.
    assert not verdict.beats(row("all_reduce", 1024, RING.name, 97.0), rule)
    # 10% faster at the median, but its p90 (108) above the rule's (102): a worse tail.
    assert not verdict.beats(row("all_reduce", 1024, RING.name, 90.0, spread=0.2), rule)
    # A wide spread on both sides does not hide a clear win.
    wide_rule = row("all_reduce", 1024, "rule", 100.0, spread=0.8)
    assert verdict.beats(row("all_reduce", 1024, RING.name, 80.0, spread=0.8), wide_rule)
    assert verdict.gain(rule, row("all_reduce", 1024, RING.name, 80.0)) == pytest.approx(0.25)


def test_a_win_counts_only_when_a_second_timing_repeats_it():
    first = [
        row("all_reduce", 1024, "rule", 100.0),
        row("all_reduce", 1024, RING.name, 70.0),
        row("all_reduce", 1024, "tcp_direct", 99.0),
    ]
    assert verdict.winners(first) == [RING.name]
    # The second run: the rule was faster and the ring slower; each keeps its worse showing
    # for the ring: the rule's 80 (its faster run) against the ring's 78 (its slower) is no win.
    again = [row("all_reduce", 1024, "rule", 80.0), row("all_reduce", 1024, RING.name, 78.0)]
    rows = verdict.confirmed(first, again)
    assert [r["median_us"] for r in rows] == [80.0, 78.0, 99.0]
    assert verdict.winners(rows) == []
    # Repeated clearly: the win stands, with the conservative numbers.
    again = [row("all_reduce", 1024, "rule", 105.0), row("all_reduce", 1024, RING.name, 72.0)]
    rows = verdict.confirmed(first, again)
    assert [r["median_us"] for r in rows] == [100.0, 72.0, 99.0]
    assert verdict.winners(rows) == [RING.name]
    # Wrong in the second run: wrong for good, whichever run's numbers are kept.
    bad = dict(row("all_reduce", 1024, RING.name, 60.0), verified=False)
    rows = verdict.confirmed(first, [row("all_reduce", 1024, "rule", 100.0), bad])
    assert not rows[1]["verified"] and verdict.winners(rows) == []


def test_class_bounds_are_geometric_means_from_zero_to_inf():
    assert cands.class_bounds([1 * KiB, 16 * KiB, 256 * KiB]) == [
        (0, 4 * KiB),
        (4 * KiB, 64 * KiB),
        (64 * KiB, None),
    ]
    assert cands.class_bounds([7]) == [(0, None)]
    assert cands.class_bounds([5, 6]) == [(0, 6), (6, None)]  # neighbours: still past 5


def measurements(times: dict, verified=None) -> list:
    """times: candidate -> [median per size] over sizes 1K, 16K, 256K, 4M (all_reduce)."""
    sizes = [1 * KiB, 16 * KiB, 256 * KiB, 4 * MiB]
    verified = verified or {}
    return [
        row("all_reduce", size, name, t, verified=verified.get((name, size), True))
        for name, medians in times.items()
        for size, t in zip(sizes, medians)
    ]


def test_entries_only_where_a_candidate_wins_and_adjacent_wins_merge():
    measured = measurements(
        {
            "rule": [10.0, 50.0, 400.0, 9000.0],
            DIRECT.name: [9.9, 30.0, 200.0, 9100.0],  # within noise at 1K, wins 16K and 256K
            RING.name: [30.0, 60.0, 300.0, 5000.0],  # wins 4M; at 256K direct is faster
        }
    )
    labels = {("all_reduce", 4 * MiB): "shm one_shot"}
    entries = verdict.build_entries(measured, BY_NAME, labels, "cpu")
    assert [(e["min_bytes"], e["max_bytes"], e["algorithm"]) for e in entries] == [
        (4 * KiB, 1 * MiB, "direct"),  # 16K and 256K merged
        (1 * MiB, None, "ring"),
    ]
    assert entries[0]["tuned_us"] == 200.0 and entries[0]["rule_us"] == 400.0
    assert entries[1]["ring_chunk_bytes"] == 512 * KiB and entries[1]["rule"] == "shm one_shot"
    from xccl import tuning

    world = {"size": 2, "hosts": 1, "locality": "one_host"}
    table = tuning.new_table("cpu", world, entries, "python -m xccl tune", measured)
    assert tuning.canonical(table).splitlines()[2:] == [
        "cpu all_reduce 4096 1048576 tcp direct 0 200000 400000",
        "cpu all_reduce 1048576 inf tcp ring 524288 5000000 9000000",
    ]
    rows = verdict.summary_rows(measured, labels, BY_NAME)
    assert [r["note"] for r in rows] == ["same as rule", "tuned", "tuned", "tuned"]
    text = summary.format_summary(rows, {"size": 2, "hosts": 1, "locality": "one_host"}, "cpu")
    assert "same as rule" in text and "+80%" in text and "3 of 4 sizes tuned" in text


def test_a_winner_keeps_the_next_size_against_a_plan_only_faster_within_noise():
    ring_2m = cands.Candidate("cpu", "tcp", "ring", 2 * MiB, cands.RING_OPS)
    by_name = {**BY_NAME, ring_2m.name: ring_2m}
    measured = measurements(
        {
            "rule": [40.0, 40.0, 40.0, 40.0],
            RING.name: [7.0, 7.2, 7.0, 9.0],
            ring_2m.name: [7.1, 7.0, 6.9, 4.0],  # within noise of RING but at 4M: clearly faster
        }
    )
    entries = verdict.build_entries(measured, by_name, {}, "cpu")
    assert [(e["min_bytes"], e["max_bytes"], e["ring_chunk_bytes"]) for e in entries] == [
        (0, 1 * MiB, 512 * KiB),
        (1 * MiB, None, 2 * MiB),
    ]


def test_a_wrong_result_disqualifies_the_candidate_at_every_size():
    measured = measurements(
        {"rule": [10.0, 50.0, 400.0, 9000.0], RING.name: [1.0, 5.0, 40.0, 900.0]},
        verified={(RING.name, 256 * KiB): False},
    )
    assert verdict.build_entries(measured, BY_NAME, {}, "cpu") == []
    rows = verdict.summary_rows(measured, {}, BY_NAME)
    assert all(not r["note"].startswith("tuned") for r in rows)
    assert "WRONG RESULT: tcp ring 512K" in rows[2]["note"]


def test_a_wrong_rule_result_tunes_nothing_for_that_collective():
    measured = measurements(
        {"rule": [10.0, 50.0, 400.0, 9000.0], DIRECT.name: [1.0, 5.0, 40.0, 900.0]},
        verified={("rule", 1 * KiB): False},
    )
    assert verdict.build_entries(measured, BY_NAME, {}, "cpu") == []


def test_all_to_all_gets_one_entry_for_every_size_or_none():
    sizes = [1 * KiB, 1 * MiB]

    def a2a(rule_times, direct_times):
        return [row("all_to_all", s, "rule", t) for s, t in zip(sizes, rule_times)] + [
            row("all_to_all", s, DIRECT.name, t) for s, t in zip(sizes, direct_times)
        ]

    won = verdict.build_entries(a2a([100.0, 900.0], [50.0, 880.0]), BY_NAME, {}, "cpu")
    assert [(e["min_bytes"], e["max_bytes"]) for e in won] == [(0, None)]
    # Faster small, clearly slower large: the rule keeps every size.
    assert verdict.build_entries(a2a([100.0, 900.0], [50.0, 2000.0]), BY_NAME, {}, "cpu") == []


def test_candidates_follow_the_group_shape():
    one_host = {c.name for c in cands.cpu_candidates("one_host", 2, cands.DEFAULT_OPS, True)}
    assert one_host == {"shm_one_shot", "shm_two_shot", "tcp_direct", "tcp_ring_512K"}
    full = {c.name for c in cands.cpu_candidates("none", 4, ["broadcast"], False)}
    assert full == {"tcp_direct", "tcp_ring_128K", "tcp_ring_512K", "tcp_ring_2M"}
    per_host = {c.name for c in cands.cpu_candidates("per_host", 4, ["all_to_all"], True)}
    assert per_host == {"tcp_direct"}  # all_to_all has no ring; hierarchical is the rule
    gpu = {c.name: c.ops for c in cands.gpu_candidates(cands.GPU_OPS)}
    assert gpu["kernel_two_shot"] == ("all_reduce",)
    assert gpu["kernel_all_pairs"] == ("all_gather", "reduce_scatter", "all_to_all")
    text = cands.forcing_text(RING, {"size": 2, "hosts": 1, "locality": "one_host"})
    assert text.splitlines()[:3] == [
        "xccl-tuning 1",
        "world 2 1 one_host",
        "cpu all_reduce 0 inf tcp ring 524288 0 0",
    ]
    # A plan row the rule prints: the same as the candidate, so not measured twice.
    assert cands.same_plan(RING, cands.parse_rule("tcp", "ring (512 KiB chunks)"))
    assert not cands.same_plan(RING, cands.parse_rule("shm", "one_shot"))
    rule = "in-host shm, between hosts direct (512 KiB chunks)"
    assert cands.parse_rule("hierarchical", rule) == ("hierarchical", "shm", 512 * KiB)
    chunked = cands.cpu_candidates("per_host", 4, ["broadcast", "all_to_all"], False)
    assert [c.name for c in chunked if c.route == "hierarchical"] == [
        "hierarchical_shm_128K",
        "hierarchical_shm_512K",
        "hierarchical_shm_2M",
    ]
    assert cands.same_plan(chunked[1], cands.parse_rule("hierarchical", rule))
    assert chunked[0].ops == ("broadcast",)


@pytest.mark.parametrize(
    "world", [(2, 1, "one_host"), (3, 1, "one_host"), (4, 2, "per_host"), (2, 2, "none")]
)
def test_every_candidates_table_makes_the_planner_run_it(world):
    """The forcing table of each candidate, given to the planner itself (_C._plan_rows): every
    collective it names is planned "tuned" and runs the candidate's route, algorithm and
    chunk."""
    from xccl import _C

    size, hosts, locality = world
    shape = {"size": size, "hosts": hosts, "locality": locality}
    for candidate in cands.cpu_candidates(locality, size, cands.CPU_OPS, False):
        text = cands.forcing_text(candidate, shape)
        rows = _C._plan_rows("cpu", size, hosts, [4096, 1 << 22], None, False, tuning=text)
        mine = [r for r in rows if r[0] in candidate.ops]
        assert len(mine) == 2 * len(candidate.ops)
        for r in mine:
            assert r[5] == "tuned", (candidate.name, r)
            assert cands.same_plan(candidate, cands.parse_rule(r[2], r[3])), (candidate.name, r)


# ---- real runs: 2 local CPU ranks -----------------------------------------------------------

TUNE_TIMEOUT_S = 120


def tune(tmp_path, *extra, env=None):
    out = tmp_path / "table.json"
    argv = [sys.executable, "-m", "xccl", "tune", "--device", "cpu", "--nranks", "2"]
    argv += ["--quick", "--out", str(out), "--no-progress", *extra]
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=TUNE_TIMEOUT_S,
        env={**os.environ, "XCCL_CACHE_DIR": str(tmp_path), **(env or {})},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done.stdout


def test_tune_writes_a_valid_table_and_prints_the_summary(tmp_path):
    from xccl import tuning

    out, stdout = tune(tmp_path, "--ops", "all_reduce,broadcast", "--sizes", "4K,1M")
    table, why = tuning.load(str(out))
    assert table is not None, why
    assert table["world"] == {"size": 2, "hosts": 1, "locality": "one_host"}
    measured = table["cpu"]["measured"]
    assert {(r["collective"], r["bytes"]) for r in measured} == {
        (op, s) for op in ("all_reduce", "broadcast") for s in (4 * KiB, 1 * MiB)
    }
    assert all(r["verified"] for r in measured)
    names = {r["candidate"] for r in measured}
    assert {"rule", "tcp_direct", "tcp_ring_512K", "shm_two_shot"} <= names
    assert "xccl tune summary" in stdout and "broadcast" in stdout
    assert tuning.canonical(table).startswith("xccl-tuning 1\nworld 2 1 one_host\n")


def test_a_candidate_with_a_wrong_result_never_wins(tmp_path):
    """The backend adds 1 to every ring result (_C._inject_wrong_result, a test hook) and the
    timer is faked so that the ring is the fastest plan of all: the next fastest verified plan
    wins, the ring never does, and its rows say verified=false."""
    from xccl.bench import launch

    out = str(tmp_path / "table.json")
    reports, error = launch.gather_reports(
        tune_rank.inject_ring, 2, (out,), "xccl-test-tune", TUNE_TIMEOUT_S
    )
    assert error is None and all(r["error"] == "" for r in reports), (error, reports)
    table = reports[0]["table"]
    ring = [r for r in table["cpu"]["measured"] if r["candidate"] == "tcp_ring_512K"]
    assert ring and not any(r["verified"] for r in ring)
    direct = [r for r in table["cpu"]["measured"] if r["candidate"] == "tcp_direct"]
    assert direct and all(r["verified"] for r in direct)
    assert ring[0]["median_us"] < direct[0]["median_us"]  # the ring was the fastest
    assert [(e["route"], e["algorithm"]) for e in table["cpu"]["entries"]] == [("tcp", "direct")]
    with open(out, encoding="utf-8") as f:
        assert json.load(f)["cpu"]["entries"] == table["cpu"]["entries"]


class _Notes:
    def __init__(self):
        self.lines = []

    def note(self, text):
        self.lines.append(text)


@pytest.mark.parametrize("exact_everywhere", [True, False])
def test_the_gpu_stamp_is_written_only_when_every_kernel_result_was_exact(
    monkeypatch, tmp_path, exact_everywhere
):
    """GPU logic without a GPU: the stamp decision on fixed rows (the measuring itself needs a
    GPU and is not covered here)."""
    from xccl import topo, verify
    from xccl.tune import measure

    written = []
    monkeypatch.setattr(verify, "stamp_path", lambda: str(tmp_path / "stamp.json"))
    monkeypatch.setattr(verify, "machine_key", lambda topology: {"gpu_model": "fake"})
    monkeypatch.setattr(verify, "write_stamp", lambda *a: written.append(a))
    monkeypatch.setattr(topo, "topology_json", lambda: "{}")
    monkeypatch.setattr(topo, "load", lambda text: {})
    forced = [(c, None) for c in cands.gpu_candidates(["all_reduce", "all_gather"])]
    measured = [
        row("all_reduce", 1024, "kernel_one_shot", 5.0),
        row("all_reduce", 1024, "kernel_two_shot", 6.0, verified=exact_everywhere),
        row("all_gather", 1024, "kernel_all_pairs", 5.0),
        row("all_reduce", 1024, "vendor", 9.0),
    ]
    notes = _Notes()
    measure._stamp(measured, forced, notes)
    assert len(written) == (1 if exact_everywhere else 0)
    if exact_everywhere:
        path, key, cases = written[0]
        assert key == {"gpu_model": "fake"} and len(cases) == 3
    assert ("stamp written" in notes.lines[0]) == exact_everywhere
    # A kernel candidate that never ran (no size of its collective) earns no stamp either.
    written.clear()
    measure._stamp(measured[:1] + measured[2:], forced, notes)
    assert written == []


def _kernel_candidate_verified_only_on_its_route(rank, world):
    """On CPU ranks: a candidate named a kernel candidate, its exact checks in float32, float16
    and bfloat16 run for real on the xccl group, while the route counters are faked: verified
    when they show the kernel route, not when they show a fallback (whose results are exact)."""
    import torch
    import torch.distributed as dist
    from dist_harness import Checker, result
    from xccl import gpu_routes
    from xccl.tune import measure

    chk = Checker(rank)
    control = dist.new_group(backend="gloo")
    timer = measure._Timer(rank, world, torch.device("cpu"), control, 0.002)
    shape = measure._layout("all_reduce", 4 * KiB, world)
    for went, want in (("kernel", True), ("host", False), ("vendor", False)):
        tally = {"kernel": 0, "vendor": 0, "host": 0, "local": 0}

        def counted(group=None, went=went, tally=tally):
            tally[went] += 1
            return dict(tally)

        gpu_routes.counts = counted
        sides = [("kernel_one_shot", dist.group.WORLD)]
        rows = measure._measure(timer, "all_reduce", shape, sides, 1, control, {"kernel_one_shot"})
        chk.equal(f"verified when the counters say {went}", rows[0]["verified"], want)
    # The dtype check alone: exact on the CPU group.
    chk.equal(
        "float16 exact on the CPU group",
        measure._check_in(torch.float16, timer, "all_reduce", shape, dist.group.WORLD, 1),
        "",
    )
    return result(chk)


def test_a_gpu_kernel_candidate_is_verified_only_when_its_route_counters_show_the_kernel():
    from dist_harness import run_checks

    run_checks(_kernel_candidate_verified_only_on_its_route, 2, min_checks=4, timeout=120)
