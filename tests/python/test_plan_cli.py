"""`python -m xccl plan` (python/xccl/plan.py over csrc/algo/plan_rows.h) on every fixture
topology, for CPU and CUDA tensors: the routes and algorithms the planners choose."""

import os

import pytest
from xccl_modules import FIXTURE_DIR, FIXTURES, run_module

pytest.importorskip("xccl._C")
from xccl import cli, plan  # after the skip: needs the extension


def run(capsys, *argv):
    assert cli.main(["plan", *argv]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("xccl plan: ")
    assert lines[1].split()[:4] == ["collective", "bytes", "route", "algorithm"]
    return lines


def table(lines):
    """The table's rows: a cuda plan ends with a line saying whether the kernels are verified."""
    return [line for line in lines[2:] if not line.startswith("xccl's GPU kernels: ")]


def row(lines, collective, size):
    """(route, algorithm, reason) of the row for `collective` at `size` ("1 KiB")."""
    for line in table(lines):
        if line.startswith(collective + " ") and f" {size} " in line:
            rest = line[len(collective) :].split(size, 1)[1].split()
            return rest[0], rest[1], " ".join(rest[2:])
    raise AssertionError(f"no row for {collective} {size} in:\n" + "\n".join(lines))


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_fixture_has_a_full_table(capsys, name, device):
    lines = run(capsys, "--topo", os.path.join(FIXTURE_DIR, name), "--device", device)
    collectives = {line.split()[0] for line in table(lines)}
    expected = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "all_to_all"}
    if device == "cpu":
        expected |= {"gather", "scatter", "barrier"}
    assert collectives == expected
    routes = {"cpu": {"tcp", "shm", "hierarchical"}, "cuda": {"kernel", "vendor", "host", "local"}}[
        device
    ]
    for line in table(lines):
        assert line.split()[3] in routes, line
        assert len(line.split()) > 5, f"no reason: {line}"  # every row says why
    # Default sizes: 1 KiB to 1 GiB in steps of 4.
    assert row(lines, "all_reduce", "1 KiB") and row(lines, "all_reduce", "1 GiB")


def test_h100_small_all_reduce_is_one_shot_and_large_is_nccl(capsys):
    lines = run(
        capsys,
        "--topo",
        os.path.join(FIXTURE_DIR, "hgx_h100_8x_nvswitch.json"),
        "--device",
        "cuda",
        "--world",
        "8",
        "--kernels",
        "verified",
        "1K",
        "64MiB",
    )
    assert lines[0].startswith("xccl plan: cuda, 8 ranks on 1 host")
    assert lines[-1].startswith("xccl's GPU kernels: verified (--kernels verified)")
    assert row(lines, "all_reduce", "1 KiB")[:2] == ("kernel", "one_shot")
    route, algorithm, reason = row(lines, "all_reduce", "64 MiB")
    assert (route, algorithm) == ("vendor", "nccl")
    assert "8 MiB" in reason  # the kernel limit it compared against


@pytest.mark.parametrize("kernels", [[], ["--kernels", "unverified"]])
def test_unverified_machines_plan_the_vendor_route(capsys, kernels):
    # A fixture is not this machine, so no stamp matches it (auto); or said outright.
    h100 = os.path.join(FIXTURE_DIR, "hgx_h100_8x_nvswitch.json")
    lines = run(capsys, "--topo", h100, "--world", "8", *kernels, "1K", "64MiB")
    for collective in ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"):
        route, algorithm, reason = row(lines, collective, "1 KiB")
        assert (route, algorithm) == ("vendor", "nccl"), (collective, reason)
        assert reason.startswith("kernels not verified on this machine"), reason
    assert lines[-1].startswith("xccl's GPU kernels: not verified")


def test_a_forced_kernel_runs_unverified():
    # XCCL_GPU_ALGO naming a kernel runs it anyway (a fresh process: variables are read once).
    h100 = os.path.join(FIXTURE_DIR, "hgx_h100_8x_nvswitch.json")
    env = dict(os.environ, XCCL_GPU_ALGO="kernel")
    out = run_module("plan", "--topo", h100, "--world", "8", "1K", env=env).stdout.splitlines()
    assert out[-1].startswith("xccl's GPU kernels: not verified")
    assert row(out, "all_reduce", "1 KiB")[:2] == ("kernel", "one_shot")


def test_amd_machines_delegate_to_rccl(capsys):
    lines = run(capsys, "--topo", os.path.join(FIXTURE_DIR, "mi300x_8x_xgmi.json"), "1G")
    assert row(lines, "all_reduce", "1 GiB")[:2] == ("vendor", "rccl")
    assert row(lines, "reduce", "1 GiB")[:2] == ("vendor", "rccl")


def test_cpu_one_host_is_shared_memory_and_hosts_split_it(capsys):
    vm = os.path.join(FIXTURE_DIR, "cpu_vm.json")
    lines = run(capsys, "--topo", vm, "--device", "cpu", "--world", "4", "1K", "16M")
    for line in table(lines):
        assert line.split()[3] == "shm", line
    assert row(lines, "all_reduce", "1 KiB")[1] == "one_shot"
    assert row(lines, "all_reduce", "16 MiB")[1] == "two_shot"
    lines = run(capsys, "--topo", vm, "--device", "cpu", "--world", "8", "--hosts", "2", "16M")
    assert row(lines, "all_reduce", "16 MiB")[0] == "hierarchical"
    assert "reduce_scatter+all_gather, between hosts direct (512 KiB chunks)" in next(
        line for line in lines if line.startswith("all_reduce ") and " 16 MiB " in line
    )
    assert row(lines, "all_gather", "16 MiB")[:2] == ("hierarchical", "in-host")
    assert "between hosts direct (512 KiB chunks)" in next(
        line for line in lines if line.startswith("all_gather ") and " 16 MiB " in line
    )
    lines = run(capsys, "--topo", vm, "--device", "cpu", "--world", "3", "--hosts", "3", "1K")
    assert row(lines, "broadcast", "1 KiB")[:2] == ("tcp", "direct")


def test_this_machine_and_the_module_entry_point():
    # No --topo: this machine's discovered topology; the cuda plan needs no GPU.
    out = run_module("plan", "--world", "2", "4K").stdout
    assert "this machine's topology" in out.splitlines()[0]
    # Title, header, one row per GPU collective, whether the kernels are verified.
    assert out.count("\n") == 2 + 6 + 1


def test_bad_input_is_a_usage_error(capsys):
    vm = os.path.join(FIXTURE_DIR, "cpu_vm.json")
    assert cli.main(["plan", "--topo", vm, "--world", "3", "--hosts", "2"]) == 2
    assert "hosts must divide" in capsys.readouterr().err
    assert cli.main(["plan", "--topo", vm, "12X"]) == 2
    assert "not a size" in capsys.readouterr().err
    assert cli.main(["plan", "--topo", os.path.join(FIXTURE_DIR, "missing.json")]) == 2
    assert plan.parse_size("64KiB") == 65536 and plan.format_size(3 << 30) == "3 GiB"


@pytest.mark.parametrize("text", ["٣K", "１２", "²", "8²M"])
def test_parse_size_takes_only_ascii_digits(text):
    with pytest.raises(ValueError, match="not a size"):
        plan.parse_size(text)


def test_shm_rows_say_from_which_size_the_single_copy_is_in_force(capsys):
    """The built-in thresholds (this process sets no XCCL_SHM_CMA_MIN_BYTES): all_reduce from
    1 MiB, all_gather from 256 KiB (its output), never broadcast or reduce."""
    assert "XCCL_SHM_CMA_MIN_BYTES" not in os.environ
    lines = run(capsys, "--device", "cpu", "--world", "2", "128K", "256K", "512K", "1M", "4M")
    single = "single copy (process_vm_readv) from "
    for collective, size, expected in (
        ("all_reduce", "512 KiB", None),
        ("all_reduce", "1 MiB", "1 MiB"),
        ("all_reduce", "4 MiB", "1 MiB"),
        ("all_gather", "128 KiB", None),
        ("all_gather", "256 KiB", "256 KiB"),
        ("broadcast", "4 MiB", None),
        ("reduce", "4 MiB", None),
        ("reduce_scatter", "4 MiB", None),
    ):
        route, _, reason = row(lines, collective, size)
        assert route == "shm", (collective, size)
        if expected is None:
            assert single not in reason, (collective, size, reason)
        else:
            assert reason.endswith(f"; {single}{expected} where the ranks may read each other"), (
                collective,
                size,
                reason,
            )
