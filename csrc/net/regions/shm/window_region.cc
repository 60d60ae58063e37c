// Window files: creation, mapping and unlinking (collective), and the signal counters.
#include "net/regions/shm/window_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <limits>

#include "common/error.h"
#include "common/wait_slice.h"
#include "net/regions/shm/futex.h"
#include "net/regions/shm/layout.h"
#include "net/regions/shm/names.h"
#include "net/regions/shm/peer_file.h"

namespace xccl::net::shm {
namespace {

// How long one sleep lasts at most: bounds how late a dead peer or the deadline is noticed.
constexpr auto kSlice = std::chrono::milliseconds(5);

struct alignas(128) Doorbell {
  std::atomic<uint32_t> rung;
  std::atomic<uint32_t> sleepers;
};

// SignalWords of every group rank, then the doorbell, in whole pages.
size_t headerBytes(int size) {
  return roundUp((static_cast<size_t>(size) + 1) * sizeof(SignalWord), kPageBytes);
}

// Window files are "xccl-w<pid>-..." (names.h newFileName).
constexpr const char* kWindowFilePrefix = "xccl-w";

// Maps `total` bytes of `fd`, or returns null with *why.
std::shared_ptr<WindowMapping> mapFile(int fd, size_t total, size_t header, std::string* why) {
  void* base = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    *why = detail::concat("mmap of ", total, " bytes failed: ", errnoText(errno));
    return nullptr;
  }
  return std::make_shared<WindowMapping>(static_cast<uint8_t*>(base), total, header,
                                         total - header);
}

// This rank's file: created, sized and its pages reserved now (so a full /dev/shm is an error
// here, not a SIGBUS at the first write), and mapped. The zero-filled header is valid as is.
std::shared_ptr<WindowMapping> makeOwn(const std::string& name, size_t total, size_t header,
                                       std::string* why) {
  const int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = detail::concat("shm_open(", name, ") failed: ", errnoText(errno));
    return nullptr;
  }
  std::shared_ptr<WindowMapping> mapping;
  int rc = 0;
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
    *why = detail::concat("ftruncate to ", total, " bytes failed: ", errnoText(errno));
  } else {
    do {
      rc = ::posix_fallocate(fd, 0, static_cast<off_t>(total));
    } while (rc == EINTR);
    if (rc != 0) {
      *why = detail::concat("could not reserve ", total,
                            " bytes in /dev/shm for the window: ", errnoText(rc));
    } else {
      mapping = mapFile(fd, total, header, why);
    }
  }
  ::close(fd);
  return mapping;
}

// `file` is what `peer` published (its size bounded by parsePublished): the file itself is
// checked (peer_file.h) before it is mapped.
std::shared_ptr<WindowMapping> mapPeer(int peer, const Published& file, size_t header,
                                       std::string* why) {
  const int fd = openPeerFile(file.name, kWindowFilePrefix, file.sizes[0], why);
  if (fd < 0) {
    *why = detail::concat("rank ", peer, "'s window file: ", *why);
    return nullptr;
  }
  std::shared_ptr<WindowMapping> mapping = mapFile(fd, file.sizes[0], header, why);
  ::close(fd);
  return mapping;
}

bool contains(const std::vector<int>& ranks, int rank) {
  for (int r : ranks) {
    if (r == rank) return true;
  }
  return false;
}

}  // namespace

WindowMapping::~WindowMapping() { ::munmap(base_, totalBytes_); }

std::atomic<uint32_t>& WindowMapping::doorbell() const {
  return reinterpret_cast<Doorbell*>(base_ + headerBytes_ - sizeof(Doorbell))->rung;
}

std::atomic<uint32_t>& WindowMapping::sleepers() const {
  return reinterpret_cast<Doorbell*>(base_ + headerBytes_ - sizeof(Doorbell))->sleepers;
}

WindowRegion::WindowRegion(int rank, int size)
    : rank_(rank), mappings_(size), consumed_(new std::atomic<uint32_t>[size]) {
  for (int r = 0; r < size; ++r) consumed_[r].store(0);
}

std::unique_ptr<WindowRegion> WindowRegion::create(const Bootstrap& bootstrap,
                                                   const std::vector<int>& local, size_t bytes) {
  const int rank = bootstrap.rank();
  const int size = bootstrap.size();
  std::unique_ptr<WindowRegion> region(new WindowRegion(rank, size));
  const size_t header = headerBytes(size);
  const bool here = contains(local, rank);
  std::string name, why;
  if (here) {
    name = newFileName("w", bootstrap.store());
    region->mappings_[rank] = makeOwn(name, header + bytes, header, &why);
    if (!region->mappings_[rank]) ::shm_unlink(("/" + name).c_str());
  }
  // Each file's name and data size; "" for ranks without one (off this host, or failed).
  const std::string published = region->mappings_[rank] ? formatPublished({header + bytes}, name)
                                                        : formatRefusal("no window file");
  const std::vector<std::string> files = bootstrap.allGather("files", published);
  Agreement made = bootstrap.agree("made", why);
  if (made.ok() && here) {
    for (int peer : local) {
      if (peer == rank) continue;
      try {
        // At least the header: the data size is what is left after it.
        const Published file =
            parsePublished(files[peer], {{"file bytes", header, header + kMaxRecordBytes}});
        XCCL_CHECK(file.made, "rank ", peer, " on this host published no window file");
        region->mappings_[peer] = mapPeer(peer, file, header, &why);
      } catch (const Error& e) {
        why = e.what();
      }
      if (!region->mappings_[peer]) break;
    }
  }
  // Every name is unlinked by its owner once every rank said how its mapping went, on every path.
  Agreement mapped;
  try {
    mapped = made.ok() ? bootstrap.agree("mapped", why) : made;
  } catch (...) {
    if (region->mappings_[rank]) ::shm_unlink(("/" + name).c_str());
    throw;
  }
  if (region->mappings_[rank]) ::shm_unlink(("/" + name).c_str());
  if (!mapped.ok()) {
    XCCL_THROW(ErrorKind::kSystem, "window memory in shared memory: ", mapped.first());
  }
  return region;
}

void WindowRegion::signal(int peer) {
  const WindowMapping& target = *mappings_[peer];
  target.signalFrom(rank_).count.fetch_add(1, std::memory_order_release);
  // seq_cst: pairs with the sleeper's sleepers increment and doorbell load (flags.cc's Dekker).
  target.doorbell().fetch_add(1, std::memory_order_seq_cst);
  if (target.sleepers().load(std::memory_order_seq_cst) != 0) futexWakeAll(&target.doorbell());
}

bool WindowRegion::tryConsume(int peer) {
  const std::atomic<uint32_t>& count = mappings_[rank_]->signalFrom(peer).count;
  uint32_t taken = consumed_[peer].load(std::memory_order_relaxed);
  // The count only grows (mod 2^32); it is ahead of what we took by fewer than 2^31 signals.
  while (static_cast<int32_t>(count.load(std::memory_order_acquire) - taken) > 0) {
    if (consumed_[peer].compare_exchange_weak(taken, taken + 1, std::memory_order_acq_rel)) {
      return true;
    }
  }
  return false;
}

uint32_t WindowRegion::doorbell() const {
  return mappings_[rank_]->doorbell().load(std::memory_order_seq_cst);
}

void WindowRegion::ring() {
  const WindowMapping& own = *mappings_[rank_];
  own.doorbell().fetch_add(1, std::memory_order_seq_cst);
  if (own.sleepers().load(std::memory_order_seq_cst) != 0) futexWakeAll(&own.doorbell());
}

void WindowRegion::sleepUnlessRung(uint32_t seen, std::chrono::nanoseconds timeout) const {
  const WindowMapping& own = *mappings_[rank_];
  const wait_slice::WhileWaiting slice;  // the ring runs this thread at once (wait_slice.h)
  own.sleepers().fetch_add(1, std::memory_order_seq_cst);
  if (own.doorbell().load(std::memory_order_seq_cst) == seen) {
    futexWait(&own.doorbell(), seen, timeout);
  }
  own.sleepers().fetch_sub(1, std::memory_order_seq_cst);
}

void WindowRegion::waitSignal(int peer, const WaitBounds& bounds) {
  for (;;) {
    // The doorbell first: a signal that lands after tryConsume fails moves it, so the sleep
    // below returns at once instead of missing it.
    const uint32_t seen = doorbell();
    if (tryConsume(peer)) return;
    const auto now = Clock::now();
    if (now >= bounds.deadline) {
      XCCL_THROW(ErrorKind::kTimeout, bounds.what, " timed out: no signal from rank ", peer,
                 " arrived at rank ", rank_);
    }
    if (peer != rank_ && bounds.alive && !bounds.alive(peer)) {
      XCCL_THROW(ErrorKind::kPeerFailure, bounds.what, ": rank ", peer,
                 " failed (its process exited or its connection closed) while rank ", rank_,
                 " waited for its signal");
    }
    sleepUnlessRung(seen, std::min<std::chrono::nanoseconds>(kSlice, bounds.deadline - now));
  }
}

}  // namespace xccl::net::shm
