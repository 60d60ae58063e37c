"""`python -m xccl doctor`: checks this host for what makes collectives slow or hang, then runs a
short self-test of the backend against gloo, printing PASS / WARN / FAIL lines.

Exit status 0 when nothing FAILed. A check that cannot run here (no GPU, no MASTER_ADDR) says so
with WARN rather than passing silently. Every wait is bounded; the only traffic is loopback.

Modules: checks (the host checks, pure functions of a topology, the environment and a
filesystem root), selftest (ranks started and measured with xccl.bench's launcher and
statistics), gpu_check (`--gpu`: every GPU kernel against a host reference, then the
verification stamp); this one runs them in order.
"""

from __future__ import annotations

import importlib
import os
import sys
import time

from .. import env as _env
from .. import topo as _topo
from .checks import (
    FAIL,
    PASS,
    SHM_WARN_BYTES,
    WARN,
    Check,
    check_environment,
    check_gpus,
    check_interfaces,
    check_links,
    check_nics,
    check_numa,
    check_ofi,
    check_shm,
    check_tuning,
    check_versions,
)
from .selftest import SELFTEST_TIMEOUT_S, check_selftest, run_selftest

__all__ = [
    "FAIL",
    "PASS",
    "SELFTEST_TIMEOUT_S",
    "SHM_WARN_BYTES",
    "WARN",
    "Check",
    "check_environment",
    "check_gpus",
    "check_interfaces",
    "check_links",
    "check_nics",
    "check_numa",
    "check_selftest",
    "check_shm",
    "check_tuning",
    "check_versions",
    "load_topology",
    "run",
    "run_selftest",
]


def load_topology(path: str | None = None) -> tuple:
    """(topology dict or None, Check): from a file, or discovered (csrc/topo via xccl._native,
    honouring XCCL_TOPO_FILE)."""
    try:
        if path:
            text = _topo.read_file(path)
            source = path
        else:
            text = _topo.topology_json()
            source = "xccl._native"
        topo = _topo.load(text)
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
    checks += check_ofi(_ofi_status(environ.get("MASTER_ADDR", "")))
    checks += check_tuning()
    for check in checks:
        print(check.line(), flush=True)
    if getattr(args, "gpu", False):
        from .gpu_check import run_gpu_check

        checks += _reported("gpu.verify", lambda: run_gpu_check(topo))
    elif args.no_selftest:
        print(Check(WARN, "selftest", "skipped (--no-selftest)").line())
        checks.append(Check(WARN, "selftest", "skipped"))
    else:
        device = args.device
        if device == "auto":
            device = "cuda" if topo and len(topo["gpus"]) >= 2 and _torch_has_gpu() else "cpu"
        checks += _reported(
            "selftest",
            lambda: check_selftest(run_selftest(args.backend, device, timeout_s=args.timeout)),
        )
    counts = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL)}
    status = 1 if counts[FAIL] else 0
    print(
        f"\n{counts[PASS]} PASS, {counts[WARN]} WARN, {counts[FAIL]} FAIL "
        f"in {time.monotonic() - started:.1f} s -> exit {status}"
    )
    return status


def _reported(name: str, run) -> list:
    """The checks `run()` returns, each printed as it comes; an exception is one FAIL named
    `name`: the doctor reports, it does not crash."""
    try:
        more = run()
    except Exception as error:  # noqa: BLE001
        more = [Check(FAIL, name, f"{type(error).__name__}: {error}")]
    for check in more:
        print(check.line(), flush=True)
    return more


def _ofi_status(store_host: str) -> dict | None:
    try:
        from .. import _native

        return _native.ofi_status(store_host)
    except (ImportError, AttributeError):
        return None


def _torch_has_gpu() -> bool:
    torch = sys.modules.get("torch") or importlib.import_module("torch")
    return bool(getattr(torch.version, "cuda", None) or getattr(torch.version, "hip", None))
