"""The kernel verification stamp (python/xccl/verify.py): the key it is tied to, its parse as
hostile input (a damaged stamp is "not verified" with a warning, never an exception), and what
counts as another machine or another xccl."""

import copy
import json
import os
import warnings

import pytest
from xccl import verify
from xccl_modules import FIXTURE_DIR

H100 = os.path.join(FIXTURE_DIR, "hgx_h100_8x_nvswitch.json")
NVIDIA_VERSION = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build  "
    "(dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 23:10:04 UTC 2025\nGCC version:  gcc 12.3.0\n"
)


def topology():
    with open(H100, encoding="utf-8") as f:
        return json.load(f)


def fake_root(tmp_path, nvidia=NVIDIA_VERSION):
    root = tmp_path / "root"
    (root / "proc/driver/nvidia").mkdir(parents=True, exist_ok=True)
    (root / "proc/driver/nvidia/version").write_text(nvidia)
    return str(root)


def key(tmp_path, **changes):
    k = verify.machine_key(topology(), fake_root(tmp_path), version="0.1.0")
    k.update(changes)
    return k


def test_the_key_names_model_driver_topology_and_version(tmp_path):
    k = key(tmp_path)
    assert k["gpu_model"] == "NVIDIA H100 80GB HBM3"
    assert k["driver"] == "570.86.15"
    assert len(k["topology"]) == 64 and k["xccl"] == "0.1.0"
    # The proprietary module's spelling, amdgpu's, and none.
    root = tmp_path / "other"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024"
    )
    assert verify.driver_version(str(root)) == "535.183.01"
    amd = tmp_path / "amd"
    (amd / "sys/module/amdgpu").mkdir(parents=True)
    (amd / "sys/module/amdgpu/version").write_text("6.8.5\n")
    assert verify.driver_version(str(amd)) == "6.8.5"
    (amd / "sys/module/amdgpu/version").write_text("6.8.5; rm -rf /\n")
    assert verify.driver_version(str(amd)) == ""
    assert verify.driver_version(str(tmp_path / "nothing")) == ""


def test_the_topology_fingerprint_follows_gpus_and_links_only():
    t = topology()
    same = copy.deepcopy(t)
    same["host"] = "another-name"
    same["nics"] = []
    same["gpuLinks"].reverse()
    assert verify.topology_fingerprint(same) == verify.topology_fingerprint(t)
    fewer = copy.deepcopy(t)
    fewer["gpuLinks"][0]["count"] = 2
    assert verify.topology_fingerprint(fewer) != verify.topology_fingerprint(t)
    moved = copy.deepcopy(t)
    moved["gpus"][0]["pciBusId"] = "0000:99:00.0"
    assert verify.topology_fingerprint(moved) != verify.topology_fingerprint(t)


def test_a_written_stamp_verifies_its_machine_only(tmp_path):
    path = str(tmp_path / "cache" / verify.STAMP_NAME)
    k = key(tmp_path)
    verify.write_stamp(path, k, ["all_reduce float32 sum 4096"])
    ok, why, damaged = verify.check_stamp(path, k)
    assert ok and not damaged and why.startswith("verified by python -m xccl doctor --gpu")
    for field, value in [
        ("gpu_model", "NVIDIA H200"),
        ("driver", "575.51.03"),
        ("topology", "0" * 64),
        ("xccl", "0.2.0"),
    ]:
        ok, why, damaged = verify.check_stamp(path, {**k, field: value})
        assert not ok and not damaged, field
        assert why == f"the stamp is for another {field.replace('_', ' ')}"
    ok, why, damaged = verify.check_stamp(str(tmp_path / "none.json"), k)
    assert (ok, damaged) == (False, False) and why.startswith("no stamp at")


def good_stamp(k):
    return {"format": verify.STAMP_FORMAT, "version": verify.STAMP_VERSION, "key": dict(k)}


def damaged_stamps(k):
    def with_key(**changes):
        s = good_stamp(k)
        s["key"] = {**s["key"], **changes}
        return json.dumps(s).encode()

    return {
        "empty": b"",
        "not json": b"{not json",
        "binary": bytes(range(256)),
        "a list": b"[1, 2, 3]",
        "another format": json.dumps({**good_stamp(k), "format": "x"}).encode(),
        "version true": json.dumps({**good_stamp(k), "version": True}).encode(),
        "version 2": json.dumps({**good_stamp(k), "version": 2}).encode(),
        "no key": json.dumps({**good_stamp(k), "key": None}).encode(),
        "key a list": json.dumps({**good_stamp(k), "key": [1]}).encode(),
        "number driver": with_key(driver=570),
        "missing field": json.dumps(
            {**good_stamp(k), "key": {f: k[f] for f in verify.KEY_FIELDS[:-1]}}
        ).encode(),
        "deep nesting": b"[" * 100000 + b"]" * 100000,
        "oversized": b" " * (verify.MAX_STAMP_BYTES + 1) + json.dumps(good_stamp(k)).encode(),
    }


@pytest.mark.parametrize("case", sorted(damaged_stamps({f: "x" for f in verify.KEY_FIELDS})))
def test_a_damaged_stamp_is_not_verified_and_never_raises(tmp_path, case):
    k = key(tmp_path)
    path = tmp_path / verify.STAMP_NAME
    path.write_bytes(damaged_stamps(k)[case])
    ok, why, damaged = verify.check_stamp(str(path), k)
    assert (ok, damaged) == (False, True), why
    assert why.startswith(f"the stamp {path} is not valid ("), why


def test_verdict_warns_about_a_damaged_stamp_and_reads_the_cache_dir(tmp_path):
    env = {"XCCL_CACHE_DIR": str(tmp_path / "c")}
    os.makedirs(env["XCCL_CACHE_DIR"])
    with open(verify.stamp_path(env), "w") as f:
        f.write("garbage")
    with pytest.warns(UserWarning, match="kernels count as not verified"):
        ok, why = verify.verdict(topology(), env, fake_root(tmp_path))
    assert not ok
    verify.write_stamp(
        verify.stamp_path(env), verify.machine_key(topology(), fake_root(tmp_path)), []
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert verify.verdict(topology(), env, fake_root(tmp_path))[0]
    # No GPU in the topology: nothing to verify.
    assert verify.verdict({**topology(), "gpus": []}, env, fake_root(tmp_path)) == (
        False,
        "the topology lists no GPU",
    )


def test_cache_dir_precedence(tmp_path):
    assert verify.cache_dir({"XCCL_CACHE_DIR": "/a", "XDG_CACHE_HOME": "/b"}) == "/a"
    assert verify.cache_dir({"XDG_CACHE_HOME": "/b"}) == os.path.join("/b", "xccl")
    home = os.path.join("/h", ".cache", "xccl")
    assert verify.cache_dir({"HOME": "/h"}) == home
    assert verify.cache_dir({"XCCL_CACHE_DIR": "", "HOME": "/h"}) == home


def test_the_known_good_list_is_empty_until_a_device_check_earns_an_entry(tmp_path):
    assert verify.KNOWN_GOOD == ()
    k = key(tmp_path)
    entry = (k["gpu_model"], "570", k["xccl"])
    assert verify.known_good(k, (entry,))
    assert not verify.known_good({**k, "driver": "575.51"}, (entry,))
    assert not verify.known_good({**k, "xccl": "0.2.0"}, (entry,))
    assert not verify.known_good(k)


def test_doctor_gpu_without_a_gpu_verifies_nothing(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: `python -m xccl doctor --gpu` runs it (device check)")
    from xccl.doctor import gpu_check

    monkeypatch.setenv("XCCL_CACHE_DIR", str(tmp_path / "cache"))
    (check,) = gpu_check.run_gpu_check(topology())
    assert check.status == "WARN" and "nothing to verify" in check.line()
    assert not os.path.exists(verify.stamp_path())


def test_doctor_gpu_covers_every_kernel_case():
    from xccl.doctor import gpu_check

    cases = list(gpu_check._cases(gpu_check.COLLECTIVES))
    assert {c[0] for c in cases} == set(gpu_check.COLLECTIVES)
    reductions = {(c[1], c[2]) for c in cases if c[0] in ("all_reduce", "reduce_scatter")}
    assert reductions == {(d, o) for d in gpu_check.DTYPES for o in gpu_check.OPS}
    assert {c[3] for c in cases} == set(gpu_check.COUNTS)
    # all_reduce's two-shot kernel gets a pass of its own.
    assert ("two_shot", ("all_reduce",)) in gpu_check.PASSES


@pytest.mark.parametrize("world", [2, 3])
def test_doctor_gpu_reference_matches_xccl_on_cpu(world):
    # The same cases and host reference on the CPU side: a wrong reference would fail the
    # verification on a GPU for nothing (world 3: avg's rounding tolerance).
    from xccl.doctor import gpu_check

    ranks, error = gpu_check._launch(
        "auto", gpu_check.COLLECTIVES, world, 120.0, counts=(1, 1001), device_kind="cpu"
    )
    assert error is None
    assert [r.get("error") for r in ranks] == [None] * world
    assert [f for r in ranks for f in r["failures"]] == []
    assert all(
        r["cases"] == len(list(gpu_check._cases(gpu_check.COLLECTIVES, (1, 1001)))) for r in ranks
    )


def _fake_gpu_pass(gpu_check, off_kernel_case=None, route="host"):
    """A stand-in for gpu_check._launch on a machine with one GPU: two ranks whose every result
    was exact, their route counters read around each case as the real ranks do; the case
    `off_kernel_case` ran on `route` instead of a kernel on rank 1 (a forced kernel that cannot
    run here, or CUDA IPC refused: the fallback's results are exact too)."""

    def launch(algo, collectives, world, timeout_s, counts=gpu_check.COUNTS, device_kind="cuda"):
        ranks = []
        for rank in range(world):
            out = {"rank": rank, "failures": [], "cases": 0, "kernel_cases": 0, "off_kernel": []}
            counters = {"kernel": 0, "vendor": 0, "host": 0, "local": 0}
            for case in gpu_check._cases(collectives, counts):
                before = dict(counters)
                went = route if rank == 1 and case == off_kernel_case else "kernel"
                counters[went] += 1
                out["cases"] += 1
                gpu_check._note_route(out, case, algo, before, dict(counters))
            ranks.append(out)
        return ranks, None

    return launch


def _doctor_gpu_on_one_fake_gpu(tmp_path, monkeypatch, launch):
    torch = pytest.importorskip("torch")
    from xccl.doctor import gpu_check

    monkeypatch.setenv("XCCL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(gpu_check, "_launch", launch)
    (check,) = gpu_check.run_gpu_check(topology())
    return check


def test_doctor_gpu_refuses_to_stamp_when_a_case_fell_back_from_the_kernel(tmp_path, monkeypatch):
    from xccl.doctor import gpu_check

    case = ("all_gather", "bfloat16", "copy", 70_001)
    check = _doctor_gpu_on_one_fake_gpu(
        tmp_path, monkeypatch, _fake_gpu_pass(gpu_check, case, "host")
    )
    assert check.status == "FAIL", check.line()
    assert (
        "all_gather bfloat16 copy 70001 elements (XCCL_GPU_ALGO=kernel), rank 1: host 1"
        in check.line()
    )
    assert "no stamp" in check.line()
    assert not os.path.exists(verify.stamp_path())
    # A fallback to NCCL is named as such.
    check = _doctor_gpu_on_one_fake_gpu(
        tmp_path, monkeypatch, _fake_gpu_pass(gpu_check, case, "vendor")
    )
    assert check.status == "FAIL" and "rank 1: vendor 1" in check.line(), check.line()
    assert not os.path.exists(verify.stamp_path())


def test_doctor_gpu_stamps_when_the_counters_show_every_case_on_the_kernel(tmp_path, monkeypatch):
    from xccl.doctor import gpu_check

    check = _doctor_gpu_on_one_fake_gpu(tmp_path, monkeypatch, _fake_gpu_pass(gpu_check))
    assert check.status == "PASS", check.line()
    assert "each counted on the kernel route" in check.line()
    assert os.path.exists(verify.stamp_path())


def test_doctor_gpu_counts_nothing_proven_when_a_rank_reports_no_routes(tmp_path, monkeypatch):
    # A rank that ran every case exactly but counted none of them on a route proves nothing.
    from xccl.doctor import gpu_check

    def launch(algo, collectives, world, timeout_s, **_):
        n = len(list(gpu_check._cases(collectives)))
        return [{"rank": r, "failures": [], "cases": n} for r in range(world)], None

    check = _doctor_gpu_on_one_fake_gpu(tmp_path, monkeypatch, launch)
    assert check.status == "FAIL" and "rank 0 did not count" in check.line(), check.line()
    assert not os.path.exists(verify.stamp_path())


def test_gpu_route_counters_read_from_the_extension():
    # The counters exist in the built module, named by the planner's routes; a process that ran
    # no CUDA call counted none, and a non-xccl backend is refused.
    from xccl import _C, gpu_routes

    assert gpu_routes.counts() == {"kernel": 0, "vendor": 0, "host": 0, "local": 0}
    assert gpu_routes.off_kernel(gpu_routes.taken({"kernel": 0}, {"kernel": 2})) == ""
    assert gpu_routes.off_kernel({"kernel": 1, "host": 1}) == "host 1, kernel 1"
    assert gpu_routes.off_kernel({}) == "no GPU call"
    with pytest.raises(ValueError, match="not an xccl backend"):
        _C._gpu_route_counts(object())
