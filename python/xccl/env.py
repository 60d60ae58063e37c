"""Environment defaults for collective libraries, chosen per detected platform.

xccl applies these on import, before torch or any GPU runtime starts, because NCCL/RCCL cache
their variables when the first communicator is created and HIP/HSA/CUDA read theirs when the
runtime starts (NCCL src, NCCL_PARAM; NCCL docs, env.html). The rules:

* A value the user set is never overridden; nor is a variable an administrator set in an
  NCCL/RCCL config file (those have lower priority than the environment, so setting it here
  would silently override the site's choice).
* "safe" defaults apply on every host of their platform. "detected" ones apply only when their
  condition is proven on this host (NCCL_MIN_NCHANNELS=112 helps a single 8x MI300X node and
  hurts multi-node jobs; interface names are computed from this host's routes, never
  hard-coded).
* Every decision carries its reason and source; `python -m xccl env` prints them.
* ``XCCL_NO_ENV_DEFAULTS=1`` turns all of it off.

Detection reads sysfs/procfs only (PCI ids, KFD topology, /sys/class/infiniband, routes): it must
not import torch or initialise a GPU runtime, and it is cheap enough to run on every import. All
functions take a filesystem ``root`` so tests can point them at fake trees.

The per-platform table with reasons and sources is documented in docs/environment.md.
"""

from __future__ import annotations

import glob
import os
import socket
import struct
import sys
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Callable, Union

NO_DEFAULTS_VAR = "XCCL_NO_ENV_DEFAULTS"

NVIDIA = "nvidia"
NVIDIA_MULTINODE = "nvidia_multinode"
AWS_EFA = "aws_efa"
AMD_MI300X = "amd_mi300x"
AMD_MI250 = "amd_mi250"
CPU = "cpu"
OTHER_GPU = "other_gpu"

PLATFORMS = {
    NVIDIA: "NVIDIA GPUs, single node",
    NVIDIA_MULTINODE: "NVIDIA GPUs, multi-node (InfiniBand/RoCE or Ethernet)",
    AWS_EFA: "NVIDIA GPUs with AWS Elastic Fabric Adapter",
    AMD_MI300X: "AMD Instinct MI300X class (gfx942)",
    AMD_MI250: "AMD Instinct MI250/MI210 class (gfx90a)",
    CPU: "no GPU",
    OTHER_GPU: "a GPU xccl has no table for (defaults: none)",
}
GPU_PLATFORMS = (NVIDIA, NVIDIA_MULTINODE, AWS_EFA, AMD_MI300X, AMD_MI250)
AMD_PLATFORMS = (AMD_MI300X, AMD_MI250)
# Where a multi-node job can run ("nvidia" is single-node by definition).
MULTINODE_GPU = (NVIDIA_MULTINODE, AWS_EFA, AMD_MI300X, AMD_MI250)

_VENDOR_NVIDIA = 0x10DE
_VENDOR_AMD = 0x1002
_VENDOR_AMAZON = 0x1D0F
_KFD_LINK_XGMI = 11  # KFD io_link type (not amdsmi's numbering)

# Set by apply_defaults() when it acts on os.environ; read by `python -m xccl env`.
_last_report: Report | None = None


# --------------------------------------------------------------------------------------------
# Facts: what detection found. Rules read only this, so tests can construct it directly.


@dataclass(frozen=True)
class Facts:
    gpu_vendor: str | None = None  # "nvidia", "amd" or None
    gpu_arch: str = ""  # "gfx942", "gfx90a"; "" when unknown (NVIDIA without NVML)
    gpu_count: int = 0
    nvswitch: bool = False
    xgmi: bool = False  # some AMD GPU pair has a direct xGMI link
    rdma: frozenset = frozenset()  # kinds of ACTIVE RDMA ports: infiniband, roce, efa
    virtual_machine: bool = False
    nodes: int | None = None  # nodes in the job, from the launcher; None: not launched
    local_ranks: int | None = None  # ranks on this node, from the launcher
    cpus: int = 1  # CPUs this process may use
    master_addr: str | None = None
    egress_interface: str | None = None  # interface whose route reaches MASTER_ADDR
    candidate_interfaces: tuple = ()  # up, non-loopback, non-veth interfaces
    provider_topo_files: tuple = ()  # /etc/nccl/*.xml
    nvidia_virtual_topology: bool = False  # /var/run/nvidia-topologyd/virtualTopology.xml
    mec_firmware: int | None = None  # lowest AMD MEC firmware version found
    large_bar: bool | None = None  # every AMD GPU's VRAM fits in its largest BAR
    hipblaslt_gfx90a: bool = False  # the installed hipBLASLt ships gfx90a kernels
    config_file_vars: frozenset = frozenset()  # NCCL_*/RCCL_* set in nccl.conf / rccl.conf
    torch_imported: bool = False
    gpu_runtime_started: bool = False

    @property
    def multi_node(self) -> bool:
        return self.nodes is not None and self.nodes > 1

    @property
    def single_node(self) -> bool:
        return self.nodes == 1


def detect_platform(facts: Facts) -> str:
    """The platform whose table applies; see PLATFORMS."""
    if facts.gpu_count == 0 or facts.gpu_vendor is None:
        return CPU
    if facts.gpu_vendor == "amd":
        if facts.gpu_arch == "gfx942":
            return AMD_MI300X
        if facts.gpu_arch == "gfx90a":
            return AMD_MI250
        return OTHER_GPU
    if facts.gpu_vendor == "nvidia":
        if "efa" in facts.rdma:
            return AWS_EFA
        return NVIDIA_MULTINODE if facts.multi_node else NVIDIA
    return OTHER_GPU


# --------------------------------------------------------------------------------------------
# Rules


Value = Union[str, Callable[[Facts], str]]


@dataclass(frozen=True)
class Rule:
    name: str
    value: Value
    platforms: tuple
    kind: str  # "safe" or "detected"
    reason: str
    source: str
    condition: str = ""  # for "detected": what must be true, in words
    when: Callable[[Facts], bool] | None = None
    # Read when the GPU runtime (or OpenMP) starts: setting it later has no effect.
    at_runtime_start: bool = False

    def value_for(self, facts: Facts) -> str:
        return self.value(facts) if callable(self.value) else self.value


def _socket_ifname_applies(facts: Facts) -> bool:
    return (facts.multi_node and facts.egress_interface is not None
            and len(facts.candidate_interfaces) > 1)


def _omp_threads(facts: Facts) -> str:
    return str(max(1, facts.cpus // max(1, facts.local_ranks or 1)))


_SOCKET_CONDITION = ("multi-node job, MASTER_ADDR routes through one interface of several "
                     "candidates (docker, VLANs, several subnets): that interface, exactly")
_SOCKET_SOURCE = ("NCCL docs (NCCL_SOCKET_IFNAME); NVIDIA/nccl#286, nccl-tests#9, nccl#1581; "
                  "horovod#700")

RULES: tuple = (
    Rule("NCCL_DEBUG", "WARN", GPU_PLATFORMS, "safe",
         "NCCL/RCCL then print their warnings (a transport that failed, a fallback that costs "
         "bandwidth) without INFO noise: the cheapest way to see why a job is slow or hangs.",
         "NCCL docs env.html"),
    Rule("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", GPU_PLATFORMS, "safe",
         "Keeps the last 2000 collectives per rank (the flight recorder) for hang diagnosis; "
         "xccl delegates large GPU collectives to ProcessGroupNCCL, which reads it.",
         "PyTorch docs, TORCH_NCCL environment variables"),
    Rule("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", GPU_PLATFORMS, "safe",
         "On a collective timeout every rank dumps its flight recorder, so the stuck rank and "
         "collective can be named instead of guessed.",
         "PyTorch docs, TORCH_NCCL environment variables"),
    Rule("NCCL_IB_TIMEOUT", "22", (NVIDIA_MULTINODE,) + AMD_PLATFORMS, "detected",
         "The IB retransmit timeout is 4.096 us x 2^N: 22 gives 17 s per attempt instead of "
         "4.3 s (NCCL >= 2.23.4 default 20; 18 before), so a transient port flap on a large "
         "fabric is survived instead of killing the job. Cost: slower detection of dead links.",
         "NCCL src net_ib; IBM Cloud H100 tested config",
         condition="multi-node job with an ACTIVE InfiniBand or RoCE port",
         when=lambda f: f.multi_node and bool(f.rdma & {"infiniband", "roce"})),
    Rule("NCCL_SOCKET_IFNAME", lambda f: "=" + (f.egress_interface or ""), MULTINODE_GPU,
         "detected",
         "Bootstrap and socket traffic must use the interface that reaches the other nodes; "
         "NCCL's own pick can take docker0 or another subnet (the most common multi-node "
         "hang). '=' makes it an exact match (bond0 would also match bond0.2093).",
         _SOCKET_SOURCE, condition=_SOCKET_CONDITION, when=_socket_ifname_applies),
    Rule("GLOO_SOCKET_IFNAME", lambda f: f.egress_interface or "", MULTINODE_GPU + (CPU,),
         "detected",
         "Gloo (torch's CPU backend, used beside xccl for CPU groups) binds to the hostname's "
         "address by default, which on multi-homed hosts can be unreachable from other nodes.",
         _SOCKET_SOURCE, condition=_SOCKET_CONDITION, when=_socket_ifname_applies),
    Rule("NCCL_TOPO_FILE", lambda f: f.provider_topo_files[0] if f.provider_topo_files else "",
         (NVIDIA, NVIDIA_MULTINODE), "detected",
         "Inside a VM NCCL cannot see PCIe switches or NUMA and mis-plans rings and GPUDirect "
         "(2x8 H200 fell from 488 GB/s to 3-55 GB/s in KVM); the provider's topology file "
         "describes the real machine.",
         "NVIDIA/nccl-tests#256; NCCL src graph/topo.cc; SemiAnalysis ClusterMAX "
         "platform_config.py",
         condition="VM, exactly one /etc/nccl/*.xml, and no "
                   "/var/run/nvidia-topologyd/virtualTopology.xml (which NCCL loads itself)",
         when=lambda f: (f.virtual_machine and len(f.provider_topo_files) == 1
                         and not f.nvidia_virtual_topology)),
    Rule("HIP_FORCE_DEV_KERNARG", "1", AMD_PLATFORMS, "safe",
         "Kernel arguments in device memory save 2-3 us per kernel launch; the default since "
         "ROCm 6.2, so this only helps older ROCm.",
         "ROCm MI300X system optimization guide",
         at_runtime_start=True),
    Rule("RCCL_MSCCL_ENABLE", "0", AMD_PLATFORMS, "safe",
         "Correctness first: MSCCL had data-corruption bugs fixed only in late 2025 and AMD's "
         "own Megatron container disables it; RCCL 7.13+ removed MSCCL, where this is a no-op.",
         "ROCm prerequisite-system-validation; RCCL usage tips (7.13); ROCm/rccl PRs #1014, "
         "#2009"),
    Rule("TORCH_BLAS_PREFER_HIPBLASLT", "1", (AMD_MI300X,), "safe",
         "hipBLASLt GEMMs are faster than hipBLAS on gfx942.",
         "ROCm workload tuning guide (workload.rst)"),
    Rule("TORCH_BLAS_PREFER_HIPBLASLT", "1", (AMD_MI250,), "detected",
         "hipBLASLt GEMMs are faster where the installed hipBLASLt has kernels for the GPU.",
         "ROCm workload tuning guide",
         condition="the installed hipBLASLt ships gfx90a kernels",
         when=lambda f: f.hipblaslt_gfx90a),
    Rule("HSA_NO_SCRATCH_RECLAIM", "1", (AMD_MI300X,), "detected",
         "With MEC firmware older than 177, RCCL cannot reclaim some scratch memory and jobs "
         "crash; keeping scratch assigned avoids it (cost: memory held until exit).",
         "SemiAnalysis InferenceX MI300X scripts citing ROCm 6.4.3 amdgpu notes; ROCR env "
         "docs",
         condition="MEC firmware version < 177",
         when=lambda f: f.mec_firmware is not None and f.mec_firmware < 177,
         at_runtime_start=True),
    Rule("NCCL_MIN_NCHANNELS", "112", (AMD_MI300X,), "detected",
         "More channels put more CUs on the 7 xGMI links of a single MI300X node. Never set "
         "for multi-node jobs (AMD's 4-node example uses 40) nor when fewer GPUs take part.",
         "ROCm workload.rst (vLLM, RCCL in E2E workloads); rocm-blogs MI300X RCCL/xGMI",
         condition="single-node job (launcher says 1 node) using all 8 GPUs (8 local ranks)",
         when=lambda f: f.single_node and f.gpu_count == 8 and f.local_ranks == 8),
    Rule("HSA_FORCE_FINE_GRAIN_PCIE", "1", (AMD_MI250,), "detected",
         "RCCL peer-to-peer over PCIe between Instinct GPUs without an xGMI bridge needs "
         "fine-grained PCIe memory, which needs large-BAR addressing.",
         "RCCL usage tips; rccl-tests README",
         condition="2+ GPUs, no xGMI link, and large BAR",
         when=lambda f: f.gpu_count >= 2 and not f.xgmi and f.large_bar is True,
         at_runtime_start=True),
    Rule("OMP_NUM_THREADS", _omp_threads, (CPU,), "detected",
         "Each rank's OpenMP pool would otherwise use every core: N ranks x all cores "
         "oversubscribe the host. Usable cores / local ranks.",
         "PyTorch CPU performance guide",
         condition="the launcher reports more than one rank on this host",
         when=lambda f: (f.local_ranks or 1) > 1,
         at_runtime_start=True),
)

# Deliberately never set, with why: shown by `python -m xccl env --all`.
LEFT_ALONE: tuple = (
    ("NCCL_IB_GID_INDEX",
     ("The right index is site-specific (3, 7 or 0 on different clusters) and NCCL >= 2.21.5 "
      "picks it itself."),
     "nccl#426, #1131, #1538"),
    ("NCCL_IB_HCA",
     "Which HCAs are GPU rails is site-specific; hard-coded lists break on other hosts.",
     "NCCL docs (NCCL_IB_HCA)"),
    ("NCCL_IB_RETRY_CNT",
     "The IB retry field is 3 bits: 7 (the default) is the maximum.",
     "InfiniBand spec"),
    ("NCCL_NVLS_ENABLE",
     ("NVLink SHARP gives ~30% more allreduce bandwidth on NVSwitch; set 0 only after a Fabric "
      "Manager / multicast failure."),
     "nccl-tests#212, #216; nccl#1788"),
    ("NCCL_CUMEM_ENABLE",
     "Both values have caused hangs in some releases; the library's choice is the tested one.",
     "nccl#1116, #1721, #2379"),
    ("NCCL_P2P_DISABLE / NCCL_P2P_LEVEL",
     "Only for broken PCIe P2P; wrong values halve bandwidth or hang.",
     "NCCL docs (debug variables); nccl#1199"),
    ("NCCL_ALGO / NCCL_PROTO / NCCL_BUFFSIZE",
     "NCCL's 'debugging' class: not for production.",
     "NCCL docs env.html"),
    ("CUDA_DEVICE_MAX_CONNECTIONS",
     ("=1 is needed by Megatron TP overlap but serialises FSDP/DDP overlap; the workload "
      "decides."),
     "Megatron-LM#1468; verl#6976; torchtitan#4508"),
    ("TORCH_NCCL_ASYNC_ERROR_HANDLING",
     "torch >= 2.2 already defaults to 3 (tear down on error).",
     "PyTorch docs; pytorch#46874"),
    ("TORCH_NCCL_AVOID_RECORD_STREAMS",
     "The default behaviour in current torch; the variable is deprecated.",
     "PyTorch ProcessGroupNCCL.cpp"),
    ("FI_PROVIDER / FI_EFA_USE_DEVICE_RDMA / NCCL_PROTO on EFA",
     "aws-ofi-nccl >= 1.7 sets what it needs; these are legacy.",
     "aws-ofi-nccl doc/efa-env-var.md"),
    ("RDMAV_FORK_SAFE",
     "Harmful with current EFA stacks (\"can break things\").",
     "aws-ofi-nccl doc/efa-env-var.md"),
    ("NCCL_IB_QPS_PER_CONNECTION / NCCL_CROSS_NIC",
     "Depend on the fabric (Clos tiers, rail isolation), which a host cannot see.",
     "ClusterMAX platform_config.py; InferenceX"),
    ("TORCH_NCCL_HIGH_PRIORITY / GPU_MAX_HW_QUEUES",
     "Help multi-node FSDP on MI300X; the workload is not detectable at import.",
     "ROCm workload.rst"),
)


# --------------------------------------------------------------------------------------------
# Decisions


@dataclass
class Decision:
    name: str
    value: str  # what xccl sets (or would set)
    action: str  # set | user | config | condition | late
    kind: str
    reason: str
    source: str
    condition: str = ""
    user_value: str | None = None

    def describe(self) -> str:
        if self.action == "set":
            return f"set {self.name}={self.value}"
        if self.action == "user":
            return f"left {self.name}={self.user_value!r} as the user set it (xccl: {self.value})"
        if self.action == "config":
            return f"left {self.name} to the NCCL/RCCL config file (xccl: {self.value})"
        if self.action == "late":
            return f"not set {self.name}: the runtime that reads it has already started"
        return f"not set {self.name}: needs {self.condition}"


@dataclass
class Report:
    platform: str
    facts: Facts
    decisions: list
    disabled: bool = False
    applied: bool = False  # acted on the environment (False: a preview)

    def by_action(self, action: str) -> list:
        return [d for d in self.decisions if d.action == action]


def plan_defaults(environ: Mapping[str, str], platform: str | None = None, root: str = "/",
                  facts: Facts | None = None) -> Report:
    """What apply_defaults would do, without changing `environ`."""
    facts = facts if facts is not None else detect_facts(root, environ)
    platform = platform or detect_platform(facts)
    if platform not in PLATFORMS:
        raise ValueError(f"unknown platform {platform!r}; known: {', '.join(PLATFORMS)}")
    decisions = []
    for rule in RULES:
        if platform not in rule.platforms:
            continue
        value = rule.value_for(facts)
        decision = Decision(rule.name, value, "set", rule.kind, rule.reason, rule.source,
                            rule.condition)
        if rule.name in environ:
            # Present counts, even empty: an explicit empty value is a choice too.
            decision.action, decision.user_value = "user", environ[rule.name]
        elif rule.name in facts.config_file_vars:
            decision.action = "config"
        elif rule.kind == "detected" and not (rule.when and rule.when(facts)):
            decision.action = "condition"
        elif rule.at_runtime_start and (facts.gpu_runtime_started or (
                rule.name == "OMP_NUM_THREADS" and facts.torch_imported)):
            decision.action = "late"
        decisions.append(decision)
    return Report(platform, facts, decisions)


def apply_defaults(environ: MutableMapping[str, str] | None = None,
                   platform: str | None = None, root: str = "/",
                   facts: Facts | None = None) -> list:
    """Sets this platform's defaults in `environ` (os.environ by default) where the user has
    not; returns the decisions. Does nothing when XCCL_NO_ENV_DEFAULTS=1."""
    global _last_report
    target = os.environ if environ is None else environ
    if _truthy(target.get(NO_DEFAULTS_VAR, "")):
        if target is os.environ:
            _last_report = Report(platform or "", Facts(), [], disabled=True)
        return []
    report = plan_defaults(target, platform, root, facts)
    for decision in report.decisions:
        if decision.action == "set":
            target[decision.name] = decision.value
    report.applied = True
    if target is os.environ:
        _last_report = report
        if os.environ.get("XCCL_LOG_LEVEL", "").lower() in ("info", "debug"):
            for decision in report.decisions:
                sys.stderr.write(f"[xccl env] {decision.describe()}\n")
    return report.decisions


def last_report() -> Report | None:
    """The report of the apply_defaults() call that acted on os.environ (at import), if any."""
    return _last_report


def _truthy(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


# --------------------------------------------------------------------------------------------
# Checks of what the user set (used by `python -m xccl doctor`)


def check_user_settings(environ: Mapping[str, str], facts: Facts) -> list:
    """Settings known to hurt on this platform: list of (name, message, source)."""
    platform = detect_platform(facts)
    found = []

    def flag(name, message, source):
        found.append((name, f"{name}={environ.get(name)!r}: {message}", source))

    if "NCCL_MIN_NCHANNELS" in environ and facts.multi_node:
        flag("NCCL_MIN_NCHANNELS", "more channels steal CUs from compute in multi-node "
             "training (AMD's 4-node example uses 40, not 112)",
             "ROCm prerequisite-system-validation; ROCm workload.rst")
    retry = environ.get("NCCL_IB_RETRY_CNT", "")
    if retry.isdigit() and int(retry) > 7:
        flag("NCCL_IB_RETRY_CNT", "the IB retry field is 3 bits; values above 7 are out of "
             "range", "InfiniBand spec")
    if environ.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":
        flag("CUDA_DEVICE_MAX_CONNECTIONS", "serialises kernels across streams: needed for "
             "Megatron TP overlap, but it removes FSDP/DDP communication overlap",
             "Megatron-LM#1468; verl#6976")
    if "RDMAV_FORK_SAFE" in environ and platform == AWS_EFA:
        flag("RDMAV_FORK_SAFE", "harmful with current EFA stacks", "aws-ofi-nccl efa-env-var.md")
    ifname = environ.get("NCCL_SOCKET_IFNAME", "")
    if ifname and not ifname.startswith(("=", "^")):
        flag("NCCL_SOCKET_IFNAME", "a prefix match (bond0 also matches bond0.2093); write "
             f"'={ifname}' for exactly that interface", "nccl-tests#9")
    if "NCCL_IB_GID_INDEX" in environ:
        flag("NCCL_IB_GID_INDEX", "site-specific and auto-detected by NCCL >= 2.21.5; a "
             "hard-coded index breaks on hosts with another GID table", "nccl#1131, #1538")
    if environ.get("NCCL_P2P_DISABLE") == "1" and (facts.nvswitch or facts.xgmi):
        flag("NCCL_P2P_DISABLE", "turns off the NVLink/xGMI peer path this machine has",
             "NCCL docs (debug variables)")
    if environ.get("NCCL_NVLS_ENABLE") == "0" and facts.nvswitch:
        flag("NCCL_NVLS_ENABLE", "NVLink SHARP is off: about 30% less allreduce bandwidth "
             "unless Fabric Manager multicast is broken here", "nccl-tests#212; nccl#1442")
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        if name in environ:
            flag(name, "a debugging variable (NCCL docs): it can cost bandwidth or hang when "
                 "the problem it worked around is gone", "NCCL docs env.html")
    return found


# --------------------------------------------------------------------------------------------
# Detection (sysfs/procfs only)


def _path(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/")) if root not in ("", "/") else path


def _read(root: str, path: str, limit: int = 65536) -> str | None:
    try:
        with open(_path(root, path), "r", encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def _read_int(root: str, path: str) -> int | None:
    text = _read(root, path)
    if text is None:
        return None
    try:
        return int(text.strip().split()[0], 0)
    except (ValueError, IndexError):
        return None


def _listdir(root: str, path: str) -> list:
    try:
        return sorted(os.listdir(_path(root, path)))
    except OSError:
        return []


def _link_basename(root: str, path: str) -> str:
    try:
        return os.path.basename(os.readlink(_path(root, path)))
    except OSError:
        return ""


def _kfd_properties(root: str, path: str) -> dict:
    values = {}
    for line in (_read(root, path) or "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            try:
                values[parts[0]] = int(parts[1])
            except ValueError:
                pass
    return values


def gfx_arch_name(version: int) -> str:
    """KFD gfx_target_version to an arch name: 90402 -> gfx942, 90010 -> gfx90a."""
    if version <= 0:
        return ""
    return f"gfx{version // 10000}{(version // 100) % 100:x}{version % 100:x}"


def _scan_gpus(root: str) -> dict:
    """GPU vendor, arch, count and links from PCI ids and the KFD topology."""
    out = {"nvidia": 0, "amd_pci": [], "nvswitch": False, "amd_kfd": [], "xgmi": False}
    for bdf in _listdir(root, "/sys/bus/pci/devices"):
        base = f"/sys/bus/pci/devices/{bdf}"
        vendor = _read_int(root, base + "/vendor")
        klass = _read_int(root, base + "/class") or 0
        if vendor == _VENDOR_NVIDIA and klass >> 16 == 0x03:
            out["nvidia"] += 1
        elif vendor == _VENDOR_NVIDIA and klass >> 8 == 0x0680:
            out["nvswitch"] = True
        elif vendor == _VENDOR_AMD and klass >> 16 in (0x03, 0x12):
            out["amd_pci"].append(bdf)
    if out["nvidia"] == 0:
        # Containers may hide the PCI tree but keep the driver's per-GPU folders.
        out["nvidia"] = len(_listdir(root, "/proc/driver/nvidia/gpus"))
    nodes = "/sys/class/kfd/kfd/topology/nodes"
    for node in _listdir(root, nodes):
        props = _kfd_properties(root, f"{nodes}/{node}/properties")
        if props.get("simd_count", 0) <= 0:
            continue
        location = props.get("location_id", 0)
        bdf = "{:04x}:{:02x}:{:02x}.{:x}".format(props.get("domain", 0) & 0xFFFF,
                                                 (location >> 8) & 0xFF, (location >> 3) & 0x1F,
                                                 location & 0x7)
        out["amd_kfd"].append((bdf, gfx_arch_name(props.get("gfx_target_version", 0))))
        for link in _listdir(root, f"{nodes}/{node}/io_links"):
            io = _kfd_properties(root, f"{nodes}/{node}/io_links/{link}/properties")
            if io.get("type") == _KFD_LINK_XGMI:
                out["xgmi"] = True
    return out


def _scan_rdma(root: str) -> frozenset:
    kinds = set()
    for hca in _listdir(root, "/sys/class/infiniband"):
        base = f"/sys/class/infiniband/{hca}"
        driver = _link_basename(root, base + "/device/driver")
        vendor = _read_int(root, base + "/device/vendor")
        for port in _listdir(root, base + "/ports"):
            if "ACTIVE" not in (_read(root, f"{base}/ports/{port}/state") or ""):
                continue
            layer = (_read(root, f"{base}/ports/{port}/link_layer") or "").strip()
            if driver == "efa" or hca.startswith("efa") or vendor == _VENDOR_AMAZON:
                kinds.add("efa")
            elif layer == "InfiniBand":
                kinds.add("infiniband")
            elif layer == "Ethernet":
                kinds.add("roce")
    return frozenset(kinds)


def _is_vm(root: str) -> bool:
    cpuinfo = _read(root, "/proc/cpuinfo", 256 * 1024) or ""
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags" and "hypervisor" in value.split():
            return True
    return bool((_read(root, "/sys/hypervisor/type") or "").strip())


def _first_int(environ: Mapping[str, str], names: Sequence[str]) -> int | None:
    for name in names:
        text = environ.get(name, "").strip()
        # SLURM_NTASKS_PER_NODE may read "8(x2)"
        digits = text.split("(")[0]
        if digits.isdigit() and int(digits) > 0:
            return int(digits)
    return None


def job_shape(environ: Mapping[str, str]) -> tuple:
    """(nodes, local ranks) from the launcher's variables; None where it says nothing.

    torchrun sets GROUP_WORLD_SIZE (nodes), WORLD_SIZE and LOCAL_WORLD_SIZE; Slurm
    SLURM_JOB_NUM_NODES and SLURM_NTASKS_PER_NODE; Open MPI OMPI_COMM_WORLD_SIZE and
    OMPI_COMM_WORLD_LOCAL_SIZE."""
    local = _first_int(environ, ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                 "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"))
    nodes = _first_int(environ, ("GROUP_WORLD_SIZE", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"))
    if nodes is None and local:
        world = _first_int(environ, ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"))
        if world:
            nodes = -(-world // local)
    return nodes, local


def _resolve_ipv4(root: str, host: str) -> str | None:
    """An IPv4 literal, or a name from /etc/hosts: never DNS (no traffic at import)."""
    try:
        socket.inet_aton(host)
        if host.count(".") == 3:
            return host
    except OSError:
        pass
    for line in (_read(root, "/etc/hosts") or "").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and host in fields[1:] and fields[0].count(".") == 3:
            return fields[0]
    return None


def route_interface(root: str, address: str) -> str | None:
    """The interface of the longest-prefix IPv4 route to `address` in /proc/net/route."""
    try:
        target = struct.unpack("<I", socket.inet_aton(address))[0]
    except OSError:
        return None
    best, best_len = None, -1
    for line in (_read(root, "/proc/net/route") or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            dest, mask = int(fields[1], 16), int(fields[7], 16)
        except ValueError:
            continue
        if target & mask == dest & mask:
            length = bin(mask).count("1")
            if length > best_len:
                best, best_len = fields[0], length
    return best


def candidate_interfaces(root: str) -> tuple:
    names = []
    for name in _listdir(root, "/sys/class/net"):
        if name == "lo" or name.startswith("veth"):
            continue
        state = (_read(root, f"/sys/class/net/{name}/operstate") or "").strip()
        flags = _read_int(root, f"/sys/class/net/{name}/flags") or 0
        if state == "up" or (state == "unknown" and flags & 0x1):
            names.append(name)
    return tuple(names)


def _config_file_vars(root: str, environ: Mapping[str, str]) -> frozenset:
    """NCCL_*/RCCL_* keys set in the files NCCL and RCCL read (lower priority than env)."""
    home = environ.get("HOME", "")
    paths = ["/etc/nccl.conf", "/etc/rccl.conf"]
    if home:
        paths += [os.path.join(home, ".nccl.conf"), os.path.join(home, ".rccl.conf")]
    if environ.get("NCCL_CONF_FILE"):
        paths.append(environ["NCCL_CONF_FILE"])
    keys = set()
    for path in paths:
        for line in (_read(root, path) or "").splitlines():
            key, sep, _ = line.split("#", 1)[0].partition("=")
            if sep and key.strip():
                keys.add(key.strip())
    return frozenset(keys)


def _amd_gpu_details(root: str, bdfs: Iterable[str]) -> tuple:
    """(lowest MEC firmware, all GPUs large-BAR) from each GPU's PCI sysfs folder."""
    firmware, large = [], []
    for bdf in bdfs:
        base = f"/sys/bus/pci/devices/{bdf}"
        mec = _read_int(root, base + "/fw_version/mec_fw_version")
        if mec:
            firmware.append(mec)
        vram = _read_int(root, base + "/mem_info_vram_total")
        biggest = 0
        for line in (_read(root, base + "/resource") or "").splitlines():
            parts = line.split()
            if len(parts) >= 2:
                start, end = int(parts[0], 16), int(parts[1], 16)
                if end > start:
                    biggest = max(biggest, end - start + 1)
        if vram:
            large.append(biggest >= vram)
    return (min(firmware) if firmware else None), (all(large) if large else None)


def detect_facts(root: str = "/", environ: Mapping[str, str] | None = None) -> Facts:
    environ = os.environ if environ is None else environ
    gpus = _scan_gpus(root)
    amd = gpus["amd_kfd"] or [(bdf, "") for bdf in gpus["amd_pci"]]
    vendor, count, arch = None, 0, ""
    if len(amd) > gpus["nvidia"]:
        vendor, count = "amd", len(amd)
        arches = sorted({a for _, a in amd if a})
        arch = arches[0] if len(arches) == 1 else ""
    elif gpus["nvidia"]:
        vendor, count = "nvidia", gpus["nvidia"]
    nodes, local = job_shape(environ)
    master = environ.get("MASTER_ADDR", "").strip() or None
    egress = None
    if master:
        address = _resolve_ipv4(root, master)
        if address and not address.startswith("127."):
            egress = route_interface(root, address)
    mec, large_bar = _amd_gpu_details(root, [bdf for bdf, _ in amd]) if vendor == "amd" else (
        None, None)
    rocm = glob.glob(_path(root, "/opt/rocm*/lib/hipblaslt/library/*gfx90a*"))
    torch = sys.modules.get("torch")
    started = False
    if torch is not None and root in ("", "/"):
        try:
            started = bool(torch.cuda.is_initialized())
        except Exception:  # noqa: BLE001 - a half-imported or stub torch: assume not started
            started = False
    try:
        cpus = len(os.sched_getaffinity(0)) if root in ("", "/") else (os.cpu_count() or 1)
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return Facts(
        gpu_vendor=vendor,
        gpu_arch=arch,
        gpu_count=count,
        nvswitch=gpus["nvswitch"],
        xgmi=gpus["xgmi"],
        rdma=_scan_rdma(root),
        virtual_machine=_is_vm(root),
        nodes=nodes,
        local_ranks=local,
        cpus=cpus,
        master_addr=master,
        egress_interface=egress,
        candidate_interfaces=candidate_interfaces(root),
        provider_topo_files=tuple(sorted(glob.glob(_path(root, "/etc/nccl/*.xml")))),
        nvidia_virtual_topology=os.path.exists(
            _path(root, "/var/run/nvidia-topologyd/virtualTopology.xml")),
        mec_firmware=mec,
        large_bar=large_bar,
        hipblaslt_gfx90a=bool(rocm),
        config_file_vars=_config_file_vars(root, environ),
        torch_imported=torch is not None,
        gpu_runtime_started=started,
    )


# --------------------------------------------------------------------------------------------
# Text for `python -m xccl env`


def format_report(report: Report, show_all: bool = False) -> str:
    f = report.facts
    lines = []
    if report.disabled:
        lines.append(f"{NO_DEFAULTS_VAR}=1: xccl set no environment defaults.")
        return "\n".join(lines)
    gpu = f"{f.gpu_count}x {f.gpu_vendor} {f.gpu_arch}".rstrip() if f.gpu_count else "none"
    job = "not launched by a known launcher" if f.nodes is None else (
        f"{f.nodes} node(s), {f.local_ranks or '?'} rank(s) on this one")
    lines.append(f"platform: {report.platform} ({PLATFORMS[report.platform]})")
    lines.append(f"  GPUs: {gpu}; NVSwitch: {'yes' if f.nvswitch else 'no'}; "
                 f"xGMI: {'yes' if f.xgmi else 'no'}; RDMA: {', '.join(sorted(f.rdma)) or 'none'}; "
                 f"VM: {'yes' if f.virtual_machine else 'no'}")
    lines.append(f"  job: {job}")
    if not report.applied:
        lines.append("  (a preview: nothing was changed)")
    sections = (("set", "Set by xccl" if report.applied else "Would set"),
                ("user", "Left alone: set by the user"),
                ("config", "Left alone: set in an NCCL/RCCL config file"),
                ("late", "Not set: too late in this process"),
                ("condition", "Not set: condition not met on this host"))
    for action, title in sections:
        chosen = report.by_action(action)
        if not chosen:
            continue
        lines.append("")
        lines.append(f"{title}:")
        for d in chosen:
            if action == "set":
                lines.append(f"  {d.name}={d.value}  [{d.kind}]")
            elif action == "user":
                lines.append(f"  {d.name}={d.user_value}  (xccl's default: {d.value})")
            else:
                lines.append(f"  {d.name}  (xccl's default: {d.value or '-'})")
            if action == "condition":
                lines.append(f"      needs: {d.condition}")
            lines.append(f"      why: {d.reason}")
            lines.append(f"      source: {d.source}")
    if not report.decisions:
        lines.append("")
        lines.append("No defaults apply to this platform.")
    if show_all:
        lines.append("")
        lines.append("Never set by xccl (dangerous as defaults):")
        for name, why, source in LEFT_ALONE:
            lines.append(f"  {name}: {why}  [{source}]")
    return "\n".join(lines)


def report_to_dict(report: Report) -> dict:
    f = report.facts
    return {
        "platform": report.platform,
        "disabled": report.disabled,
        "applied": report.applied,
        "facts": {k: (sorted(v) if isinstance(v, (set, frozenset)) else v)
                  for k, v in f.__dict__.items()},
        "decisions": [d.__dict__ for d in report.decisions],
    }


__all__ = [
    "AMD_MI250",
    "AMD_MI300X",
    "AWS_EFA",
    "CPU",
    "LEFT_ALONE",
    "NO_DEFAULTS_VAR",
    "NVIDIA",
    "NVIDIA_MULTINODE",
    "OTHER_GPU",
    "PLATFORMS",
    "RULES",
    "Decision",
    "Facts",
    "Report",
    "Rule",
    "apply_defaults",
    "check_user_settings",
    "detect_facts",
    "detect_platform",
    "format_report",
    "last_report",
    "plan_defaults",
]
