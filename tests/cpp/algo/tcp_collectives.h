// The fixture of the collective tests over real loopback TCP (test_collectives.cc,
// test_data_movement.cc): per-rank contexts as the backend issues them, and the parameters
// (world size x forced algorithm).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <string>
#include <vector>

#include "algo/collectives.h"
#include "collective_cases.h"
#include "harness.h"

namespace xccl::testing {

constexpr size_t kOdd = 4099;       // several 4 KiB ring chunks per segment, uneven segments
constexpr size_t kLarge = 1000003;  // > 1M elements, odd
constexpr size_t kSmallCounts[] = {0, 1, 7, kOdd};

// One rank's communicator: contexts with increasing sequence numbers on one transport, as the
// backend issues them.
class Calls {
 public:
  Calls(net::Transport& transport, algo::Algorithm algorithm) : transport_(transport) {
    tunables_.forced = algorithm;
    tunables_.ringChunkBytes = 4096;  // the ring pipelines many chunks even for modest sizes
  }
  void force(algo::Algorithm algorithm) { tunables_.forced = algorithm; }
  algo::Context next(const std::string& what) {
    ++seq_;
    return {transport_, seq_, what + " #" + std::to_string(seq_),
            net::Clock::now() + std::chrono::seconds(60), tunables_};
  }

 private:
  net::Transport& transport_;
  algo::Tunables tunables_;
  uint64_t seq_ = 0;
};

struct CollectiveParam {
  int world;
  algo::Algorithm algorithm;
};

inline std::string paramName(const ::testing::TestParamInfo<CollectiveParam>& info) {
  return std::string(algo::algorithmName(info.param.algorithm)) + "_world" +
         std::to_string(info.param.world);
}

// Each world size with each algorithm forced, and kAuto.
inline std::vector<CollectiveParam> allParams(std::initializer_list<int> worlds) {
  std::vector<CollectiveParam> params;
  for (int world : worlds) {
    for (algo::Algorithm a :
         {algo::Algorithm::kDirect, algo::Algorithm::kRing, algo::Algorithm::kAuto}) {
      params.push_back({world, a});
    }
  }
  return params;
}

// Its tests live in test_collectives.cc (reductions, where it is instantiated) and
// test_data_movement.cc (broadcast, all_gather).
class Collectives : public ::testing::TestWithParam<CollectiveParam> {
 protected:
  int world() const { return GetParam().world; }
  algo::Algorithm algorithm() const { return GetParam().algorithm; }
  // > 1M elements with each forced algorithm (kAuto picks one of them for such sizes).
  bool withLarge() const { return world() <= 4 && algorithm() != algo::Algorithm::kAuto; }
};

}  // namespace xccl::testing
