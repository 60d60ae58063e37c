"""Link failover under load, run by hand N times: two namespace hosts with 2 ranks each
(python/xccl/bench/hosts.py), all_reduce of 4 MiB in a loop with every result checked, host 1's
second link taken down a fifth of the way in and brought up at three fifths, while CPU-bound
processes (two per core by default) compete with the job. Prints one line per run and "N/N
passed"; exits 1 unless every run passed. Needs root (namespaces), like test_cross_host.py.

    python tests/python/link_failover_runs.py --runs 20
    python tests/python/link_failover_runs.py --runs 5 --burners-per-core 0 --log-level debug

A failed run's rank logs are kept in --keep (a fresh temporary folder by default).

Recorded (2 cores, 2 burners per core, other builds running beside): `--runs 20 --log-level
debug` passed 20/20, 51-147 s a run, longest all_reduce 2.29 s (1.07-1.27 s in 19 runs); the
only links taken down were the downed xnet1 ones (320 "nothing received" timeouts, none on
xnet0). `--runs 1 --pause 0 1.5` (rank 0 stopped 1.5 s while the link is down) passed, longest
all_reduce 1.57 s.
"""

from __future__ import annotations

import argparse
import pathlib
import signal
import sys
import tempfile
import time

import test_cross_host as cross
from chaos_load import burners

ITERS = cross.LINKDOWN_ITERS
RUN_TIMEOUT_S = 240


def link_down_run(
    folder: pathlib.Path, iters: int = ITERS, extra: dict | None = None, pause: tuple = ()
) -> list:
    """One run (test_cross_host.test_link_down_mid_loop_loses_nothing's scenario); returns each
    rank's result, or raises AssertionError saying which rank failed and how. `pause` =
    (rank, seconds): that rank's process is stopped (SIGSTOP) that long once the link is down,
    as a rank descheduled on a loaded machine is."""
    with cross.hosts_module.Hosts(2) as hosts:
        progress = folder / "progress"
        argv = ["linkdown", str(progress), str(iters)]
        env = {"XCCL_NET": "tcp", **cross.MULTI_LINK, **(extra or {})}
        procs = cross.start_ranks(hosts, [2, 2], env, argv, folder)
        deadline = time.monotonic() + RUN_TIMEOUT_S
        cross._wait_for_iteration(progress, iters // 5, procs, deadline)
        hosts.set_link(1, 1, up=False)
        if pause:
            stopped = procs[pause[0]][0]
            stopped.send_signal(signal.SIGSTOP)
            try:
                time.sleep(pause[1])
            finally:
                stopped.send_signal(signal.SIGCONT)
        cross._wait_for_iteration(progress, 3 * iters // 5, procs, deadline)
        hosts.set_link(1, 1, up=True)
        results = cross.finish_ranks(procs, folder, deadline)
    cross.assert_all_passed(results, [2, 2])
    assert all(r["checks"] == iters for r in results), [r["checks"] for r in results]
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--iters", type=int, default=ITERS)
    parser.add_argument("--burners-per-core", type=int, default=2)
    parser.add_argument("--log-level", default="warn", help="XCCL_LOG_LEVEL of the ranks")
    parser.add_argument(
        "--pause",
        type=float,
        nargs=2,
        default=(),
        metavar=("RANK", "SECONDS"),
        help="stop that rank's process that long once the link is down (a descheduled rank)",
    )
    parser.add_argument("--keep", type=pathlib.Path, default=None, help="folder for rank logs")
    args = parser.parse_args(argv)
    reason = cross.hosts_module.unavailable_reason()
    if reason is not None:
        print(f"cannot run: {reason}", file=sys.stderr)
        return 2
    keep = args.keep or pathlib.Path(tempfile.mkdtemp(prefix="xccl-failover-"))
    passed, longest = 0, []
    with burners(args.burners_per_core):
        for run in range(args.runs):
            folder = keep / f"run{run}"
            folder.mkdir(parents=True, exist_ok=True)
            began = time.monotonic()
            try:
                pause = (int(args.pause[0]), args.pause[1]) if args.pause else ()
                extra = {"XCCL_LOG_LEVEL": args.log_level}
                results = link_down_run(folder, args.iters, extra, pause)
            except AssertionError as e:
                first = str(e).strip().splitlines()[:3]
                print(f"run {run + 1}: FAILED after {time.monotonic() - began:.1f} s: {first}")
                print(f"  logs: {folder}")
                continue
            passed += 1
            longest.append(max(r["max_call_s"] for r in results))
            print(
                f"run {run + 1}: passed in {time.monotonic() - began:.1f} s, longest all_reduce "
                f"{longest[-1]:.2f} s",
                flush=True,
            )
    worst = f", longest all_reduce of all {max(longest):.2f} s" if longest else ""
    print(f"{passed}/{args.runs} passed ({args.burners_per_core} burners per core{worst})")
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
