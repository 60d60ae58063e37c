"""Which defaults apply given the environment (the decisions), and applying them.

The rules of this package (see its __init__): a value the user set, or one an NCCL/RCCL config
file sets, is never overridden; "detected" rules need their condition proven on this host;
variables read when a runtime starts are not set once it has started.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from .facts import Facts, ascii_int, detect_facts
from .rules import AWS_EFA, NO_DEFAULTS_VAR, PLATFORMS, RULES, detect_platform

# Set by apply_defaults() when it acts on os.environ; read by `python -m xccl env`.
_last_report: Report | None = None


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


def decide_defaults(
    environ: Mapping[str, str],
    platform: str | None = None,
    root: str = "/",
    facts: Facts | None = None,
) -> Report:
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
        decision = Decision(
            rule.name, value, "set", rule.kind, rule.reason, rule.source, rule.condition
        )
        if rule.name in environ:
            # Present counts, even empty: an explicit empty value is a choice too.
            decision.action, decision.user_value = "user", environ[rule.name]
        elif rule.name in facts.config_file_vars:
            decision.action = "config"
        elif rule.kind == "detected" and not (rule.when and rule.when(facts)):
            decision.action = "condition"
        elif rule.at_runtime_start and (
            facts.gpu_runtime_started or (rule.name == "OMP_NUM_THREADS" and facts.torch_imported)
        ):
            decision.action = "late"
        decisions.append(decision)
    return Report(platform, facts, decisions)


def apply_defaults(
    environ: MutableMapping[str, str] | None = None,
    platform: str | None = None,
    root: str = "/",
    facts: Facts | None = None,
) -> list:
    """Sets this platform's defaults in `environ` (os.environ by default) where the user has
    not; returns the decisions. Does nothing when XCCL_NO_ENV_DEFAULTS=1."""
    global _last_report
    target = os.environ if environ is None else environ
    if _truthy(target.get(NO_DEFAULTS_VAR, "")):
        if target is os.environ:
            _last_report = Report(platform or "", Facts(), [], disabled=True)
        return []
    report = decide_defaults(target, platform, root, facts)
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
        flag(
            "NCCL_MIN_NCHANNELS",
            "more channels steal CUs from compute in multi-node "
            "training (AMD's 4-node example uses 40, not 112)",
            "ROCm prerequisite-system-validation; ROCm workload.rst",
        )
    retry = ascii_int(environ.get("NCCL_IB_RETRY_CNT", ""))
    if retry is not None and retry > 7:
        flag(
            "NCCL_IB_RETRY_CNT",
            "the IB retry field is 3 bits; values above 7 are out of range",
            "InfiniBand spec",
        )
    if environ.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":
        flag(
            "CUDA_DEVICE_MAX_CONNECTIONS",
            "serialises kernels across streams: needed for "
            "Megatron TP overlap, but it removes FSDP/DDP communication overlap",
            "Megatron-LM#1468; verl#6976",
        )
    if "RDMAV_FORK_SAFE" in environ and platform == AWS_EFA:
        flag("RDMAV_FORK_SAFE", "harmful with current EFA stacks", "aws-ofi-nccl efa-env-var.md")
    ifname = environ.get("NCCL_SOCKET_IFNAME", "")
    if ifname and not ifname.startswith(("=", "^")):
        flag(
            "NCCL_SOCKET_IFNAME",
            "a prefix match (bond0 also matches bond0.2093); write "
            f"'={ifname}' for exactly that interface",
            "nccl-tests#9",
        )
    if "NCCL_IB_GID_INDEX" in environ:
        flag(
            "NCCL_IB_GID_INDEX",
            "site-specific and auto-detected by NCCL >= 2.21.5; a "
            "hard-coded index breaks on hosts with another GID table",
            "nccl#1131, #1538",
        )
    if environ.get("NCCL_P2P_DISABLE") == "1" and (facts.nvswitch or facts.xgmi):
        flag(
            "NCCL_P2P_DISABLE",
            "turns off the NVLink/xGMI peer path this machine has",
            "NCCL docs (debug variables)",
        )
    if environ.get("NCCL_NVLS_ENABLE") == "0" and facts.nvswitch:
        flag(
            "NCCL_NVLS_ENABLE",
            "NVLink SHARP is off: about 30% less allreduce bandwidth "
            "unless Fabric Manager multicast is broken here",
            "nccl-tests#212; nccl#1442",
        )
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        if name in environ:
            flag(
                name,
                "a debugging variable (NCCL docs): it can cost bandwidth or hang when "
                "the problem it worked around is gone",
                "NCCL docs env.html",
            )
    return found
