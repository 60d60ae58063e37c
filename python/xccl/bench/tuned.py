"""--tuning: which tuning table (docs/tuning.md) each measured xccl group plans from.

`--tuning FILE` makes the tested xccl group plan from FILE's table and an xccl reference plan from
the built-in rules, so `--reference xccl --tuning FILE` measures tuned against untuned in one run,
interleaved per size like any other comparison; `--tuning off` makes the tested group plan from
the rules. Without the option every group plans from whatever table is in force.
"""

from __future__ import annotations

import contextlib

# torch and xccl.tuning are imported where used: the report side (netns.py) names sides without
# them.


def table_text(choice: str | None, here: bool = True) -> str | None:
    """The canonical text for --tuning's value (None: the option was not given; "": off).
    ValueError with the reason for a file that is not a table or, when the ranks run `here`,
    was made on another machine. Ranks in namespace hosts (--netns-hosts) see another NIC set
    than this process (none of the physical NICs), as the tune run that made such a table did."""
    if choice is None:
        return None
    if choice == "off":
        return ""
    from .. import tuning

    table, why = tuning.load(choice)
    if table is None:
        raise ValueError(why)
    if not here:
        return tuning.canonical(table)
    ours = {s: tuning.fingerprint(d) for d, s in tuning.SECTIONS.items() if table[s] is not None}
    refused = tuning.check_machine(table, ours)
    if refused:
        raise ValueError(f"{choice} was made on another machine ({refused})")
    return tuning.canonical(table)


def side_text(text: str | None, role: str, name: str) -> str | None:
    """What the `role` side's group plans from: None leaves the table in force as it is."""
    if text is None or name != "xccl":
        return None
    return text if role == "backend" else ""


def side_name(text: str | None, role: str, name: str) -> str:
    """The side's name in the output: xccl-tuned / xccl-rules where --tuning decides."""
    if side_text(text, role, name) is None:
        return name
    return "xccl-tuned" if role == "backend" and text else "xccl-rules"


@contextlib.contextmanager
def planning_from(text: str | None):
    """Groups created inside plan from `text` (None: from the table in force)."""
    if text is None:
        yield
        return
    from .. import tuning

    with tuning.override(text):
        yield


def in_force(group) -> str:
    """Why the xccl group plans as it does: "rank 0's table", "no table: ..." (_C's answer)."""
    import torch

    from .. import _C

    return _C._tuning_in_force(group._get_backend(torch.device("cpu")))[1]
