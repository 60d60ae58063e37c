// RecorderLink: a group's entries in the flight recorder (backend/recorder/flight_recorder.h;
// GroupCore's part, group_core.h): the group's name and members, each collective as scheduled,
// and each send and recv, numbered as torch numbers them (a collective's sequence number; the
// point-to-point count, which only the recorder keeps). It reads the membership (rank, size) and
// the sequencer (the last collective's number, the group's timeout); it changes neither.
//
// Threads: every method may be called from any thread; renew() runs with no operation in flight.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace xccl::backend {

class Membership;
class Sequencer;

class RecorderLink {
 public:
  // `face` is the c10d::Backend the group serves (its group uid and description name the group
  // to the recorder); `options` are its options.
  RecorderLink(const c10d::Backend& face, c10::intrusive_ptr<c10d::Backend::Options> options,
               const Membership& membership, const Sequencer& sequencer);

  // Names this group to the recorder (its name, description and members' global ranks).
  void describe();
  // Records a collective of `count` sequence numbers from `seq` as scheduled.
  uint64_t recordCollective(c10d::OpType type, uint64_t seq, uint64_t count,
                            const std::vector<at::Tensor>& inputs,
                            const std::vector<at::Tensor>& outputs,
                            std::chrono::milliseconds timeout);
  // Records a send or recv (peer net::kAnySource: any) as started, since it is posted at once.
  uint64_t recordPointToPoint(bool isSend, int peer, const at::Tensor& tensor);
  // A new membership (reconfigure): the point-to-point count back to 0.
  void renew() { p2pSeq_.store(0); }

 private:
  const c10d::Backend& face_;
  const c10::intrusive_ptr<c10d::Backend::Options> options_;
  const Membership& membership_;
  const Sequencer& sequencer_;
  const size_t groupId_;
  std::atomic<bool> described_{false};
  std::atomic<uint64_t> p2pSeq_{0};  // torch's p2p_seq_id: sends and recvs so far
};

}  // namespace xccl::backend
