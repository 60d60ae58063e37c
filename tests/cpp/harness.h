// Shared GoogleTest harness: N ranks as threads over a MemoryStore and real TCP transports.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "net/store.h"
#include "net/tcp/transport.h"

namespace xccl::testing {

inline net::tcp::TcpOptions loopbackOptions(const std::string& prefix = "tcp") {
  net::tcp::TcpOptions options;
  options.storeHost = "127.0.0.1";
  options.timeout = std::chrono::seconds(30);
  options.storePrefix = prefix;
  return options;
}

// Builds `size` TCP transports (one per thread, as ranks), runs body(rank, transport) on each
// rank's thread and rethrows the first failure after all threads joined.
inline void runRanks(int size, const net::tcp::TcpOptions& options,
                     const std::function<void(int, net::Transport&)>& body) {
  net::MemoryStore store;
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::exception_ptr failure;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        net::tcp::TcpTransport transport(store, rank, size, options);
        body(rank, transport);
      } catch (...) {
        std::lock_guard<std::mutex> guard(mutex);
        if (!failure) failure = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

inline void runRanks(int size, const std::function<void(int, net::Transport&)>& body) {
  runRanks(size, loopbackOptions(), body);
}

}  // namespace xccl::testing
