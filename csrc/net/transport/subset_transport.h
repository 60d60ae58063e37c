// Some ranks of a transport seen as a transport of their own: rank i of the subset is rank
// members[i] of the inner transport. Messages travel over the inner transport unchanged (same
// tags), so a subset must only carry collectives that no other rank of the inner transport runs
// under the same tags (the host leaders of a hierarchical all_reduce: net/transport/hierarchy.h).
#pragma once

#include <vector>

#include "net/transport/transport.h"

namespace xccl::net {

class SubsetTransport final : public Transport {
 public:
  // `members` are distinct inner ranks in subset order and include inner.rank(); `inner` must
  // outlive this object.
  SubsetTransport(Transport& inner, std::vector<int> members);

  // Subset ranks become inner ranks here; requests name the inner rank as their peer, so errors
  // and timeouts name real ranks.
  RequestPtr isend(int peer, MessageTag tag, const void* data, size_t bytes,
                   Completion onDone) override;
  RequestPtr irecv(int peer, MessageTag tag, void* data, size_t bytes, Completion onDone) override;
  bool peerFailed(int peer, std::string* why) override;
  // The inner transport's answers of the members, in subset order.
  std::vector<std::string> queryStatus(Deadline deadline) override;

  // The rest is the inner transport's own: requests are its requests, and aborting aborts it (a
  // subset cannot fail alone).
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const char* name() const override { return inner_.name(); }
  void wait(const std::vector<RequestPtr>& requests, Deadline deadline,
            const std::string& what) override {
    inner_.wait(requests, deadline, what);
  }
  void abort(const std::string& reason) override { inner_.abort(reason); }
  void setStatusProvider(std::function<std::string()> provider) override {
    inner_.setStatusProvider(std::move(provider));
  }

  const std::vector<int>& members() const { return members_; }

 private:
  int inner(int peer) const;

  Transport& inner_;
  const std::vector<int> members_;
  int rank_ = -1;
};

}  // namespace xccl::net
