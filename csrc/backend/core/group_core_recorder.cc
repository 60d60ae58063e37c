#include "backend/core/group_core_recorder.h"

#include "backend/core/group_core_membership.h"
#include "backend/core/group_core_sequencer.h"
#include "backend/recorder/flight_recorder.h"

namespace xccl::backend {
namespace {

// torch's recorder name for an operation (ProcessGroupNCCL's profiling titles, the names
// torch/distributed/flight_recorder/components/types.py matches); `count` > 1 for the coalesced
// forms of the flat all_gather and reduce_scatter.
const char* torchOpName(c10d::OpType type, uint64_t count) {
  switch (type) {
    case c10d::OpType::BROADCAST: return "broadcast";
    case c10d::OpType::ALLREDUCE: return "all_reduce";
    case c10d::OpType::ALLREDUCE_COALESCED: return "allreduce_coalesced";
    case c10d::OpType::REDUCE: return "reduce";
    case c10d::OpType::ALLGATHER: return "all_gather";
    case c10d::OpType::_ALLGATHER_BASE:
      return count > 1 ? "all_gather_into_tensor_coalesced" : "_all_gather_base";
    case c10d::OpType::ALLGATHER_COALESCED: return "ALLGATHER_coalesced";
    case c10d::OpType::GATHER: return "gather";
    case c10d::OpType::SCATTER: return "scatter";
    case c10d::OpType::REDUCE_SCATTER: return "reduce_scatter";
    case c10d::OpType::_REDUCE_SCATTER_BASE:
      return count > 1 ? "reduce_scatter_tensor_coalesced" : "_reduce_scatter_base";
    case c10d::OpType::ALLTOALL_BASE:
    case c10d::OpType::ALLTOALL: return "all_to_all";
    case c10d::OpType::BARRIER: return "barrier";
    default:
      // The analyzer rejects names it does not know; an all_reduce is the closest kin of
      // what is left (sparse and compressed all_reduce).
      return "all_reduce";
  }
}

// True for the first caller only; a plain load after that (the hot path).
bool firstUse(std::atomic<bool>& used) {
  return !used.load(std::memory_order_relaxed) && !used.exchange(true);
}

}  // namespace

RecorderLink::RecorderLink(const c10d::Backend& face,
                           c10::intrusive_ptr<c10d::Backend::Options> options,
                           const Membership& membership, const Sequencer& sequencer)
    : face_(face),
      options_(std::move(options)),
      membership_(membership),
      sequencer_(sequencer),
      groupId_(FlightRecorder::get().newGroupId()) {}

void RecorderLink::describe() {
  const int rank = membership_.rank(), size = membership_.size();
  std::vector<uint64_t> ranks(options_->global_ranks_in_group.begin(),
                              options_->global_ranks_in_group.end());
  if (ranks.size() != static_cast<size_t>(size)) {
    // The default group (torch leaves the list empty) or a direct build: group ranks are global.
    ranks.clear();
    for (int r = 0; r < size; ++r) ranks.push_back(static_cast<uint64_t>(r));
  }
  std::string name = options_->group_name.empty() ? face_.getGroupUid() : options_->group_name;
  if (name.empty()) name = std::to_string(groupId_);
  const std::string desc =
      face_.getGroupDesc().empty() ? std::string("undefined") : face_.getGroupDesc();
  FlightRecorder::get().describeGroup(groupId_, name, desc, ranks, static_cast<int>(ranks[rank]));
}

uint64_t RecorderLink::recordCollective(c10d::OpType type, uint64_t seq, uint64_t count,
                                        const std::vector<at::Tensor>& inputs,
                                        const std::vector<at::Tensor>& outputs,
                                        std::chrono::milliseconds timeout) {
  FlightRecorder& recorder = FlightRecorder::get();
  if (!recorder.enabled()) return FlightRecorder::kNoRecord;
  // Again at the first operation: torch names the group (setGroupDesc) after building it.
  if (firstUse(described_)) describe();
  FlightRecorder::Call call;
  call.groupId = groupId_;
  call.collectiveSeq = seq;
  call.p2pSeq = p2pSeq_.load();
  call.name = torchOpName(type, count);
  call.timeout = timeout;
  return recorder.record(call, inputs, outputs);
}

uint64_t RecorderLink::recordPointToPoint(bool isSend, int peer, const at::Tensor& tensor) {
  FlightRecorder& recorder = FlightRecorder::get();
  if (!recorder.enabled()) return FlightRecorder::kNoRecord;
  // Again at the first operation: torch names the group (setGroupDesc) after building it.
  if (firstUse(described_)) describe();
  FlightRecorder::Call call;
  call.groupId = groupId_;
  call.collectiveSeq = sequencer_.sequenceNumber();  // unchanged by point-to-point, as in torch
  call.p2pSeq = ++p2pSeq_;
  call.name = isSend ? "send" : "recv";
  call.isP2P = true;
  call.src = isSend ? membership_.rank() : peer;
  call.dst = isSend ? peer : membership_.rank();
  call.timeout = sequencer_.timeout();
  const std::vector<at::Tensor> tensors{tensor}, none;
  const uint64_t id = recorder.record(call, isSend ? tensors : none, isSend ? none : tensors);
  recorder.started(id);  // posted to the transport at once
  return id;
}

}  // namespace xccl::backend
