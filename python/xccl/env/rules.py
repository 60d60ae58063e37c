"""Rules: the per-platform environment defaults, each with its reason and source.

The table (and what xccl deliberately never sets) is documented in docs/environment.md; a test
checks that the two agree. Which rules apply on a host is decided in decisions.py, from Facts only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from .facts import Facts

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
    return (
        facts.multi_node
        and facts.egress_interface is not None
        and len(facts.candidate_interfaces) > 1
    )


def _omp_threads(facts: Facts) -> str:
    return str(max(1, facts.cpus // max(1, facts.local_ranks or 1)))


_SOCKET_CONDITION = (
    "multi-node job, MASTER_ADDR routes through one interface of several "
    "candidates (docker, VLANs, several subnets): that interface, exactly"
)
_SOCKET_SOURCE = (
    "NCCL docs (NCCL_SOCKET_IFNAME); NVIDIA/nccl#286, nccl-tests#9, nccl#1581; horovod#700"
)

RULES: tuple = (
    Rule(
        "NCCL_DEBUG",
        "WARN",
        GPU_PLATFORMS,
        "safe",
        "NCCL/RCCL then print their warnings (a transport that failed, a fallback that costs "
        "bandwidth) without INFO noise: the cheapest way to see why a job is slow or hangs.",
        "NCCL docs env.html",
    ),
    Rule(
        "TORCH_NCCL_TRACE_BUFFER_SIZE",
        "2000",
        GPU_PLATFORMS,
        "safe",
        "Keeps the last 2000 collectives per rank (the flight recorder) for hang diagnosis; "
        "xccl delegates large GPU collectives to ProcessGroupNCCL, which reads it.",
        "PyTorch docs, TORCH_NCCL environment variables",
    ),
    Rule(
        "TORCH_NCCL_DUMP_ON_TIMEOUT",
        "1",
        GPU_PLATFORMS,
        "safe",
        "On a collective timeout every rank dumps its flight recorder, so the stuck rank and "
        "collective can be named instead of guessed.",
        "PyTorch docs, TORCH_NCCL environment variables",
    ),
    Rule(
        "NCCL_IB_TIMEOUT",
        "22",
        (NVIDIA_MULTINODE,) + AMD_PLATFORMS,
        "detected",
        "The IB retransmit timeout is 4.096 us x 2^N: 22 gives 17 s per attempt instead of "
        "4.3 s (NCCL >= 2.23.4 default 20; 18 before), so a transient port flap on a large "
        "fabric is survived instead of killing the job. Cost: slower detection of dead links.",
        "NCCL src net_ib; IBM Cloud H100 tested config",
        condition="multi-node job with an ACTIVE InfiniBand or RoCE port",
        when=lambda f: f.multi_node and bool(f.rdma & {"infiniband", "roce"}),
    ),
    Rule(
        "NCCL_SOCKET_IFNAME",
        lambda f: "=" + (f.egress_interface or ""),
        MULTINODE_GPU,
        "detected",
        "Bootstrap and socket traffic must use the interface that reaches the other nodes; "
        "NCCL's own pick can take docker0 or another subnet (the most common multi-node "
        "hang). '=' makes it an exact match (bond0 would also match bond0.2093).",
        _SOCKET_SOURCE,
        condition=_SOCKET_CONDITION,
        when=_socket_ifname_applies,
    ),
    Rule(
        "GLOO_SOCKET_IFNAME",
        lambda f: f.egress_interface or "",
        MULTINODE_GPU + (CPU,),
        "detected",
        "Gloo (torch's CPU backend, used beside xccl for CPU groups) binds to the hostname's "
        "address by default, which on multi-homed hosts can be unreachable from other nodes.",
        _SOCKET_SOURCE,
        condition=_SOCKET_CONDITION,
        when=_socket_ifname_applies,
    ),
    Rule(
        "NCCL_TOPO_FILE",
        lambda f: f.provider_topo_files[0] if f.provider_topo_files else "",
        (NVIDIA, NVIDIA_MULTINODE),
        "detected",
        "Inside a VM NCCL cannot see PCIe switches or NUMA and mis-plans rings and GPUDirect "
        "(2x8 H200 fell from 488 GB/s to 3-55 GB/s in KVM); the provider's topology file "
        "describes the real machine.",
        "NVIDIA/nccl-tests#256; NCCL src graph/topo.cc; SemiAnalysis ClusterMAX platform_config.py",
        condition="VM, exactly one /etc/nccl/*.xml, and no "
        "/var/run/nvidia-topologyd/virtualTopology.xml (which NCCL loads itself)",
        when=lambda f: (
            f.virtual_machine and len(f.provider_topo_files) == 1 and not f.nvidia_virtual_topology
        ),
    ),
    Rule(
        "HIP_FORCE_DEV_KERNARG",
        "1",
        AMD_PLATFORMS,
        "safe",
        "Kernel arguments in device memory save 2-3 us per kernel launch; the default since "
        "ROCm 6.2, so this only helps older ROCm.",
        "ROCm MI300X system optimization guide",
        at_runtime_start=True,
    ),
    Rule(
        "RCCL_MSCCL_ENABLE",
        "0",
        AMD_PLATFORMS,
        "safe",
        "Correctness first: MSCCL had data-corruption bugs fixed only in late 2025 and AMD's "
        "own Megatron container disables it; RCCL 7.13+ removed MSCCL, where this is a no-op.",
        "ROCm prerequisite-system-validation; RCCL usage tips (7.13); ROCm/rccl PRs #1014, #2009",
    ),
    Rule(
        "TORCH_BLAS_PREFER_HIPBLASLT",
        "1",
        (AMD_MI300X,),
        "safe",
        "hipBLASLt GEMMs are faster than hipBLAS on gfx942.",
        "ROCm workload tuning guide (workload.rst)",
    ),
    Rule(
        "TORCH_BLAS_PREFER_HIPBLASLT",
        "1",
        (AMD_MI250,),
        "detected",
        "hipBLASLt GEMMs are faster where the installed hipBLASLt has kernels for the GPU.",
        "ROCm workload tuning guide",
        condition="the installed hipBLASLt ships gfx90a kernels",
        when=lambda f: f.hipblaslt_gfx90a,
    ),
    Rule(
        "HSA_NO_SCRATCH_RECLAIM",
        "1",
        (AMD_MI300X,),
        "detected",
        "With MEC firmware older than 177, RCCL cannot reclaim some scratch memory and jobs "
        "crash; keeping scratch assigned avoids it (cost: memory held until exit).",
        "SemiAnalysis InferenceX MI300X scripts citing ROCm 6.4.3 amdgpu notes; ROCR env docs",
        condition="MEC firmware version < 177",
        when=lambda f: f.mec_firmware is not None and f.mec_firmware < 177,
        at_runtime_start=True,
    ),
    Rule(
        "NCCL_MIN_NCHANNELS",
        "112",
        (AMD_MI300X,),
        "detected",
        "More channels put more CUs on the 7 xGMI links of a single MI300X node. Never set "
        "for multi-node jobs (AMD's 4-node example uses 40) nor when fewer GPUs take part.",
        "ROCm workload.rst (vLLM, RCCL in E2E workloads); rocm-blogs MI300X RCCL/xGMI",
        condition="single-node job (launcher says 1 node) using all 8 GPUs (8 local ranks)",
        when=lambda f: f.single_node and f.gpu_count == 8 and f.local_ranks == 8,
    ),
    Rule(
        "HSA_FORCE_FINE_GRAIN_PCIE",
        "1",
        (AMD_MI250,),
        "detected",
        "RCCL peer-to-peer over PCIe between Instinct GPUs without an xGMI bridge needs "
        "fine-grained PCIe memory, which needs large-BAR addressing.",
        "RCCL usage tips; rccl-tests README",
        condition="2+ GPUs, no xGMI link, and large BAR",
        when=lambda f: f.gpu_count >= 2 and not f.xgmi and f.large_bar is True,
        at_runtime_start=True,
    ),
    Rule(
        "OMP_NUM_THREADS",
        _omp_threads,
        (CPU,),
        "detected",
        "Each rank's OpenMP pool would otherwise use every core: N ranks x all cores "
        "oversubscribe the host. Usable cores / local ranks.",
        "PyTorch CPU performance guide",
        condition="the launcher reports more than one rank on this host",
        when=lambda f: (f.local_ranks or 1) > 1,
        at_runtime_start=True,
    ),
)

# Deliberately never set, with why: shown by `python -m xccl env --all`.
LEFT_ALONE: tuple = (
    (
        "NCCL_IB_GID_INDEX",
        (
            "The right index is site-specific (3, 7 or 0 on different clusters) and NCCL >= 2.21.5 "
            "picks it itself."
        ),
        "nccl#426, #1131, #1538",
    ),
    (
        "NCCL_IB_HCA",
        "Which HCAs are GPU rails is site-specific; hard-coded lists break on other hosts.",
        "NCCL docs (NCCL_IB_HCA)",
    ),
    (
        "NCCL_IB_RETRY_CNT",
        "The IB retry field is 3 bits: 7 (the default) is the maximum.",
        "InfiniBand spec",
    ),
    (
        "NCCL_NVLS_ENABLE",
        (
            "NVLink SHARP gives ~30% more allreduce bandwidth on NVSwitch; set 0 only after a "
            "Fabric Manager / multicast failure."
        ),
        "nccl-tests#212, #216; nccl#1788",
    ),
    (
        "NCCL_CUMEM_ENABLE",
        "Both values have caused hangs in some releases; the library's choice is the tested one.",
        "nccl#1116, #1721, #2379",
    ),
    (
        "NCCL_P2P_DISABLE / NCCL_P2P_LEVEL",
        "Only for broken PCIe P2P; wrong values halve bandwidth or hang.",
        "NCCL docs (debug variables); nccl#1199",
    ),
    (
        "NCCL_ALGO / NCCL_PROTO / NCCL_BUFFSIZE",
        "NCCL's 'debugging' class: not for production.",
        "NCCL docs env.html",
    ),
    (
        "CUDA_DEVICE_MAX_CONNECTIONS",
        (
            "=1 is needed by Megatron TP overlap but serialises FSDP/DDP overlap; the workload "
            "decides."
        ),
        "Megatron-LM#1468; verl#6976; torchtitan#4508",
    ),
    (
        "TORCH_NCCL_ASYNC_ERROR_HANDLING",
        "torch >= 2.2 already defaults to 3 (tear down on error).",
        "PyTorch docs; pytorch#46874",
    ),
    (
        "TORCH_NCCL_AVOID_RECORD_STREAMS",
        "The default behaviour in current torch; the variable is deprecated.",
        "PyTorch ProcessGroupNCCL.cpp",
    ),
    (
        "FI_PROVIDER / FI_EFA_USE_DEVICE_RDMA / NCCL_PROTO on EFA",
        "aws-ofi-nccl >= 1.7 sets what it needs; these are legacy.",
        "aws-ofi-nccl doc/efa-env-var.md",
    ),
    (
        "RDMAV_FORK_SAFE",
        'Harmful with current EFA stacks ("can break things").',
        "aws-ofi-nccl doc/efa-env-var.md",
    ),
    (
        "NCCL_IB_QPS_PER_CONNECTION / NCCL_CROSS_NIC",
        "Depend on the fabric (Clos tiers, rail isolation), which a host cannot see.",
        "ClusterMAX platform_config.py; InferenceX",
    ),
    (
        "TORCH_NCCL_HIGH_PRIORITY / GPU_MAX_HW_QUEUES",
        "Help multi-node FSDP on MI300X; the workload is not detectable at import.",
        "ROCm workload.rst",
    ),
)
