// Window memory shared by the ranks of one host (the backend's one-sided windows: docs/p2p.md,
// "Windows"): each rank's window lies in a shared-memory file of its own that every rank of its
// host maps, so a put to a peer there is one memcpy into the peer's memory, and a peer's window
// can be read as an ordinary tensor.
//
// Each rank's file: [0, headerBytes) one SignalWord per group rank, 128 bytes apart, then the
// data (page aligned). SignalWord s of rank d's file counts the signals rank s sent to d; only s
// increments it and only d consumes from it (consumed counts live in d's process). One doorbell
// word in the same header is bumped after every signal, so a waiter sleeps on a single futex
// whichever peer it waits for.
//
// Memory ordering. A writer copies data into the peer's memory with plain stores and then
// increments its SignalWord with a release RMW; the waiter acquire-loads the count, so data put
// before the signal happens-before its reads after the wait. Lost wake-ups are avoided as in
// flags.cc (Dekker on doorbell/sleepers, both seq_cst).
//
// Lifetime: every rank creates its file under a random name, the host's ranks map each other's,
// and each unlinks its own name once all confirmed (before create() returns), so nothing stays in
// /dev/shm. Each mapping is a shared_ptr: tensors viewing a window keep it mapped after the
// region is gone.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/regions/shm/segment.h"
#include "net/rendezvous/bootstrap.h"

namespace xccl::net::shm {

struct alignas(128) SignalWord {
  std::atomic<uint32_t> count;  // signals sent by the word's source rank, mod 2^32
};

// One rank's mapped file: unmapped when the last holder lets go.
class WindowMapping {
 public:
  WindowMapping(uint8_t* base, size_t totalBytes, size_t headerBytes, size_t dataBytes)
      : base_(base), totalBytes_(totalBytes), headerBytes_(headerBytes), dataBytes_(dataBytes) {}
  ~WindowMapping();
  WindowMapping(const WindowMapping&) = delete;
  WindowMapping& operator=(const WindowMapping&) = delete;

  uint8_t* data() const { return base_ + headerBytes_; }
  size_t bytes() const { return dataBytes_; }
  SignalWord& signalFrom(int rank) const { return reinterpret_cast<SignalWord*>(base_)[rank]; }
  // After the last SignalWord: bumped after every signal to this rank; `sleepers` says whether
  // anyone sleeps on it, so a signal costs no syscall when nobody does.
  std::atomic<uint32_t>& doorbell() const;
  std::atomic<uint32_t>& sleepers() const;

 private:
  uint8_t* const base_;
  const size_t totalBytes_;
  const size_t headerBytes_;
  const size_t dataBytes_;
};

class WindowRegion {
 public:
  // Collective over `bootstrap` (every rank of the group calls it with the same keys): every
  // rank in `local` (ascending group ranks of this host, this rank among them) makes a file with
  // `bytes` of data and maps the files of the others in `local`; ranks outside it only take part
  // in the agreement. Throws alike on every rank when some rank could not (kSystem, naming it and
  // why: /dev/shm full, say).
  static std::unique_ptr<WindowRegion> create(const Bootstrap& bootstrap,
                                              const std::vector<int>& local, size_t bytes);

  int rank() const { return rank_; }
  // Whether `rank`'s window is mapped here (it is on this host).
  bool maps(int rank) const { return rank >= 0 && rank < size() && mappings_[rank] != nullptr; }
  int size() const { return static_cast<int>(mappings_.size()); }
  const std::shared_ptr<WindowMapping>& mapping(int rank) const { return mappings_[rank]; }

  // Adds one to `peer`'s count of signals from this rank (release: every store this thread made
  // before, such as puts into `peer`'s memory, is visible to the waiter that consumes it) and
  // wakes `peer` when it sleeps. `peer` must be mapped.
  void signal(int peer);
  // Consumes one signal from `peer` if one arrived that nobody consumed yet (acquire); never
  // blocks. Safe from several threads at once.
  bool tryConsume(int peer);
  // The doorbell's value now; sleepUnlessRung sleeps until it differs from `seen` or `timeout`
  // passes (spurious returns are allowed: callers check their condition again).
  uint32_t doorbell() const;
  // Moves this rank's own doorbell and wakes its sleepers (a waiter with new work to look at).
  void ring();
  void sleepUnlessRung(uint32_t seen, std::chrono::nanoseconds timeout) const;
  // Blocks until a signal from `peer` arrives and consumes it. Sleeps in short slices checking
  // the deadline (kTimeout naming `peer`) and `bounds.alive(peer)` (kPeerFailure naming it).
  void waitSignal(int peer, const WaitBounds& bounds);

 private:
  explicit WindowRegion(int rank, int size);

  const int rank_;
  std::vector<std::shared_ptr<WindowMapping>> mappings_;  // by group rank; null off this host
  std::unique_ptr<std::atomic<uint32_t>[]> consumed_;  // by source rank: signals consumed
};

}  // namespace xccl::net::shm
