"""`python -m xccl.bench --ops put,put_pages`: the options, the plan, the records, tables and
target verdicts (pure, from the source tree), and one tiny run end to end (needs torch's window
API and an xccl built with it; skipped, saying why, on older torch)."""

import pytest
from test_bench import run_bench_json
from xccl_modules import load

options = load("bench.options")
method = load("bench.method")
onesided_report = load("bench.onesided_report")
netns = load("bench.netns")

KiB, MiB = 1 << 10, 1 << 20


def test_one_sided_ops_are_accepted_only_when_named():
    assert options.parse_ops("put,put_pages,all_reduce") == ["put", "put_pages", "all_reduce"]
    assert options.parse_ops("all") == list(options.OPS)  # "all" stays the collectives
    assert options.parse_args([]).ops == list(options.OPS)
    with pytest.raises(ValueError, match="puts.*known: .*put_pages"):
        options.parse_ops("puts")


def test_put_sweeps_4k_to_64m_unless_a_size_option_is_given():
    args = options.parse_args(["--ops", "put"])
    assert args.put_sizes == [4 * KiB << (2 * i) for i in range(8)]  # 4 KiB .. 64 MiB
    assert args.sizes[0] == 8  # the collectives' default is unchanged
    assert args.page_sizes == [16 * KiB, 64 * KiB, 256 * KiB] and args.pages is None
    args = options.parse_args(["--ops", "put", "--max", "1M"])
    assert args.put_sizes == args.sizes and args.sizes[-1] == 512 * KiB
    args = options.parse_args(["--ops", "put", "--sizes", "4K,1M"])
    assert args.put_sizes == [4 * KiB, MiB]


def test_one_sided_bad_options_are_usage_errors(capsys):
    for argv in (["--ops", "put", "--pages", "0"], ["--ops", "put_pages", "--device", "cuda"]):
        with pytest.raises(SystemExit) as stop:
            options.parse_args(argv)
        assert stop.value.code == 2, argv
    capsys.readouterr()


def test_plan_gives_put_sizes_and_page_transfers_in_the_order_asked():
    plan = method.one_sided_plan(
        ["put_pages", "put"], [2, 4 * KiB, 4 * KiB + 2], [64 * KiB], None, 4, 64 * MiB
    )
    assert [op for op, _ in plan] == ["put_pages", "put"]
    pages = plan[0][1]
    assert pages["pages"] == 1024 and pages["page_elems"] == 16 * KiB
    assert pages["bytes"] == 64 * MiB and pages["count"] == 16 * MiB
    # 2 B is less than one float32; 4 KiB + 2 rounds down to 4 KiB, which is already there.
    assert [shape["bytes"] for _, shape in plan[1:]] == [4 * KiB]
    (only,) = method.one_sided_plan(["put_pages"], [], [16 * KiB], 1000, 2, 64 * MiB)
    assert only[1]["pages"] == 1000 and only[1]["bytes"] == 1000 * 16 * KiB
    assert method.busbw_factor("put", 8) == method.busbw_factor("put_pages", 2) == 1.0


def test_scattered_pages_are_two_reproducible_shuffles():
    src, dst = method.scattered_pages(64, 7)
    assert sorted(src) == sorted(dst) == list(range(64))
    assert src != list(range(64)) and dst != list(range(64)) and src != dst
    assert method.scattered_pages(64, 7) == (src, dst)
    assert method.scattered_pages(64, 8) != (src, dst)


def _results(median_s: float, check=None) -> dict:
    stats = {key: median_s for key in method.STAT_KEYS}
    return {"stats": stats, "iters": 3, "warmup": 1, "check": check}


def _put_record(nbytes: int, put_s: float, send_s: float, gloo_s: float, memcpy_s: float):
    roles = {"backend": put_s, "send_recv": send_s, "reference": gloo_s, "memcpy": memcpy_s}
    gathered = [
        {role: _results(s, True if role == "backend" else None) for role, s in roles.items()}
        for _ in range(2)
    ]
    names = {"backend": "xccl", "send_recv": "xccl", "reference": "gloo", "memcpy": "memcpy"}
    shape = {"count": nbytes // 4, "bytes": nbytes}
    return onesided_report.record("put", shape, "float32", 4, names, gathered)


def _pages_record(pages: int, page_bytes: int, pages_s: float, put_s: float):
    gathered = [{"backend": _results(pages_s), "put": _results(put_s)} for _ in range(2)]
    count = pages * page_bytes // 4
    shape = {"count": count, "bytes": count * 4, "pages": pages, "page_elems": page_bytes // 4}
    names = {"backend": "xccl", "put": "xccl"}
    return onesided_report.record("put_pages", shape, "float32", 4, names, gathered)


def test_put_record_holds_every_side_and_bandwidth_ratios():
    r = _put_record(MiB, put_s=1e-3, send_s=2e-3, gloo_s=4e-3, memcpy_s=0.5e-3)
    assert r["backend"]["algbw_gbps"] == pytest.approx(MiB / 1e-3 / 1e9, rel=1e-5)
    assert r["backend"]["check"] == "PASS" and r["reference"]["name"] == "gloo"
    assert list(r["baselines"]) == ["send_recv", "memcpy"]
    assert r["ratios"] == {"put/send_recv": 2.0, "put/memcpy": 0.5, "put/gloo": 4.0}
    assert r["speedup"] == 4.0 and r["pages"] is None


def test_tables_and_verdicts_name_the_targets():
    records = [
        _put_record(64 * KiB, 1e-4, 1e-4, 1e-4, 1e-5),  # below 1 MiB: not judged
        _put_record(MiB, 1e-3, 2e-3, 3e-3, 0.9e-3),
        _put_record(4 * MiB, 4e-3, 8e-3, 9e-3, 2e-3),
    ]
    table = onesided_report.format_table(records, "# put")
    lines = table.splitlines()
    assert lines[0] == "# put"
    assert lines[1].split() == [
        "size", "put", "send/recv", "memcpy", "gloo", "send/recv",
        "put/send_recv", "put/memcpy", "put/gloo", "check",
    ]  # fmt: skip
    assert lines[3].split()[:2] == ["1", "MiB"] and lines[3].split()[-1] == "PASS"
    summary = onesided_report.summary_lines(records)
    assert (
        "put/memcpy at >= 1 MiB: worst 0.500 at 4 MiB (target >= 0.8, same host: NOT met)"
        in summary
    )
    pages = [_pages_record(1000, 64 * KiB, 1.1e-3, 1e-3), _pages_record(100, 16 * KiB, 2e-3, 1e-3)]
    summary = onesided_report.summary_lines(pages)
    assert any(line.startswith("put_pages/put: geomean") for line in summary)
    assert "put_pages/put: worst 0.909 at 1000 x 64 KiB" in summary[-1] and summary[-1].endswith(
        ": met)"
    )
    header = onesided_report.format_table(pages).splitlines()[0].split()
    assert header == ["pages", "page", "bytes", "put_pages", "put", "put_pages/put"]


def test_netns_merge_keeps_each_engines_baselines_and_judges_put_against_its_send():
    runs = {
        "tcp": {"results": [_put_record(MiB, 1e-3, 1.05e-3, 3e-3, 1e-4)]},
        "ofi": {"results": [_put_record(MiB, 2e-3, 1e-3, 2e-3, 1e-4)]},
    }
    rows = netns.merge(runs)
    (row,) = rows
    assert set(row["baselines"]) == {"tcp", "ofi"} and row["gloo"]["median_us"] == 2000
    lines = onesided_report.netns_table(rows, "t").splitlines()
    assert lines[1].split() == [
        "size", "put/tcp", "send/recv/tcp", "put/send_recv", "put/ofi", "send/recv/ofi",
        "put/send_recv", "gloo", "send/recv", "check",
    ]  # fmt: skip
    assert lines[2].split()[-1] == "PASS"
    summary = onesided_report.netns_summary(rows)
    assert (
        summary[0].startswith("tcp: put/send_recv at >= 1 MiB: worst 1.050") and "met" in summary[0]
    )
    assert summary[1].startswith("ofi: put/send_recv at >= 1 MiB: worst 0.500")
    assert summary[1].endswith("NOT met)")


def test_tiny_put_run_reports_positive_bandwidth_beside_every_baseline(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    if not hasattr(dist, "_new_window"):
        pytest.skip("this torch has no window API (torch.distributed._new_window)")
    proc, result = run_bench_json(
        tmp_path,
        "--ops put,put_pages --sizes 4K,64K --page-sizes 16K --pages 4 --iters 2 "
        "--warmup 1 --check --no-progress",
    )
    records = result["results"]
    assert [(r["op"], r["bytes"]) for r in records] == [
        ("put", 4 * KiB),
        ("put", 64 * KiB),
        ("put_pages", 64 * KiB),
    ]
    for r in records:
        sides = [r["backend"], *r["baselines"].values(), *([r["reference"]] or [])]
        for side in filter(None, sides):
            assert side["iters"] == 2 and side["algbw_gbps"] > 0 and side["median_us"] > 0
        assert r["backend"]["check"] == "PASS"
        assert all(value > 0 for value in r["ratios"].values())
    assert set(records[0]["ratios"]) == {"put/send_recv", "put/memcpy", "put/gloo"}
    assert records[2]["pages"] == 4 and set(records[2]["ratios"]) == {"put_pages/put"}
    assert "put/memcpy: geomean" in proc.stdout and "check: PASS (3 sizes)" in proc.stdout
