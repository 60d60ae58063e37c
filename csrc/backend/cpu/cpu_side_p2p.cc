// The CPU side's point-to-point (cpu_side.h): send, recv, recvAnysource.
//
// Unlike collectives these are posted to the transport at once, on the caller's thread, not
// queued behind earlier work: an irecv waiting for a message must not block a collective that
// the sender has to finish first. Works complete from the transport's completion callback via
// the executor's completion thread.
#include <c10/util/Exception.h>

#include "backend/core/group_core.h"
#include "backend/core/tensor_args.h"
#include "backend/cpu/cpu_side.h"
#include "backend/recorder/flight_recorder.h"

namespace xccl::backend {

Side::WorkPtr CpuSide::pointToPoint(std::vector<at::Tensor>& tensors, int peer, int tag,
                                    bool isSend, const char* opName) {
  at::Tensor tensor = single(tensors, opName);
  if (peer != net::kAnySource) checkPeer(peer, rank_, size_, opName);
  TORCH_CHECK_VALUE(tag >= 0, "xccl ", opName, ": tag must be non-negative, got ", tag);
  group_.checkUsable(opName);
  c10d::OpType type =
      isSend ? c10d::OpType::SEND
             : (peer == net::kAnySource ? c10d::OpType::RECVANYSOURCE : c10d::OpType::RECV);
  auto work =
      c10::make_intrusive<XcclWork>(rank_, type, opName, group_.sequencer().sequenceNumber(),
                                    std::vector<at::Tensor>{tensor},
                                    group_.sequencer().effectiveTimeout(c10d::kUnsetTimeout));
  group_.batch().add(work, opName);
  Executor* executor = group_.sequencer().executor();
  const uint64_t record = group_.recorder().recordPointToPoint(isSend, peer, tensor);
  std::string what = std::string(opName) + (isSend ? " to rank " : " from rank ") +
                     (peer == net::kAnySource ? std::string("any") : std::to_string(peer)) +
                     " (tag " + std::to_string(tag) + ")";
  // Runs under the transport's lock: only capture the outcome and hand over.
  auto onDone = [executor, work, what, record](const net::Request& request) {
    bool ok = request.state() == net::Request::State::kDone;
    std::string error = ok ? std::string() : what + " failed: " + request.errorMessage();
    int source = request.peer();
    FlightRecorder::get().finished(record, ok);  // never blocks: only the recorder's lock
    executor->complete([work, ok, error, source] {
      if (!ok) {
        work->fail(ErrorKind::kPeerFailure, error);
        return;
      }
      work->setSourceRank(source);
      work->succeed();
    });
  };
  net::MessageTag messageTag{net::TagSpace::kPointToPoint, 0, static_cast<uint64_t>(tag)};
  if (isSend) {
    group_.membership().transport()->isend(peer, messageTag, tensor.data_ptr(), byteSize(tensor),
                                           onDone);
  } else {
    group_.membership().transport()->irecv(peer, messageTag, tensor.data_ptr(), byteSize(tensor),
                                           onDone);
  }
  return work;
}

Side::WorkPtr CpuSide::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  return pointToPoint(tensors, dstRank, tag, /*isSend=*/true, "send");
}

Side::WorkPtr CpuSide::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  return pointToPoint(tensors, srcRank, tag, /*isSend=*/false, "recv");
}

Side::WorkPtr CpuSide::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  return pointToPoint(tensors, net::kAnySource, tag, /*isSend=*/false, "recv");
}

}  // namespace xccl::backend
