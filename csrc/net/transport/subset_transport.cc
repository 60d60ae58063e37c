#include "net/transport/subset_transport.h"

#include <set>

namespace xccl::net {

SubsetTransport::SubsetTransport(Transport& inner, std::vector<int> members)
    : inner_(inner), members_(std::move(members)) {
  std::set<int> distinct;
  for (size_t i = 0; i < members_.size(); ++i) {
    XCCL_CHECK_ARG(members_[i] >= 0 && members_[i] < inner_.size() &&
                       distinct.insert(members_[i]).second,
                   "bad subset member ", members_[i], " of a transport of ", inner_.size());
    if (members_[i] == inner_.rank()) rank_ = static_cast<int>(i);
  }
  XCCL_CHECK_ARG(rank_ >= 0, "rank ", inner_.rank(), " is not a member of its subset");
}

int SubsetTransport::inner(int peer) const {
  XCCL_CHECK_ARG(peer >= 0 && peer < size(), "rank ", peer, " is not in a subset of ", size());
  return members_[peer];
}

RequestPtr SubsetTransport::isend(int peer, MessageTag tag, const void* data, size_t bytes,
                                  Completion onDone) {
  return inner_.isend(inner(peer), tag, data, bytes, std::move(onDone));
}

RequestPtr SubsetTransport::irecv(int peer, MessageTag tag, void* data, size_t bytes,
                                  Completion onDone) {
  // A receive from any source could match a message from outside the subset.
  XCCL_CHECK_ARG(peer != kAnySource, "a subset transport cannot receive from any source");
  return inner_.irecv(inner(peer), tag, data, bytes, std::move(onDone));
}

std::vector<std::string> SubsetTransport::queryStatus(Deadline deadline) {
  std::vector<std::string> all = inner_.queryStatus(deadline), mine;
  for (int member : members_) mine.push_back(all[member]);
  return mine;
}

bool SubsetTransport::peerFailed(int peer, std::string* why) {
  return inner_.peerFailed(inner(peer), why);
}

}  // namespace xccl::net
