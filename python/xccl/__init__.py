"""xccl: a collective-communication backend for torch.distributed.

    import xccl
    torch.distributed.init_process_group(backend="xccl")
"""

import torch  # noqa: F401  (loads libtorch before the extension that links it)

from xccl import _C
from xccl._C import Options
from xccl._registration import BACKEND_NAME, install as _install

__version__ = "0.1.0"
__all__ = ["BACKEND_NAME", "Options", "ProcessGroupXccl", "__version__"]

ProcessGroupXccl = _C.ProcessGroupXccl

_install()
