"""Environment defaults (python/xccl/env.py): platform detection from fake sysfs trees, and for
every default in the table: applied on its platform when its condition holds, never on another
platform, never over a user's (or a config file's) value.

These tests never import torch: env.py runs before torch is imported.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from xccl_modules import FakeRoot, load

env = load("env")
Facts = env.Facts

# Facts that make each "detected" rule's condition true, and the value it must then produce.
SATISFY = {
    "NCCL_IB_TIMEOUT": {"nodes": 2, "local_ranks": 8, "rdma": frozenset({"infiniband"})},
    "NCCL_SOCKET_IFNAME": {"nodes": 2, "egress_interface": "ens7",
                           "candidate_interfaces": ("docker0", "ens7", "eno1")},
    "GLOO_SOCKET_IFNAME": {"nodes": 2, "egress_interface": "ens7",
                           "candidate_interfaces": ("docker0", "ens7", "eno1")},
    "NCCL_TOPO_FILE": {"virtual_machine": True, "provider_topo_files": ("/etc/nccl/h100-vm.xml",)},
    "TORCH_BLAS_PREFER_HIPBLASLT": {"hipblaslt_gfx90a": True},
    "HSA_NO_SCRATCH_RECLAIM": {"mec_firmware": 170},
    "NCCL_MIN_NCHANNELS": {"nodes": 1, "gpu_count": 8, "local_ranks": 8},
    "HSA_FORCE_FINE_GRAIN_PCIE": {"gpu_count": 2, "xgmi": False, "large_bar": True},
    "OMP_NUM_THREADS": {"local_ranks": 8, "cpus": 64},
}
EXPECTED_VALUE = {
    "NCCL_SOCKET_IFNAME": "=ens7",
    "GLOO_SOCKET_IFNAME": "ens7",
    "NCCL_TOPO_FILE": "/etc/nccl/h100-vm.xml",
    "OMP_NUM_THREADS": "8",
}


def satisfying(rule) -> Facts:
    return Facts(**SATISFY.get(rule.name, {}))


def rule_id(rule) -> str:
    return f"{rule.name}@{'+'.join(rule.platforms) if len(rule.platforms) < 3 else 'many'}"


def platforms_of(name):
    """Every platform on which some rule sets `name`."""
    return {p for rule in env.RULES if rule.name == name for p in rule.platforms}


# ---------------------------------------------------------------------------------------------
# Every default: applied only on its platform, never over a user or config value.


def test_every_detected_rule_has_a_satisfying_case():
    detected = {rule.name for rule in env.RULES if rule.kind == "detected"}
    assert detected <= set(SATISFY), detected - set(SATISFY)
    assert {rule.kind for rule in env.RULES} == {"safe", "detected"}


@pytest.mark.parametrize("rule", env.RULES, ids=rule_id)
def test_applied_on_its_platforms(rule):
    for platform in rule.platforms:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=satisfying(rule))
        fixed = rule.value if isinstance(rule.value, str) else None
        expected = EXPECTED_VALUE.get(rule.name, fixed)
        assert environ.get(rule.name) == expected, (platform, decisions)
        mine = [d for d in decisions if d.name == rule.name]
        assert [d.action for d in mine] == ["set"]
        assert mine[0].reason and mine[0].source


@pytest.mark.parametrize("rule", env.RULES, ids=rule_id)
def test_never_applied_on_other_platforms(rule):
    others = set(env.PLATFORMS) - platforms_of(rule.name)
    assert others, "a rule for every platform is not a platform default"
    for platform in others:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=satisfying(rule))
        assert rule.name not in environ, platform
        assert rule.name not in [d.name for d in decisions]


@pytest.mark.parametrize("rule", env.RULES, ids=rule_id)
def test_never_overrides_a_user_value(rule):
    for platform in rule.platforms:
        for user_value in ("user-choice", ""):
            environ = {rule.name: user_value}
            decisions = env.apply_defaults(environ, platform=platform, facts=satisfying(rule))
            assert environ[rule.name] == user_value
            mine = [d for d in decisions if d.name == rule.name]
            assert [(d.action, d.user_value) for d in mine] == [("user", user_value)]


@pytest.mark.parametrize("rule", env.RULES, ids=rule_id)
def test_never_overrides_an_nccl_config_file(rule):
    facts = Facts(**{**SATISFY.get(rule.name, {}), "config_file_vars": frozenset({rule.name})})
    for platform in rule.platforms:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=facts)
        assert rule.name not in environ
        assert [d.action for d in decisions if d.name == rule.name] == ["config"]


@pytest.mark.parametrize("rule", [r for r in env.RULES if r.kind == "detected"], ids=rule_id)
def test_detected_rules_need_their_condition(rule):
    for platform in rule.platforms:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=Facts())
        assert rule.name not in environ
        mine = [d for d in decisions if d.name == rule.name]
        assert [d.action for d in mine] == ["condition"]
        assert mine[0].condition


@pytest.mark.parametrize("rule", [r for r in env.RULES if r.at_runtime_start], ids=rule_id)
def test_runtime_variables_are_not_set_after_the_runtime_started(rule):
    facts = Facts(**{**SATISFY.get(rule.name, {}), "gpu_runtime_started": True,
                     "torch_imported": True})
    for platform in rule.platforms:
        environ = {}
        decisions = env.apply_defaults(environ, platform=platform, facts=facts)
        assert rule.name not in environ
        assert [d.action for d in decisions if d.name == rule.name] == ["late"]


def test_no_env_defaults_switch_disables_everything():
    environ = {"XCCL_NO_ENV_DEFAULTS": "1"}
    assert env.apply_defaults(environ, platform=env.AMD_MI300X,
                              facts=Facts(**SATISFY["NCCL_MIN_NCHANNELS"])) == []
    assert environ == {"XCCL_NO_ENV_DEFAULTS": "1"}
    environ = {"XCCL_NO_ENV_DEFAULTS": "0"}
    assert env.apply_defaults(environ, platform=env.AMD_MI300X, facts=Facts())
    assert environ["HIP_FORCE_DEV_KERNARG"] == "1"


def test_cpu_only_hosts_get_no_gpu_library_variables():
    merged = {k: v for case in SATISFY.values() for k, v in case.items()}
    facts = Facts(**{**merged, "nodes": 2})
    environ = {}
    env.apply_defaults(environ, platform=env.CPU, facts=facts)
    prefixes = ("NCCL_", "RCCL_", "HSA_", "HIP_", "CUDA_", "TORCH_NCCL_", "TORCH_BLAS_")
    assert not [name for name in environ if name.startswith(prefixes)], environ
    assert environ == {"GLOO_SOCKET_IFNAME": "ens7", "OMP_NUM_THREADS": "8"}


def test_other_gpus_get_no_defaults():
    environ = {}
    assert env.apply_defaults(environ, platform=env.OTHER_GPU, facts=Facts()) == []
    assert environ == {}


# ---------------------------------------------------------------------------------------------
# The conditions that matter most, near their edges.


@pytest.mark.parametrize("overrides", [
    {"nodes": 2, "gpu_count": 8, "local_ranks": 8},     # multi-node: hurts (AMD 4-node uses 40)
    {"nodes": None, "gpu_count": 8, "local_ranks": 8},  # not launched: single node not proven
    {"nodes": 1, "gpu_count": 8, "local_ranks": 4},     # only half the GPUs take part
    {"nodes": 1, "gpu_count": 4, "local_ranks": 4},     # a 4-GPU box
])
def test_min_nchannels_only_for_a_whole_single_mi300x_node(overrides):
    environ = {}
    env.apply_defaults(environ, platform=env.AMD_MI300X, facts=Facts(**overrides))
    assert "NCCL_MIN_NCHANNELS" not in environ
    # ... and never on MI250 even when the shape fits.
    env.apply_defaults(environ, platform=env.AMD_MI250,
                       facts=Facts(**SATISFY["NCCL_MIN_NCHANNELS"]))
    assert "NCCL_MIN_NCHANNELS" not in environ


def test_interface_names_come_from_this_hosts_route():
    for egress in ("ens7", "bond0.2093"):
        facts = Facts(nodes=2, egress_interface=egress, candidate_interfaces=("eth0", egress))
        environ = {}
        env.apply_defaults(environ, platform=env.NVIDIA_MULTINODE, facts=facts)
        assert environ["NCCL_SOCKET_IFNAME"] == "=" + egress  # exact match, never a prefix
        assert environ["GLOO_SOCKET_IFNAME"] == egress
    # One interface only: NCCL's own choice is right, so nothing is set.
    environ = {}
    env.apply_defaults(environ, platform=env.NVIDIA_MULTINODE,
                       facts=Facts(nodes=2, egress_interface="eth0",
                                   candidate_interfaces=("eth0",)))
    assert "NCCL_SOCKET_IFNAME" not in environ and "GLOO_SOCKET_IFNAME" not in environ
    # Single node: no interface is needed.
    environ = {}
    env.apply_defaults(environ, platform=env.NVIDIA,
                       facts=Facts(nodes=1, egress_interface="ens7",
                                   candidate_interfaces=("eth0", "ens7")))
    assert "NCCL_SOCKET_IFNAME" not in environ


def test_ib_timeout_needs_an_rdma_fabric_and_several_nodes():
    for facts in (Facts(nodes=1, rdma=frozenset({"infiniband"})), Facts(nodes=4),
                  Facts(nodes=4, rdma=frozenset({"efa"}))):
        environ = {}
        env.apply_defaults(environ, platform=env.NVIDIA_MULTINODE, facts=facts)
        assert "NCCL_IB_TIMEOUT" not in environ, facts
    environ = {}
    env.apply_defaults(environ, platform=env.AMD_MI250,
                       facts=Facts(nodes=2, rdma=frozenset({"roce"})))
    assert environ["NCCL_IB_TIMEOUT"] == "22"


def test_topo_file_only_in_a_vm_without_nvidias_own_file():
    for overrides in ({"virtual_machine": False}, {"nvidia_virtual_topology": True},
                      {"provider_topo_files": ("/etc/nccl/a.xml", "/etc/nccl/b.xml")}):
        facts = Facts(**{**SATISFY["NCCL_TOPO_FILE"], **overrides})
        environ = {}
        env.apply_defaults(environ, platform=env.NVIDIA, facts=facts)
        assert "NCCL_TOPO_FILE" not in environ, overrides


def test_scratch_reclaim_by_firmware_version():
    for firmware, expected in ((176, "1"), (177, None), (None, None)):
        environ = {}
        env.apply_defaults(environ, platform=env.AMD_MI300X, facts=Facts(mec_firmware=firmware))
        assert environ.get("HSA_NO_SCRATCH_RECLAIM") == expected


def _private_environ(monkeypatch):
    """os.environ replaced by a copy for one test, so what apply_defaults sets cannot leak."""
    monkeypatch.setattr(os, "environ", dict(os.environ))
    for name in [r.name for r in env.RULES] + ["XCCL_NO_ENV_DEFAULTS"]:
        os.environ.pop(name, None)


def test_apply_to_os_environ_records_a_report(monkeypatch, capsys):
    _private_environ(monkeypatch)
    monkeypatch.setattr(env, "_last_report", None)
    os.environ.update(XCCL_LOG_LEVEL="info", NCCL_DEBUG="INFO")
    decisions = env.apply_defaults(platform=env.AMD_MI250, facts=Facts())
    assert os.environ["HIP_FORCE_DEV_KERNARG"] == "1"
    assert os.environ["NCCL_DEBUG"] == "INFO"
    report = env.last_report()
    assert report.applied and report.platform == env.AMD_MI250
    assert report.decisions == decisions
    logged = capsys.readouterr().err
    assert "[xccl env] set HIP_FORCE_DEV_KERNARG=1" in logged
    assert "left NCCL_DEBUG='INFO' as the user set it" in logged


def test_report_text_and_json():
    report = env.plan_defaults({"NCCL_DEBUG": "TRACE"}, platform=env.AMD_MI300X,
                               facts=Facts(mec_firmware=200))
    text = env.format_report(report, show_all=True)
    assert "platform: amd_mi300x" in text
    assert "Would set:" in text and "  RCCL_MSCCL_ENABLE=0  [safe]" in text
    assert "Left alone: set by the user:\n  NCCL_DEBUG=TRACE" in text
    assert "needs: MEC firmware version < 177" in text
    assert "NCCL_IB_GID_INDEX" in text  # the never-set list
    data = json.loads(json.dumps(env.report_to_dict(report), default=str))
    assert data["platform"] == "amd_mi300x"
    assert {d["name"] for d in data["decisions"] if d["action"] == "set"} >= {"RCCL_MSCCL_ENABLE"}
    with pytest.raises(ValueError, match="unknown platform"):
        env.plan_defaults({}, platform="tpu", facts=Facts())


def test_user_settings_that_hurt_are_flagged():
    multi = Facts(nodes=2, gpu_vendor="amd", gpu_arch="gfx942", gpu_count=8)

    def names(environ, facts):
        return [name for name, _, _ in env.check_user_settings(environ, facts)]

    assert names({"NCCL_MIN_NCHANNELS": "112"}, multi) == ["NCCL_MIN_NCHANNELS"]
    assert names({"NCCL_MIN_NCHANNELS": "112"}, Facts(nodes=1)) == []
    assert names({"NCCL_SOCKET_IFNAME": "eth0"}, multi) == ["NCCL_SOCKET_IFNAME"]
    assert names({"NCCL_SOCKET_IFNAME": "=eth0"}, multi) == []
    assert names({"NCCL_SOCKET_IFNAME": "^docker,lo"}, multi) == []
    assert names({"NCCL_IB_RETRY_CNT": "10"}, multi) == ["NCCL_IB_RETRY_CNT"]
    assert names({"NCCL_IB_RETRY_CNT": "7"}, multi) == []
    assert names({"RDMAV_FORK_SAFE": "1"},
                 Facts(gpu_vendor="nvidia", gpu_count=8, rdma=frozenset({"efa"}))) == [
        "RDMAV_FORK_SAFE"]
    assert names({"RDMAV_FORK_SAFE": "1"}, multi) == []
    assert names({"NCCL_NVLS_ENABLE": "0"}, Facts(nvswitch=True)) == ["NCCL_NVLS_ENABLE"]
    assert names({"NCCL_P2P_DISABLE": "1"}, Facts(xgmi=True)) == ["NCCL_P2P_DISABLE"]
    assert names({"NCCL_P2P_DISABLE": "1"}, Facts()) == []
    assert names({"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_PROTO": "Simple"}, Facts()) == [
        "CUDA_DEVICE_MAX_CONNECTIONS", "NCCL_PROTO"]


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
        fake.pci(f"0000:{0x05 + 0x20 * i:02x}:00.0", 0x1002, 0x120000,
                 fw_version__mec_fw_version="0x000000b1\n")
    fake.write("/sys/class/kfd/kfd/topology/nodes/0/properties", "simd_count 0\n")
    facts, platform = detect(fake)
    assert platform == env.AMD_MI300X
    assert (facts.gpu_vendor, facts.gpu_arch, facts.gpu_count, facts.xgmi) == (
        "amd", "gfx942", 8, True)
    assert facts.mec_firmware == 0xB1


def test_detects_mi250_and_large_bar(fake):
    for i, bus in enumerate((0x23, 0x24)):
        fake.kfd_gpu(i + 1, bus, 90010)
        fake.pci(f"0000:{bus:02x}:00.0", 0x1002, 0x038000,
                 mem_info_vram_total=f"{64 << 30}\n",
                 resource="0x0000038000000000 0x0000038fffffffff 0x000000000014220c\n"
                          "0x0000000000000000 0x0000000000000000 0x0000000000000000\n")
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


@pytest.mark.parametrize("environ, shape", [
    ({}, (None, None)),
    ({"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}, (2, 8)),
    ({"GROUP_WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "4", "WORLD_SIZE": "12"}, (3, 4)),
    ({"SLURM_JOB_NUM_NODES": "2", "SLURM_NTASKS_PER_NODE": "8(x2)"}, (2, 8)),
    ({"OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "4"}, (1, 4)),
    ({"WORLD_SIZE": "8"}, (None, None)),
])
def test_job_shape_from_launchers(environ, shape):
    assert env.job_shape(environ) == shape


def test_egress_interface_from_routes_and_hosts(fake):
    fake.net("docker0")
    fake.net("veth12ab")
    fake.net("ens7")
    fake.net("ens8", state="down")
    fake.routes(("eth0", "00000000", "00000000"), ("ens7", "00000A0A", "0000FFFF"),
                ("docker0", "000011AC", "0000FFFF"))
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
        {"NCCL_IB_TIMEOUT", "NCCL_DEBUG", "RCCL_MSCCL_ENABLE", "NCCL_SOCKET_IFNAME"})


def test_provider_topology_file(fake):
    fake.write("/proc/cpuinfo", "processor\t: 0\nflags\t\t: hypervisor\n\n")
    fake.pci("0000:18:00.0", 0x10DE, 0x030200)
    fake.write("/etc/nccl/h100-vsi.xml", "<system version=\"1\"/>\n")
    facts, platform = detect(fake)
    environ = {}
    env.apply_defaults(environ, root=fake.root, facts=facts)
    assert platform == env.NVIDIA
    assert environ["NCCL_TOPO_FILE"].endswith("/etc/nccl/h100-vsi.xml")
    fake.write("/var/run/nvidia-topologyd/virtualTopology.xml", "<system/>\n")
    environ = {}
    env.apply_defaults(environ, root=fake.root)
    assert "NCCL_TOPO_FILE" not in environ


def test_gfx_names():
    assert [env.gfx_arch_name(v) for v in (90402, 90010, 90500, 110000, 0)] == [
        "gfx942", "gfx90a", "gfx950", "gfx1100", ""]


def test_this_host_is_detected_quickly_and_without_torch():
    """On import of xccl this runs before torch: it must not import torch and must be cheap."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = (f"import sys, time; sys.path.insert(0, {here!r}); from xccl_modules import load; "
            "env = load('env'); t = time.perf_counter(); report = env.plan_defaults({}); "
            "print(report.platform, round(time.perf_counter() - t, 3), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    platform, seconds, torch_loaded = out[0], float(out[1]), out[2]
    assert platform in env.PLATFORMS
    assert torch_loaded == "False"
    assert seconds < 5.0  # ~15 ms in practice; generous for a loaded 2-core CI host


def test_import_of_the_package_applies_defaults():
    """The installed package applies the defaults at import (needs the built extension)."""
    pytest.importorskip("xccl._C")
    code = ("import os, xccl, xccl.env as e; r = e.last_report(); "
            "print(r is not None and r.applied, os.environ.get('NCCL_DEBUG'))")
    environ = {k: v for k, v in os.environ.items() if k not in ("NCCL_DEBUG",
                                                                 "XCCL_NO_ENV_DEFAULTS")}
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=environ, check=True).stdout.split()
    assert out[0] == "True", out
    platform = env.detect_platform(env.detect_facts())
    assert out[1] == ("WARN" if platform in env.GPU_PLATFORMS else "None")
    disabled = dict(environ, XCCL_NO_ENV_DEFAULTS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=disabled, check=True).stdout.split()
    assert out[1] == "None"
    assert time.monotonic() - start < 300


# ---------------------------------------------------------------------------------------------
# docs/environment.md says what the code does.

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def _doc_sections():
    with open(os.path.join(REPO, "docs", "environment.md"), encoding="utf-8") as f:
        text = f.read()
    sections, current = {}, None
    for line in text.splitlines():
        if line.startswith("#"):
            current = line.lstrip("#").strip()
            sections[current] = []
        elif current and line.startswith("| `"):
            sections[current].append(line.split("|")[1].strip())
    return sections


def _names(cells):
    """The first backticked name of each first-column cell."""
    return [cell.split("`")[1] for cell in cells]


def test_docs_list_each_platforms_defaults():
    sections = _doc_sections()
    for platform in env.PLATFORMS:
        documented = _names(sections[platform])
        expected = [rule.name for rule in env.RULES if platform in rule.platforms]
        assert sorted(documented) == sorted(expected), platform
    reasons = sections["Why, and where each default comes from"]
    for rule in env.RULES:
        assert any(rule.name in row for row in reasons), rule.name


def test_docs_list_every_xccl_variable():
    import re

    with open(os.path.join(REPO, "csrc", "common", "env.cc"), encoding="utf-8") as f:
        # Each table entry starts a line: text("XCCL_...", integer("XCCL_...", ...
        declared = re.findall(r'^\s*[a-z]+\("(XCCL_[A-Z0-9_]+)"', f.read(), re.M)
    assert "XCCL_TOPO_FILE" in declared and "XCCL_TOPO_DUMP_FILE" in declared
    assert set(declared) <= set(_names(_doc_sections()["XCCL variables"]))


# ---------------------------------------------------------------------------------------------
# python -m xccl env


def test_env_command_previews_and_explains(monkeypatch, capsys):
    cli = load("cli")
    monkeypatch.setattr(env, "_last_report", None)
    _private_environ(monkeypatch)
    os.environ["NCCL_DEBUG"] = "INFO"
    assert cli.main(["env", "--platform", "amd_mi300x", "--all"]) == 0
    out = capsys.readouterr().out
    assert "platform: amd_mi300x" in out and "(a preview: nothing was changed)" in out
    assert "Would set:\n" in out and "\n  HIP_FORCE_DEV_KERNARG=1  [safe]\n" in out
    assert "Left alone: set by the user:\n  NCCL_DEBUG=INFO" in out
    assert "Never set by xccl" in out
    assert "HIP_FORCE_DEV_KERNARG" not in os.environ  # a preview changes nothing
    assert cli.main(["env", "--json", "--platform", "cpu"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["platform"] == "cpu" and data["applied"] is False
    assert cli.main(["env", "--platform", "tpu"]) == 2
    assert "unknown platform 'tpu'" in capsys.readouterr().err


def test_env_command_shows_what_import_applied(monkeypatch, capsys):
    cli = load("cli")
    _private_environ(monkeypatch)
    monkeypatch.setattr(env, "_last_report", None)
    env.apply_defaults(platform=env.AMD_MI250, facts=Facts())
    assert cli.main(["env"]) == 0
    out = capsys.readouterr().out
    assert "platform: amd_mi250" in out and "Set by xccl:\n" in out and "preview" not in out
    os.environ["XCCL_NO_ENV_DEFAULTS"] = "1"
    env.apply_defaults()
    assert cli.main(["env"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("XCCL_NO_ENV_DEFAULTS=1: xccl set no environment defaults.")
    assert "What xccl would set without it:" in out
