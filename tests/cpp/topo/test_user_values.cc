// What a user writes into a topology file (XCCL_TOPO_FILE): numbers past their bounds are refused
// with kInvalidArgument, never wrapped into valid-looking ones or allocated for
// (tests/fuzz/fuzz_user_values.cc explores the rest).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "threads.h"
#include "topo/sysfs.h"
#include "topo/topology.h"

namespace xccl::topo {
namespace {

using testing::errorKindOf;

TEST(TopologyFileValues, CpuListsAreBoundedBeforeAllocating) {
  EXPECT_EQ(parseCpuList("0-" + std::to_string(kMaxCpus - 1)).size(), kMaxCpus);
  for (const std::string& bad :
       std::vector<std::string>{"0-" + std::to_string(kMaxCpus), "0-9999999", "0-40000,0-40000",
                                "5,0-" + std::to_string(kMaxCpus - 1)}) {
    EXPECT_EQ(errorKindOf([&] { parseCpuList(bad); }), ErrorKind::kInvalidArgument) << bad;
  }
}

std::string twoGpus(const std::string& links, const std::string& distances = "[10]") {
  return R"({"format": "xccl-topology", "version": 1, "numaNodes": [{"id": 0, "distances": )" +
         distances + R"(}], "gpus": [{}, {}], "gpuLinks": [)" + links + "]}";
}

TEST(TopologyFileValues, IdsAndDistancesDoNotWrap) {
  EXPECT_EQ(fromJson(twoGpus(R"({"gpus": [0, 1], "type": "nvlink"})")).gpuLinks.size(), 1u);
  // 2^32 once read as GPU 0, and 2^32 + 10 as distance 10.
  for (const std::string& bad :
       {twoGpus(R"({"gpus": [4294967296, 1], "type": "nvlink"})"),
        twoGpus(R"({"gpus": [0, 4294967297], "type": "nvlink"})"), twoGpus("", "[4294967306]")}) {
    EXPECT_EQ(errorKindOf([&] { fromJson(bad); }), ErrorKind::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace xccl::topo
