"""`python -m xccl tune --netns-hosts H`: the tuner's ranks spread over H hosts made of network
namespaces on this machine (xccl.bench's hosts), so the table is measured across a network.
Ranks are plain processes started with torchrun's variables; rank 0's summary is printed here."""

from __future__ import annotations

import os
import sys
import tempfile

from ..bench import hosts as hosts_module
from ..bench import netns as bench_netns
from ..bench.rank import EXIT_RANK_FAILED, EXIT_USAGE
from . import rank as rank_module


def main(args) -> int:
    reason = hosts_module.unavailable_reason()
    if reason:
        sys.stderr.write(f"xccl tune: --netns-hosts: {reason}\n")
        return EXIT_USAGE
    if args.out is None:
        # Ranks in namespaces see this machine's files: resolve the default path here, once.
        from .. import tuning

        args.out = tuning.default_path()
    layout = bench_netns.layout(args.nranks, args.netns_hosts)
    sys.stderr.write(
        f"xccl tune: {args.nranks} ranks on {args.netns_hosts} namespace hosts {layout}\n"
    )
    with tempfile.TemporaryDirectory(prefix="xccl-tune-netns-") as folder:
        options = rank_module.options_file(args, folder)
        with hosts_module.Hosts(args.netns_hosts) as made:
            procs, rank = [], 0
            for host, count in enumerate(layout):
                for local in range(count):
                    env = hosts_module.rank_env(dict(os.environ), rank, args.nranks, local, count)
                    env.setdefault(
                        "OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // args.nranks))
                    )
                    log = (
                        None
                        if rank == 0
                        else open(  # noqa: SIM115
                            os.path.join(folder, f"rank{rank}.log"), "w"
                        )
                    )
                    argv = [sys.executable, "-m", "xccl.tune.netns", options]
                    procs.append((made.popen(host, argv, env=env, stdout=log, stderr=log), log))
                    rank += 1
            try:
                code = bench_netns._wait([p for p, _ in procs], args.time_limit)
            finally:
                for proc, log in procs:
                    if proc.poll() is None:
                        proc.kill()
                    proc.wait()
                    if log:
                        log.close()
            if code != 0:
                for index in range(1, rank):
                    with open(os.path.join(folder, f"rank{index}.log"), encoding="utf-8") as f:
                        tail = f.read()[-2000:].strip()
                    if tail:
                        sys.stderr.write(f"--- rank {index}:\n{tail}\n")
    return 0 if code == 0 else EXIT_RANK_FAILED


def _rank_main(path: str) -> int:
    args = rank_module.load_options(path)
    env = os.environ
    return rank_module.rank_main(args, int(env["RANK"]), int(env["WORLD_SIZE"]), "env://")


if __name__ == "__main__":
    sys.exit(_rank_main(sys.argv[1]))
