// Every exchange through the store at group creation goes through one Bootstrap: the TCP mesh's
// secret and addresses, shared-memory segments, the hierarchy of hosts, CUDA IPC workspaces, the
// GPU placement, the settings check. So each exchange has one deadline, a timeout names every rank
// that did not take part, and a step that can fail on some ranks ends alike on all of them
// (agree()). Layering: docs/design.md.
//
// Every exchange is collective: every rank of the group calls it with the same key. Keys go under
// the bootstrap's prefix; callers make prefixes unique per group and per attempt, because a store
// never forgets a key (a reused key reads the previous call's values).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/rendezvous/deadline.h"
#include "net/rendezvous/store.h"

namespace xccl::net {

// 64 random bits from std::random_device: segment names, process tokens (the TCP links' secrets
// come from getrandom: net_key.h).
uint64_t randomToken();

// What every rank said in one agree(): the same on every rank.
struct Agreement {
  std::vector<std::string> failures;  // by rank; "" where that rank had none

  bool ok() const;
  // "rank r: reason" for the lowest failing rank; "" when ok().
  std::string first() const;
  // Every failing rank's reason, ranks with the same reason grouped (tally(); defined in
  // agree.cc with the other verdict texts).
  std::string all() const;
};

class Bootstrap {
 public:
  // Each exchange waits at most `timeout`, unless until() set one deadline for all of them.
  Bootstrap(Store& store, std::string prefix, int rank, int size,
            std::chrono::milliseconds timeout);

  int rank() const { return rank_; }
  int size() const { return size_; }
  Store& store() const { return store_; }
  const std::string& prefix() const { return prefix_; }

  // The same ranks, keys under prefix/name.
  Bootstrap scoped(const std::string& name) const;
  // The same ranks and keys; every exchange ends by `deadline` (the steps of one setup together).
  Bootstrap until(Deadline deadline) const;

  // Every rank publishes `mine`; returns every rank's value in rank order. Throws kTimeout naming
  // every rank that did not publish by the deadline (this rank's value stays published).
  std::vector<Bytes> allGather(const std::string& key, const Bytes& mine) const;
  std::vector<std::string> allGather(const std::string& key, const std::string& mine) const;
  // `root` publishes `value` (ignored elsewhere); every rank returns it. kTimeout like allGather.
  Bytes broadcast(const std::string& key, int root, const Bytes& value) const;
  // A random token drawn by rank 0 (randomToken()) that every rank returns: a group's nonce or
  // session id, which strangers' connections and messages cannot match. kTimeout like allGather.
  uint64_t sharedToken(const std::string& key) const;
  // Every rank says why it cannot go on ("" when it can) and learns what every rank said, so all
  // proceed or all fail alike. kTimeout like allGather.
  Agreement agree(const std::string& key, const std::string& failure) const;

 private:
  Deadline deadline() const;
  std::string keyOf(const std::string& key, int rank) const;
  [[noreturn]] void throwMissing(const std::string& key, const std::vector<int>& missing,
                                 const std::string& storeError) const;

  Store& store_;
  std::string prefix_;
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  Deadline deadline_{};  // set by until(); otherwise each exchange's own now + timeout_
};

}  // namespace xccl::net
