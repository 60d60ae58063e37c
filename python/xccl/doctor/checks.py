"""The host checks of `python -m xccl doctor`: pure functions of a topology dict (docs/topology.md,
questions answered by csrc/topo through xccl.topo), the environment and a filesystem root, so
tests run them on the fixture machines and fake trees."""

from __future__ import annotations

import importlib
import os
import platform as _platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

from .. import env as _env
from .. import topo as _topo
from ..env import facts as _facts

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"

SHM_WARN_BYTES = 1 << 30  # containers default to 64 MB; shm transports want far more


@dataclass
class Check:
    status: str
    name: str
    message: str

    def line(self) -> str:
        return f"{self.status:<5} {self.name:<18} {self.message}"


# --------------------------------------------------------------------------------------------
# Host checks: pure functions of a topology dict, the environment and a filesystem root.


def check_gpus(topo: dict | None) -> list:
    if topo is None:
        return [Check(WARN, "gpus", "no topology: GPU checks skipped")]
    gpus = topo["gpus"]
    if not gpus:
        return [
            Check(
                WARN,
                "gpus",
                "no GPUs found: GPU, link and GPU placement checks skipped "
                "(a CPU-only host; xccl uses its CPU transports)",
            )
        ]
    names = sorted({g.get("name") or g.get("vendor", "?") for g in gpus})
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", os.environ.get("HIP_VISIBLE_DEVICES"))
    note = f"; visible to this process: {visible}" if visible is not None else ""
    return [Check(PASS, "gpus", f"{len(gpus)}x {', '.join(names)}{note}")]


def check_links(topo: dict | None) -> list:
    """Are the GPU links up, and what the platform should have?"""
    if topo is None or len(topo["gpus"]) < 2:
        count = 0 if topo is None else len(topo["gpus"])
        return [
            Check(
                WARN if count == 0 else PASS,
                "gpu links",
                "no GPU pairs to check" if count == 0 else "one GPU: no peer links",
            )
        ]
    gpus = topo["gpus"]
    klass = _topo.link_class(topo)
    checks = []
    if any(g.get("nvswitchLinks") for g in gpus) or klass == "nvswitch":
        counts = {g["index"]: g.get("nvswitchLinks", 0) for g in gpus}
        most = max(counts.values())
        if most == 0:
            checks.append(
                Check(
                    WARN,
                    "gpu links",
                    "NVSwitch fabric inferred from PCI, link states unknown (NVML not available)",
                )
            )
        else:
            short = {i: c for i, c in counts.items() if c < most}
            if short:
                detail = ", ".join(f"GPU{i}: {c}" for i, c in sorted(short.items()))
                checks.append(
                    Check(
                        FAIL,
                        "gpu links",
                        f"NVLinks down: most GPUs have {most} "
                        f"active links to NVSwitch, but {detail}",
                    )
                )
            else:
                checks.append(
                    Check(
                        PASS,
                        "gpu links",
                        f"NVSwitch fabric, {most} active NVLinks on each of {len(gpus)} GPUs",
                    )
                )
        if klass != "nvswitch":
            checks.append(
                Check(
                    FAIL,
                    "gpu links",
                    "some GPU pairs are not connected through "
                    "NVSwitch: " + _missing(topo, "nvswitch"),
                )
            )
        return checks
    arches = {g.get("arch") for g in gpus}
    if arches == {"gfx942"}:
        if klass == "xgmi_full_mesh":
            return [
                Check(
                    PASS,
                    "gpu links",
                    f"xGMI full mesh over {len(gpus)} GPUs ({len(gpus) - 1} peers each)",
                )
            ]
        return [
            Check(
                FAIL,
                "gpu links",
                "MI300X GPUs should form a full xGMI mesh; missing: " + _missing(topo, "xgmi"),
            )
        ]
    if klass == "xgmi_partial":
        lonely = [
            g["index"]
            for g in gpus
            if not any(
                _topo.find_link(topo, g["index"], h["index"])
                and _topo.find_link(topo, g["index"], h["index"])["type"] == "xgmi"
                for h in gpus
                if h is not g
            )
        ]
        if lonely:
            return [
                Check(
                    WARN,
                    "gpu links",
                    "GPUs without any xGMI link: " + ", ".join(f"GPU{i}" for i in lonely),
                )
            ]
        return [
            Check(
                PASS,
                "gpu links",
                "partial xGMI mesh (as on MI250): every GPU has xGMI peers; other pairs cross PCIe",
            )
        ]
    if klass == "xgmi_full_mesh":
        return [Check(PASS, "gpu links", f"xGMI full mesh over {len(gpus)} GPUs")]
    if klass == "nvlink_partial":
        return [Check(PASS, "gpu links", "NVLink between some GPU pairs; others cross PCIe")]
    worst = max(
        (link.get("pciPath", "unknown") for link in topo["gpuLinks"]),
        key=lambda p: _topo.PATH_ORDER.index(p) if p in _topo.PATH_ORDER else 99,
    )
    return [
        Check(WARN, "gpu links", f"no NVLink/xGMI: peer traffic crosses PCIe (worst pair: {worst})")
    ]


def _missing(topo: dict, wanted: str) -> str:
    pairs = []
    n = len(topo["gpus"])
    for a in range(n):
        for b in range(a + 1, n):
            link = _topo.find_link(topo, a, b)
            if link is None or link["type"] != wanted:
                pairs.append(f"{a}-{b}")
    return ", ".join(pairs[:12]) + (" ..." if len(pairs) > 12 else "")


def check_nics(topo: dict | None) -> list:
    if topo is None:
        return [Check(WARN, "nics", "no topology: NIC checks skipped")]
    physical = [n for n in topo["nics"] if not n.get("virtual")]
    if not physical:
        return [Check(WARN, "nics", "no physical network interface found (loopback only?)")]
    checks = []
    for nic in physical:
        if nic.get("up"):
            continue
        port = f" port {nic['port']}" if nic.get("port") else ""
        checks.append(Check(WARN, "nics", f"{nic['name']}{port} ({nic.get('kind')}) is down"))
    up = [n for n in physical if n.get("up")]
    if up:
        summary = ", ".join(
            f"{n['name']} {n.get('kind')}"
            + (f" {n['speedMbps'] // 1000} Gb/s" if n.get("speedMbps", -1) >= 1000 else "")
            for n in up
        )
        checks.insert(0, Check(PASS, "nics", f"{len(up)} up: {summary}"))
    else:
        checks.insert(0, Check(FAIL, "nics", "every physical network interface is down"))
    return checks


def check_numa(topo: dict | None, root: str = "/", allowed: set | None = None) -> list:
    if topo is None:
        return [Check(WARN, "numa", "no topology: NUMA checks skipped")]
    nodes = topo["numaNodes"]
    checks = []
    if len(nodes) <= 1:
        checks.append(Check(PASS, "numa", "1 NUMA node: nothing to place"))
    else:
        unknown = [g["index"] for g in topo["gpus"] if g.get("numaNode", -1) < 0]
        if unknown:
            checks.append(
                Check(
                    WARN,
                    "numa",
                    f"{len(nodes)} NUMA nodes but the NUMA node of "
                    f"GPU(s) {unknown} is unknown: progress threads "
                    f"cannot be placed near them",
                )
            )
        far = []
        for g in topo["gpus"]:
            near = _topo.nearest_nics(topo, g["index"])
            rdma = [i for i in near if topo["nics"][i].get("kind") != "ethernet"]
            if rdma and _topo.gpu_nic_path(topo, g["index"], rdma[0]) == "SYS":
                far.append(g["index"])
        if far:
            checks.append(
                Check(
                    WARN,
                    "numa",
                    f"GPU(s) {far} have no RDMA NIC on their NUMA "
                    f"node: network traffic crosses the CPU link",
                )
            )
        if allowed is not None:
            spanned = [n["id"] for n in nodes if allowed & set(_parse_cpus(n.get("cpus", "")))]
            checks.append(
                Check(
                    PASS,
                    "numa",
                    f"{len(nodes)} NUMA nodes; this process may run "
                    f"on CPUs of node(s) {spanned}; xccl pins its "
                    f"progress threads near each GPU/NIC",
                )
            )
        if any(g.get("vendor") == "amd" for g in topo["gpus"]):
            balancing = (_facts.read_text(root, "/proc/sys/kernel/numa_balancing") or "").strip()
            if balancing == "1":
                checks.append(
                    Check(
                        WARN,
                        "numa",
                        "automatic NUMA balancing is on; AMD "
                        "recommends 0 for Instinct GPUs (ROCm "
                        "workload tuning guide)",
                    )
                )
        if not checks:
            checks.append(Check(PASS, "numa", f"{len(nodes)} NUMA nodes, devices placed"))
    return checks


def _parse_cpus(text: str) -> list:
    cpus = []
    for part in text.split(","):
        if part:
            first, _, last = part.partition("-")
            cpus.extend(range(int(first), int(last or first) + 1))
    return cpus


def check_shm(path: str = "/dev/shm", statvfs: Callable = os.statvfs) -> Check:
    try:
        st = statvfs(path)
    except OSError as error:
        return Check(
            WARN,
            "shm",
            f"{path} unusable ({error.strerror}): xccl falls back from "
            f"shared memory to TCP between local ranks",
        )
    free = st.f_bavail * st.f_frsize
    total = st.f_blocks * st.f_frsize
    text = f"{path}: {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"
    if free < SHM_WARN_BYTES:
        return Check(
            WARN,
            "shm",
            text + " (containers default to 64 MB: run docker with "
            "--shm-size or --ipc=host; xccl falls back to TCP "
            "when a segment does not fit)",
        )
    return Check(PASS, "shm", text)


def _interface_names(value: str) -> tuple:
    """Names in an *_SOCKET_IFNAME value and whether each is an exact ('=') match; None for an
    exclusion list ('^'), which names interfaces that need not exist."""
    value = value.strip()
    if value.startswith("^"):
        return None
    exact = value.startswith("=")
    return tuple((name.strip(), exact) for name in value.lstrip("=").split(",") if name.strip())


def check_interfaces(environ: Mapping[str, str], facts: _env.Facts, root: str = "/") -> list:
    checks = []
    existing = set(_facts.list_dir(root, "/sys/class/net"))
    up = set(_env.candidate_interfaces(root))
    for var in ("XCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        if var not in environ:
            continue
        names = _interface_names(environ[var])
        if names is None:
            continue
        exact_default = var != "NCCL_SOCKET_IFNAME"  # only NCCL does prefix matching
        for name, exact in names:
            matches = [
                n
                for n in existing
                if n == name or (not (exact or exact_default) and n.startswith(name))
            ]
            if not matches:
                checks.append(
                    Check(
                        FAIL,
                        "interfaces",
                        f"{var} names {name!r}, which does not "
                        f"exist here (have: "
                        f"{', '.join(sorted(existing))})",
                    )
                )
            elif not any(m in up or m == "lo" for m in matches):
                checks.append(Check(FAIL, "interfaces", f"{var} names {name!r}, which is down"))
    master = facts.master_addr
    if not master:
        checks.append(
            Check(
                WARN,
                "interfaces",
                "MASTER_ADDR is not set: the route to the "
                "rendezvous host was not checked (set it as "
                "the launcher would to check it)",
            )
        )
    else:
        address = _facts.resolve_ipv4(root, master)
        if address is None:
            checks.append(
                Check(
                    WARN,
                    "interfaces",
                    f"MASTER_ADDR={master} is not an IPv4 "
                    f"address or /etc/hosts name; not resolved "
                    f"(doctor does no DNS lookups)",
                )
            )
        elif address.startswith("127."):
            status = FAIL if facts.multi_node else PASS
            checks.append(
                Check(
                    status,
                    "interfaces",
                    f"MASTER_ADDR={master} is loopback"
                    + (": other nodes cannot reach it" if facts.multi_node else " (single node)"),
                )
            )
        else:
            iface = _env.route_interface(root, address)
            if iface is None:
                checks.append(Check(FAIL, "interfaces", f"no route to MASTER_ADDR={address}"))
            elif iface not in up:
                checks.append(
                    Check(
                        FAIL,
                        "interfaces",
                        f"MASTER_ADDR={address} routes through {iface}, which is down",
                    )
                )
            else:
                checks.append(
                    Check(PASS, "interfaces", f"MASTER_ADDR={address} routes through {iface} (up)")
                )
    candidates = _env.candidate_interfaces(root)
    if candidates:
        checks.append(Check(PASS, "interfaces", "up: " + ", ".join(candidates)))
    else:
        checks.append(
            Check(WARN, "interfaces", "no non-loopback interface is up: single-host runs only")
        )
    return checks


def check_ofi(status: dict | None) -> list:
    """The libfabric engine (docs/network.md): usable here or why not, and the registration cache's
    bound and counters (`status`: xccl._native.ofi_status(); None: a build without it)."""
    if status is None:
        return [Check(WARN, "ofi", "this xccl._native cannot report the libfabric engine")]
    mib = status["cache_capacity"] / 2**20
    cache = (
        f"registration cache {status['entries']} entries, {status['bytes']} bytes of "
        f"{mib:.0f} MiB (XCCL_OFI_MR_CACHE_BYTES), {status['hits']} hits, "
        f"{status['misses']} misses, {status['evictions']} evictions"
    )
    if status["available"]:
        return [Check(PASS, "ofi", f"libfabric {status['detail']}; {cache}")]
    return [Check(WARN, "ofi", f"libfabric engine unavailable ({status['detail']}); {cache}")]


def check_versions() -> list:
    parts = [f"python {_platform.python_version()}", f"kernel {_platform.release()}"]
    status = PASS
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            torch = importlib.import_module("torch")
        except ImportError:
            torch = None
    if torch is None:
        return [Check(FAIL, "versions", "torch is not importable; " + ", ".join(parts))]
    parts.append(f"torch {torch.__version__}")
    if getattr(torch.version, "cuda", None):
        parts.append(f"CUDA {torch.version.cuda}")
    if getattr(torch.version, "hip", None):
        parts.append(f"HIP {torch.version.hip}")
    try:
        nccl = torch.cuda.nccl.version()  # no CUDA initialisation
        parts.append(("RCCL " if torch.version.hip else "NCCL ") + ".".join(map(str, nccl)))
    except Exception:  # noqa: BLE001, S110 - a CPU build of torch has no NCCL: nothing to show
        pass
    xccl_version = getattr(sys.modules.get("xccl"), "__version__", None) or _package_version("xccl")
    parts.append(f"xccl {xccl_version or '(not installed; running from source)'}")
    for path, label in (
        ("/proc/driver/nvidia/version", "NVIDIA driver"),
        ("/sys/module/amdgpu/version", "amdgpu"),
    ):
        text = _facts.read_text("/", path)
        if text:
            first = text.splitlines()[0]
            parts.append(
                f"{label} "
                + (
                    first.split("Kernel Module")[-1].split()[0]
                    if "Kernel Module" in first
                    else first.strip()
                )
            )
    return [Check(status, "versions", ", ".join(parts))]


def _package_version(name: str) -> str | None:
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:  # noqa: BLE001 - not installed (running from the source tree)
        return None


def check_environment(environ: Mapping[str, str], facts: _env.Facts) -> list:
    checks = []
    report = _env.last_report()
    if environ.get(_env.NO_DEFAULTS_VAR, "") not in ("", "0"):
        checks.append(
            Check(PASS, "environment", f"{_env.NO_DEFAULTS_VAR} is set: xccl set no defaults")
        )
    elif report is not None and report.applied:
        names = [d.name for d in report.by_action("set")]
        checks.append(
            Check(
                PASS,
                "environment",
                f"platform {report.platform}; xccl set "
                f"{len(names)} default(s)"
                + (f": {', '.join(names)}" if names else "")
                + " (details: python -m xccl env)",
            )
        )
    else:
        would = _env.decide_defaults(environ, facts=facts)
        checks.append(
            Check(
                PASS,
                "environment",
                f"platform {would.platform}; defaults not "
                f"applied in this process (python -m xccl env)",
            )
        )
    for _name, message, source in _env.check_user_settings(environ, facts):
        checks.append(Check(WARN, "environment", f"{message} [{source}]"))
    return checks


def check_tuning() -> list:
    """The table of `python -m xccl tune` groups would plan from here: WARN for a file that is
    not used (not a table, made on another machine), since its rank would warn at each run."""
    from .. import tuning

    return [Check(WARN if tuning.problem() else PASS, "tuning", tuning.describe())]
