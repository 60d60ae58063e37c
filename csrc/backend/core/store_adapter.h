// net::Store over the c10d::Store torch hands the backend (already prefixed per group).
#pragma once

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "common/error.h"
#include "net/rendezvous/incarnation.h"
#include "net/rendezvous/store.h"

namespace xccl::backend {

// The one scope every key of a group creation goes under (net/rendezvous/incarnation.h): the
// group's store wrapped once at creation; every store the group derives from it (memberships,
// windows, the GPU side) is a prefix of this one, which carries the creation's tag for
// shared-memory names.
class IncarnationStore final : public c10d::PrefixStore {
 public:
  IncarnationStore(const std::string& prefix, c10::intrusive_ptr<c10d::Store> store,
                   std::string tag)
      : c10d::PrefixStore(prefix, std::move(store)), tag_(std::move(tag)) {}
  const std::string& tag() const { return tag_; }

  // The tag of the incarnation `store` lies under; "" for a store outside any.
  static std::string tagOf(const c10::intrusive_ptr<c10d::Store>& store) {
    c10d::Store* at = store.get();
    while (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(at)) {
      if (auto* scoped = dynamic_cast<IncarnationStore*>(prefixed)) return scoped->tag_;
      at = prefixed->getUnderlyingStore().get();
    }
    return "";
  }

 private:
  std::string tag_;
};

class StoreAdapter final : public net::Store, public net::IncarnationTagged {
 public:
  StoreAdapter(c10::intrusive_ptr<c10d::Store> store, std::string prefix)
      : store_(std::move(store)),
        prefix_(std::move(prefix)),
        tag_(IncarnationStore::tagOf(store_)) {}

  void set(const std::string& key, const net::Bytes& value) override {
    reaching(key, [&] { store_->set(prefix_ + key, value); });
  }
  net::Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    reaching(key, [&] {
      try {
        store_->wait({prefix_ + key}, timeout);
      } catch (const c10::DistNetworkError&) {
        throw;  // the store is gone: reaching() says so
      } catch (const std::exception& e) {
        XCCL_THROW(ErrorKind::kTimeout, "waiting for store key '", prefix_ + key, "': ", e.what());
      }
    });
    net::Bytes value;
    reaching(key, [&] { value = store_->get(prefix_ + key); });
    return value;
  }
  int64_t add(const std::string& key, int64_t delta) override {
    int64_t value = 0;
    reaching(key, [&] { value = store_->add(prefix_ + key, delta); });
    return value;
  }
  std::string incarnationTag() const override { return tag_; }

 private:
  // Runs one store operation on `key`. A network error is not a slow rank: the store itself is
  // gone (its server exited, or the network to it failed), and no rank can publish anything any
  // more, so it fails the caller as such instead of blaming the ranks it waited for.
  template <typename Operation>
  void reaching(const std::string& key, Operation&& operation) {
    try {
      operation();
    } catch (const c10::DistNetworkError& e) {
      XCCL_THROW(ErrorKind::kPeerFailure,
                 "the store is unreachable (its server exited, or the network to it failed) at "
                 "key '",
                 prefix_ + key, "': ", e.what());
    }
  }

  c10::intrusive_ptr<c10d::Store> store_;
  std::string prefix_;
  std::string tag_;
};

}  // namespace xccl::backend
