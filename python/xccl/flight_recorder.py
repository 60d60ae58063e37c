"""xccl's flight recorder, in torch's dump format (docs/training.md, "Flight recorder").

Every ProcessGroupXccl records its last collectives and point-to-point operations (sequence
numbers, op, sizes, dtypes, state scheduled/started/completed, timestamps, group) in a ring of
TORCH_FR_BUFFER_SIZE entries (torch's default 2000; 0 turns it off). Each rank writes the ring to
``<prefix><global rank>`` (prefix: TORCH_FR_DUMP_TEMP_FILE, else ``torch/comm_lib_trace_rank_`` in
the user's own cache folder, else a private folder with a warning) when one of its
collectives fails or times out, when a peer's collective times out, on ``abort()``, and when
``dump_flight_recorder()`` asks. ``torchfrtrace DIR -p PREFIX`` reads the files of all ranks.
"""

from __future__ import annotations

import pickle

from xccl import _C


def dump_flight_recorder(path_prefix: str | None = None, only_active: bool = False) -> str | None:
    """Writes this process's flight recorder to ``path_prefix`` + its global rank (default
    prefix: TORCH_FR_DUMP_TEMP_FILE, else the user's cache folder's, docs/training.md). Returns
    the path written, or None when recording is off, no xccl group exists yet, or the file could
    not be written (a warning on stderr says why, once per process). ``only_active`` leaves out
    completed operations."""
    path = _C._flight_recorder_write(path_prefix or "", bool(only_active))
    return path or None


def flight_recorder_trace(only_active: bool = False) -> dict:
    """This process's recorder as the dict a dump file holds ("version", "pg_config",
    "pg_status", "entries", ...), without writing a file."""
    return pickle.loads(_C._flight_recorder_dump(bool(only_active)))


def flight_recorder_capacity() -> int:
    """Entries kept per process (TORCH_FR_BUFFER_SIZE, else TORCH_NCCL_TRACE_BUFFER_SIZE, else
    2000); 0 when recording is off."""
    return _C._flight_recorder_capacity()
