// The per-rank pools of a segment: mapping, first-fit allocation, lazy page reservation.
#include "net/regions/shm/pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "common/error.h"
#include "net/regions/shm/layout.h"

namespace xccl::net::shm {

Pool::Pool(int fd, size_t offset, size_t bytesPerRank, int ranks, int rank)
    : rank_(rank), bytesPerRank_(bytesPerRank), offset_(offset) {
  mappedBytes_ = bytesPerRank * static_cast<size_t>(ranks);
  void* base = ::mmap(nullptr, mappedBytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                      static_cast<off_t>(offset));
  if (base == MAP_FAILED) {
    detail::throwSystemError(__FILE__, __LINE__, "mmap of the shared-memory pools", errno);
  }
  base_ = static_cast<uint8_t*>(base);
  fd_ = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (fd_ < 0) {
    const int err = errno;
    ::munmap(base_, mappedBytes_);
    detail::throwSystemError(__FILE__, __LINE__, "dup of the shared-memory segment", err);
  }
  free_[0] = bytesPerRank;
  stats_.bytes = bytesPerRank;
}

Pool::~Pool() {
  ::munmap(base_, mappedBytes_);
  ::close(fd_);
}

void* Pool::allocate(size_t bytes) {
  const size_t length = roundUp(std::max<size_t>(bytes, 1), kPoolAlignment);
  std::lock_guard<std::mutex> guard(mutex_);
  // First fit from the lowest offset keeps the reserved prefix (reservedEnd_) short.
  auto block = free_.begin();
  while (block != free_.end() && block->second < length) ++block;
  if (block == free_.end()) {
    ++stats_.failures;
    return nullptr;
  }
  const size_t offset = block->first, end = offset + length;
  if (end > reservedEnd_) {
    // Reserve the new pages now: a full /dev/shm is a fallback here, not a SIGBUS on first touch.
    const size_t newEnd = std::min(roundUp(end, kPageBytes), bytesPerRank_);
    const size_t fileOffset = offset_ + rank_ * bytesPerRank_ + reservedEnd_;
    int rc;
    do {
      rc = ::posix_fallocate(fd_, static_cast<off_t>(fileOffset),
                             static_cast<off_t>(newEnd - reservedEnd_));
    } while (rc == EINTR);
    if (rc != 0) {
      ++stats_.failures;
      return nullptr;
    }
    reservedEnd_ = newEnd;
    stats_.reserved = newEnd;
  }
  const size_t rest = block->second - length;
  free_.erase(block);
  if (rest > 0) free_[end] = rest;
  used_[offset] = length;
  stats_.inUse += length;
  ++stats_.allocations;
  return base_ + rank_ * bytesPerRank_ + offset;
}

void Pool::release(void* data) {
  const size_t offset = static_cast<uint8_t*>(data) - (base_ + rank_ * bytesPerRank_);
  std::lock_guard<std::mutex> guard(mutex_);
  auto used = used_.find(offset);
  XCCL_CHECK(used != used_.end(), "release of ", data, ": not a live allocation of this pool");
  size_t begin = offset, length = used->second;
  stats_.inUse -= length;
  used_.erase(used);
  // Merge with the free neighbours on both sides.
  auto next = free_.lower_bound(begin);
  if (next != free_.end() && next->first == begin + length) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == begin) {
      begin = previous->first;
      length += previous->second;
      free_.erase(previous);
    }
  }
  free_[begin] = length;
}

std::optional<size_t> Pool::offsetOf(const void* data, size_t bytes) const {
  const uint8_t* mine = base_ + rank_ * bytesPerRank_;
  const auto* p = static_cast<const uint8_t*>(data);
  if (p < mine || p > mine + bytesPerRank_ ||
      bytes > static_cast<size_t>(mine + bytesPerRank_ - p)) {
    return std::nullopt;
  }
  return static_cast<size_t>(p - mine);
}

const uint8_t* Pool::of(int rank, size_t offset, size_t bytes) const {
  XCCL_CHECK(offset <= bytesPerRank_ && bytes <= bytesPerRank_ - offset, "rank ", rank,
             " published pool bytes [", offset, ", +", bytes, ") outside its ", bytesPerRank_,
             "-byte pool");
  return base_ + rank * bytesPerRank_ + offset;
}

PoolStats Pool::stats() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return stats_;
}

}  // namespace xccl::net::shm
