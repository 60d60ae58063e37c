"""Environment defaults: what xccl.env.facts detects from fake sysfs/procfs trees (the machine
through csrc/topo's discovery in xccl._native, the rest read in Python) and from launcher
variables. These tests never import torch."""

import pytest
from xccl_modules import FakeRoot, load

env = load("env")


# ---------------------------------------------------------------------------------------------
# Detection from fake sysfs/procfs trees.


@pytest.fixture
def fake(tmp_path):
    root = FakeRoot(tmp_path)
    root.write("/proc/cpuinfo", "processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse2\n\n")
    root.net("lo", "unknown", 0x9)
    root.net("eth0")
    return root


def detect(fake, environ=None):
    facts = env.detect_facts(fake.root, environ or {})
    return facts, env.detect_platform(facts)


def test_detects_a_cpu_only_vm(fake):
    fake.write("/proc/cpuinfo", "processor\t: 0\nflags\t\t: fpu hypervisor sse2\n\n")
    fake.pci("0000:00:03.0", 0x1AF4, 0x020000)
    facts, platform = detect(fake)
    assert platform == env.CPU
    assert facts.virtual_machine and facts.gpu_count == 0
    assert facts.candidate_interfaces == ("eth0",)


def test_detects_nvidia_single_node_with_nvswitch(fake):
    for i in range(8):
        fake.pci(f"0000:{0x18 + i:02x}:00.0", 0x10DE, 0x030200)
        fake.pci(f"0000:{0x18 + i:02x}:00.1", 0x10DE, 0x040300)  # audio function
    fake.pci("0000:07:00.0", 0x10DE, 0x068000)
    facts, platform = detect(fake, {"WORLD_SIZE": "8", "LOCAL_WORLD_SIZE": "8"})
    assert platform == env.NVIDIA
    assert (facts.gpu_vendor, facts.gpu_count, facts.nvswitch) == ("nvidia", 8, True)
    assert (facts.nodes, facts.local_ranks) == (1, 8)
    assert not facts.virtual_machine


def test_detects_nvidia_multinode_infiniband(fake):
    fake.pci("0000:18:00.0", 0x10DE, 0x030200)
    fake.rdma("mlx5_0", "InfiniBand")
    fake.rdma("mlx5_1", "Ethernet", state="1: DOWN")
    facts, platform = detect(fake, {"GROUP_WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "8"})
    assert platform == env.NVIDIA_MULTINODE
    assert facts.rdma == frozenset({"infiniband"})  # the down RoCE port does not count


def test_detects_aws_efa(fake):
    fake.pci("0000:18:00.0", 0x10DE, 0x030200)
    fake.rdma("rdmap16s27", "Unspecified", driver="efa", vendor=0x1D0F)
    facts, platform = detect(fake, {"SLURM_JOB_NUM_NODES": "4"})
    assert platform == env.AWS_EFA
    assert facts.rdma == frozenset({"efa"}) and facts.nodes == 4


def test_detects_mi300x_from_kfd(fake):
    for i in range(8):
        fake.kfd_gpu(i + 1, 0x05 + 0x20 * i, 90402, [j + 1 for j in range(8) if j != i])
        fake.pci(
            f"0000:{0x05 + 0x20 * i:02x}:00.0",
            0x1002,
            0x120000,
            fw_version__mec_fw_version="0x000000b1\n",
        )
    fake.write("/sys/class/kfd/kfd/topology/nodes/0/properties", "simd_count 0\n")
    facts, platform = detect(fake)
    assert platform == env.AMD_MI300X
    assert (facts.gpu_vendor, facts.gpu_arch, facts.gpu_count, facts.xgmi) == (
        "amd",
        "gfx942",
        8,
        True,
    )
    assert facts.mec_firmware == 0xB1


def test_detects_mi250_and_large_bar(fake):
    for i, bus in enumerate((0x23, 0x24)):
        fake.kfd_gpu(i + 1, bus, 90010)
        fake.pci(
            f"0000:{bus:02x}:00.0",
            0x1002,
            0x038000,
            mem_info_vram_total=f"{64 << 30}\n",
            resource="0x0000038000000000 0x0000038fffffffff 0x000000000014220c\n"
            "0x0000000000000000 0x0000000000000000 0x0000000000000000\n",
        )
    facts, platform = detect(fake)
    assert platform == env.AMD_MI250
    assert facts.gpu_arch == "gfx90a" and not facts.xgmi
    assert facts.large_bar is True
    environ = {}
    env.apply_defaults(environ, root=fake.root, facts=facts)
    assert environ["HSA_FORCE_FINE_GRAIN_PCIE"] == "1"  # PCIe-only gfx90a with large BAR


def test_unknown_amd_arch_is_other(fake):
    fake.kfd_gpu(1, 0x03, 110000)
    facts, platform = detect(fake)
    assert (platform, facts.gpu_arch) == (env.OTHER_GPU, "gfx1100")


def test_nvidia_driver_folders_count_when_pci_is_hidden(fake):
    fake.write("/proc/driver/nvidia/gpus/0000:18:00.0/information", "Model: H100\n")
    facts, platform = detect(fake)
    assert (platform, facts.gpu_count) == (env.NVIDIA, 1)


@pytest.mark.parametrize(
    "environ, shape",
    [
        ({}, (None, None)),
        ({"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}, (2, 8)),
        ({"GROUP_WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "12"}, (3, 4)),
        ({"SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS_PER_NODE": "8(x2)"}, (2, 8)),
        ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, (1, 4)),
        ({"WORLD_SIZE": "8"}, (None, None)),
    ],
)
def test_job_shape_from_launchers(environ, shape):
    assert env.job_shape(environ) == shape


def test_egress_interface_from_routes_and_hosts(fake):
    fake.net("docker0")
    fake.net("veth12ab")
    fake.net("ens7")
    fake.net("ens8", state="down")
    fake.routes(eth0="0.0.0.0/0", ens7="10.10.0.0/16", docker0="172.17.0.0/16")
    fake.write("/etc/hosts", "127.0.0.1 localhost\n10.10.3.4 head-node  # rendezvous\n")
    assert env.route_interface(fake.root, "10.10.3.4") == "ens7"
    assert env.route_interface(fake.root, "8.8.8.8") == "eth0"
    assert env.route_interface(fake.root, "172.17.0.2") == "docker0"
    facts, _ = detect(fake, {"MASTER_ADDR": "head-node", "GROUP_WORLD_SIZE": "2"})
    assert facts.egress_interface == "ens7"
    assert facts.candidate_interfaces == ("docker0", "ens7", "eth0")
    environ = {}
    env.apply_defaults(environ, platform=env.CPU, facts=facts)
    assert environ["GLOO_SOCKET_IFNAME"] == "ens7"
    # An unknown name is not looked up (no DNS at import), and loopback needs no interface.
    assert detect(fake, {"MASTER_ADDR": "elsewhere"})[0].egress_interface is None
    assert detect(fake, {"MASTER_ADDR": "127.0.0.1"})[0].egress_interface is None


def test_config_files_nccl_reads(fake):
    fake.write("/etc/nccl.conf", "# site settings\nNCCL_IB_TIMEOUT=23\n\nNCCL_DEBUG = WARN\n")
    fake.write("/home/u/.rccl.conf", "RCCL_MSCCL_ENABLE=1\n")
    fake.write("/opt/site/nccl.conf", "NCCL_SOCKET_IFNAME==ib0\n")
    facts, _ = detect(fake, {"HOME": "/home/u", "NCCL_CONF_FILE": "/opt/site/nccl.conf"})
    assert facts.config_file_vars == frozenset(
        {"NCCL_IB_TIMEOUT", "NCCL_DEBUG", "RCCL_MSCCL_ENABLE", "NCCL_SOCKET_IFNAME"}
    )


def test_provider_topology_file(fake):
    fake.write("/proc/cpuinfo", "processor\t: 0\nflags\t\t: hypervisor\n\n")
    fake.pci("0000:18:00.0", 0x10DE, 0x030200)
    fake.write("/etc/nccl/h100-vsi.xml", '<system version="1"/>\n')
    facts, platform = detect(fake)
    environ = {}
    env.apply_defaults(environ, root=fake.root, facts=facts)
    assert platform == env.NVIDIA
    assert environ["NCCL_TOPO_FILE"].endswith("/etc/nccl/h100-vsi.xml")
    fake.write("/var/run/nvidia-topologyd/virtualTopology.xml", "<system/>\n")
    environ = {}
    env.apply_defaults(environ, root=fake.root)
    assert "NCCL_TOPO_FILE" not in environ


@pytest.mark.parametrize(
    "version, arch",
    [(90402, "gfx942"), (90010, "gfx90a"), (90500, "gfx950"), (110000, "gfx1100"), (0, "")],
)
def test_gfx_names_from_kfd(fake, version, arch):
    fake.kfd_gpu(1, 0x03, version)
    assert detect(fake)[0].gpu_arch == arch


# Numbers that str.isdigit() (or int()) takes but a plain decimal is not: "²" and "8²" (isdigit
# True, int raises), other scripts' digits, more digits than int() converts, signs, exponents.
HOSTILE_NUMBERS = ["²", "8²", "٣", "１２", "4" * 5000, "-3", "+4", "1e3", "0x10", "8 8"]


@pytest.mark.parametrize("value", HOSTILE_NUMBERS, ids=range(len(HOSTILE_NUMBERS)))
def test_job_shape_takes_only_ascii_numbers(value):
    environ = {
        name: value
        for name in ("LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE", "SLURM_JOB_NUM_NODES")
    }
    environ["SLURM_NTASKS_PER_NODE"] = value + "(x2)"
    assert env.job_shape(environ) == (None, None)
    # A good value after a hostile one is still found.
    assert env.job_shape({"LOCAL_WORLD_SIZE": value, "MPI_LOCALNRANKS": "4"}) == (None, 4)


def test_hostile_bar_resource_is_skipped(fake):
    fake.kfd_gpu(1, 0x23, 90010)
    fake.pci(
        "0000:23:00.0",
        0x1002,
        0x038000,
        mem_info_vram_total=f"{64 << 30}\n",
        resource="²0 0x0000038fffffffff 0x0\n0x0000038000000000 0x0000038fffffffff 0x0\n",
    )
    facts, _ = detect(fake)
    assert facts.large_bar is True  # the good line still counts


def test_import_xccl_survives_hostile_numbers():
    import os
    import subprocess
    import sys

    environ = dict(os.environ)
    for name in ("LOCAL_WORLD_SIZE", "WORLD_SIZE", "GROUP_WORLD_SIZE", "NCCL_IB_RETRY_CNT"):
        environ[name] = "²"
    environ["SLURM_NTASKS_PER_NODE"] = "²(x2)"
    done = subprocess.run(
        [sys.executable, "-c", "import xccl"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("value", HOSTILE_NUMBERS, ids=range(len(HOSTILE_NUMBERS)))
def test_retry_count_check_takes_only_ascii_numbers(value):
    facts = env.Facts(nodes=2, gpu_vendor="amd", gpu_arch="gfx942", gpu_count=8)
    assert env.check_user_settings({"NCCL_IB_RETRY_CNT": value}, facts) == []
