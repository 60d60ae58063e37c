"""Files a user or anyone with access to a folder may have written (python/xccl/files.py): the
kernel stamp, the tuning table and a topology file are read only when they are regular files, no
FIFO (which would block a group's creation forever), no link, no device, no folder, within their
cap; and xccl's default cache folder is the user's own, else a private one with a warning, never
relative to the working directory nor one another user made or can write."""

import json
import os
import pwd
import shutil
import stat
import threading
import time

import pytest
from xccl import files, topo, tuning, verify

IS_ROOT = os.geteuid() == 0
NOBODY = 65534


def promptly(call, fifo: str, bound: float = 5.0):
    """call()'s value (or exception) from a thread. A call still running after `bound` seconds is
    blocked on the FIFO: a writer then opens it so the call returns, and the test fails (an
    unfixed reader shows up as a failure, not as a hung test run)."""
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except Exception as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(bound)
    blocked = thread.is_alive()
    if blocked:  # release the reader: a writer's open() ends a reader's blocked open()
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(bound)
    assert not blocked, f"reading the FIFO {fifo} blocked for {bound} s; it must be refused"
    assert time.monotonic() - started < bound
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def make_fifo(tmp_path, name="fifo"):
    path = str(tmp_path / name)
    os.mkfifo(path, 0o600)
    return path


def stamp_key():
    return {field: "x" for field in verify.KEY_FIELDS}


# ---------------------------------------------------------------------------------------------
# Reading


def test_a_fifo_as_the_stamp_is_refused_promptly(tmp_path):
    fifo = make_fifo(tmp_path, verify.STAMP_NAME)
    ok, why, damaged = promptly(lambda: verify.check_stamp(fifo, stamp_key()), fifo)
    assert (ok, damaged) == (False, True)
    assert why == f"the stamp {fifo} is not valid (not a regular file: a FIFO)", why


def test_a_fifo_as_the_tuning_table_is_refused_promptly(tmp_path):
    fifo = make_fifo(tmp_path, "tuning.json")
    table, why = promptly(lambda: tuning.load(fifo), fifo)
    assert table is None
    assert why == f"{fifo} is not a tuning table (not a regular file: a FIFO)", why


def test_a_fifo_as_a_topology_file_is_refused_promptly(tmp_path):
    fifo = make_fifo(tmp_path, "topo.json")
    with pytest.raises(ValueError, match="not a regular file: a FIFO"):
        promptly(lambda: topo.read_file(fifo), fifo)
    # The C++ reader (XCCL_TOPO_FILE, xccl plan --topo) the same.
    from xccl import _native

    with pytest.raises(ValueError, match=r"topology file .*: not a regular file \(a FIFO\)"):
        promptly(lambda: _native.load_file(fifo), fifo)


def test_a_link_is_never_followed(tmp_path):
    real = tmp_path / "real.json"
    real.write_text(json.dumps({"format": verify.STAMP_FORMAT}))
    link = tmp_path / verify.STAMP_NAME
    link.symlink_to(real)
    ok, why, damaged = verify.check_stamp(str(link), stamp_key())
    assert (ok, damaged) == (False, True)
    assert "not a regular file: a symbolic link, which is not followed" in why, why
    table, why = tuning.load(str(link))
    assert table is None and "symbolic link" in why, why
    with pytest.raises(ValueError, match="symbolic link"):
        files.read_capped(str(link), 100)


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda tmp_path: str(tmp_path), "a directory"),
        (lambda tmp_path: "/dev/null", "a character device"),
    ],
)
def test_what_is_not_a_regular_file_is_refused_naming_its_kind(tmp_path, make, kind):
    with pytest.raises(ValueError, match=f"^not a regular file: {kind}$"):
        files.read_capped(make(tmp_path), 100)


def test_the_cap_is_exact_and_a_missing_file_is_file_not_found(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert files.read_capped(str(path), 100) == b"x" * 100
    with pytest.raises(ValueError, match="^over 99 bytes$"):
        files.read_capped(str(path), 99)
    with pytest.raises(FileNotFoundError):
        files.read_capped(str(tmp_path / "none"), 100)
    table, why = tuning.load(str(tmp_path / "none"))
    assert table is None and why == f"no table at {tmp_path}/none"


# ---------------------------------------------------------------------------------------------
# The default cache folder


@pytest.fixture
def no_home(monkeypatch):
    """HOME, XDG_CACHE_HOME and XCCL_CACHE_DIR unset; no private folder made yet."""
    for name in ("HOME", "XDG_CACHE_HOME", "XCCL_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    made = []
    monkeypatch.setattr(verify, "_private_dir", made, raising=False)
    yield
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def assert_private(folder: str):
    assert os.path.isabs(folder), folder
    st = os.lstat(folder)
    assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid(), folder
    assert stat.S_IMODE(st.st_mode) == 0o700, oct(st.st_mode)


def test_without_a_home_the_cache_folder_is_private_never_relative(no_home, monkeypatch):
    def no_entry(uid):
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.warns(UserWarning, match=r"no home folder .*using the private folder"):
        folder = verify.cache_dir()
    assert_private(folder)
    assert verify.cache_dir() == folder  # one per process
    assert os.path.dirname(verify.stamp_path()) == folder
    assert os.path.dirname(tuning.default_path()) == folder


def test_with_home_unset_the_cache_folder_is_the_users_own(no_home):
    folder = verify.cache_dir()
    assert os.path.isabs(folder), folder
    home = pwd.getpwuid(os.geteuid()).pw_dir
    assert folder == os.path.join(home, ".cache", "xccl")
    assert files.folder_problem(folder) == ""


def test_a_relative_xdg_cache_home_is_ignored(no_home, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert verify.cache_dir() == str(tmp_path / ".cache" / "xccl")


def planted(tmp_path, how: str) -> str:
    cache = tmp_path / "cache"
    cache.mkdir()
    folder = cache / "xccl"
    if how == "a link":
        (tmp_path / "elsewhere").mkdir()
        folder.symlink_to(tmp_path / "elsewhere")
    else:
        folder.mkdir()
        if how == "world-writable":
            folder.chmod(0o777)
        else:
            os.chown(folder, NOBODY, NOBODY)
    return str(cache)


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("a link", "is a symbolic link"),
        ("world-writable", r"is writable by its group or others \(mode 0777\)"),
        pytest.param(
            "another user's",
            f"is owned by uid {NOBODY}, not by this user",
            marks=pytest.mark.skipif(not IS_ROOT, reason="only root can give a folder away"),
        ),
    ],
)
def test_a_cache_folder_not_the_users_alone_is_replaced_by_a_private_one(
    no_home, monkeypatch, tmp_path, how, why
):
    monkeypatch.setenv("XDG_CACHE_HOME", planted(tmp_path, how))
    with pytest.warns(UserWarning, match=f"cache folder {tmp_path}/cache/xccl {why}"):
        folder = verify.cache_dir()
    assert_private(folder)
    assert not folder.startswith(str(tmp_path))


def test_an_explicit_cache_folder_is_kept_as_given(no_home, monkeypatch, tmp_path):
    monkeypatch.setenv("XCCL_CACHE_DIR", planted(tmp_path, "world-writable") + "/xccl")
    assert verify.cache_dir() == f"{tmp_path}/cache/xccl"


def test_the_writer_rechecks_the_default_folder_and_replaces_a_planted_link(
    no_home, monkeypatch, tmp_path
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = verify.cache_dir()  # not there yet: fine, made 0700 by the writer
    verify.write_json_atomically(os.path.join(folder, "t.json"), {"a": 1}, ".t-")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(os.path.join(folder, "t.json")).st_mode) == 0o600
    # A link planted at the file's name is replaced, its target untouched.
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    os.symlink(victim, os.path.join(folder, "u.json"))
    verify.write_json_atomically(os.path.join(folder, "u.json"), {"b": 2}, ".t-")
    assert victim.read_text() == "keep me"
    assert not os.path.islink(os.path.join(folder, "u.json"))
    # The folder swapped for a link after cache_dir chose it: nothing written.
    os.rename(folder, str(tmp_path / "moved"))
    os.symlink(tmp_path / "moved", folder)
    with pytest.raises(PermissionError, match="is a symbolic link"):
        verify.write_json_atomically(os.path.join(folder, "v.json"), {"c": 3}, ".t-")
    assert not os.path.exists(tmp_path / "moved" / "v.json")
