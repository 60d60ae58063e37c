"""xccl: a collective-communication backend for torch.distributed.

import xccl
torch.distributed.init_process_group(backend="xccl")
"""

# Platform defaults go into os.environ before torch (and through it any GPU runtime or NCCL)
# starts, and never override a value the user set; XCCL_NO_ENV_DEFAULTS=1 turns them off.
# `python -m xccl env` explains each decision. They read the machine through xccl._native
# (csrc/topo's discovery), an extension that links no torch library, so it can load here.
from xccl import env as _env

_env.apply_defaults()

import torch  # noqa: E402,F401  (loads libtorch before the extension that links it)

# window: put_pages and put_strided on torch's one-sided windows (xccl.window).
from xccl import _C, window  # noqa: E402,F401
from xccl._C import Options  # noqa: E402
from xccl._registration import BACKEND_NAME  # noqa: E402
from xccl._registration import install as _install  # noqa: E402
from xccl.flight_recorder import dump_flight_recorder  # noqa: E402

__version__ = "0.1.0"
__all__ = ["BACKEND_NAME", "Options", "ProcessGroupXccl", "__version__", "dump_flight_recorder"]

ProcessGroupXccl = _C.ProcessGroupXccl

_install()
