"""`python -m xccl topo`: the machine's topology as xccl sees it.

The C++ side (csrc/topo) discovers, reads and answers every question about a topology; this
module reaches it through the torch-free extension xccl._native, keeps the versioned JSON of
docs/topology.md as a dict, and prints it, so it is testable with the fixture files in
tests/fixtures/topo.
"""

from __future__ import annotations

import json
import sys

from . import _native, files

FORMAT_NAME = _native.FORMAT_NAME
FORMAT_VERSION = _native.FORMAT_VERSION
# Best first, as csrc/topo/topology.h orders PciPath.
PATH_ORDER = _native.PCI_PATHS


# A topology file's cap, as csrc/topo/topology.h's kMaxTopologyFileBytes.
MAX_FILE_BYTES = 16 << 20


def read_file(path: str) -> str:
    """The text of the topology file at `path`, read as any file a user names is
    (files.read_capped: a regular file, no link, no FIFO, capped); ValueError naming the file
    and what is wrong (FileNotFoundError when there is none)."""
    try:
        return files.read_text(path, MAX_FILE_BYTES)
    except ValueError as error:
        raise ValueError(f"the topology file {path}: {error}") from None


def topology_json() -> str:
    """The running machine's topology (probed once per process; XCCL_TOPO_FILE honoured)."""
    return _native.discover()


def discover_root(root: str = "/") -> dict:
    """The sysfs/procfs tree below `root` as a topology, without vendor libraries (NVML,
    amdsmi): cheap enough for every import, and tests point it at fake trees."""
    return json.loads(_native.discover_root(root))


def load(source: str | bytes | dict) -> dict:
    """Parses topology JSON (text or an already parsed dict) as the C++ reader does, with every
    field present; raises ValueError when it is not an xccl topology of a version this xccl
    reads, or is inconsistent (a link to a GPU it does not list)."""
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    text = source if isinstance(source, str) else json.dumps(source)
    return json.loads(_native.load(text))


def pci_path_between(path_a: str, numa_a: int, path_b: str, numa_b: int) -> str:
    """PIX, PXB, PHB, NODE, SYS or unknown: pciPathBetween() in csrc/topo/pci.cc."""
    return _native.pci_path_between(path_a or "", numa_a, path_b or "", numa_b)


def find_link(topo: dict, a: int, b: int) -> dict | None:
    """The entry of topo["gpuLinks"] between GPUs a and b (either order), to read or edit."""
    pair = sorted((a, b))
    for link in topo["gpuLinks"]:
        if sorted(link["gpus"]) == pair:
            return link
    return None


def link_class(topo: dict, gpus: list | None = None) -> str:
    """gpuLinkClass() in csrc/topo/links.cc: none, pcie, nvlink_partial, nvswitch,
    xgmi_partial or xgmi_full_mesh."""
    return _native.link_class(json.dumps(topo), gpus)


def gpu_nic_path(topo: dict, gpu: int, nic: int) -> str:
    return _native.gpu_nic_path(json.dumps(topo), gpu, nic)


def nearest_nics(topo: dict, gpu: int) -> list:
    """nearestNics() in csrc/topo/links.cc: usable NICs with the best path, then the fastest."""
    return _native.nearest_nics(json.dumps(topo), gpu)


def _bytes(n: int) -> str:
    if not n:
        return "?"
    return f"{n / 2**30:.1f} GiB"


def _speed(mbps: int) -> str:
    if mbps is None or mbps < 0:
        return "speed unknown"
    return f"{mbps / 1000:g} Gb/s" if mbps >= 1000 else f"{mbps} Mb/s"


def _numa(node: int) -> str:
    return "-" if node is None or node < 0 else str(node)


def _link_code(link: dict | None) -> str:
    """nvidia-smi style: NV# (NVLink), NS# (through NVSwitch), XG# (xGMI), else the PCIe path."""
    if link is None:
        return "?"
    count = link.get("count", 0) or ""
    kind = link["type"]
    if kind == "nvlink":
        return f"NV{count}"
    if kind == "nvswitch":
        return f"NS{count}"
    if kind == "xgmi":
        return f"XG{count}"
    return link.get("pciPath", "unknown")


def format_topology(source: str | dict) -> str:
    topo = load(source)
    out = []
    vm = ", virtual machine" if topo.get("virtualMachine") else ""
    out.append(f"host {topo.get('host') or '?'}{vm}  (found by: {topo.get('source') or '?'})")
    nodes = topo["numaNodes"]
    cpus = topo.get("cpus", "")
    count = _cpu_count(cpus)
    out.append(
        f"CPU: {topo.get('cpuModel') or '?'}; {count} online CPUs ({cpus or '?'}); "
        f"{len(nodes)} NUMA node{'s' if len(nodes) != 1 else ''}"
    )
    for node in nodes:
        distances = node.get("distances") or []
        far = f", distances {' '.join(map(str, distances))}" if len(distances) > 1 else ""
        out.append(
            f"  NUMA {node['id']}: CPUs {node.get('cpus') or '?'}, "
            f"memory {_bytes(node.get('memoryBytes', 0))}{far}"
        )

    gpus = topo["gpus"]
    if not gpus:
        out.append("GPUs: none")
    else:
        names = sorted(
            {f"{g.get('name') or g.get('vendor', '?')} ({g.get('arch') or '?'})" for g in gpus}
        )
        out.append(f"GPUs: {len(gpus)}x {', '.join(names)}; GPU links: {link_class(topo)}")
        for g in gpus:
            near = nearest_nics(topo, g["index"])
            nic = (
                ", ".join(
                    f"{topo['nics'][i]['name']} ({gpu_nic_path(topo, g['index'], i)})" for i in near
                )
                or "none"
            )
            switch = f", NVSwitch links {g['nvswitchLinks']}" if g.get("nvswitchLinks") else ""
            out.append(
                f"  GPU{g['index']}: {g.get('pciBusId') or '?'}"
                f"  NUMA {_numa(g.get('numaNode'))}  CPUs {g.get('cpus') or '?'}"
                f"  {_bytes(g.get('memoryBytes', 0))}{switch}  nearest NIC: {nic}"
            )

    nics = topo["nics"]
    if not nics:
        out.append("NICs: none")
    else:
        out.append(f"NICs: {len(nics)}")
        for i, n in enumerate(nics):
            port = f" port {n['port']}" if n.get("port") else ""
            netdev = f" ({n['netdev']})" if n.get("netdev") and n.get("netdev") != n["name"] else ""
            where = "virtual" if n.get("virtual") else f"PCI {n.get('pciBusId') or '?'}"
            addresses = f"  {', '.join(n['addresses'])}" if n.get("addresses") else ""
            out.append(
                f"  NIC{i} {n['name']}{port}{netdev}: {n.get('kind', '?')}, "
                f"{'up' if n.get('up') else 'DOWN'}, {_speed(n.get('speedMbps', -1))}, "
                f"mtu {n.get('mtu') or '?'}, {where}, NUMA {_numa(n.get('numaNode'))}, "
                f"driver {n.get('driver') or '?'}{addresses}"
            )

    if len(gpus) > 1 or (gpus and nics):
        out.append("")
        out.extend(_matrix(topo))
        out.append(
            "Legend: X self; NV# NVLink x#; NS# through NVSwitch with # links; XG# xGMI "
            "x#; PIX one PCIe switch; PXB several bridges; PHB host bridge; NODE same "
            "NUMA node; SYS across NUMA nodes"
        )
    return "\n".join(out)


def _cpu_count(cpulist: str) -> int:
    total = 0
    for part in (cpulist or "").split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        total += (int(last) - int(first) + 1) if last else 1
    return total


def _matrix(topo: dict) -> list:
    gpus = topo["gpus"]
    nic_index = [i for i, n in enumerate(topo["nics"]) if not n.get("virtual")]
    header = [f"GPU{g['index']}" for g in gpus] + [f"NIC{i}" for i in nic_index]
    width = max(6, max(len(h) for h in header) + 1)
    rows = [("".ljust(7) + "".join(h.ljust(width) for h in header)).rstrip()]
    for g in gpus:
        cells = []
        for h in gpus:
            cells.append(
                "X"
                if h["index"] == g["index"]
                else _link_code(find_link(topo, g["index"], h["index"]))
            )
        cells += [gpu_nic_path(topo, g["index"], i) for i in nic_index]
        rows.append((f"GPU{g['index']}".ljust(7) + "".join(c.ljust(width) for c in cells)).rstrip())
    return rows


def main(args) -> int:
    """Implements the `topo` subcommand (arguments parsed by xccl.cli)."""
    try:
        # --file, or a malformed XCCL_TOPO_FILE: a message, not a traceback
        text = read_file(args.file) if args.file else topology_json()
    except (OSError, ValueError) as error:
        sys.stderr.write(f"xccl topo: {error}\n")
        return 2
    try:
        topo = load(text)
    except ValueError as error:
        sys.stderr.write(f"xccl topo: {error}\n")
        return 2
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")
    if args.json:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        print(format_topology(topo))
        if args.dump:
            print(f"\nwritten to {args.dump}")
    return 0
