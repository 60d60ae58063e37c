// The rings' copies and memory ordering, and making the shared file through the store.
//
// Ordering. The producer loads `tail` (acquire: the consumer finished reading those bytes),
// copies, then release-stores `head`; the consumer acquire-loads `head`, copies out, then
// release-stores `tail`. Wake-ups pair like the segment's flags (flags.cc): the waker bumps
// `doorbell` then loads `sleepers`; a sleeper increments `sleepers` then loads `doorbell` before
// futex_wait (which itself refuses to sleep when the word changed). All seq_cst, so at least one
// side sees the other's store (Dekker) and no wake-up is lost.
#include "net/shm/ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "net/bootstrap.h"
#include "net/shm/layout.h"
#include "net/shm/names.h"

namespace xccl::net::shm {
namespace {

constexpr uint64_t kRingMagic = 0x5843434c52494e47ull;  // "XCCLRING"

struct FileHeader {
  uint64_t magic;
  uint64_t size;
  uint64_t ringBytes;
};

// Ordered pairs of distinct ranks: a rank has no ring to itself.
size_t pairs(int size) { return static_cast<size_t>(size) * (size - 1); }

struct FileLayout {
  size_t boxes, indices, rings, total;
  static FileLayout of(int size, size_t ringBytes) {
    const size_t n = static_cast<size_t>(size);
    FileLayout l;
    l.boxes = kPageBytes;
    l.indices = l.boxes + roundUp(n * sizeof(Mailbox), kPageBytes);
    l.rings = l.indices + roundUp(pairs(size) * sizeof(RingIndices), kPageBytes);
    l.total = l.rings + pairs(size) * ringBytes;
    return l;
  }
};

size_t chooseRingBytes(int size, std::string* why) {
  struct statvfs fs{};
  if (::statvfs("/dev/shm", &fs) != 0) {
    *why = "statvfs(/dev/shm) failed: " + errnoText(errno);
    return 0;
  }
  const size_t quarter = static_cast<size_t>(fs.f_bavail) * fs.f_frsize / 4;
  size_t ring = kRingBytes;
  while (ring > kMinRingBytes && FileLayout::of(size, ring).total > quarter) ring /= 2;
  if (FileLayout::of(size, ring).total > quarter) {
    *why = detail::concat("/dev/shm has too little free space for ", size,
                          " ranks' point-to-point rings; enlarge it (docker --shm-size)");
    return 0;
  }
  return ring;
}

// Local rank 0: the file, sized and reserved (running out of /dev/shm is an error here, not a
// SIGBUS later), with its header; -1 and why on failure.
int createFile(const std::string& name, int size, size_t ringBytes, std::string* why) {
  const int fd = ::shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    *why = detail::concat("shm_open(", name, ") failed: ", errnoText(errno));
    return -1;
  }
  const FileLayout layout = FileLayout::of(size, ringBytes);
  const FileHeader header{kRingMagic, static_cast<uint64_t>(size), ringBytes};
  int rc = ::ftruncate(fd, static_cast<off_t>(layout.total)) != 0 ? errno : 0;
  if (rc == 0) {
    do {
      rc = ::posix_fallocate(fd, 0, static_cast<off_t>(layout.total));
    } while (rc == EINTR);
  }
  if (rc == 0 && ::pwrite(fd, &header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)))
    rc = errno;
  if (rc != 0) {
    *why = detail::concat("sizing ", name, " to ", layout.total, " bytes failed: ", errnoText(rc));
    ::close(fd);
    ::shm_unlink(("/" + name).c_str());
    return -1;
  }
  return fd;
}

}  // namespace

size_t Ring::write(const void* data, size_t bytes) {
  const uint64_t head = indices_->head.load(std::memory_order_relaxed);
  const uint64_t tail = indices_->tail.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(bytes, capacity_ - (head - tail));
  const size_t at = head % capacity_, first = std::min(n, capacity_ - at);
  std::memcpy(data_ + at, data, first);
  std::memcpy(data_, static_cast<const uint8_t*>(data) + first, n - first);
  indices_->head.store(head + n, std::memory_order_release);
  return n;
}

size_t Ring::readable() const {
  return indices_->head.load(std::memory_order_acquire) -
         indices_->tail.load(std::memory_order_relaxed);
}

void Ring::copyOut(uint64_t from, uint8_t* out, size_t bytes) const {
  const size_t at = from % capacity_, first = std::min(bytes, capacity_ - at);
  std::memcpy(out, data_ + at, first);
  std::memcpy(out + first, data_, bytes - first);
}

size_t Ring::read(void* out, size_t bytes) {
  const uint64_t tail = indices_->tail.load(std::memory_order_relaxed);
  const size_t n = std::min(bytes, readable());
  copyOut(tail, static_cast<uint8_t*>(out), n);
  indices_->tail.store(tail + n, std::memory_order_release);
  return n;
}

size_t Ring::skip(size_t bytes) {
  const size_t n = std::min(bytes, readable());
  indices_->tail.fetch_add(n, std::memory_order_release);
  return n;
}

std::unique_ptr<Mailboxes> Mailboxes::create(Store& store, const std::string& prefix, int rank,
                                             int size, std::chrono::milliseconds timeout,
                                             std::string* why) {
  const Bootstrap bootstrap(store, prefix, rank, size, timeout);
  std::string failure, name;
  size_t ringBytes = 0;
  int fd = -1;
  if (rank == 0) {
    ringBytes = chooseRingBytes(size, &failure);
    if (ringBytes != 0) {
      name = newFileName("p2p-", store);
      fd = createFile(name, size, ringBytes, &failure);
    }
    bootstrap.broadcast("name", 0,
                        toBytes(fd >= 0 ? detail::concat("+", ringBytes, " ", name)
                                        : "-" + failure));
  } else {
    const std::string published = toString(bootstrap.broadcast("name", 0, {}));
    if (published[0] == '-') {
      failure = "local rank 0: " + published.substr(1);
    } else {
      const size_t space = published.find(' ');
      ringBytes = std::stoull(published.substr(1, space - 1));
      name = published.substr(space + 1);
      fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_CLOEXEC, 0);
      if (fd < 0) failure = detail::concat("shm_open(", name, ") failed: ", errnoText(errno));
    }
  }
  std::unique_ptr<Mailboxes> boxes(new Mailboxes(size, ringBytes));
  if (fd >= 0) {
    const FileLayout layout = FileLayout::of(size, ringBytes);
    void* base = ::mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (base == MAP_FAILED) {
      failure = "mmap of " + name + " failed: " + errnoText(errno);
    } else {
      boxes->base_ = static_cast<uint8_t*>(base);
      boxes->mappedBytes_ = layout.total;
      boxes->boxes_ = reinterpret_cast<Mailbox*>(boxes->base_ + layout.boxes);
      boxes->indices_ = reinterpret_cast<RingIndices*>(boxes->base_ + layout.indices);
      boxes->rings_ = boxes->base_ + layout.rings;
      const auto* header = reinterpret_cast<const FileHeader*>(base);
      if (header->magic != kRingMagic || header->size != static_cast<uint64_t>(size) ||
          header->ringBytes != ringBytes) {
        failure = name + " does not hold the header local rank 0 wrote";
      }
      boxes->boxes_[rank].pid.store(static_cast<int32_t>(::getpid()), std::memory_order_release);
    }
  }
  // Every rank says how mapping went; rank 0 unlinks the name on every path after that.
  Agreement mapped;
  try {
    mapped = bootstrap.agree("mapped", failure);
  } catch (...) {
    if (rank == 0 && !name.empty()) ::shm_unlink(("/" + name).c_str());
    throw;
  }
  if (rank == 0 && !name.empty()) ::shm_unlink(("/" + name).c_str());
  if (!mapped.ok()) {
    *why = mapped.first();
    return nullptr;
  }
  return boxes;
}

Mailboxes::~Mailboxes() {
  if (base_ != nullptr) ::munmap(base_, mappedBytes_);
}

Ring Mailboxes::ring(int from, int to) const {
  const size_t pair = static_cast<size_t>(from) * (size_ - 1) + (to < from ? to : to - 1);
  return Ring(&indices_[pair], rings_ + pair * ringBytes_, ringBytes_);
}

void Mailboxes::wake(int rank) const {
  Mailbox& box = boxes_[rank];
  box.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (box.sleepers.load(std::memory_order_seq_cst) != 0) {
    // Not FUTEX_PRIVATE: the word is shared between processes.
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&box.doorbell), FUTEX_WAKE, INT_MAX, nullptr,
              nullptr, 0);
  }
}

void Mailboxes::sleep(int rank, uint32_t seen, std::chrono::nanoseconds timeout) const {
  Mailbox& box = boxes_[rank];
  box.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (box.doorbell.load(std::memory_order_seq_cst) == seen) {
    timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
                static_cast<long>(timeout.count() % 1000000000)};
    // EAGAIN (the word changed), EINTR and ETIMEDOUT all mean "look again".
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&box.doorbell), FUTEX_WAIT, seen, &ts, nullptr,
              0);
  }
  box.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace xccl::net::shm
