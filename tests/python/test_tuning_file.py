"""The tuning table file (python/xccl/tuning.py, docs/tuning.md): its round trip, its parse as
hostile input (a bad file is "no table" with one warning, never an exception), the machine it is
tied to, XCCL_TUNING, the tuner's override, and where users see it (plan, env, doctor)."""

import copy
import json
import os
import warnings

import pytest

pytest.importorskip("xccl._C")
from xccl import cli, tuning  # after the skip: the fingerprint names xccl's and torch's versions
from xccl.doctor import checks

WORLD = {"size": 2, "hosts": 1, "locality": "one_host"}
MACHINE = {
    "topology": "ab" * 32,
    "cpu_model": "Test CPU 9000",
    "cores": 2,
    "gpu_model": "",
    "driver": "",
    "nics": "eth0 25000Mb/s",
    "xccl": "0.1.0",
    "torch": "2.14.1",
}


def cpu_entry(**changes):
    entry = {
        "collective": "all_reduce",
        "min_bytes": 0,
        "max_bytes": 65536,
        "route": "shm",
        "algorithm": "two_shot",
        "ring_chunk_bytes": 0,
        "tuned_us": 12.5,
        "rule_us": 15.25,
        "rule": "shm one_shot",
    }
    entry.update(changes)
    return entry


def gpu_entry(**changes):
    entry = {
        "collective": "all_gather",
        "min_bytes": 4096,
        "max_bytes": None,
        "route": "vendor",
        "kernel": "none",
        "tuned_us": 80.0004,
        "rule_us": 0,
    }
    entry.update(changes)
    return entry


MEASURED = {
    "collective": "all_reduce",
    "bytes": 65536,
    "candidate": "shm_two_shot",
    "median_us": 12.5,
    "p10_us": 12.1,
    "p90_us": 13.0,
    "verified": True,
}


def fixed_table():
    """A table with a made-up machine (what another machine's file looks like)."""
    ring = cpu_entry(
        min_bytes=65536, max_bytes=None, route="tcp", algorithm="ring", ring_chunk_bytes=524288
    )
    return {
        "format": "xccl-tuning",
        "version": 1,
        "created": "2026-12-03T19:00:00Z",
        "command": "python -m xccl tune --device cpu --nranks 2 --quick",
        "machine": dict(MACHINE),
        "world": dict(WORLD),
        "cpu": {
            "machine": dict(MACHINE),
            "entries": [cpu_entry(), ring],
            "measured": [dict(MEASURED)],
        },
        "gpu": {
            "machine": dict(MACHINE, gpu_model="H100"),
            "entries": [gpu_entry()],
            "measured": [],
        },
    }


def write(path, table, **dump):
    path.write_text(json.dumps(table, **dump) if not isinstance(table, str) else table)
    return str(path)


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """No table file, no switches, no warnings remembered from other tests."""
    for name in ("XCCL_TUNING", "XCCL_TUNING_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XCCL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(tuning, "_warned", set())
    return tmp_path


def this_machine_table(entries=None, device="cpu", world=WORLD):
    return tuning.new_table(device, world, entries or [cpu_entry()], "test", [dict(MEASURED)])


# ---------------------------------------------------------------------------------------------
# Round trip


def test_save_load_and_the_canonical_text(tmp_path):
    path = str(tmp_path / "sub" / "t.json")
    tuning.save(path, fixed_table())
    table, why = tuning.load(path)
    assert why == "" and table == fixed_table()
    assert [n for n in os.listdir(tmp_path / "sub")] == ["t.json"]  # no temporary left
    assert tuning.canonical(table) == (
        "xccl-tuning 1\n"
        "world 2 1 one_host\n"
        "cpu all_reduce 0 65536 shm two_shot 0 12500 15250\n"
        "cpu all_reduce 65536 inf tcp ring 524288 12500 15250\n"
        "gpu all_gather 4096 inf vendor none 80000 0\n"
    )


def test_new_table_is_this_machines_and_refuses_what_load_would(clean):
    table = this_machine_table()
    assert table["cpu"]["machine"] == tuning.fingerprint("cpu") == table["machine"]
    assert table["gpu"] is None and table["world"] == WORLD
    assert table["cpu"]["machine"]["cores"] == os.cpu_count()
    with pytest.raises(ValueError, match=r"entries\[0\]\.route"):
        this_machine_table([cpu_entry(route="nvlink")])
    with pytest.raises(ValueError, match="device must be"):
        tuning.new_table("tpu", WORLD, [], "test", [])


# ---------------------------------------------------------------------------------------------
# Hostile files: (None, why), never an exception


def entry0(table):
    return table["cpu"]["entries"][0]


HOSTILE = {
    "wrong format": (lambda t: t.update(format="xccl-stamp"), "not an xccl-tuning"),
    "version as text": (lambda t: t.update(version="1"), "version '1'"),
    "version as bool": (lambda t: t.update(version=True), "version True"),
    "future version": (lambda t: t.update(version=2), "version 2"),
    "negative bytes": (lambda t: entry0(t).update(min_bytes=-1), "min_bytes"),
    "2^64 bytes": (lambda t: entry0(t).update(max_bytes=1 << 64), "max_bytes"),
    "bytes as text": (lambda t: entry0(t).update(min_bytes="0"), "min_bytes"),
    "bytes as float": (lambda t: entry0(t).update(min_bytes=1.0), "min_bytes"),
    "bytes as bool": (lambda t: entry0(t).update(min_bytes=False), "min_bytes"),
    "empty range": (lambda t: entry0(t).update(max_bytes=0), "not above min_bytes"),
    "small chunk": (lambda t: entry0(t).update(ring_chunk_bytes=4095), "ring_chunk_bytes"),
    "huge chunk": (lambda t: entry0(t).update(ring_chunk_bytes=(1 << 30) + 1), "ring_chunk"),
    "chunk as null": (lambda t: entry0(t).update(ring_chunk_bytes=None), "ring_chunk_bytes"),
    "NaN time": (lambda t: entry0(t).update(tuned_us=float("nan")), "tuned_us"),
    "infinite time": (lambda t: entry0(t).update(rule_us=float("inf")), "rule_us"),
    "negative time": (lambda t: entry0(t).update(tuned_us=-1), "tuned_us"),
    "time as text": (lambda t: entry0(t).update(tuned_us="12"), "tuned_us"),
    "unknown collective": (lambda t: entry0(t).update(collective="allreduce"), "collective"),
    "unknown route": (lambda t: entry0(t).update(route="nvlink"), "route"),
    "unknown algorithm": (lambda t: entry0(t).update(algorithm="tree"), "algorithm"),
    "gpu name in cpu": (lambda t: entry0(t).update(algorithm="all_pairs"), "algorithm"),
    "unknown locality": (lambda t: t["world"].update(locality="two_hosts"), "locality"),
    "more hosts than ranks": (lambda t: t["world"].update(hosts=3), "world.hosts"),
    "empty world": (lambda t: t["world"].update(size=0), "world.size"),
    "kernel route without kernel": (
        lambda t: t["gpu"]["entries"][0].update(route="kernel"),
        "kernel is none exactly when",
    ),
    "overlapping ranges": (lambda t: entry0(t).update(max_bytes=65537), "overlap"),
    "4097 entries": (
        lambda t: t["cpu"].update(
            entries=[cpu_entry(min_bytes=i, max_bytes=i + 1) for i in range(4097)]
        ),
        "4097 items",
    ),
    "4097 entries in all": (
        lambda t: (
            t["cpu"].update(entries=[cpu_entry(min_bytes=i, max_bytes=i + 1) for i in range(4000)]),
            t["gpu"].update(entries=[gpu_entry(min_bytes=i, max_bytes=i + 1) for i in range(97)]),
        ),
        "4097 entries, at most 4096",
    ),
    "entries not a list": (lambda t: t["cpu"].update(entries={}), "must be a list"),
    "entry not an object": (lambda t: t["cpu"]["entries"].append(7), "must be an object"),
    "missing field": (lambda t: entry0(t).pop("route"), "missing route"),
    "unknown field": (lambda t: entry0(t).update(blocks=8), "unknown blocks"),
    "machine field missing": (lambda t: t["cpu"]["machine"].pop("nics"), "missing nics"),
    "negative cores": (lambda t: t["machine"].update(cores=-2), "cores"),
    "huge text": (lambda t: t.update(command="x" * 5000), "command"),
    "measured not verified flag": (
        lambda t: t["cpu"]["measured"][0].update(verified="yes"),
        "verified",
    ),
    "no sections": (lambda t: t.update(cpu=None, gpu=None), "neither"),
    "top level list": (lambda t: None, None),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_field_is_refused_with_the_reason(tmp_path, case):
    change, expected = HOSTILE[case]
    table = fixed_table()
    if expected is None:
        table = [table]
        expected = "must be an object"
    else:
        change(table)
    path = write(tmp_path / "t.json", table)  # json writes NaN and Infinity as such
    loaded, why = tuning.load(path)
    assert loaded is None
    assert path in why and expected in why, why


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", "not JSON"),
        (b"{", "not JSON"),
        (b"\xff\xfe{}", "not JSON"),  # not UTF-8
        (b"[" * 100000 + b"]" * 100000, "not JSON"),  # nesting past the parser's recursion
        (b'{"version": ' + b"9" * 5000 + b"}", "not JSON"),  # digits past Python's int limit
        (b" " * (4 << 20) + b"{}", "over 4194304 bytes"),
    ],
)
def test_a_file_that_is_not_a_table_is_refused(tmp_path, content, expected):
    path = tmp_path / "t.json"
    path.write_bytes(content)
    loaded, why = tuning.load(str(path))
    assert loaded is None and expected in why and str(path) in why


def test_a_folder_or_nothing_is_no_table(tmp_path):
    assert tuning.load(str(tmp_path)) == (
        None,
        f"{tmp_path} is not a tuning table (not a regular file: a directory)",
    )
    assert tuning.load(str(tmp_path / "none.json")) == (None, f"no table at {tmp_path}/none.json")


# ---------------------------------------------------------------------------------------------
# The machine and the switches


def test_check_machine_names_each_differing_field():
    table = fixed_table()
    fps = {"cpu": dict(MACHINE), "gpu": dict(MACHINE, gpu_model="H100")}
    assert tuning.check_machine(table, fps) == ""
    fps["cpu"].update(cpu_model="Other CPU", cores=64)
    reason = tuning.check_machine(table, fps)
    assert reason.startswith("cpu: ") and "gpu" not in reason
    assert "cpu_model differs: 'Test CPU 9000' in the table, 'Other CPU' here" in reason
    assert "cores differs: 2 in the table, 64 here" in reason
    fps["gpu"].update(driver="570.86.15")
    assert "gpu: driver differs: '' in the table, '570.86.15' here" in tuning.check_machine(
        table, fps
    )
    assert tuning.check_machine(table, {"gpu": dict(MACHINE, gpu_model="H100")}) == ""


def test_source_follows_the_file_and_refuses_another_machines_once(clean, monkeypatch):
    path = tuning.default_path()
    assert path == os.path.join(str(clean / "cache"), "tuning.json")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tuning.source() == ("", f"no table at {path}")  # absence is normal: no warning
        table = this_machine_table()
        tuning.save(path, table)
        assert tuning.source() == (tuning.canonical(table), f"table {path}")
        assert caught == []
        foreign = copy.deepcopy(table)
        foreign["cpu"]["machine"]["cpu_model"] = "Another CPU"
        tuning.save(path, foreign)
        for _ in range(3):
            text, why = tuning.source()
            assert text == "" and why.startswith(f"ignored {path}: made on another machine")
            assert "cpu_model differs: 'Another CPU' in the table" in why
    assert len(caught) == 1  # once per process per (file, reason)
    assert path in str(caught[0].message) and "cpu_model differs" in str(caught[0].message)


def test_a_named_file_that_is_missing_is_warned_about(clean, monkeypatch):
    missing = str(clean / "nowhere.json")
    monkeypatch.setenv("XCCL_TUNING_FILE", missing)
    with pytest.warns(UserWarning, match=f"not used: no table at {missing}; the rules plan"):
        assert tuning.source() == ("", f"no table at {missing}")
    assert [c.status for c in checks.check_tuning()] == ["WARN"]


def test_a_corrupt_file_is_the_rules_with_one_warning(clean, monkeypatch):
    path = write(clean / "t.json", '{"format": "xccl-tuning", "version": 1')
    monkeypatch.setenv("XCCL_TUNING_FILE", path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tuning.source() == ("", f"{path} is not a tuning table (not JSON)")
        assert tuning.source()[0] == ""
    assert [str(w.message) for w in caught] == [
        f"xccl: tuning table not used: {path} is not a tuning table (not JSON); the rules plan"
    ]


@pytest.mark.parametrize("value", ["off", "0", "False", "no"])
def test_xccl_tuning_off_ignores_a_good_table(clean, monkeypatch, value):
    tuning.save(tuning.default_path(), this_machine_table())
    monkeypatch.setenv("XCCL_TUNING", value)
    assert tuning.source() == ("", f"XCCL_TUNING={value}")
    assert tuning.describe() == f"no table (XCCL_TUNING={value})"
    monkeypatch.setenv("XCCL_TUNING", "on")
    assert tuning.source()[0].startswith("xccl-tuning 1\n")
    monkeypatch.setenv("XCCL_TUNING", "maybe")
    with pytest.warns(UserWarning, match="XCCL_TUNING=maybe is not a boolean"):
        assert tuning.source()[0] == ""


def test_override_replaces_the_file_while_active(clean):
    tuning.save(tuning.default_path(), this_machine_table())
    from_file = tuning.source()
    text = "xccl-tuning 1\nworld 2 1 one_host"
    with tuning.override(text):
        assert tuning.source() == (text, "set by xccl.tune")
        with tuning.override(None):
            assert tuning.source() == ("", "set by xccl.tune")
        assert tuning.source() == (text, "set by xccl.tune")
    assert tuning.source() == from_file


def test_only_the_tuners_candidate_groups_run_unverified_kernels(clean, monkeypatch):
    from xccl import verify

    monkeypatch.setattr(verify, "_this_machine", lambda: (False, "no stamp"))
    text = "xccl-tuning 1\nworld 2 1 one_host"
    assert verify.kernels_verified() == (False, "no stamp")
    with tuning.override(text, kernels_under_test=True):
        verified, why = verify.kernels_verified()
        assert verified and "python -m xccl tune" in why
        with tuning.override(""):  # the rules' group inside: the machine's verdict again
            assert verify.kernels_verified() == (False, "no stamp")
    with tuning.override(text):
        assert verify.kernels_verified() == (False, "no stamp")
    assert not verify.kernels_trusted()


def test_save_keeps_the_other_devices_section_only_for_the_same_machine_and_world(clean):
    path = tuning.default_path()
    cpu = this_machine_table()
    gpu = this_machine_table([gpu_entry()], device="cuda")
    tuning.save(path, cpu)
    tuning.save(path, gpu)
    both, _ = tuning.load(path)
    assert both["cpu"] == cpu["cpu"] and both["gpu"] == gpu["gpu"]
    assert tuning.source()[0].endswith("\ngpu all_gather 4096 inf vendor none 80000 0\n")
    tuning.save(path, this_machine_table(world={"size": 4, "hosts": 1, "locality": "one_host"}))
    assert tuning.load(path)[0]["gpu"] is None  # another world: replaced
    tuning.save(path, gpu)
    elsewhere = this_machine_table()
    elsewhere["machine"] = dict(elsewhere["machine"], nics="eth9")
    elsewhere["cpu"]["machine"] = elsewhere["machine"]
    tuning.save(path, elsewhere)
    assert tuning.load(path)[0]["gpu"] is None  # another machine: replaced


# ---------------------------------------------------------------------------------------------
# Where users see it


def test_env_and_doctor_say_which_table_is_in_force(clean, monkeypatch, capsys):
    assert cli.main(["env", "--platform", "cpu"]) == 0
    path = tuning.default_path()
    assert f"\ntuning: no table (no table at {path})\n" in capsys.readouterr().out
    assert [c.status for c in checks.check_tuning()] == ["PASS"]
    tuning.save(path, this_machine_table())
    assert cli.main(["env", "--json", "--platform", "cpu"]) == 0
    line = json.loads(capsys.readouterr().out)["tuning"]
    assert line.startswith(f"table {path} made ") and "world 2/1/one_host (cpu 1 entries)" in line
    write(clean / "cache" / "tuning.json", fixed_table())  # another machine's
    (check,) = checks.check_tuning()
    assert check.status == "WARN" and "made on another machine" in check.message


def test_plan_refuses_a_bad_table_without_a_traceback(clean, capsys):
    path = write(clean / "t.json", dict(fixed_table(), version=7))
    assert cli.main(["plan", "--device", "cpu", "--world", "2", "--tuning", path]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"xccl plan: {path} is not a valid tuning table (version 7")
    assert "Traceback" not in err


def test_a_section_made_elsewhere_is_dropped_and_the_other_plans(clean, monkeypatch):
    path = tuning.default_path()
    table = this_machine_table()
    table["gpu"] = {
        "machine": dict(table["machine"], gpu_model="H100"),
        "entries": [gpu_entry()],
        "measured": [],
    }
    tuning.save(path, table)
    with pytest.warns(UserWarning, match="used in part: .*gpu: gpu_model differs: 'H100' in the"):
        text, why = tuning.source()
    assert text == tuning.canonical(table, ["cpu"]) and "gpu all_gather" not in text
    assert why.startswith(f"table {path} without its section made on another machine (gpu: ")
    assert "(cpu 1 entries, gpu 0 entries)" in tuning.describe()


def test_plan_marks_each_row_tuned_or_rule_with_the_measured_times(clean, capsys):
    path = str(clean / "t.json")
    tuning.save(path, this_machine_table())  # all_reduce below 64 KiB: shm two_shot
    argv = ["plan", "--device", "cpu", "--world", "2", "--tuning", path, "1K", "1M"]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == ["collective", "bytes", "route", "algorithm", "decision", "reason"]
    rows = {
        tuple(line.split()[:3]): line.split()
        for line in lines[2:]
        if "KiB" in line or "MiB" in line
    }
    small, large = rows[("all_reduce", "1", "KiB")], rows[("all_reduce", "1", "MiB")]
    assert small[3:6] == ["shm", "two_shot", "tuned"]
    assert lines[2 + [line.split()[:3] for line in lines[2:]].index(list(small[:3]))].endswith(
        "; 12.5 us vs rule 15.2 us, gain +22%"
    )
    assert large[5] == "rule" and "gain" not in " ".join(large)
    assert rows[("broadcast", "1", "KiB")][5] == "rule"  # no entry for it
    assert lines[-1].startswith(f"tuning table {path}: made ") and "2/1/one_host" in lines[-1]
    assert cli.main(["plan", "--device", "cpu", "--tuning", path, "1K"]) == 0  # the table's world
    assert capsys.readouterr().out.startswith("xccl plan: cpu, 2 ranks on 1 host,")
    assert cli.main(["plan", "--device", "cpu", "--world", "4", "--tuning", path, "1K"]) == 2
    assert "table for world 2/1/one_host, group is 4/1/one_host" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# Registered with the backend: each rank's file is read at group creation, rank 0's wins


def _rank_zeros_file_wins(rank: int, world: int, folder: str):
    import torch
    import torch.distributed as dist
    from rank_checks import Checker, result
    from xccl import _C

    chk = Checker(rank)
    cpu = torch.device("cpu")
    default = dist.distributed_c10d._get_default_group()._get_backend(cpu)
    locality = "one_host" if default.transport == "shm" else "none"
    good, bad = os.path.join(folder, "good.json"), os.path.join(folder, f"bad{rank}.json")
    if rank == 0:
        ring = cpu_entry(max_bytes=None, route="tcp", algorithm="ring", ring_chunk_bytes=8192)
        shape = {"size": world, "hosts": 1, "locality": locality}
        tuning.save(good, tuning.new_table("cpu", shape, [ring], "test", []))
    with open(bad, "w", encoding="utf-8") as f:
        f.write("{not json")
    dist.barrier()
    os.environ["XCCL_TUNING_FILE"] = good if rank == 0 else bad
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        group = dist.new_group(backend="xccl")
    text, why = _C._tuning_in_force(group._get_backend(cpu))
    chk.equal(
        "rank 0's table", (text, why), (tuning.canonical(tuning.load(good)[0]), "rank 0's table")
    )
    chk.equal("warned about its own file", len(caught), 0 if rank == 0 else 1)
    x = torch.ones(1000)
    dist.all_reduce(x, group=group)
    chk.equal("all_reduce on the tuned ring", x, torch.full((1000,), float(world)))
    if rank == 0:
        os.environ["XCCL_TUNING"] = "off"
    group = dist.new_group(backend="xccl")
    chk.equal("rank 0 off", _C._tuning_in_force(group._get_backend(cpu))[0], "")
    return result(chk)


def test_every_rank_follows_the_table_in_rank_zeros_file(tmp_path):
    from dist_harness import run_checks

    run_checks(
        _rank_zeros_file_wins, 2, str(tmp_path), min_checks=4, env={"XCCL_CACHE_DIR": str(tmp_path)}
    )
