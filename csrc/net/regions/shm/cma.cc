#include "net/regions/shm/cma.h"

#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <fstream>
#include <random>

#include "common/error.h"

namespace xccl::net::shm {
namespace {

constexpr pid_t kPidMaxLimit = 4194304;  // PID_MAX_LIMIT on 64-bit kernels
constexpr size_t kBatch = IOV_MAX;

std::string errnoName(int err) { return detail::concat(errnoText(err), " (errno ", err, ")"); }

// Strict decimal, as the other store records are read (names.cc, window_record.cc): from_chars
// takes no sign, space or prefix and reports overflow instead of wrapping.
bool parseU64(const std::string& text, uint64_t* value) {
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, *value);
  return error == std::errc() && stop == end && !text.empty();
}

// /proc/sys/kernel/yama/ptrace_scope: -1 without Yama (only uid and dumpability matter).
int yamaScope() {
  std::ifstream file("/proc/sys/kernel/yama/ptrace_scope");
  int scope = -1;
  if (!(file >> scope)) return -1;
  return scope;
}

// Lets this process's peers read it (peerAccess in cma.h decides how). The setting is per
// process; every group of it names the same parent, so a later group changes nothing.
std::string allowPeers(const std::vector<pid_t>& parents) {
  const PeerAccess access = peerAccess(yamaScope(), parents);
  if (!access.whyNot.empty() || access.tracer == 0) return access.whyNot;
  if (::prctl(PR_SET_PTRACER, static_cast<unsigned long>(access.tracer), 0, 0, 0) != 0) {
    return detail::concat("prctl(PR_SET_PTRACER) failed under ptrace_scope 1: ", errnoName(errno));
  }
  return "";
}

struct Record {
  pid_t pid = 0;
  pid_t ppid = 0;
  uint64_t address = 0;
  uint64_t cookie = 0;
};

// "+<pid> <ppid> <address> <cookie>", all decimal; false when anything is off.
bool parseRecord(const std::string& text, Record* record) {
  if (text.empty() || text[0] != '+') return false;
  std::vector<std::string> fields;
  size_t begin = 1;
  for (;;) {
    const size_t space = text.find(' ', begin);
    fields.push_back(text.substr(begin, space - begin));
    if (space == std::string::npos || fields.size() > 4) break;
    begin = space + 1;
  }
  uint64_t ppid = 0;
  if (fields.size() != 4 || !parseU64(fields[1], &ppid) || ppid > kPidMaxLimit ||
      !parseU64(fields[2], &record->address) || !parseU64(fields[3], &record->cookie)) {
    return false;
  }
  record->pid = parsePid(fields[0]);
  record->ppid = static_cast<pid_t>(ppid);
  return record->pid != 0 && record->address != 0;
}

}  // namespace

PeerAccess peerAccess(int scope, const std::vector<pid_t>& parents) {
  if (scope <= 0) return {};
  if (scope >= 2) {
    return {0, detail::concat("/proc/sys/kernel/yama/ptrace_scope is ", scope,
                              " (only 0 or 1 let processes read each other)")};
  }
  for (size_t r = 1; r < parents.size(); ++r) {
    if (parents[r] != parents[0]) {
      return {0, detail::concat("ranks 0 and ", r, " have different parent processes (", parents[0],
                                " and ", parents[r],
                                ") under yama ptrace_scope 1, which lets only a common parent "
                                "read the ranks (start them from one launcher, e.g. torchrun)")};
    }
  }
  if (parents.empty() || parents[0] == 0) {
    // getppid() is 0 when the parent lives outside our pid namespace: nothing to name.
    return {0, "the ranks' parent is outside their pid namespace under yama ptrace_scope 1"};
  }
  return {parents[0], ""};
}

pid_t parsePid(const std::string& text) {
  uint64_t value = 0;
  if (!parseU64(text, &value) || value == 0 || value > kPidMaxLimit) return 0;
  return static_cast<pid_t>(value);
}

int cmaTryRead(pid_t pid, const CmaPiece* pieces, size_t count, size_t* failedPiece) {
  iovec local[kBatch], remote[kBatch];
  size_t piece = 0, done = 0;  // the first piece not fully read, and its bytes already read
  while (piece < count) {
    size_t batch = 0;
    for (size_t i = piece; i < count && batch < kBatch; ++i) {
      const size_t skip = i == piece ? done : 0;
      uint64_t end;
      if (__builtin_add_overflow(pieces[i].remote, pieces[i].length, &end)) {
        *failedPiece = i;
        return EFAULT;  // a peer's range that wraps is never passed on
      }
      if (pieces[i].length == skip) continue;
      local[batch] = {static_cast<uint8_t*>(pieces[i].local) + skip, pieces[i].length - skip};
      remote[batch] = {reinterpret_cast<void*>(pieces[i].remote + skip), pieces[i].length - skip};
      ++batch;
    }
    if (batch == 0) return 0;
    const ssize_t got = ::process_vm_readv(pid, local, batch, remote, batch, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      *failedPiece = piece;
      return got < 0 ? errno : EFAULT;
    }
    // The kernel fills the local iovecs in order; skip what it completed.
    size_t left = static_cast<size_t>(got);
    while (left > 0) {
      const size_t rest = pieces[piece].length - done;
      if (left < rest) {
        done += left;
        break;
      }
      left -= rest;
      ++piece;
      done = 0;
    }
    while (piece < count && pieces[piece].length == done) {
      ++piece;
      done = 0;
    }
  }
  return 0;
}

void cmaRead(const std::string& what, pid_t pid, int rank, const CmaPiece* pieces, size_t count) {
  size_t failed = 0;
  const int err = cmaTryRead(pid, pieces, count, &failed);
  if (err == 0) return;
  const CmaPiece& p = pieces[failed];
  const std::string range = detail::concat(p.length, " bytes at [0x", std::hex, p.remote, ", 0x",
                                           p.remote + p.length, ")");
  if (err == ESRCH) {
    XCCL_THROW(ErrorKind::kPeerFailure, what, ": rank ", rank, " failed: its process (pid ", pid,
               ") is gone (process_vm_readv of ", range, ": ", errnoName(err), ")");
  }
  XCCL_THROW(ErrorKind::kPeerFailure, what, ": reading ", range, " of rank ", rank, " (pid ", pid,
             ") with process_vm_readv failed: ", errnoName(err),
             err == EFAULT ? " (an address that rank does not map)" : "");
}

void CmaPeers::read(const std::string& what, int rank, uint64_t remote, void* local,
                    size_t length) const {
  const CmaPiece piece{remote, local, length};
  cmaRead(what, pids_[rank], rank, &piece, 1);
}

std::unique_ptr<CmaPeers> CmaPeers::probe(const Bootstrap& bootstrap, bool enabled, pid_t pid,
                                          std::string* whyNot) {
  const int n = bootstrap.size(), me = bootstrap.rank();
  std::unique_ptr<CmaPeers> peers(new CmaPeers());
  peers->cookie_ = (static_cast<uint64_t>(std::random_device{}()) << 32 | std::random_device{}()) |
                   1;  // never 0, so a zero-filled page cannot match
  const std::string mine =
      enabled ? detail::concat("+", pid, " ", getppid(), " ",
                               reinterpret_cast<uintptr_t>(&peers->cookie_), " ", peers->cookie_)
              : "-";
  // 1. Every rank sees every record, so every decision up to the agreements below is the same.
  const std::vector<std::string> records = bootstrap.allGather("cma", mine);
  std::vector<Record> parsed(n);
  std::vector<pid_t> parents;
  for (int r = 0; r < n; ++r) {
    if (records[r] == "-") {
      *whyNot = detail::concat("off on rank ", r, " (XCCL_SHM_CMA=0)");
      return nullptr;
    }
    if (!parseRecord(records[r], &parsed[r])) {
      *whyNot = detail::concat("rank ", r, " published a malformed process record");
      return nullptr;
    }
    parents.push_back(parsed[r].ppid);
    peers->pids_.push_back(parsed[r].pid);
  }
  // 2. Everyone allows its peers before anyone reads.
  Agreement allowed = bootstrap.agree("cma-allowed", allowPeers(parents));
  if (!allowed.ok()) {
    *whyNot = allowed.first();
    return nullptr;
  }
  // 3. Every rank reads every peer's cookie; the cookie lives until the agreement is over.
  std::string failure;
  for (int r = 0; r < n && failure.empty(); ++r) {
    if (r == me) continue;
    uint64_t cookie = 0;
    size_t failed = 0;
    const CmaPiece piece{parsed[r].address, &cookie, sizeof(cookie)};
    const int err = cmaTryRead(parsed[r].pid, &piece, 1, &failed);
    if (err != 0 || cookie != parsed[r].cookie) {
      const int scope = yamaScope();
      failure = detail::concat("cannot read rank ", r, " (pid ", parsed[r].pid, "): ",
                               err != 0 ? errnoName(err)
                                        : "another process's memory (a different pid namespace?)",
                               scope >= 0 ? detail::concat(", yama ptrace_scope ", scope) : "");
    }
  }
  Agreement read = bootstrap.agree("cma-read", failure);
  if (!read.ok()) {
    *whyNot = read.first();
    return nullptr;
  }
  return peers;
}

}  // namespace xccl::net::shm
