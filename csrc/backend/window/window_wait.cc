// XcclWindow's wait_signal (window.h). A rank of this host: the signal counter in our own file
// (net/regions/shm/window_region.h), waited on this thread (synchronous) or by the window's waiter
// thread (asynchronous; one futex sleep on our doorbell serves every pending wait). Another
// host: the transport's iwaitWrite for the window's signal value.
#include <c10/util/Exception.h>

#include <optional>

#include "backend/core/group_core.h"
#include "backend/core/torch_error.h"
#include "backend/window/window.h"
#include "common/wait_slice.h"

#if XCCL_TORCH_HAS_WINDOW

namespace xccl::backend {
namespace {

// How long the waiter thread sleeps at most between looks at deadlines and peers' liveness.
constexpr auto kWaiterSlice = std::chrono::milliseconds(5);

std::string timedOut(int peer, int rank) {
  return "wait_signal timed out: no signal from rank " + std::to_string(peer) +
         " arrived at rank " + std::to_string(rank);
}

}  // namespace

// One iwaitWrite. Its completion (on the transport's thread, with its lock held) records the
// outcome and hands an attached async Work to the executor; a synchronous waiter sleeps on
// `fired`. The completion holds the slot, the slot never holds the request: no cycle.
struct XcclWindow::SignalSlot {
  std::mutex mutex;
  std::condition_variable changed;
  bool fired = false;
  std::string error;  // empty when the signal arrived
  c10::intrusive_ptr<XcclWork> work;  // an async wait_signal to complete when it fires

  bool firedNow() {
    std::lock_guard<std::mutex> guard(mutex);
    return fired;
  }
};

XcclWindow::WorkPtr XcclWindow::wait_signal(int64_t peerRank, bool asyncOp,
                                            const c10d::WaitSignalOptions& opts) {
  checkRank(peerRank, "wait_signal");
  std::shared_ptr<Registered> reg = current("wait_signal");
  const int peer = static_cast<int>(peerRank);
  const net::Deadline deadline = deadlineOf(opts.timeout);
  if (!reg->region->maps(peer)) return waitRemote(*reg, peer, asyncOp, deadline);
  auto work = newWork(c10d::OpType::RECV, "wait_signal");
  if (reg->region->tryConsume(peer)) {
    work->succeed();
    return work;
  }
  if (asyncOp) {
    watch(PendingWait{peer, work, deadline, reg->region, nullptr});
    return work;
  }
  const std::string what = "window wait_signal";
  const net::shm::PeerAlive alive = [this](int r) { return group_.membership().peerAlive(r); };
  try {
    reg->region->waitSignal(peer, net::shm::WaitBounds{deadline, what, alive});
  } catch (const Error& e) {
    throwTorchError(e.kind(), e.what());
  }
  work->succeed();
  return work;
}

XcclWindow::WorkPtr XcclWindow::waitRemote(const Registered& reg, int peer, bool asyncOp,
                                           net::Deadline deadline) {
  auto work = newWork(c10d::OpType::RECV, "wait_signal");
  std::shared_ptr<SignalSlot> slot;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (!orphans_[peer].empty()) {
      slot = orphans_[peer].front();
      orphans_[peer].pop_front();
    }
  }
  if (!slot) {
    slot = std::make_shared<SignalSlot>();
    Executor* executor = group_.sequencer().executor();
    const std::string what = "wait_signal from rank " + std::to_string(peer);
    group_.membership().transport()->iwaitWrite(
        peer, signalValue_, [slot, executor, what](const net::Request& request) {
          c10::intrusive_ptr<XcclWork> attached;
          std::string error;
          {
            std::lock_guard<std::mutex> guard(slot->mutex);
            slot->fired = true;
            if (request.state() == net::Request::State::kFailed) {
              slot->error = what + " failed: " + request.errorMessage();
            }
            error = slot->error;
            attached = std::move(slot->work);
          }
          slot->changed.notify_all();
          if (attached) {
            executor->complete([attached, error] {
              if (error.empty()) {
                attached->succeed();
              } else {
                attached->fail(ErrorKind::kPeerFailure, error);
              }
            });
          }
        });
  }
  std::unique_lock<std::mutex> lock(slot->mutex);
  if (asyncOp && !slot->fired) {
    slot->work = work;
    lock.unlock();
    watch(PendingWait{peer, work, deadline, reg.region, slot});  // for its deadline
    return work;
  }
  std::optional<wait_slice::WhileWaiting> slice;  // only for a wait that will sleep
  if (!slot->fired) slice.emplace();
  if (!slot->changed.wait_until(lock, deadline, [&] { return slot->fired; })) {
    lock.unlock();
    // The iwaitWrite stays posted and will take the next signal: the next wait gets it.
    std::lock_guard<std::mutex> guard(mutex_);
    orphans_[peer].push_front(slot);
    throwTorchError(ErrorKind::kTimeout, "xccl window " + timedOut(peer, rank_));
  }
  if (!slot->error.empty()) {
    const std::string error = slot->error;
    lock.unlock();
    work->fail(ErrorKind::kPeerFailure, error);
    throwTorchError(ErrorKind::kPeerFailure, "xccl window " + error);
  }
  lock.unlock();
  work->succeed();
  return work;
}

void XcclWindow::waiterLoop() {
  std::unique_lock<std::mutex> lock(waitMutex_);
  for (;;) {
    waitChanged_.wait(lock, [this] { return stopping_ || !waits_.empty(); });
    if (stopping_) return;
    // Every pending wait is on the same registration's region (deregistration fails them).
    std::shared_ptr<net::shm::WindowRegion> region = waits_.front().region;
    const uint32_t seen = region->doorbell();
    net::Deadline next = net::Clock::now() + kWaiterSlice;
    struct Finished {
      c10::intrusive_ptr<XcclWork> work;
      ErrorKind kind;
      std::string error;  // empty: the signal arrived
    };
    std::vector<Finished> finished;
    for (auto it = waits_.begin(); it != waits_.end();) {
      Finished end{it->work, ErrorKind::kTimeout, ""};
      if (it->slot) {
        // Another host: the transport completes it; we only end it at its deadline.
        const bool late = net::Clock::now() >= it->deadline;
        if (late && detach(*it)) {
          end.error = timedOut(it->peer, rank_);
          finished.push_back(std::move(end));
        }
        if (late || it->slot->firedNow()) {
          it = waits_.erase(it);
        } else {
          next = std::min(next, it->deadline);
          ++it;
        }
        continue;
      }
      bool done = it->region->tryConsume(it->peer);
      if (!done && net::Clock::now() >= it->deadline) {
        done = true;
        end.error = timedOut(it->peer, rank_);
      }
      if (!done && it->peer != rank_) {
        try {
          group_.membership().peerAlive(it->peer);
        } catch (const Error& e) {
          done = true;
          end.kind = e.kind();
          end.error = "wait_signal from rank " + std::to_string(it->peer) + " failed: " + e.what();
        }
      }
      if (done) {
        finished.push_back(std::move(end));
        it = waits_.erase(it);
      } else {
        next = std::min(next, it->deadline);
        ++it;
      }
    }
    const bool more = !waits_.empty();
    lock.unlock();
    // Outside the lock: a Work's callbacks may call wait_signal again.
    for (Finished& end : finished) {
      if (end.error.empty()) {
        end.work->succeed();
      } else {
        end.work->fail(end.kind, "xccl window " + end.error);
      }
    }
    finished.clear();
    if (more) {
      region->sleepUnlessRung(seen,
                              std::max<std::chrono::nanoseconds>(next - net::Clock::now(),
                                                                 std::chrono::nanoseconds(0)));
    }
    lock.lock();
  }
}

void XcclWindow::watch(PendingWait wait) {
  std::shared_ptr<net::shm::WindowRegion> region = wait.region;
  {
    std::lock_guard<std::mutex> guard(waitMutex_);
    waits_.push_back(std::move(wait));
    if (!waiter_.joinable()) {
      waiter_ = std::thread([this] {
        wait_slice::keepShort();
        waiterLoop();
      });
    }
  }
  waitChanged_.notify_all();
  region->ring();  // the waiter may be asleep on the doorbell: look at the new wait
}

bool XcclWindow::detach(const PendingWait& wait) {
  {
    std::lock_guard<std::mutex> guard(wait.slot->mutex);
    if (wait.slot->fired || wait.slot->work != wait.work) return false;
    wait.slot->work.reset();
  }
  // Still posted: the signal it will take goes to the next wait_signal on this peer.
  std::lock_guard<std::mutex> guard(mutex_);
  orphans_[wait.peer].push_front(wait.slot);
  return true;
}

void XcclWindow::failWaits(const std::string& why) {
  std::list<PendingWait> waits;
  {
    std::lock_guard<std::mutex> guard(waitMutex_);
    waits.swap(waits_);
  }
  for (PendingWait& wait : waits) {
    if (wait.slot && !detach(wait)) continue;  // the signal came: already completed
    wait.work->fail(ErrorKind::kAborted,
                    "xccl window wait_signal from rank " + std::to_string(wait.peer) + ": " + why);
  }
}

}  // namespace xccl::backend

#endif  // XCCL_TORCH_HAS_WINDOW
