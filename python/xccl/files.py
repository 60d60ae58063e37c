"""Files a user or anyone with access to a folder may have written, and the folders xccl chooses by
default for what it writes (the C++ side's rule is csrc/common/files.h).

A named file (the kernel stamp, the tuning table, a topology file) is read only through
``read_capped``: a FIFO would block ``open()`` with no timeout (the stamp and the table are read
at every group's creation), a device, directory or socket is no file of ours, a symbolic link at
the last component would make every check about another file, and an unbounded read of a hostile
file would take the memory.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
import tempfile
from collections.abc import Mapping

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link, which is not followed"),
        (stat.S_ISREG, "a regular file"),
    ):
        if test(mode):
            return name
    return "of an unknown kind"


def read_capped(path: str, limit: int) -> bytes:
    """The bytes of the regular file at `path`, at most `limit` of them: FileNotFoundError when
    there is none, ValueError saying what is wrong otherwise (a symbolic link, not a regular file,
    unreadable, over `limit` bytes). The file is not opened when lstat shows anything but a
    regular file, is opened with O_NOFOLLOW | O_NONBLOCK (nothing swapped in between is followed
    or waited on), and fstat of the opened descriptor is what counts; at most limit + 1 bytes are
    read."""
    try:
        named = os.lstat(path)
    except FileNotFoundError:
        raise
    except OSError:
        named = None  # open() below says why
    if named is not None and not stat.S_ISREG(named.st_mode):
        raise ValueError(f"not a regular file: {_kind(named.st_mode)}")
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise ValueError("not a regular file: a symbolic link, which is not followed") from None
        raise ValueError(f"unreadable: {error.strerror or error}") from None
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise ValueError(f"not a regular file: {_kind(opened.st_mode)}")
        chunks, got = [], 0
        while got <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except OSError as error:
        raise ValueError(f"unreadable: {error.strerror or error}") from None
    finally:
        os.close(fd)
    if got > limit:
        raise ValueError(f"over {limit} bytes")
    return b"".join(chunks)


def read_text(path: str, limit: int) -> str:
    """read_capped's bytes as UTF-8 text; ValueError as read_capped, or when not UTF-8."""
    try:
        return read_capped(path, limit).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def folder_problem(folder: str) -> str:
    """Why `folder` is no place for this user's files, or "" when it is: it (when it exists)
    must be a folder itself, not a symbolic link, owned by this process's user and writable by
    nobody else; the folder holding it (when it exists, its link followed) must be owned by this
    user or root and writable by nobody else unless sticky (as /tmp)."""
    me = os.geteuid()
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        st = None
    except OSError as error:
        return f"cannot be examined ({error.strerror or error})"
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            return "is a symbolic link"
        if not stat.S_ISDIR(st.st_mode):
            return f"is not a folder but {_kind(st.st_mode)}"
        if st.st_uid != me:
            return f"is owned by uid {st.st_uid}, not by this user (uid {me})"
        # Even with the sticky bit, others could add files of theirs (a stamp) to it.
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"is writable by its group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    if not os.path.isabs(folder):
        return "is not an absolute path"
    parent = os.path.dirname(os.path.normpath(folder))
    try:
        up = os.stat(parent)
    except FileNotFoundError:
        return ""
    except OSError as error:
        return f"is in {parent}, which cannot be examined ({error.strerror or error})"
    if up.st_uid not in (me, 0):
        return f"is in {parent}, owned by uid {up.st_uid}, not by this user (uid {me}) or root"
    if up.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not up.st_mode & stat.S_ISVTX:
        mode = stat.S_IMODE(up.st_mode)
        return f"is in {parent}, which its group or others may write (mode {mode:04o})"
    return ""


def home_folder(environ: Mapping[str, str] | None = None) -> str:
    """This user's home: $HOME when absolute, else the password database's entry for the
    effective user when absolute and not "/"; "" when neither."""
    home = (os.environ if environ is None else environ).get("HOME", "")
    if os.path.isabs(home):
        return home
    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        return ""
    return home if os.path.isabs(home) and home != "/" else ""


def private_folder(prefix: str) -> str:
    """A fresh folder of mode 0700 in the temporary folder (mkdtemp): nobody else can have made
    it or put anything in it."""
    return tempfile.mkdtemp(prefix=prefix)
