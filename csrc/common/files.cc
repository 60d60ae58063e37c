#include "common/files.h"

#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/error.h"

namespace xccl::files {
namespace {

const char* kindOf(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link, which is not followed";
  if (S_ISREG(mode)) return "a regular file";
  return "of an unknown kind";
}

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Writable by someone other than its owner: by its group or by others.
bool othersMayWrite(mode_t mode) { return (mode & (S_IWGRP | S_IWOTH)) != 0; }

struct Closer {
  int fd;
  ~Closer() {
    if (fd >= 0) ::close(fd);
  }
};

// Opens `path` with `flags` plus O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK (a link at the last
// component is not followed, a FIFO does not block) and refuses what fstat() of the opened
// descriptor shows is not a regular file: the one check the reader and the writer share.
int openRegular(const std::string& path, int flags, const std::string& what, struct stat* st) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
  XCCL_CHECK_ARG(fd >= 0, what, ": cannot open it: ", errnoText(errno),
                 errno == ELOOP ? " (a symbolic link, which is not followed)" : "");
  Closer closer{fd};
  XCCL_CHECK_ARG(::fstat(fd, st) == 0, what, ": ", errnoText(errno));
  XCCL_CHECK_ARG(S_ISREG(st->st_mode), what, ": not a regular file (", kindOf(st->st_mode), ")");
  closer.fd = -1;
  return fd;
}

}  // namespace

std::string readRegularFile(const std::string& path, size_t maxBytes, const std::string& what,
                            const std::function<void(const struct stat&)>& check) {
  // lstat first: a FIFO or a device is refused without being opened at all (opening some
  // devices does something). The fstat below is what counts: the name may change in between.
  struct stat named{};
  if (::lstat(path.c_str(), &named) == 0) {
    XCCL_CHECK_ARG(S_ISREG(named.st_mode), what, ": not a regular file (", kindOf(named.st_mode),
                   ")");
  }
  struct stat st{};
  const int fd = openRegular(path, O_RDONLY, what, &st);
  Closer closer{fd};
  if (check) check(st);
  // Sized from fstat, grown only if the file grows; never past maxBytes + 1 (which proves
  // "over maxBytes" without reading the rest).
  const uint64_t size = static_cast<uint64_t>(std::max<off_t>(st.st_size, 0));
  std::string out(static_cast<size_t>(std::min<uint64_t>(size, maxBytes)) + 1, '\0');
  size_t got = 0;
  for (;;) {
    if (got == out.size()) {
      if (out.size() > maxBytes) break;
      out.resize(std::min(out.size() * 2, maxBytes + 1));
    }
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    XCCL_CHECK_ARG(n >= 0, what, ": read failed after ", got, " bytes: ", errnoText(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  XCCL_CHECK_ARG(got <= maxBytes, what, ": over ", maxBytes, " bytes");
  out.resize(got);
  return out;
}

void writeRegularFile(const std::string& path, const std::string& data, const std::string& what) {
  struct stat st{};
  const int fd = openRegular(path, O_WRONLY | O_CREAT, what, &st);
  Closer closer{fd};
  XCCL_CHECK_ARG(::ftruncate(fd, 0) == 0, what, ": ", errnoText(errno));
  for (size_t done = 0; done < data.size();) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    XCCL_CHECK_ARG(n > 0, what, ": write failed after ", done, " bytes: ", errnoText(errno));
    done += static_cast<size_t>(n);
  }
}

std::string folderProblem(const std::string& folder) {
  const uid_t me = ::geteuid();
  struct stat st{};
  if (::lstat(folder.c_str(), &st) != 0) {
    if (errno != ENOENT) return detail::concat("cannot be examined: ", errnoText(errno));
  } else {
    if (S_ISLNK(st.st_mode)) return "is a symbolic link";
    if (!S_ISDIR(st.st_mode)) return detail::concat("is not a folder but ", kindOf(st.st_mode));
    if (st.st_uid != me) {
      return detail::concat("is owned by uid ", st.st_uid, ", not by this user (uid ", me, ")");
    }
    // Even with the sticky bit, others could add files of theirs to a folder of ours.
    if (othersMayWrite(st.st_mode)) {
      return detail::concat("is writable by its group or others (mode ", octal(st.st_mode), ")");
    }
  }
  std::string parent = folder;
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  const size_t slash = parent.find_last_of('/');
  if (slash == std::string::npos) return "is not an absolute path";
  parent = slash == 0 ? "/" : parent.substr(0, slash);
  struct stat up{};
  if (::stat(parent.c_str(), &up) != 0) {
    return errno == ENOENT ? "" : detail::concat("its folder ", parent, " cannot be examined");
  }
  if (up.st_uid != me && up.st_uid != 0) {
    return detail::concat("is in ", parent, ", owned by uid ", up.st_uid,
                          ", not by this user (uid ", me, ") or root");
  }
  if (othersMayWrite(up.st_mode) && (up.st_mode & S_ISVTX) == 0) {
    return detail::concat("is in ", parent, ", which its group or others may write (mode ",
                          octal(up.st_mode), ")");
  }
  return "";
}

std::string makePrivateFolder(const std::string& prefix, std::string* why) {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = (tmp != nullptr && tmp[0] == '/') ? tmp : "/tmp";
  std::string name = base + "/" + prefix + "XXXXXX";
  if (::mkdtemp(name.data()) == nullptr) {
    *why = detail::concat("cannot make a private folder in ", base, ": ", errnoText(errno));
    return "";
  }
  return name;
}

std::string homeFolder() {
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/') return home;
  struct passwd entry{};
  struct passwd* found = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr || found->pw_dir == nullptr || found->pw_dir[0] != '/') {
    return "";
  }
  const std::string dir = found->pw_dir;
  return dir == "/" ? "" : dir;
}

}  // namespace xccl::files
