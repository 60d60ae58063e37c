// Files a user or a peer names (a key file, a topology file), and the folders xccl chooses by
// default for what it writes (the flight recorder's dumps).
//
// A named file is read through readRegularFile only: a FIFO would block open() and read() with
// no timeout (the reader runs while a group is being created), a device or socket is no file of
// ours, a symbolic link at the last component would make every check about another file, and
// an unbounded read of a hostile file would take the memory. python/xccl/files.py is the same
// rule for the Python side.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <functional>
#include <string>

namespace xccl::files {

// The bytes of the regular file at `path`, at most `maxBytes` of them. The file is never opened
// when lstat() shows anything but a regular file, and is opened with O_NOFOLLOW | O_NONBLOCK, so
// neither a link nor a FIFO swapped in between is followed or waited on; fstat() of the opened
// descriptor is what counts. `check` (if given) sees that fstat() before a byte is read and
// throws to refuse the file. At most maxBytes + 1 bytes are read. Throws kInvalidArgument as
// "<what>: <fault>": cannot open it (with errno's text), a symbolic link, not a regular file (a
// FIFO, a directory, ...), over maxBytes bytes, or a failed read.
std::string readRegularFile(const std::string& path, size_t maxBytes, const std::string& what,
                            const std::function<void(const struct stat&)>& check = {});

// Writes `data` to the file a user named at `path`, creating it (mode 0666 less the umask) or
// replacing its content: never through a symbolic link at the last component (O_NOFOLLOW), and
// never into a FIFO, device or anything but a regular file (O_NONBLOCK, then fstat), so a link
// planted at a predictable name cannot redirect the write. kInvalidArgument "<what>: <fault>".
void writeRegularFile(const std::string& path, const std::string& data, const std::string& what);

// Why `folder` is no place for this user's files, or "" when it is: it (when it exists) must be
// a folder itself, not a symbolic link, owned by this process's user and writable by nobody else;
// the folder holding it (when it exists, its link followed) must be owned by this user or root
// and writable by nobody else unless sticky (as /tmp), so no one else can rename `folder` away.
std::string folderProblem(const std::string& folder);

// A fresh folder of mode 0700 named "<prefix>XXXXXX" in $TMPDIR (when absolute) or /tmp, made
// with mkdtemp: nobody else can have made it or planted anything in it. "" with `*why` set when
// it cannot be made.
std::string makePrivateFolder(const std::string& prefix, std::string* why);

// This user's home folder: $HOME when it is an absolute path, else the password database's entry
// for the effective user when that is absolute and not "/"; "" when neither.
std::string homeFolder();

}  // namespace xccl::files
