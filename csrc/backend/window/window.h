// XcclWindow: torch's one-sided window (c10d::Window) on CPU tensors, with xccl's page and
// strided writes. Model, ordering, lifetime and failures: docs/p2p.md, "Windows".
//
// Where the memory is. tensor_register (collective) copies the tensor into a shared-memory file
// of this rank (net/regions/shm/window_region.h) that every rank of its host maps, and re-points
// the tensor at it: the registered tensor is the window. Ranks on other hosts reach it through the
// group's transport (registerMemory; the RemoteRegions are exchanged at registration).
// A put to a rank of this host is one memcpy into its mapping (done before put returns, async or
// not); to another host it is the transport's iwrite, completing the Work when the bytes are
// visible there. signal(peer) is a release increment of our counter in peer's file (this host)
// or a 0-byte iwrite carrying the window's signal value, sent once every earlier put to peer
// completed (other hosts); wait_signal consumes one.
//
// Threads: every method may be called from any thread; the registration is swapped under
// mutex_ and operations hold a shared_ptr to the one they started with.
#pragma once

#include "backend/torch_features.h"

#if XCCL_TORCH_HAS_WINDOW

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Window.hpp>

#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backend/core/work.h"
#include "net/regions/shm/window_region.h"
#include "net/transport/transport.h"

namespace xccl::backend {

class GroupCore;

// One contiguous run of bytes of a write: from `src` to byte `dstOffset` of the target's window.
struct WindowPiece {
  const uint8_t* src;
  size_t dstOffset;
  size_t bytes;
};

class XcclWindow final : public c10d::Window {
 public:
  using WorkPtr = c10::intrusive_ptr<c10d::Work>;
  // Collective (new_window): finds which ranks share this rank's host. `owner` is the process
  // group whose core `group` is: the window keeps it alive.
  XcclWindow(c10::intrusive_ptr<c10d::Backend> owner, GroupCore& group, uint64_t id);
  ~XcclWindow() override;

  void tensor_register(const at::Tensor& tensor, bool owning = true) override;
  void tensor_deregister() override;
  WorkPtr put(const at::Tensor& tensor, int64_t dstRank, int64_t targetOffsetNelems, bool asyncOp,
              const c10d::PutOptions& opts = c10d::PutOptions()) override;
  at::Tensor map_remote_tensor(int64_t rank) override;
  WorkPtr signal(int64_t peerRank, bool asyncOp,
                 const c10d::SignalOptions& opts = c10d::SignalOptions()) override;
  WorkPtr wait_signal(int64_t peerRank, bool asyncOp,
                      const c10d::WaitSignalOptions& opts = c10d::WaitSignalOptions()) override;
  c10d::WindowAttr get_attr(int64_t peerRank) override;

  // xccl's extensions (python/xccl/window.py). putPages copies page srcPages[i] of `src` (viewed
  // flat, pages of pageElems elements) to page dstPages[i] of dstRank's window; putStrided
  // writes row i of the 2-D `src` at targetOffset + i * dstRowStride. One Work each.
  WorkPtr putPages(const at::Tensor& src, const at::Tensor& srcPages, int64_t dstRank,
                   const at::Tensor& dstPages, int64_t pageElems, bool asyncOp);
  WorkPtr putStrided(const at::Tensor& src, int64_t dstRank, int64_t targetOffsetNelems,
                     int64_t dstRowStrideNelems, bool asyncOp);

 private:
  // What every rank registered, as this rank sees it.
  // Registration checked numel * elementSize against the memory behind it (net::checkWindowFits).
  struct PeerWindow {
    at::ScalarType dtype;
    size_t elementSize = 0;
    std::vector<int64_t> sizes;
    int64_t numel = 0;
    net::RemoteRegion remote;  // for ranks of other hosts
  };
  struct Registered {
    at::Tensor tensor;  // held only when registered with owning=True
    std::shared_ptr<net::shm::WindowRegion> region;
    std::unique_ptr<net::Registration> registration;  // with the transport; null when unneeded
    std::vector<PeerWindow> peers;
  };
  // A transport iwaitWrite for a signal; kept when a synchronous wait_signal timed out, so the
  // signal it will consume is handed to the next wait_signal on that peer instead of being lost.
  struct SignalSlot;
  // An asynchronous wait_signal, watched by waiterLoop(): for a rank of this host it consumes
  // the signal; for another host (`slot` set) the transport's completion completes the Work and
  // the waiter only fails it at its deadline.
  struct PendingWait {
    int peer;
    c10::intrusive_ptr<XcclWork> work;
    net::Deadline deadline;
    std::shared_ptr<net::shm::WindowRegion> region;
    std::shared_ptr<SignalSlot> slot;
  };

  // The current registration; ValueError naming `opName` when there is none.
  std::shared_ptr<Registered> current(const char* opName) const;
  void checkRank(int64_t rank, const char* opName) const;
  // Whether the group was reconfigured since this window was created (see epoch_).
  bool stale() const;
  // DistBackendError naming `peer` (a rank of this host) when it is known to have failed.
  void checkAlive(int peer) const;
  net::Deadline deadlineOf(std::chrono::milliseconds requested) const;
  // Writes `pieces` to `dst` (window_ops.cc): memcpys on this host, iwrites (one Work) to
  // others. `keep` holds the sources alive until the Work completes.
  WorkPtr write(const char* opName, const Registered& reg, int dst,
                const std::vector<WindowPiece>& pieces, std::vector<at::Tensor> keep, bool asyncOp,
                net::Deadline deadline);
  // ValueError unless every piece ends within `dst`'s window as mapped here or registered with
  // the transport (window_ops.cc).
  void checkFits(const char* opName, const Registered& reg, int dst,
                 const std::vector<WindowPiece>& pieces) const;
  // The element size of `dst`'s window, checking `src`'s dtype against it and that its size in
  // bytes fits int64.
  size_t checkTarget(const char* opName, const Registered& reg, int dst,
                     const at::Tensor& src) const;
  // Waits until every put to `peer` posted so far completed (other hosts): signal's fence.
  void fence(int peer, net::Deadline deadline, const std::string& what);
  WorkPtr waitRemote(const Registered& reg, int peer, bool asyncOp, net::Deadline deadline);
  // Queues an async wait for waiterLoop(), starting the thread on first use.
  void watch(PendingWait wait);
  // Detaches `wait`'s Work from its slot (the slot goes back to orphans_); false when the
  // signal already completed it.
  bool detach(const PendingWait& wait);
  void waiterLoop();
  void failWaits(const std::string& why);
  c10::intrusive_ptr<XcclWork> newWork(c10d::OpType type, const char* opName,
                                       std::vector<at::Tensor> outputs = {}) const;

  const c10::intrusive_ptr<c10d::Backend> owner_;
  GroupCore& group_;
  const uint64_t id_;
  const int rank_;
  const int size_;
  const uint64_t signalValue_;  // what this window's signals carry over the transport (never 0)
  // The group's membership (Membership::membershipEpoch) this window was created in: a
  // reconfigure since then ended it, with the transport its registration belongs to.
  const uint64_t epoch_;
  std::vector<int> local_;  // ranks on this host whose windows are mapped (ascending)
  std::string unmapped_;  // why the other ranks' windows are not mapped here
  uint64_t generation_ = 0;  // registrations so far: names their store keys

  mutable std::mutex mutex_;
  std::shared_ptr<Registered> registered_;
  bool deregistered_ = false;
  // Other hosts: puts not yet known complete, by peer (pruned as they complete), and the
  // iwaitWrites kept by timed-out waits.
  std::vector<std::vector<net::RequestPtr>> pending_;
  std::vector<std::deque<std::shared_ptr<SignalSlot>>> orphans_;

  // Asynchronous wait_signal on this host: one thread per window, started by the first.
  std::mutex waitMutex_;
  std::condition_variable waitChanged_;
  std::list<PendingWait> waits_;
  bool stopping_ = false;
  std::thread waiter_;
};

}  // namespace xccl::backend

#endif  // XCCL_TORCH_HAS_WINDOW
