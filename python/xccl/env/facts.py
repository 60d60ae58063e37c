"""Facts: what this host and job are, as the environment defaults need them.

The machine itself (GPUs and their links, RDMA ports, whether it is a VM) comes from csrc/topo
through xccl._native, the same discovery the backend plans with, here from sysfs and procfs only
(no NVML or amdsmi: this runs on every import, before torch). The rest is what the topology does
not describe: the launcher's job shape, the route to MASTER_ADDR, NCCL/RCCL config files, AMD
firmware and BAR sizes, and what this process has already started. Every reader takes a
filesystem ``root`` so tests can point it at fake trees.

Rules read only Facts, so tests can also construct it directly.
"""

from __future__ import annotations

import glob
import os
import re
import socket
import struct
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .. import topo as _topo

RDMA_KINDS = ("infiniband", "roce", "efa")


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


def machine_facts(root: str) -> dict:
    """Facts of the machine from its topology (csrc/topo's discovery below `root`)."""
    topology = _topo.discover_root(root)
    gpus = topology["gpus"]
    nvidia = sum(g["vendor"] == "nvidia" for g in gpus)
    if nvidia == 0:
        # Containers may hide the PCI tree but keep the driver's per-GPU folders; the topology
        # finds those GPUs only through NVML, which is not loaded here.
        nvidia = len(list_dir(root, "/proc/driver/nvidia/gpus"))
    amd = [g for g in gpus if g["vendor"] == "amd"]
    vendor, count, arch = None, 0, ""
    if len(amd) > nvidia:
        vendor, count = "amd", len(amd)
        arches = sorted({g["arch"] for g in amd if g["arch"]})
        arch = arches[0] if len(arches) == 1 else ""
    elif nvidia:
        vendor, count = "nvidia", nvidia
    kinds = {link["type"] for link in topology["gpuLinks"]}
    # RDMA ports only (port > 0): an IPoIB netdev is listed as "infiniband" too.
    rdma = frozenset(
        n["kind"] for n in topology["nics"] if n["port"] > 0 and n["up"] and n["kind"] in RDMA_KINDS
    )
    return {
        "gpu_vendor": vendor,
        "gpu_arch": arch,
        "gpu_count": count,
        "nvswitch": "nvswitch" in kinds,
        "xgmi": "xgmi" in kinds,
        "rdma": rdma,
        "virtual_machine": topology["virtualMachine"],
        "amd_bus_ids": [g["pciBusId"] for g in amd] if vendor == "amd" else [],
    }


# --------------------------------------------------------------------------------------------
# What the topology does not describe (sysfs/procfs, and the launcher's variables)


def _path(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/")) if root not in ("", "/") else path


def read_text(root: str, path: str, limit: int = 65536) -> str | None:
    try:
        with open(_path(root, path), encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def _read_int(root: str, path: str) -> int | None:
    text = read_text(root, path)
    if text is None:
        return None
    try:
        return int(text.strip().split()[0], 0)
    except (ValueError, IndexError):
        return None


def list_dir(root: str, path: str) -> list:
    try:
        return sorted(os.listdir(_path(root, path)))
    except OSError:
        return []


# ASCII digits only, at most 18 (below 2**63): str.isdigit() accepts "²", which int() refuses,
# int() accepts other scripts' digits ("٣"), and a few thousand digits exceed int()'s limit.
# Each of those would raise at import from a variable or file nobody checked.
_ASCII_INT = re.compile(r"[0-9]{1,18}")


def ascii_int(text: str) -> int | None:
    """The value of ``text`` if it is a plain decimal number (ASCII digits), else None."""
    return int(text) if _ASCII_INT.fullmatch(text) else None


def _first_int(environ: Mapping[str, str], names: Sequence[str]) -> int | None:
    for name in names:
        text = environ.get(name, "").strip()
        # SLURM_NTASKS_PER_NODE may read "8(x2)"
        value = ascii_int(text.split("(")[0])
        if value:
            return value
    return None


def job_shape(environ: Mapping[str, str]) -> tuple:
    """(nodes, local ranks) from the launcher's variables; None where it says nothing.

    torchrun sets GROUP_WORLD_SIZE (nodes), WORLD_SIZE and LOCAL_WORLD_SIZE; Slurm
    SLURM_JOB_NUM_NODES and SLURM_NTASKS_PER_NODE; Open MPI OMPI_COMM_WORLD_SIZE and
    OMPI_COMM_WORLD_LOCAL_SIZE."""
    local = _first_int(
        environ,
        (
            "LOCAL_WORLD_SIZE",
            "OMPI_COMM_WORLD_LOCAL_SIZE",
            "MPI_LOCALNRANKS",
            "SLURM_NTASKS_PER_NODE",
        ),
    )
    nodes = _first_int(environ, ("GROUP_WORLD_SIZE", "SLURM_JOB_NUM_NODES", "SLURM_NNODES"))
    if nodes is None and local:
        world = _first_int(environ, ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"))
        if world:
            nodes = -(-world // local)
    return nodes, local


def resolve_ipv4(root: str, host: str) -> str | None:
    """An IPv4 literal, or a name from /etc/hosts: never DNS (no traffic at import)."""
    try:
        socket.inet_aton(host)
        if host.count(".") == 3:
            return host
    except OSError:
        pass
    for line in (read_text(root, "/etc/hosts") or "").splitlines():
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
    for line in (read_text(root, "/proc/net/route") or "").splitlines()[1:]:
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
    for name in list_dir(root, "/sys/class/net"):
        if name == "lo" or name.startswith("veth"):
            continue
        state = (read_text(root, f"/sys/class/net/{name}/operstate") or "").strip()
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
        for line in (read_text(root, path) or "").splitlines():
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
        for line in (read_text(root, base + "/resource") or "").splitlines():
            parts = line.split()
            if len(parts) >= 2:
                try:
                    start, end = int(parts[0], 16), int(parts[1], 16)
                except ValueError:
                    continue
                if end > start:
                    biggest = max(biggest, end - start + 1)
        if vram:
            large.append(biggest >= vram)
    return (min(firmware) if firmware else None), (all(large) if large else None)


def detect_facts(root: str = "/", environ: Mapping[str, str] | None = None) -> Facts:
    environ = os.environ if environ is None else environ
    machine = machine_facts(root)
    nodes, local = job_shape(environ)
    master = environ.get("MASTER_ADDR", "").strip() or None
    egress = None
    if master:
        address = resolve_ipv4(root, master)
        if address and not address.startswith("127."):
            egress = route_interface(root, address)
    mec, large_bar = (
        _amd_gpu_details(root, machine["amd_bus_ids"]) if machine["amd_bus_ids"] else (None, None)
    )
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
        gpu_vendor=machine["gpu_vendor"],
        gpu_arch=machine["gpu_arch"],
        gpu_count=machine["gpu_count"],
        nvswitch=machine["nvswitch"],
        xgmi=machine["xgmi"],
        rdma=machine["rdma"],
        virtual_machine=machine["virtual_machine"],
        nodes=nodes,
        local_ranks=local,
        cpus=cpus,
        master_addr=master,
        egress_interface=egress,
        candidate_interfaces=candidate_interfaces(root),
        provider_topo_files=tuple(sorted(glob.glob(_path(root, "/etc/nccl/*.xml")))),
        nvidia_virtual_topology=os.path.exists(
            _path(root, "/var/run/nvidia-topologyd/virtualTopology.xml")
        ),
        mec_firmware=mec,
        large_bar=large_bar,
        hipblaslt_gfx90a=bool(rocm),
        config_file_vars=_config_file_vars(root, environ),
        torch_imported=torch is not None,
        gpu_runtime_started=started,
    )
