// The rings' copies, their checks and memory ordering, and the doorbells.
//
// Ordering. The producer loads `tail` (acquire: the consumer finished reading those bytes),
// copies, then release-stores `head`; the consumer acquire-loads `head`, copies out, then
// release-stores `tail`. Wake-ups pair like the segment's flags (flags.cc): the waker bumps
// `doorbell` then loads `sleepers`; a sleeper increments `sleepers` then loads `doorbell` before
// futex_wait (which itself refuses to sleep when the word changed). All seq_cst, so at least one
// side sees the other's store (Dekker) and no wake-up is lost.
#include "net/transport/shm_rings/ring.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/error.h"

namespace xccl::net::shm_rings {

// Called with both indices loaded once: the copies below use only these values, so a peer that
// changes them meanwhile cannot move a copy out of the ring.
size_t Ring::used(uint64_t head, uint64_t tail) const {
  const uint64_t n = head - tail;
  if (n > capacity_) {
    XCCL_THROW(ErrorKind::kPeerFailure, "rank ", peer_,
               " corrupted the shared-memory ring between us: head ", head, " and tail ", tail,
               " say ", static_cast<int64_t>(n), " bytes are in a ring of ", capacity_);
  }
  return n;
}

size_t Ring::write(const void* data, size_t bytes) {
  const uint64_t head = indices_->head.load(std::memory_order_relaxed);
  const uint64_t tail = indices_->tail.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(bytes, capacity_ - used(head, tail));
  const size_t at = head % capacity_, first = std::min(n, capacity_ - at);
  std::memcpy(data_ + at, data, first);
  std::memcpy(data_, static_cast<const uint8_t*>(data) + first, n - first);
  indices_->head.store(head + n, std::memory_order_release);
  return n;
}

size_t Ring::readable() const {
  const uint64_t head = indices_->head.load(std::memory_order_acquire);
  return used(head, indices_->tail.load(std::memory_order_relaxed));
}

void Ring::copyOut(uint64_t from, uint8_t* out, size_t bytes) const {
  const size_t at = from % capacity_, first = std::min(bytes, capacity_ - at);
  std::memcpy(out, data_ + at, first);
  std::memcpy(out + first, data_, bytes - first);
}

size_t Ring::read(void* out, size_t bytes) {
  const uint64_t tail = indices_->tail.load(std::memory_order_relaxed);
  const uint64_t head = indices_->head.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(bytes, used(head, tail));
  copyOut(tail, static_cast<uint8_t*>(out), n);
  indices_->tail.store(tail + n, std::memory_order_release);
  return n;
}

size_t Ring::skip(size_t bytes) {
  const uint64_t tail = indices_->tail.load(std::memory_order_relaxed);
  const uint64_t head = indices_->head.load(std::memory_order_acquire);
  const size_t n = std::min<size_t>(bytes, used(head, tail));
  indices_->tail.store(tail + n, std::memory_order_release);
  return n;
}

void ringDoorbell(Mailbox& box) {
  box.doorbell.fetch_add(1, std::memory_order_seq_cst);
  if (box.sleepers.load(std::memory_order_seq_cst) != 0) {
    // Not FUTEX_PRIVATE: the word is shared between processes.
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&box.doorbell), FUTEX_WAKE, INT_MAX, nullptr,
              nullptr, 0);
  }
}

void sleepOnDoorbell(Mailbox& box, uint32_t seen, int64_t timeoutNs) {
  box.sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (box.doorbell.load(std::memory_order_seq_cst) == seen) {
    timespec ts{static_cast<time_t>(timeoutNs / 1000000000),
                static_cast<long>(timeoutNs % 1000000000)};
    // EAGAIN (the word changed), EINTR and ETIMEDOUT all mean "look again".
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&box.doorbell), FUTEX_WAIT, seen, &ts, nullptr,
              0);
  }
  box.sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace xccl::net::shm_rings
