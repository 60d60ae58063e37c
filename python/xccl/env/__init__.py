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

Detection reads sysfs/procfs only (the machine through csrc/topo's discovery in xccl._native,
routes and config files here): it must not import torch or initialise a GPU runtime, and it is
cheap enough to run on every import. All functions take a filesystem ``root`` so tests can point
them at fake trees.

Modules: facts (what the host and job are), rules (the per-platform table and why; documented
in docs/environment.md), decisions (which defaults apply given the environment, and applying them),
report (`python -m xccl env` output).
"""

from .decisions import (
    Decision,
    Report,
    apply_defaults,
    check_user_settings,
    decide_defaults,
    last_report,
)
from .facts import (
    Facts,
    candidate_interfaces,
    detect_facts,
    job_shape,
    route_interface,
)
from .report import format_report, report_to_dict
from .rules import (
    AMD_MI250,
    AMD_MI300X,
    AMD_PLATFORMS,
    AWS_EFA,
    CPU,
    GPU_PLATFORMS,
    LEFT_ALONE,
    MULTINODE_GPU,
    NO_DEFAULTS_VAR,
    NVIDIA,
    NVIDIA_MULTINODE,
    OTHER_GPU,
    PLATFORMS,
    RULES,
    Rule,
    detect_platform,
)

__all__ = [
    "AMD_MI250",
    "AMD_MI300X",
    "AMD_PLATFORMS",
    "AWS_EFA",
    "CPU",
    "GPU_PLATFORMS",
    "LEFT_ALONE",
    "MULTINODE_GPU",
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
    "candidate_interfaces",
    "check_user_settings",
    "detect_facts",
    "detect_platform",
    "format_report",
    "job_shape",
    "last_report",
    "decide_defaults",
    "report_to_dict",
    "route_interface",
]
