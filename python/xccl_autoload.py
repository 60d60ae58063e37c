"""The `torch.backends` entry point: runs at the end of `import torch`.

It must never make `import torch` fail, so every problem becomes a warning; users can turn
autoloading off with TORCH_DEVICE_BACKEND_AUTOLOAD=0 (torch's switch) or XCCL_NO_AUTOLOAD=1.
A module of its own, outside the xccl package: loading an entry point imports its module, and a
module inside the package would import the package (and register the backend) before this
function could read XCCL_NO_AUTOLOAD.
"""

import os
import warnings


def autoload() -> None:
    # A boolean as csrc/common/env.cc declares it (1/true/yes/on).
    if os.environ.get("XCCL_NO_AUTOLOAD", "").strip().lower() in ("1", "true", "yes", "on"):
        return
    try:
        import xccl  # noqa: F401  (registers the backend)
    except Exception as err:  # noqa: BLE001 - import torch must survive any failure here
        warnings.warn(
            f"xccl: not registered at torch import ({err}); `import xccl` to retry", stacklevel=2
        )
