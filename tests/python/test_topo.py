"""`python -m xccl topo` and the topology questions (python/xccl/topo.py, answered by csrc/topo
through xccl._native) on the fixture machines; the compiled discovery on this host."""

import json
import os

import pytest
from xccl_modules import FIXTURE_DIR, FIXTURES, fixture, load, run_module

topo = load("topo")
cli = load("cli")


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_loads_and_prints(name):
    data = topo.load(fixture(name))
    text = topo.format_topology(data)
    assert text.startswith(f"host {data['host']}")
    assert f"{len(data['numaNodes'])} NUMA node" in text
    for nic in data["nics"]:
        assert f" {nic['name']}" in text
    for gpu in data["gpus"]:
        assert f"GPU{gpu['index']}: {gpu['pciBusId']}" in text


def _machine(name, link_class):
    """A fixture machine, checked to have `link_class`, and its printed topology."""
    data = topo.load(fixture(name))
    assert topo.link_class(data) == link_class
    return data, topo.format_topology(data)


def test_hgx_h100():
    data, text = _machine("hgx_h100_8x_nvswitch.json", "nvswitch")
    assert [topo.nearest_nics(data, g) for g in range(8)] == [[g] for g in range(8)]
    assert "GPUs: 8x NVIDIA H100 80GB HBM3 (sm90); GPU links: nvswitch" in text
    assert "nearest NIC: mlx5_3 (PIX)" in text
    assert "GPU0   X     NS18  NS18" in text
    assert "NIC0 mlx5_0 port 1 (ibp25s0): infiniband, up, 400 Gb/s" in text


def test_mi300x():
    data, text = _machine("mi300x_8x_xgmi.json", "xgmi_full_mesh")
    assert topo.link_class(data, [1, 4, 6]) == "xgmi_full_mesh"
    assert "GPU links: xgmi_full_mesh" in text
    assert "XG1" in text


def test_mi250_two_hosts():
    hosts = [topo.load(fixture(n)) for n in ("mi250_2node_host0.json", "mi250_2node_host1.json")]
    assert hosts[0]["host"] != hosts[1]["host"]
    for data in hosts:
        assert topo.link_class(data) == "xgmi_partial"
        assert topo.link_class(data, [0, 1]) == "xgmi_full_mesh"
        assert topo.link_class(data, [0, 3]) == "pcie"
        assert topo.nearest_nics(data, 5) == [2]
        text = topo.format_topology(data)
        assert "GPU0   X     XG4   XG2   SYS" in text
        assert "infiniband, up, 200 Gb/s" in text


def test_pcie_box():
    data, text = _machine("pcie_4x_l40s.json", "pcie")
    assert "GPU0   X     PIX   SYS   SYS   NODE  NODE" in text
    assert "NIC1 ens2f1: ethernet, DOWN" in text
    assert topo.nearest_nics(data, 2) == [0]  # the down port is never chosen
    for nic in data["nics"]:
        nic["speedMbps"] = -1  # unknown (virtio): the closest NIC is still chosen
    assert topo.nearest_nics(data, 2) == [0]


def test_cpu_vm():
    _, text = _machine("cpu_vm.json", "none")
    assert "host cpu-vm, virtual machine" in text
    assert "CPU: AMD EPYC; 2 online CPUs (0-1); 1 NUMA node" in text
    assert "GPUs: none" in text
    assert "speed unknown" in text and "NUMA -" in text
    assert "Legend" not in text  # no matrix without GPUs


@pytest.mark.parametrize(
    "a, na, b, nb, expected",
    [
        (
            "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0",
            0,
            "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:10.0/0000:19:00.0",
            0,
            "PIX",
        ),
        (
            "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/0000:20:00.0",
            0,
            "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:10.0/0000:19:00.0",
            0,
            "PXB",
        ),
        ("pci0000:00/0000:00:03.0", -1, "pci0000:00/0000:00:05.0", -1, "PHB"),
        ("pci0000:00/0000:00:03.0", 0, "pci0000:40/0000:40:01.0", 0, "NODE"),
        ("pci0000:00/0000:00:03.0", 0, "pci0000:80/0000:80:01.0", 1, "SYS"),
        ("", -1, "pci0000:80/0000:80:01.0", 1, "unknown"),
        ("", -1, "", -1, "NODE"),
    ],
)
def test_pci_paths_match_the_cpp_rules(a, na, b, nb, expected):
    assert topo.pci_path_between(a, na, b, nb) == expected
    assert topo.pci_path_between(b, nb, a, na) == expected


def test_rejects_other_formats_and_versions():
    data = json.loads(fixture("cpu_vm.json"))
    with pytest.raises(ValueError, match="version 2 is not supported"):
        topo.load(dict(data, version=2))
    with pytest.raises(ValueError, match="not an xccl topology"):
        topo.load('{"system": {}}')


def test_cli_prints_dumps_and_emits_json(tmp_path, capsys):
    path = os.path.join(FIXTURE_DIR, "mi300x_8x_xgmi.json")
    assert cli.main(["topo", "--file", path]) == 0
    assert "GPU links: xgmi_full_mesh" in capsys.readouterr().out
    dump = tmp_path / "dump.json"
    assert cli.main(["topo", "--file", path, "--json", "--dump", str(dump)]) == 0
    assert capsys.readouterr().out == fixture("mi300x_8x_xgmi.json")
    assert dump.read_text() == fixture("mi300x_8x_xgmi.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "xccl-topology", "version": 9}')
    assert cli.main(["topo", "--file", str(bad)]) == 2
    assert "version 9 is not supported" in capsys.readouterr().err


def test_cli_reports_a_missing_bench_module(capsys, monkeypatch):
    # An installation without the optional module: its import fails naming it.
    real_import = cli.importlib.import_module

    def without_bench(name, *args, **kwargs):
        if name.endswith(".bench"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(cli.importlib, "import_module", without_bench)
    assert cli.main(["bench", "--sizes", "1K"]) == 2
    assert "xccl.bench" in capsys.readouterr().err


def _online_cpus():
    with open("/sys/devices/system/cpu/online") as f:
        return f.read().strip()


def test_extension_discovers_this_host():
    """The compiled discovery (xccl._native.discover) on the machine running the tests."""
    data = topo.load(topo.topology_json())
    assert data["cpus"] == _online_cpus()
    nodes = (
        [n for n in os.listdir("/sys/devices/system/node") if n[4:].isdigit()]
        if (os.path.isdir("/sys/devices/system/node"))
        else []
    )
    assert len(data["numaNodes"]) == max(1, len(nodes))
    nvidia = os.path.exists("/proc/driver/nvidia") or os.path.exists("/dev/kfd")
    if not nvidia:
        assert data["gpus"] == []
    for nic in data["nics"]:
        assert os.path.exists(f"/sys/class/net/{nic['netdev']}") or nic["port"] > 0
    pytest.importorskip("xccl._C")  # `python -m xccl` imports the whole package
    out = run_module("topo").stdout
    assert out.startswith("host ") and f"online CPUs ({_online_cpus()})" in out


def test_extension_honours_topo_file_and_dump_file(tmp_path):
    pytest.importorskip("xccl._C")  # `python -m xccl` imports the whole package
    dump = tmp_path / "dumped.json"
    environ = dict(
        os.environ,
        XCCL_TOPO_FILE=os.path.join(FIXTURE_DIR, "mi250_2node_host1.json"),
        XCCL_TOPO_DUMP_FILE=str(dump),
    )
    out = run_module("topo", "--json", env=environ).stdout
    assert out == fixture("mi250_2node_host1.json")
    assert dump.read_text() == fixture("mi250_2node_host1.json")
