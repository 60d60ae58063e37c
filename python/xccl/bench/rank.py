"""One benchmark rank, and the exit statuses of the launchers that start ranks: launch.py's
local and torchrun ranks, and netns.py's ranks inside namespace hosts. Both import this module,
never each other.

Exit status: 0 done; 1 a --check failed; 2 bad usage; 3 a rank failed, crashed or timed out;
130 interrupted.
"""

from __future__ import annotations

import sys
import traceback

EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_RANK_FAILED = 1, 2, 3
# After one rank fails the others are stuck in a collective until the group timeout; this long
# is enough for them to report their own error before they are terminated.
FAILURE_GRACE_S = 10.0


def run_rank(args, rank: int, world: int, local_rank: int, init_method: str, launched: bool) -> int:
    """One rank, turning any failure into a message that names the rank and a status."""
    try:
        from .runner import run  # torch, torch.distributed and the extension load here

        return run(args, rank, world, local_rank, init_method, launched)
    except (RuntimeError, ValueError, TimeoutError) as error:  # DistBackendError included
        sys.stderr.write(f"xccl bench rank {rank}: {error}\n")
    except Exception:  # noqa: BLE001 - unexpected: the traceback is the useful part
        sys.stderr.write(f"xccl bench rank {rank}: unexpected error\n{traceback.format_exc()}")
    return EXIT_RANK_FAILED
