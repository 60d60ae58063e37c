"""The flight recorder (docs/training.md, "Flight recorder"): every collective and point-to-point
call in torch's dump format, written by every rank on a timeout (the ranks that time out, and the
peers they ask), on abort() and on request, so that torch's own analyzer names the collective and
the rank that never joined it. Also: the entries' fields and states, the ring's size
(TORCH_FR_BUFFER_SIZE, 0 turning it off), an unwritable dump path (one warning, training goes
on), abort hooks, and torch's wording in a timeout's message."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from dist_harness import describe, run, spawn

PREFIX = "xccl_trace_rank_"
TIMEOUT_S = 3.0
HAS_ABORT_HOOKS = hasattr(torch._C._distributed_c10d.Backend, "register_abort_hook")


def _backend():
    return dist.distributed_c10d._get_default_group()._get_backend(torch.device("cpu"))


def _wait_for(path: str, bound: float = 20.0) -> bool:
    deadline = time.time() + bound
    while time.time() < deadline:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def _skip_one(rank, world, absent, dump_dir):
    """Rank `absent` never enters all_reduce #2; the others time out in it."""
    import xccl  # noqa: F401

    store = dist.distributed_c10d._get_default_store()
    x = torch.ones(16)
    dist.all_reduce(x)  # #1: everyone
    if rank == absent:
        store.wait([f"failed/{r}" for r in range(world) if r != absent], timedelta(seconds=60))
        # Nothing failed here: the peers' status queries after their timeout asked for this dump.
        return {"dumped": _wait_for(os.path.join(dump_dir, f"{PREFIX}{rank}"))}
    hooks = []
    if HAS_ABORT_HOOKS:
        _backend().register_abort_hook(7, lambda: hooks.append("ran"))
    try:
        dist.all_reduce(x)
        message = None
    except Exception as e:  # noqa: BLE001 - the point of the test
        message = str(e)
    store.set(f"failed/{rank}", "1")
    return {
        "message": message,
        "hooks": hooks,
        "dumped": os.path.exists(f"{dump_dir}/{PREFIX}{rank}"),
    }


def _analyze(dump_dir: str) -> str:
    """torch's analyzer (the `torchfrtrace` console script) on the dumps; its report."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.flight_recorder.fr_trace",
            dump_dir,
            "-p",
            PREFIX,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, report
    return report


@pytest.mark.parametrize("world_size,absent,transport", [(4, 2, "shm"), (3, 1, "tcp")])
def test_skipped_collective_is_named_by_torch_analyzer(world_size, absent, transport):
    with tempfile.TemporaryDirectory(prefix="xccl-fr-") as dump_dir:
        env = {"TORCH_FR_DUMP_TEMP_FILE": os.path.join(dump_dir, PREFIX)}
        outcomes = spawn(
            _skip_one,
            world_size,
            absent,
            dump_dir,
            pg_timeout=TIMEOUT_S,
            timeout=90,
            env=env,
            transport=transport,
        )
        assert all(o.ok for o in outcomes), describe(outcomes)
        for o in outcomes:
            v = o.value
            assert v["dumped"], f"rank {o.rank} wrote no dump: {v}"
            if o.rank == absent:
                continue
            message = v["message"]
            assert message is not None, f"rank {o.rank}: all_reduce #2 did not fail"
            # torch's wording (ProcessGroupNCCL's watchdog, Gloo's "Timed out waiting") beside
            # xccl's diagnosis naming the absent rank.
            assert "Watchdog caught collective operation timeout" in message, message
            assert "SeqNum=2, OpType=ALLREDUCE" in message, message
            assert " Timed out waiting " in message, message
            assert f"rank(s) {absent} (last entered #1" in message, message
            if HAS_ABORT_HOOKS:
                assert v["hooks"] == ["ran"], f"rank {o.rank}: {v['hooks']}"
        assert sorted(os.listdir(dump_dir)) == sorted(f"{PREFIX}{r}" for r in range(world_size))
        report = _analyze(dump_dir)
    assert "Not all ranks joining collective, sequence number: 2" in report, report
    assert "collective: xccl:all_reduce" in report, report
    assert f"missing ranks: {{{absent}}}" in report, report


def _calls(rank, world):
    from xccl.flight_recorder import flight_recorder_trace

    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    dist.all_reduce(x)
    gathered = [torch.empty(2, 3) for _ in range(world)]
    dist.all_gather(gathered, x)
    flat = torch.empty(world * 4, dtype=torch.float64)
    dist.all_gather_into_tensor(flat, torch.ones(4, dtype=torch.float64))
    peer = (rank + 1) % world
    if rank == 0:
        dist.send(torch.ones(5, dtype=torch.int32), peer)
    elif rank == 1:
        dist.recv(torch.empty(5, dtype=torch.int32), 0)
    dist.barrier()
    return flight_recorder_trace()


def test_entries_describe_every_call():
    traces = run(_calls, 2, timeout=60)
    for rank, trace in enumerate(traces):
        assert trace["version"] == "2.10"
        assert trace["pg_config"]["0"] == {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}
        entries = trace["entries"]
        names = [e["profiling_name"] for e in entries]
        p2p = ["xccl:send 0->1"] if rank == 0 else ["xccl:recv 1<-0"]
        want = ["xccl:all_reduce", "xccl:all_gather", "xccl:_all_gather_base", *p2p, "xccl:barrier"]
        assert names == want, names
        assert [e["record_id"] for e in entries] == list(range(len(entries)))
        assert [e["op_id"] for e in entries] == list(range(len(entries)))
        collectives = [e for e in entries if not e["is_p2p"]]
        assert [e["collective_seq_id"] for e in collectives] == [1, 2, 3, 4]
        reduce, gather, flat = collectives[:3]
        assert reduce["input_sizes"] == reduce["output_sizes"] == [[2, 3]]
        assert reduce["input_dtypes"] == ["Float"]
        assert gather["input_sizes"] == [[2, 3]] and gather["output_sizes"] == [[2, 3]] * 2
        assert flat["input_sizes"] == [[4]] and flat["output_sizes"] == [[8]]
        assert flat["output_dtypes"] == ["Double"]
        (point,) = [e for e in entries if e["is_p2p"]]
        assert point["p2p_seq_id"] == 1 and point["collective_seq_id"] == 3
        assert (point["input_sizes"], point["output_sizes"]) == (
            ([[5]], []) if rank == 0 else ([], [[5]])
        )
        for e in entries:
            assert e["state"] == "completed" and e["retired"], e
            assert e["process_group"] == ("0", "default_pg")
            assert e["time_created_ns"] <= e["time_discovered_started_ns"]
            assert e["time_discovered_started_ns"] <= e["time_discovered_completed_ns"]
            assert e["duration_ms"] >= 0 and e["timeout_ms"] == 60_000
            assert e["thread_name"] and int(e["thread_id"]) > 0
        status = trace["pg_status"]["0"]
        assert status == {
            "last_enqueued_collective": 4,
            "last_started_collective": 4,
            "last_completed_collective": 4,
        }


def _wrap(rank, world):
    from xccl.flight_recorder import flight_recorder_capacity, flight_recorder_trace

    for _ in range(12):
        dist.all_reduce(torch.ones(3))
    return flight_recorder_capacity(), flight_recorder_trace()["entries"]


def test_ring_keeps_the_last_entries():
    for capacity, entries in run(_wrap, 2, env={"TORCH_FR_BUFFER_SIZE": "5"}, timeout=60):
        assert capacity == 5
        assert [e["record_id"] for e in entries] == [7, 8, 9, 10, 11]
        assert [e["collective_seq_id"] for e in entries] == [8, 9, 10, 11, 12]


def _on_request(rank, world, dump_dir):
    import xccl
    from xccl.flight_recorder import flight_recorder_trace

    dist.all_reduce(torch.ones(3))
    explicit = xccl.dump_flight_recorder(os.path.join(dump_dir, "asked_"))
    default = xccl.dump_flight_recorder()  # TORCH_FR_DUMP_TEMP_FILE
    with open(explicit, "rb") as f:
        dumped = pickle.load(f)
    active = flight_recorder_trace(only_active=True)["entries"]
    # abort() writes one more dump (the default path) after its hooks.
    os.remove(default)
    _backend().abort()
    return explicit, default, dumped["entries"], active, os.path.exists(default)


def test_dump_on_request_and_on_abort():
    with tempfile.TemporaryDirectory(prefix="xccl-fr-") as dump_dir:
        env = {"TORCH_FR_DUMP_TEMP_FILE": os.path.join(dump_dir, "env_")}
        values = run(_on_request, 2, dump_dir, env=env, timeout=60)
    for rank, (explicit, default, entries, active, after_abort) in enumerate(values):
        assert explicit == os.path.join(dump_dir, f"asked_{rank}")
        assert default == os.path.join(dump_dir, f"env_{rank}")
        assert [e["profiling_name"] for e in entries] == ["xccl:all_reduce"]
        assert active == []  # only_active leaves completed operations out
        assert after_abort, f"rank {rank}: abort() wrote no dump"


def _unwritable(rank, world):
    import xccl

    results = [xccl.dump_flight_recorder() for _ in range(3)]
    x = torch.ones(4)
    dist.all_reduce(x)  # training goes on
    return results, x.tolist()


def test_unwritable_path_warns_once_and_training_continues():
    env = {"TORCH_FR_DUMP_TEMP_FILE": "/nonexistent-xccl-dir/sub/trace_"}
    outcomes = spawn(_unwritable, 2, env=env, timeout=60)
    assert all(o.ok for o in outcomes), describe(outcomes)
    for o in outcomes:
        results, values = o.value
        assert results == [None, None, None]
        assert values == [2.0] * 4
        assert o.log.count("could not write the flight recorder dump") == 1, o.log


def _off(rank, world, dump_dir):
    import xccl
    from xccl.flight_recorder import flight_recorder_capacity, flight_recorder_trace

    dist.all_reduce(torch.ones(3))
    trace = flight_recorder_trace()
    written = xccl.dump_flight_recorder()
    _backend().abort()
    return flight_recorder_capacity(), trace["entries"], written, os.listdir(dump_dir)


def test_size_zero_turns_the_recorder_off():
    with tempfile.TemporaryDirectory(prefix="xccl-fr-") as dump_dir:
        env = {"TORCH_FR_BUFFER_SIZE": "0", "TORCH_FR_DUMP_TEMP_FILE": f"{dump_dir}/off_"}
        for capacity, entries, written, files in run(_off, 2, dump_dir, env=env, timeout=60):
            assert (capacity, entries, written, files) == (0, [], None, [])


def _hooks(rank, world):
    ran = []

    def failing():
        ran.append("failing")
        raise RuntimeError("hook failure on purpose")

    backend = _backend()
    backend.register_abort_hook(1, failing)
    backend.register_abort_hook(2, lambda: ran.append("second"))
    backend.register_abort_hook(3, lambda: ran.append("removed"))
    backend.unregister_abort_hook(3)
    backend.abort()
    backend.abort()  # hooks run at most once
    return ran


@pytest.mark.skipif(not HAS_ABORT_HOOKS, reason="this torch has no Backend.register_abort_hook")
def test_abort_hooks_run_once_and_their_errors_are_logged():
    outcomes = spawn(_hooks, 2, timeout=60)
    assert all(o.ok for o in outcomes), describe(outcomes)
    for o in outcomes:
        assert o.value == ["failing", "second"], o.value
        assert "abort hook 1 raised (ignored)" in o.log, o.log
        assert "hook failure on purpose" in o.log, o.log


def _wait_times_out(rank, world):
    from xccl.flight_recorder import flight_recorder_trace

    store = dist.distributed_c10d._get_default_store()
    if rank == 1:  # never sends; stays until rank 0 has looked
        store.wait(["looked"], timedelta(seconds=60))
        return None
    work = dist.irecv(torch.empty(3), src=1)
    try:
        work.wait(timedelta(milliseconds=300))
        message = None
    except Exception as e:  # noqa: BLE001 - the point of the test
        message = str(e)
    (entry,) = flight_recorder_trace()["entries"]
    store.set("looked", "1")
    return message, entry["profiling_name"], entry["state"], entry["retired"]


def test_wait_timeout_has_torch_wording_and_leaves_the_recv_started():
    message, name, state, retired = run(_wait_times_out, 2, timeout=60)[0]
    assert message is not None and "Timed out waiting 300ms" in message, message
    assert (name, state, retired) == ("xccl:recv 0<-1", "started", False)


def _subgroup(rank, world):
    from xccl.flight_recorder import flight_recorder_trace

    group = dist.new_group([1, 2])
    if rank in (1, 2):
        dist.all_reduce(torch.ones(2), group=group)
    return flight_recorder_trace()


def test_subgroup_entries_name_their_group_and_global_ranks():
    for rank, trace in enumerate(run(_subgroup, 3, timeout=60)):
        if rank == 0:
            assert trace["entries"] == []
            continue
        (entry,) = trace["entries"]
        name, desc = entry["process_group"]
        assert trace["pg_config"][name] == {"name": name, "desc": desc, "ranks": "[1, 2]"}
        assert entry["profiling_name"] == "xccl:all_reduce"
        assert entry["collective_seq_id"] == 1


def _planted_symlink(rank, world, dump_dir):
    import xccl

    dist.all_reduce(torch.ones(3))
    prefix = os.path.join(dump_dir, "trace_")
    path = f"{prefix}{rank}"
    # The temporary name a dump used to take (".tmp" + pid), planted as a symlink to a file of
    # ours: following it would overwrite that file with the dump.
    victim = os.path.join(dump_dir, f"victim_{rank}")
    with open(victim, "w") as f:
        f.write("keep me")
    planted = f"{path}.tmp{os.getpid()}"
    os.symlink(victim, planted)
    written = xccl.dump_flight_recorder(prefix)
    with open(victim, "rb") as f:
        victim_text = f.read()
    with open(path, "rb") as f:
        entries = pickle.load(f)["entries"]
    return {
        "written": written,
        "victim": victim_text,
        "still a link to it": os.path.islink(planted) and os.readlink(planted) == victim,
        "mode": oct(os.stat(path).st_mode & 0o777),
        "regular file": os.path.isfile(path) and not os.path.islink(path),
        "entries": [e["profiling_name"] for e in entries],
        "left": sorted(n for n in os.listdir(dump_dir) if n.startswith(f"trace_{rank}.tmp")),
        "planted": os.path.basename(planted),
    }


def test_dump_never_follows_a_planted_symlink_and_is_private():
    with tempfile.TemporaryDirectory(prefix="xccl-fr-") as dump_dir:
        values = run(_planted_symlink, 2, dump_dir, timeout=60)
    for rank, v in enumerate(values):
        assert v["written"] == os.path.join(dump_dir, f"trace_{rank}"), v
        assert v["victim"] == b"keep me", f"rank {rank}: the link's target was overwritten"
        assert v["still a link to it"], v
        assert v["mode"] == "0o600", v
        assert v["regular file"] and v["entries"] == ["xccl:all_reduce"], v
        # Only the planted link remains: no temporary file of ours is left behind.
        assert v["left"] == [v["planted"]], v


def _burst(rank, world):
    from xccl import _C

    dist.all_reduce(torch.ones(3))
    # What every peer's status query does after its timeout: 30 queries in a burst.
    taken = [_C._flight_recorder_request_write(2.0) for _ in range(30)]
    dist.barrier()
    return taken


def test_peer_requests_write_at_most_one_dump_per_interval():
    with tempfile.TemporaryDirectory(prefix="xccl-fr-") as dump_dir:
        env = {"TORCH_FR_DUMP_TEMP_FILE": f"{dump_dir}/burst_", "XCCL_LOG_LEVEL": "info"}
        outcomes = spawn(_burst, 2, env=env, timeout=120)
        assert all(o.ok for o in outcomes), describe(outcomes)
        for o in outcomes:
            assert o.value == [True] + [False] * 29, f"rank {o.rank}: {o.value}"
            assert o.log.count("flight recorder dump written to") == 1, o.log[-3000:]
            assert os.path.exists(f"{dump_dir}/burst_{o.rank}")


def _default_dump(rank, world, xdg):
    """A dump to the default prefix, with HOME unset (and XDG_CACHE_HOME as `xdg`, or unset)."""
    import shutil
    import stat

    import xccl
    from xccl import files

    # os.environ's pop unsets the variable for the C++ side too, which reads it at each dump.
    for name in ("HOME", "XDG_CACHE_HOME", "TORCH_FR_DUMP_TEMP_FILE"):
        os.environ.pop(name, None)
    os.environ.pop("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", None)
    if xdg:
        os.environ["XDG_CACHE_HOME"] = xdg
    dist.all_reduce(torch.ones(3))
    path = xccl.dump_flight_recorder()
    folder = os.path.dirname(path)
    found = {
        "path": path,
        "problem": files.folder_problem(folder),
        "mode": oct(stat.S_IMODE(os.lstat(folder).st_mode)),
        "again": xccl.dump_flight_recorder(),  # the same folder, no second warning
    }
    os.remove(path)
    if os.path.basename(folder).startswith("xccl-flight-recorder-"):
        shutil.rmtree(folder)
    return found


def test_default_dump_folder_without_home_is_the_users_own_not_a_shared_one():
    import pwd

    (found,) = run(_default_dump, 1, "", timeout=60)
    home = pwd.getpwuid(os.geteuid()).pw_dir
    # torch's fallback, /tmp/.cache/torch, is a folder any user could have made first.
    assert found["path"] == f"{home}/.cache/torch/comm_lib_trace_rank_0", found
    assert found["problem"] == "" and found["again"] == found["path"], found


@pytest.mark.parametrize("how", ["another user's", "world-writable"])
def test_default_dump_folder_not_the_users_alone_gives_a_private_one(how):
    if how == "another user's" and os.geteuid() != 0:
        pytest.skip("only root can give a folder away")
    with tempfile.TemporaryDirectory(prefix="xccl-fr-") as shared:
        planted = os.path.join(shared, "torch")
        os.mkdir(planted)
        if how == "world-writable":
            os.chmod(planted, 0o777)
            why = "is writable by its group or others (mode 0777)"
        else:
            os.chown(planted, 65534, 65534)
            why = "is owned by uid 65534, not by this user"
        outcomes = spawn(_default_dump, 1, shared, timeout=60)
        assert all(o.ok for o in outcomes), describe(outcomes)
        found, log = outcomes[0].value, outcomes[0].log
        assert os.listdir(planted) == [], "a dump went into the planted folder"
    folder = os.path.dirname(found["path"])
    assert os.path.basename(folder).startswith("xccl-flight-recorder-"), found
    assert found["problem"] == "" and found["mode"] == "0o700", found
    assert found["again"] == found["path"], found
    assert log.count("dumps go to the private folder") == 1, log[-3000:]
    assert f"default folder {planted} {why}" in log, log[-3000:]
