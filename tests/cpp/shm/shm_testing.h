// Helpers shared by the shm tests and shm_bench: a store that works across fork()ed processes,
// ranks as threads over one segment (or with TCP transports too), per-rank collective contexts,
// /dev/shm listings, and the benchmarks' forked ranks.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "algo/shm_collectives.h"
#include "common/error.h"
#include "harness.h"
#include "net/regions/shm/segment.h"
#include "net/rendezvous/store.h"

namespace xccl::testing {

// A Store over files in one directory, for ranks that are processes (MemoryStore cannot cross a
// fork). set() renames a complete file into place, so get() never sees half a value.
class FileStore : public net::Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}

  void set(const std::string& key, const net::Bytes& value) override {
    const std::string tmp = path(key) + ".tmp" + std::to_string(::getpid());
    {
      std::ofstream out(tmp, std::ios::binary);
      out.write(reinterpret_cast<const char*>(value.data()), value.size());
    }
    std::rename(tmp.c_str(), path(key).c_str());
  }

  net::Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::ifstream in(path(key), std::ios::binary);
      if (in) return net::Bytes(std::istreambuf_iterator<char>(in), {});
      if (std::chrono::steady_clock::now() >= deadline) {
        XCCL_THROW(ErrorKind::kTimeout, "store key '", key, "' not set within ", timeout.count(),
                   " ms");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  int64_t add(const std::string& key, int64_t delta) override {
    int fd = ::open((path(key) + ".counter").c_str(), O_RDWR | O_CREAT, 0600);
    ::flock(fd, LOCK_EX);
    int64_t value = 0;
    if (::pread(fd, &value, sizeof(value), 0) != sizeof(value)) value = 0;
    value += delta;
    ::pwrite(fd, &value, sizeof(value), 0);
    ::flock(fd, LOCK_UN);
    ::close(fd);
    return value;
  }

 private:
  std::string path(std::string key) const {
    std::replace(key.begin(), key.end(), '/', '#');
    return dir_ + "/" + key;
  }
  std::string dir_;
};

// Threads meet here (std::barrier is C++20): e.g. before ranks destroy their segments, so no
// rank's exit can race with what another rank is expected to observe.
class Latch {
 public:
  explicit Latch(int count) : count_(count) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--count_ <= 0) zero_.notify_all();
    zero_.wait(lock, [&] { return count_ <= 0; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable zero_;
  int count_;
};

// The names in /dev/shm of segments created by process `creator` (rank 0 of their group): a
// segment's name is "xccl-<creator pid>-<token>". Other processes' segments (tests running in
// parallel) come and go at any time, so tests only look at their own.
inline std::set<std::string> xcclShmNamesFrom(pid_t creator) {
  const std::string prefix = std::string(net::shm::kNamePrefix) + std::to_string(creator) + "-";
  std::set<std::string> names;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* entry = ::readdir(dir)) {
      if (std::string(entry->d_name).rfind(prefix, 0) == 0) names.insert(entry->d_name);
    }
    ::closedir(dir);
  }
  return names;
}

inline bool shmNameExists(const std::string& name) {
  return ::access(("/dev/shm/" + name).c_str(), F_OK) == 0;
}

// Alive unless gone or a zombie (a killed child stays a zombie until its parent reaps it).
inline bool processAlive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ||
         (text[paren + 2] != 'Z' && text[paren + 2] != 'X');
}

inline net::shm::Options shmOptions(size_t slotBytes,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  net::shm::Options options;
  options.slotBytes = slotBytes;
  options.timeout = timeout;
  return options;
}

// One rank's communicator over a segment: contexts with increasing sequence numbers.
class ShmCalls {
 public:
  ShmCalls(net::shm::Segment& segment, algo::Tunables tunables = {},
           net::shm::PeerAlive alive = nullptr,
           std::chrono::milliseconds timeout = std::chrono::seconds(60))
      : segment_(segment), tunables_(tunables), alive_(std::move(alive)), timeout_(timeout) {}
  algo::shm::Context next(const std::string& what) {
    ++seq_;
    return {segment_,  seq_,  what + " #" + std::to_string(seq_), net::Clock::now() + timeout_,
            tunables_, alive_};
  }
  algo::Tunables& tunables() { return tunables_; }

 private:
  net::shm::Segment& segment_;
  algo::Tunables tunables_;
  net::shm::PeerAlive alive_;
  std::chrono::milliseconds timeout_;
  uint64_t seq_ = 0;
};

// Runs body(rank, segment) on `size` threads sharing one segment built through a MemoryStore,
// and rethrows the first failure after all threads joined.
inline void runShmRanks(int size, size_t slotBytes,
                        const std::function<void(int, net::shm::Segment&)>& body) {
  net::MemoryStore store;
  runThreads(size, [&](int rank) {
    std::string why;
    auto segment = net::shm::Segment::create(store, rank, size, shmOptions(slotBytes), &why);
    if (!segment) XCCL_THROW(ErrorKind::kInternal, "shared memory unavailable: ", why);
    body(rank, *segment);
  });
}

// Runs body(rank, store, tcp) on `size` threads, each with its own TCP transport over loopback,
// all sharing one MemoryStore (to build segments through as well); rethrows the first failure
// after all threads joined. `tcp` may be reset by the body (a rank whose process "exits").
inline void runTcpRanks(
    int size,
    const std::function<void(int, net::Store&, std::unique_ptr<net::tcp::TcpTransport>&)>& body) {
  net::MemoryStore store;
  runThreads(size, [&](int rank) {
    auto tcp = std::make_unique<net::tcp::TcpTransport>(store, rank, size, loopbackOptions());
    body(rank, store, tcp);
  });
}

// What the backend passes as alive(): the TCP transport's verdict on a group rank, with its
// reason.
inline net::shm::PeerAlive aliveFrom(net::Transport& tcp) {
  return [&tcp](int peer) {
    std::string why;
    if (tcp.peerFailed(peer, &why)) throw Error(ErrorKind::kPeerFailure, why);
    return true;
  };
}

// The upper median (values is not empty): the benchmarks' statistic.
inline double medianOf(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The benchmarks' process harness: forks `ranks` processes that each run body(rank, dir) in a
// fresh temporary folder named after `folderPrefix` (their file store lives there), waits for
// them and removes the folder. A rank's exception is printed; returns 0 when every rank returned
// 0, else 1.
inline int forkRanks(int ranks, const std::string& folderPrefix,
                     const std::function<int(int rank, const std::string& dir)>& body) {
  std::string dir = (std::filesystem::temp_directory_path() / (folderPrefix + "-XXXXXX")).string();
  if (::mkdtemp(dir.data()) == nullptr) return 1;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < ranks; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 1;
      try {
        code = body(rank, dir);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
      }
      std::fflush(stdout);
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::filesystem::remove_all(dir);
  return failures == 0 ? 0 : 1;
}

// User plus system CPU seconds this process has used, all threads together (for tests that
// check that idle or waiting ranks do not spin).
inline double processCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace xccl::testing
