"""`python -m xccl tune` and `xccl.tune.run(group)`: measured tuning (docs/tuning.md).

Every plan the planner can choose for the group's shape (candidates.py) runs on a group of its
own, forced by a one-entry-per-collective table; each (collective, size) is first checked
exactly (exact.py), then timed with xccl.bench's method; a candidate replaces the rule only
where it is exact at every size of the collective and faster beyond the noise (verdict.py); the
table (xccl.tuning's format) holds only those ranges. Modules: candidates, verdict, summary and
exact are pure (exact needs torch only); measure is one rank; launch and netns start the ranks.
"""


def run(group=None, **kwargs) -> dict:
    """See xccl.tune.measure.run."""
    from .measure import run as measure_run

    return measure_run(group, **kwargs)


def main(argv=None) -> int:
    from .launch import main as launch_main

    return launch_main(argv)


__all__ = ["main", "run"]
