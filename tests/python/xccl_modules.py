"""Loads xccl's Python modules (env, topo, doctor, cli) from the source tree without running
xccl/__init__.py, which imports torch and the backend extension xccl._C.

The environment-defaults code must work before torch is imported, so its tests load it this way.
It reads the machine through the torch-free extension xccl._native, which the stand-in package
finds beside the installed xccl (located without importing it); tests that need xccl._C import
the real package instead (and skip only when it is missing).
"""

import importlib
import importlib.util
import ipaddress
import os
import subprocess
import sys
import types

SOURCE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "xccl")
FIXTURE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "topo")
PACKAGE = "_xccl_source_tree"


def load(name: str):
    """xccl.<name> as a submodule of a stand-in package rooted at python/xccl."""
    if PACKAGE not in sys.modules:
        package = types.ModuleType(PACKAGE)
        # The source first; then the installed package, for the compiled xccl._native.
        spec = importlib.util.find_spec("xccl")
        installed = list(spec.submodule_search_locations or []) if spec else []
        package.__path__ = [os.path.abspath(SOURCE_DIR)] + installed
        sys.modules[PACKAGE] = package
    return importlib.import_module(f"{PACKAGE}.{name}")


def fixture(name: str) -> str:
    with open(os.path.join(FIXTURE_DIR, name), encoding="utf-8") as f:
        return f.read()


class FakeRoot:
    """A fake filesystem root for sysfs/procfs readers: paths are written as on a real host."""

    def __init__(self, path):
        self.root = str(path)

    def write(self, path, text):
        full = os.path.join(self.root, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def link(self, path, target):
        full = os.path.join(self.root, path.lstrip("/"))
        os.makedirs(os.path.dirname(full), exist_ok=True)
        os.symlink(target, full)

    def pci(self, bdf, vendor, klass, **files):
        """A PCI function; keyword files use "__" for "/" (fw_version__mec_fw_version)."""
        base = f"/sys/bus/pci/devices/{bdf}"
        self.write(f"{base}/vendor", f"0x{vendor:04x}\n")
        self.write(f"{base}/class", f"0x{klass:06x}\n")
        for name, text in files.items():
            self.write(f"{base}/{name.replace('__', '/')}", text)

    def kfd_gpu(self, node, bus, gfx, xgmi_to=()):
        base = f"/sys/class/kfd/kfd/topology/nodes/{node}"
        self.write(
            f"{base}/properties",
            f"simd_count 1216\ngfx_target_version {gfx}\ndomain 0\nlocation_id {bus << 8}\n",
        )
        self.write(f"{base}/io_links/0/properties", "type 2\nnode_to 0\n")
        for i, to in enumerate(xgmi_to, start=1):
            self.write(f"{base}/io_links/{i}/properties", f"type 11\nnode_to {to}\n")

    def rdma(self, hca, layer, state="4: ACTIVE", driver="mlx5_core", vendor=0x15B3):
        base = f"/sys/class/infiniband/{hca}"
        self.write(f"{base}/ports/1/state", state + "\n")
        self.write(f"{base}/ports/1/link_layer", layer + "\n")
        self.write(f"{base}/device/vendor", f"0x{vendor:04x}\n")
        self.link(f"{base}/device/driver", f"/sys/bus/pci/drivers/{driver}")

    def net(self, name, state="up", flags=0x1003):
        self.write(f"/sys/class/net/{name}/operstate", state + "\n")
        self.write(f"/sys/class/net/{name}/flags", f"0x{flags:x}\n")

    def routes(self, **networks):
        """/proc/net/route, one row per interface=network ("10.10.0.0/16"), in the order given.
        The kernel writes destination and mask as the hex of the address in memory (little
        endian): 10.10.0.0/16 is 00000A0A with mask 0000FFFF."""
        header = (
            "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n"
        )
        rows = ""
        for name, network in networks.items():
            net = ipaddress.IPv4Network(network)
            d, m = (
                f"{int.from_bytes(a.packed, 'little'):08X}"
                for a in (net.network_address, net.netmask)
            )
            rows += f"{name}\t{d}\t00000000\t0001\t0\t0\t0\t{m}\t0\t0\t0\n"
        self.write("/proc/net/route", header + rows)


FIXTURES = (
    "hgx_h100_8x_nvswitch.json",
    "mi300x_8x_xgmi.json",
    "mi250_2node_host0.json",
    "mi250_2node_host1.json",
    "pcie_4x_l40s.json",
    "cpu_vm.json",
)


def installed(name: str):
    """xccl.<name> from the installed package, for tests whose code starts ranks: the ranks come
    from a forkserver, which imports their code by its real module name."""
    import pytest

    pytest.importorskip("xccl._C")
    return importlib.import_module(f"xccl.{name}")


def run_module(*args: str, env: dict | None = None, check: bool = True):
    """`python -m xccl ARGS` in a fresh interpreter: its CompletedProcess, output as text."""
    return subprocess.run(
        [sys.executable, "-m", "xccl", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=check,
    )
