// Point-to-point: send, recv, recvAnysource and their coalescing (batch_isend_irecv).
//
// Unlike collectives these are posted to the transport at once, on the caller's thread, not
// queued behind earlier work: an irecv waiting for a message must not block a collective that
// the sender has to finish first. Works complete from the transport's completion callback via
// the executor's completion thread.
#include <c10/util/Exception.h>

#include "backend/process_group.h"
#include "backend/tensor_args.h"
#include "common/logging.h"

namespace xccl::backend {

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::pointToPoint(std::vector<at::Tensor>& tensors,
                                                              int peer, int tag, bool isSend,
                                                              const char* opName) {
  if (gpuTensors(pointers(tensors))) {
    auto call = [&](c10d::Backend& b) {
      if (isSend) return b.send(tensors, peer, tag);
      return peer == net::kAnySource ? b.recvAnysource(tensors, tag) : b.recv(tensors, peer, tag);
    };
    return gpuWithoutKernel(
        opName, call, pointers(tensors), isSend ? std::vector<at::Tensor*>{} : pointers(tensors));
  }
  at::Tensor tensor = single(tensors, opName);
  if (peer != net::kAnySource) checkPeer(peer, rank_, size_, opName);
  TORCH_CHECK_VALUE(tag >= 0, "xccl ", opName, ": tag must be non-negative, got ", tag);
  checkUsable(opName);
  c10d::OpType type = isSend ? c10d::OpType::SEND
                             : (peer == net::kAnySource ? c10d::OpType::RECVANYSOURCE
                                                        : c10d::OpType::RECV);
  auto work = c10::make_intrusive<XcclWork>(rank_, type, opName, seq_.load(),
                                            std::vector<at::Tensor>{tensor},
                                            effectiveTimeout(c10d::kUnsetTimeout));
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    addToBatchLocked(work, opName);
  }
  Executor* executor = executor_.get();
  std::string what = std::string(opName) + (isSend ? " to rank " : " from rank ") +
                     (peer == net::kAnySource ? std::string("any") : std::to_string(peer)) +
                     " (tag " + std::to_string(tag) + ")";
  // Runs under the transport's lock: only capture the outcome and hand over.
  auto onDone = [executor, work, what](const net::Request& request) {
    bool ok = request.state() == net::Request::State::kDone;
    std::string error = ok ? std::string() : what + " failed: " + request.errorMessage();
    int source = request.peer();
    executor->complete([work, ok, error, source] {
      if (!ok) {
        work->fail(error);
        return;
      }
      work->setSourceRank(source);
      work->succeed();
    });
  };
  net::MessageTag messageTag{net::TagSpace::kPointToPoint, 0, static_cast<uint64_t>(tag)};
  if (isSend) {
    transport_->isend(peer, messageTag, tensor.data_ptr(), byteSize(tensor), onDone);
  } else {
    transport_->irecv(peer, messageTag, tensor.data_ptr(), byteSize(tensor), onDone);
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::send(std::vector<at::Tensor>& tensors,
                                                      int dstRank, int tag) {
  return pointToPoint(tensors, dstRank, tag, /*isSend=*/true, "send");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::recv(std::vector<at::Tensor>& tensors,
                                                      int srcRank, int tag) {
  return pointToPoint(tensors, srcRank, tag, /*isSend=*/false, "recv");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::recvAnysource(std::vector<at::Tensor>& tensors,
                                                               int tag) {
  return pointToPoint(tensors, net::kAnySource, tag, /*isSend=*/false, "recv");
}

void ProcessGroupXccl::addToBatchLocked(const c10::intrusive_ptr<XcclWork>& work,
                                        const char* opName) {
  dropClosedGpuBatchLocked();
  if (!coalescing_) return;
  TORCH_CHECK_VALUE(!gpuCoalescing_, "xccl ", opName, ": a coalesced batch (batch_isend_irecv) "
                    "mixes CPU and CUDA tensors; use one device per batch");
  coalesced_.push_back(work);
}

void ProcessGroupXccl::dropClosedGpuBatchLocked() {
  // gpu_ was set (under gpuMutex_) before gpuCoalescing_ could become true.
  if (gpuCoalescing_ && !gpu_->coalescing()) {
    coalescing_ = false;
    gpuCoalescing_ = false;
  }
}

void ProcessGroupXccl::startCoalescing() {
  bool closeGpuBatch = false;
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    dropClosedGpuBatchLocked();
    if (coalescing_) {
      // torch's coalescing manager never ends a batch whose body raised: close that one (its
      // operations still complete on their own) and start afresh.
      XCCL_WARN("backend", "startCoalescing: the previous batch was never ended (an exception "
                           "inside it?); closing it");
      closeGpuBatch = gpuCoalescing_;
    }
    coalescing_ = true;
    gpuCoalescing_ = false;
    coalesced_.clear();
  }
  if (closeGpuBatch) {
    std::lock_guard<std::mutex> guard(gpuMutex_);
    (void)gpu_->endCoalescing();
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXccl::endCoalescing() {
  std::vector<c10::intrusive_ptr<XcclWork>> works;
  bool onGpu = false;
  {
    std::lock_guard<std::mutex> guard(stateMutex_);
    TORCH_CHECK(coalescing_, "xccl: endCoalescing() without startCoalescing()");
    coalescing_ = false;
    std::swap(onGpu, gpuCoalescing_);
    works.swap(coalesced_);
  }
  if (onGpu) {
    std::lock_guard<std::mutex> guard(gpuMutex_);
    return gpu_->endCoalescing();
  }
  // One Work that completes when every operation issued while coalescing has: the operations
  // already run concurrently (p2p is posted at once), so nothing is re-issued here.
  std::vector<at::Tensor> outputs;
  for (auto& w : works) {
    for (auto& t : w->outputs()) outputs.push_back(t);
  }
  auto group = c10::make_intrusive<XcclWork>(rank_, c10d::OpType::COALESCED, "coalesced",
                                             seq_.load(), outputs,
                                             effectiveTimeout(c10d::kUnsetTimeout));
  if (works.empty()) {
    group->succeed();
    return group;
  }
  struct Pending {
    std::mutex mutex;
    size_t left;
    std::string firstError;
  };
  auto pending = std::make_shared<Pending>();
  pending->left = works.size();
  for (auto& w : works) {
    w->getFuture()->addCallback([pending, group](c10::ivalue::Future& future) {
      std::string error;
      bool last;
      {
        std::lock_guard<std::mutex> guard(pending->mutex);
        if (future.hasError() && pending->firstError.empty()) {
          pending->firstError = future.tryRetrieveErrorMessage();
        }
        last = --pending->left == 0;
        error = pending->firstError;
      }
      if (!last) return;
      if (error.empty()) {
        group->succeed();
      } else {
        group->fail(error);
      }
    });
  }
  return group;
}

}  // namespace xccl::backend
