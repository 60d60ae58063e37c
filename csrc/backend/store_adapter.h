// net::Store over the c10d::Store torch hands the backend (already prefixed per group).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "common/error.h"
#include "net/store.h"

namespace xccl::backend {

class StoreAdapter final : public net::Store {
 public:
  StoreAdapter(c10::intrusive_ptr<c10d::Store> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}

  void set(const std::string& key, const net::Bytes& value) override {
    store_->set(prefix_ + key, value);
  }
  net::Bytes get(const std::string& key, std::chrono::milliseconds timeout) override {
    try {
      store_->wait({prefix_ + key}, timeout);
    } catch (const c10::DistNetworkError& e) {
      // Not a slow rank: the store itself is gone, and no rank can publish anything any more.
      XCCL_THROW(ErrorKind::kPeerFailure,
                 "the store is unreachable (its server exited, or the "
                 "network to it failed) while waiting for key '",
                 prefix_ + key, "': ", e.what());
    } catch (const std::exception& e) {
      XCCL_THROW(ErrorKind::kTimeout, "waiting for store key '", prefix_ + key, "': ", e.what());
    }
    return store_->get(prefix_ + key);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return store_->add(prefix_ + key, delta);
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::string prefix_;
};

}  // namespace xccl::backend
