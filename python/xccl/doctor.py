"""`python -m xccl doctor`: checks this host for what makes collectives slow or hang, then runs a
short self-test of the backend against gloo, printing PASS / WARN / FAIL lines.

Exit status 0 when nothing FAILed. A check that cannot run here (no GPU, no MASTER_ADDR) says so
with WARN rather than passing silently. Every wait is bounded; the only traffic is loopback.
"""

from __future__ import annotations

import importlib
import os
import platform as _platform
import queue
import statistics
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

from . import _procs
from . import env as _env
from . import topo as _topo

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"

SHM_WARN_BYTES = 1 << 30  # containers default to 64 MB; shm transports want far more
SMALL_BYTES = 32  # latency probe: 8 float32
LARGE_BYTES = 16 << 20  # bandwidth probe
SELFTEST_TIMEOUT_S = 45.0
# The self-test's bar, relative to gloo measured in the same run on the same host (timings on a
# shared machine mean little in absolute terms).
MAX_LATENCY_RATIO = 2.0
MIN_BANDWIDTH_RATIO = 0.5
# Absolute floors for when there is no baseline (the backend under test is gloo itself).
MAX_LATENCY_S = 0.005  # gloo on a 2-vCPU VM: ~0.4 ms (measured on loopback TCP, 2 ranks)
MIN_BUSBW_BYTES_S = 50e6


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
        return [Check(WARN, "gpus", "no GPUs found: GPU, link and GPU placement checks skipped "
                                    "(a CPU-only host; xccl uses its CPU transports)")]
    names = sorted({g.get("name") or g.get("vendor", "?") for g in gpus})
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", os.environ.get("HIP_VISIBLE_DEVICES"))
    note = f"; visible to this process: {visible}" if visible is not None else ""
    return [Check(PASS, "gpus", f"{len(gpus)}x {', '.join(names)}{note}")]


def check_links(topo: dict | None) -> list:
    """Are the GPU links up, and what the platform should have?"""
    if topo is None or len(topo["gpus"]) < 2:
        count = 0 if topo is None else len(topo["gpus"])
        return [Check(WARN if count == 0 else PASS, "gpu links",
                      "no GPU pairs to check" if count == 0 else "one GPU: no peer links")]
    gpus = topo["gpus"]
    klass = _topo.link_class(topo)
    checks = []
    if any(g.get("nvswitchLinks") for g in gpus) or klass == "nvswitch":
        counts = {g["index"]: g.get("nvswitchLinks", 0) for g in gpus}
        most = max(counts.values())
        if most == 0:
            checks.append(Check(WARN, "gpu links", "NVSwitch fabric inferred from PCI, link "
                                                   "states unknown (NVML not available)"))
        else:
            short = {i: c for i, c in counts.items() if c < most}
            if short:
                detail = ", ".join(f"GPU{i}: {c}" for i, c in sorted(short.items()))
                checks.append(Check(FAIL, "gpu links", f"NVLinks down: most GPUs have {most} "
                                                       f"active links to NVSwitch, but {detail}"))
            else:
                checks.append(Check(PASS, "gpu links", f"NVSwitch fabric, {most} active NVLinks "
                                                       f"on each of {len(gpus)} GPUs"))
        if klass != "nvswitch":
            checks.append(Check(FAIL, "gpu links", "some GPU pairs are not connected through "
                                                   "NVSwitch: " + _missing(topo, "nvswitch")))
        return checks
    arches = {g.get("arch") for g in gpus}
    if arches == {"gfx942"}:
        if klass == "xgmi_full_mesh":
            return [Check(PASS, "gpu links", f"xGMI full mesh over {len(gpus)} GPUs "
                                             f"({len(gpus) - 1} peers each)")]
        return [Check(FAIL, "gpu links", "MI300X GPUs should form a full xGMI mesh; missing: "
                                         + _missing(topo, "xgmi"))]
    if klass == "xgmi_partial":
        lonely = [g["index"] for g in gpus if not any(
            _topo.find_link(topo, g["index"], h["index"]) and _topo.find_link(
                topo, g["index"], h["index"])["type"] == "xgmi" for h in gpus if h is not g)]
        if lonely:
            return [Check(WARN, "gpu links", "GPUs without any xGMI link: "
                                             + ", ".join(f"GPU{i}" for i in lonely))]
        return [Check(PASS, "gpu links", "partial xGMI mesh (as on MI250): every GPU has xGMI "
                                         "peers; other pairs cross PCIe")]
    if klass == "xgmi_full_mesh":
        return [Check(PASS, "gpu links", f"xGMI full mesh over {len(gpus)} GPUs")]
    if klass == "nvlink_partial":
        return [Check(PASS, "gpu links", "NVLink between some GPU pairs; others cross PCIe")]
    worst = max((link.get("pciPath", "unknown") for link in topo["gpuLinks"]),
                key=lambda p: _topo.PATH_ORDER.index(p) if p in _topo.PATH_ORDER else 99)
    return [Check(WARN, "gpu links", f"no NVLink/xGMI: peer traffic crosses PCIe (worst pair: "
                                     f"{worst})")]


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
        summary = ", ".join(f"{n['name']} {n.get('kind')}" + (
            f" {n['speedMbps'] // 1000} Gb/s" if n.get("speedMbps", -1) >= 1000 else "")
            for n in up)
        checks.insert(0, Check(PASS, "nics", f"{len(up)} up: {summary}"))
    else:
        checks.insert(0, Check(FAIL, "nics", "every physical network interface is down"))
    return checks


def check_numa(topo: dict | None, root: str = "/",
               allowed: set | None = None) -> list:
    if topo is None:
        return [Check(WARN, "numa", "no topology: NUMA checks skipped")]
    nodes = topo["numaNodes"]
    checks = []
    if len(nodes) <= 1:
        checks.append(Check(PASS, "numa", "1 NUMA node: nothing to place"))
    else:
        unknown = [g["index"] for g in topo["gpus"] if g.get("numaNode", -1) < 0]
        if unknown:
            checks.append(Check(WARN, "numa", f"{len(nodes)} NUMA nodes but the NUMA node of "
                                              f"GPU(s) {unknown} is unknown: progress threads "
                                              f"cannot be placed near them"))
        far = []
        for g in topo["gpus"]:
            near = _topo.nearest_nics(topo, g["index"])
            rdma = [i for i in near if topo["nics"][i].get("kind") != "ethernet"]
            if rdma and _topo.gpu_nic_path(topo, g["index"], rdma[0]) == "SYS":
                far.append(g["index"])
        if far:
            checks.append(Check(WARN, "numa", f"GPU(s) {far} have no RDMA NIC on their NUMA "
                                              f"node: network traffic crosses the CPU link"))
        if allowed is not None:
            spanned = [n["id"] for n in nodes
                       if allowed & set(_parse_cpus(n.get("cpus", "")))]
            checks.append(Check(PASS, "numa", f"{len(nodes)} NUMA nodes; this process may run "
                                              f"on CPUs of node(s) {spanned}; xccl pins its "
                                              f"progress threads near each GPU/NIC"))
        if any(g.get("vendor") == "amd" for g in topo["gpus"]):
            balancing = (_env._read(root, "/proc/sys/kernel/numa_balancing") or "").strip()
            if balancing == "1":
                checks.append(Check(WARN, "numa", "automatic NUMA balancing is on; AMD "
                                                  "recommends 0 for Instinct GPUs (ROCm "
                                                  "workload tuning guide)"))
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
        return Check(WARN, "shm", f"{path} unusable ({error.strerror}): xccl falls back from "
                                  f"shared memory to TCP between local ranks")
    free = st.f_bavail * st.f_frsize
    total = st.f_blocks * st.f_frsize
    text = f"{path}: {free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB"
    if free < SHM_WARN_BYTES:
        return Check(WARN, "shm", text + " (containers default to 64 MB: run docker with "
                                         "--shm-size or --ipc=host; xccl falls back to TCP "
                                         "when a segment does not fit)")
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
    existing = set(_env._listdir(root, "/sys/class/net"))
    up = set(_env.candidate_interfaces(root))
    for var in ("XCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        if var not in environ:
            continue
        names = _interface_names(environ[var])
        if names is None:
            continue
        exact_default = var != "NCCL_SOCKET_IFNAME"  # only NCCL does prefix matching
        for name, exact in names:
            matches = [n for n in existing if n == name or (
                not (exact or exact_default) and n.startswith(name))]
            if not matches:
                checks.append(Check(FAIL, "interfaces", f"{var} names {name!r}, which does not "
                                                        f"exist here (have: "
                                                        f"{', '.join(sorted(existing))})"))
            elif not any(m in up or m == "lo" for m in matches):
                checks.append(Check(FAIL, "interfaces", f"{var} names {name!r}, which is down"))
    master = facts.master_addr
    if not master:
        checks.append(Check(WARN, "interfaces", "MASTER_ADDR is not set: the route to the "
                                                "rendezvous host was not checked (set it as "
                                                "the launcher would to check it)"))
    else:
        address = _env._resolve_ipv4(root, master)
        if address is None:
            checks.append(Check(WARN, "interfaces", f"MASTER_ADDR={master} is not an IPv4 "
                                                    f"address or /etc/hosts name; not resolved "
                                                    f"(doctor does no DNS lookups)"))
        elif address.startswith("127."):
            status = FAIL if facts.multi_node else PASS
            checks.append(Check(status, "interfaces", f"MASTER_ADDR={master} is loopback" + (
                ": other nodes cannot reach it" if facts.multi_node else " (single node)")))
        else:
            iface = _env.route_interface(root, address)
            if iface is None:
                checks.append(Check(FAIL, "interfaces", f"no route to MASTER_ADDR={address}"))
            elif iface not in up:
                checks.append(Check(FAIL, "interfaces", f"MASTER_ADDR={address} routes through "
                                                        f"{iface}, which is down"))
            else:
                checks.append(Check(PASS, "interfaces", f"MASTER_ADDR={address} routes through "
                                                        f"{iface} (up)"))
    candidates = _env.candidate_interfaces(root)
    if candidates:
        checks.append(Check(PASS, "interfaces", "up: " + ", ".join(candidates)))
    else:
        checks.append(Check(WARN, "interfaces", "no non-loopback interface is up: single-host "
                                                "runs only"))
    return checks


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
    xccl_version = getattr(sys.modules.get("xccl"), "__version__", None) or _package_version(
        "xccl")
    parts.append(f"xccl {xccl_version or '(not installed; running from source)'}")
    for path, label in (("/proc/driver/nvidia/version", "NVIDIA driver"),
                        ("/sys/module/amdgpu/version", "amdgpu")):
        text = _env._read("/", path)
        if text:
            first = text.splitlines()[0]
            parts.append(f"{label} " + (first.split("Kernel Module")[-1].split()[0]
                                        if "Kernel Module" in first else first.strip()))
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
        checks.append(Check(PASS, "environment", f"{_env.NO_DEFAULTS_VAR} is set: xccl set no "
                                                 f"defaults"))
    elif report is not None and report.applied:
        names = [d.name for d in report.by_action("set")]
        checks.append(Check(PASS, "environment", f"platform {report.platform}; xccl set "
                                                 f"{len(names)} default(s)"
                                                 + (f": {', '.join(names)}" if names else "")
                                                 + " (details: python -m xccl env)"))
    else:
        plan = _env.plan_defaults(environ, facts=facts)
        checks.append(Check(PASS, "environment", f"platform {plan.platform}; defaults not "
                                                 f"applied in this process (python -m xccl env)"))
    for name, message, source in _env.check_user_settings(environ, facts):
        checks.append(Check(WARN, "environment", f"{message} [{source}]"))
    return checks


# --------------------------------------------------------------------------------------------
# Self-test: 2 processes, all_reduce latency and bandwidth, backend vs gloo.


def _time_allreduce(dist, torch, tensor, group, iters: int, warmup: int, device: str) -> list:
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(warmup):
        dist.all_reduce(tensor, group=group)
    sync()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        sync()
        times.append(time.perf_counter() - start)
    return times


def _selftest_worker(rank: int, world: int, init_file: str, backend: str, device: str,
                     timeout_s: float, iters: int, results) -> None:
    """One rank. Never raises: every outcome, errors included, goes to `results`."""
    out = {"rank": rank}
    try:
        import torch
        import torch.distributed as dist

        if backend == "xccl":
            importlib.import_module("xccl")  # registers the backend
        if device == "cuda":
            torch.cuda.set_device(rank)
            out["device_count"] = torch.cuda.device_count()
        baseline_name = "nccl" if device == "cuda" else "gloo"
        dist.init_process_group(baseline_name, init_method=f"file://{init_file}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=timeout_s))
        groups = {"baseline": None}
        if backend != baseline_name:
            try:
                groups["backend"] = dist.new_group(backend=backend,
                                                   timeout=timedelta(seconds=timeout_s))
            except Exception as error:  # noqa: BLE001 - reported; the baseline still runs
                out["create_error"] = f"{type(error).__name__}: {error}"
        else:
            groups["backend"] = None
        expected = world * (world + 1) / 2
        for label, group in groups.items():
            if label == "baseline" and "backend" in groups and backend == baseline_name:
                continue  # the same thing twice
            small = torch.full((SMALL_BYTES // 4,), float(rank + 1), device=device)
            large = torch.full((LARGE_BYTES // 4,), float(rank + 1), device=device)
            dist.all_reduce(small, group=group)
            dist.all_reduce(large, group=group)
            ok = bool((small == expected).all()) and bool((large == expected).all())
            small_times = _time_allreduce(dist, torch, small, group, iters * 10, 20, device)
            large_times = _time_allreduce(dist, torch, large, group, iters, 2, device)
            out[label] = {"correct": ok, "small": small_times, "large": large_times}
        dist.destroy_process_group()
    except Exception as error:  # noqa: BLE001 - a rank reports every failure, never raises
        out["error"] = f"{type(error).__name__}: {error}"
    results.put(out)


def run_selftest(backend: str = "xccl", device: str = "cpu", world: int = 2,
                 timeout_s: float = SELFTEST_TIMEOUT_S, iters: int = 5) -> dict:
    """Runs `world` ranks on this host; returns {"ranks": [...], "error": str|None}.

    Ranks are started by _procs.rank_context() (never forked from this process)."""
    import torch
    import torch.distributed  # noqa: F401

    context = _procs.rank_context()
    results = context.Queue()
    deadline = time.monotonic() + timeout_s
    with tempfile.TemporaryDirectory(prefix="xccl-doctor-") as tmp:
        init_file = os.path.join(tmp, "store")
        procs = [context.Process(target=_selftest_worker, daemon=True,
                                 args=(r, world, init_file, backend, device, timeout_s * 0.8,
                                       iters, results)) for r in range(world)]
        for proc in procs:
            proc.start()
        ranks, error = [], None
        while len(ranks) < world:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                error = f"timed out after {timeout_s:.0f} s ({len(ranks)} of {world} ranks done)"
                break
            try:
                ranks.append(results.get(timeout=min(remaining, 1.0)))
            except queue.Empty:
                if not any(p.is_alive() for p in procs) and results.empty():
                    error = "a rank exited without reporting (crashed?)"
                    break
        for proc in procs:
            proc.join(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5.0)
    ranks.sort(key=lambda r: r["rank"])
    return {"ranks": ranks, "error": error, "backend": backend, "device": device, "world": world}


def _median_max(ranks: list, label: str, key: str) -> float | None:
    """The slowest rank's median: a collective finishes when its last rank does."""
    medians = [statistics.median(r[label][key]) for r in ranks if label in r and r[label][key]]
    return max(medians) if medians else None


def check_selftest(result: dict) -> list:
    backend, device, world = result["backend"], result["device"], result["world"]
    name = "selftest"
    if result["error"]:
        return [Check(FAIL, name, f"{backend} on {device}: {result['error']}")]
    errors = [r["error"] for r in result["ranks"] if "error" in r]
    if errors:
        return [Check(FAIL, name, f"{backend} on {device}: {errors[0]}")]
    created = [r["create_error"] for r in result["ranks"] if "create_error" in r]
    if created:
        return [Check(FAIL, name, f"backend {backend!r} could not be created: {created[0]}")]
    label = "backend" if all("backend" in r for r in result["ranks"]) else "baseline"
    checks = []
    if not all(r[label]["correct"] for r in result["ranks"]):
        checks.append(Check(FAIL, name, f"{backend} all_reduce gave a wrong sum"))
    small = _median_max(result["ranks"], label, "small")
    large = _median_max(result["ranks"], label, "large")
    base_small = _median_max(result["ranks"], "baseline", "small")
    base_large = _median_max(result["ranks"], "baseline", "large")
    factor = 2 * (world - 1) / world  # allreduce bus bandwidth (nccl-tests PERFORMANCE.md)
    busbw = LARGE_BYTES / large * factor
    where = f"{world} ranks, {device}"
    if base_small is not None:
        status = PASS if small <= MAX_LATENCY_RATIO * base_small else WARN
        checks.append(Check(status, name + ".latency",
                            f"{backend} all_reduce {SMALL_BYTES} B: {small * 1e6:.0f} us median "
                            f"vs {base_small * 1e6:.0f} us for the baseline ({where})"))
        base_busbw = LARGE_BYTES / base_large * factor
        status = PASS if busbw >= MIN_BANDWIDTH_RATIO * base_busbw else WARN
        checks.append(Check(status, name + ".bandwidth",
                            f"{backend} all_reduce 16 MiB: {busbw / 1e9:.2f} GB/s bus bandwidth "
                            f"vs {base_busbw / 1e9:.2f} GB/s for the baseline ({where})"))
    else:
        status = PASS if small <= MAX_LATENCY_S else WARN
        checks.append(Check(status, name + ".latency",
                            f"{backend} all_reduce {SMALL_BYTES} B: {small * 1e6:.0f} us median "
                            f"(expected under {MAX_LATENCY_S * 1e6:.0f} us; {where})"))
        status = PASS if busbw >= MIN_BUSBW_BYTES_S else WARN
        checks.append(Check(status, name + ".bandwidth",
                            f"{backend} all_reduce 16 MiB: {busbw / 1e9:.2f} GB/s bus bandwidth "
                            f"(expected over {MIN_BUSBW_BYTES_S / 1e9:.2f} GB/s; {where})"))
    counts = {r.get("device_count") for r in result["ranks"] if "device_count" in r}
    if counts:
        checks.append(Check(PASS, "gpus", f"torch sees {counts.pop()} GPU(s)"))
    return checks


# --------------------------------------------------------------------------------------------


def load_topology(path: str | None = None) -> tuple:
    """(topology dict or None, Check): from a file, or discovered by the extension."""
    try:
        if path:
            with open(path, "r", encoding="utf-8") as f:
                text = f.read()
            source = path
        else:
            text = _topo.topology_json()
            source = "xccl._C"
        topo = _topo.load(text)
    except ImportError as error:
        return None, Check(FAIL, "extension", f"xccl._C is not importable: {error}")
    except Exception as error:  # noqa: BLE001 - any failure here is the check's finding
        return None, Check(FAIL, "topology", f"{type(error).__name__}: {error}")
    return topo, Check(PASS, "topology", f"from {source} (found by: {topo.get('source') or '?'})")


def run(args) -> int:
    """Implements the `doctor` subcommand; returns the exit status."""
    started = time.monotonic()
    environ = os.environ
    facts = _env.detect_facts("/", environ)
    topo, topo_check = load_topology(args.topology_file)
    checks = [topo_check]
    checks += check_versions()
    checks += check_gpus(topo)
    checks += check_links(topo)
    checks += check_nics(topo)
    checks += check_numa(topo, "/", set(os.sched_getaffinity(0)))
    checks.append(check_shm())
    checks += check_interfaces(environ, facts)
    checks += check_environment(environ, facts)
    for check in checks:
        print(check.line(), flush=True)
    if args.no_selftest:
        print(Check(WARN, "selftest", "skipped (--no-selftest)").line())
        checks.append(Check(WARN, "selftest", "skipped"))
    else:
        device = args.device
        if device == "auto":
            device = "cuda" if topo and len(topo["gpus"]) >= 2 and _torch_has_gpu() else "cpu"
        try:
            result = run_selftest(args.backend, device, timeout_s=args.timeout)
            more = check_selftest(result)
        except Exception as error:  # noqa: BLE001 - the doctor reports, it does not crash
            more = [Check(FAIL, "selftest", f"{type(error).__name__}: {error}")]
        for check in more:
            print(check.line(), flush=True)
        checks += more
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL)}
    status = 1 if counts[FAIL] else 0
    print(f"\n{counts[PASS]} PASS, {counts[WARN]} WARN, {counts[FAIL]} FAIL "
          f"in {time.monotonic() - started:.1f} s -> exit {status}")
    return status


def _torch_has_gpu() -> bool:
    torch = sys.modules.get("torch") or importlib.import_module("torch")
    return bool(getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None))
