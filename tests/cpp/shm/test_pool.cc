// The per-rank tensor pools of a segment (net/regions/shm/pool.h) and the zero-copy all_gather and
// reduce_scatter over them: allocation reuse, merging and exhaustion; exact results for every
// placement of the inputs (in the pool on all, some or no ranks) with inputs of one and of many
// slots; the traffic counters say what went through the slots and what was read in place.
#include <cstring>
#include <numeric>

#include "shm_testing.h"

namespace xccl {
namespace {

using testing::ShmCalls;

constexpr size_t kSlot = 4096;
constexpr size_t kPool = size_t{1} << 20;

// Ranks as threads over one segment with pools of `poolBytes`.
void runPoolRanks(int size, size_t poolBytes,
                  const std::function<void(int, net::shm::Segment&)>& body) {
  net::MemoryStore store;
  testing::runThreads(size, [&](int rank) {
    net::shm::Options options = testing::shmOptions(kSlot);
    options.poolBytes = poolBytes;
    std::string why;
    auto segment = net::shm::Segment::create(store, rank, size, options, &why);
    if (!segment) XCCL_THROW(ErrorKind::kInternal, "shared memory unavailable: ", why);
    body(rank, *segment);
  });
}

TEST(ShmPool, AllocationsAreReusedMergedAndBounded) {
  runPoolRanks(2, 64 * 1024, [](int, net::shm::Segment& segment) {
    net::shm::Pool& pool = *segment.pool();
    EXPECT_EQ(pool.bytesPerRank(), 64u * 1024);
    void* a = pool.allocate(1000);  // rounds to 1024
    void* b = pool.allocate(3 * 1024);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(static_cast<uint8_t*>(b) - static_cast<uint8_t*>(a), 1024);
    EXPECT_EQ(pool.offsetOf(b, 3 * 1024), std::optional<size_t>(1024));
    EXPECT_FALSE(pool.offsetOf(b, 64 * 1024));  // runs past the region
    int local = 0;
    EXPECT_FALSE(pool.offsetOf(&local, sizeof(local)));
    EXPECT_EQ(pool.stats().inUse, 4u * 1024);
    pool.release(a);
    EXPECT_EQ(pool.allocate(512), a);  // first fit reuses the freed block
    pool.release(a);
    pool.release(b);
    // Everything merged back: the whole region is one block again.
    void* all = pool.allocate(64 * 1024);
    EXPECT_EQ(all, a);
    EXPECT_EQ(pool.allocate(1), nullptr);
    const net::shm::PoolStats stats = pool.stats();
    EXPECT_EQ(stats.failures, 1u);
    EXPECT_EQ(stats.allocations, 4u);
    EXPECT_EQ(stats.reserved, 64u * 1024);
    pool.release(all);
    EXPECT_EQ(pool.stats().inUse, 0u);
  });
}

// Tensors may outlive their group: the pool's mapping stays while anyone holds the pool.
TEST(ShmPool, OutlivesItsSegment) {
  net::MemoryStore store;
  testing::runThreads(2, [&](int rank) {
    net::shm::Options options = testing::shmOptions(kSlot);
    options.poolBytes = 64 * 1024;
    std::string why;
    auto segment = net::shm::Segment::create(store, rank, 2, options, &why);
    ASSERT_NE(segment, nullptr) << why;
    std::shared_ptr<net::shm::Pool> pool = segment->pool();
    auto* data = static_cast<uint32_t*>(pool->allocate(4096));
    ASSERT_NE(data, nullptr);
    segment.reset();
    std::fill(data, data + 1024, 0xabcdu + rank);  // still mapped: no fault
    EXPECT_EQ(data[1023], 0xabcdu + rank);
    pool->release(data);
  });
}

TEST(ShmPool, NoPoolUnlessAskedFor) {
  testing::runShmRanks(2, kSlot,
                       [](int, net::shm::Segment& segment) { EXPECT_EQ(segment.pool(), nullptr); });
}

// Rank r's input element i: distinct per rank and position, exact in fp32.
float valueOf(int rank, size_t i) { return static_cast<float>(rank * 100000 + i % 50000); }

// placement bit r set: rank r's input is in its pool. Elements: one slot and many slots.
void checkPlacement(int world, unsigned placement, size_t count) {
  runPoolRanks(world, kPool, [&](int rank, net::shm::Segment& segment) {
    ShmCalls calls(segment);
    const bool inPool = placement >> rank & 1;
    net::shm::Pool& pool = *segment.pool();
    const net::shm::Traffic& traffic = segment.traffic();
    const uint64_t staged0 = traffic.staged, direct0 = traffic.direct;

    // all_gather: in the pool, the input is this rank's part of the output (as in FSDP2).
    std::vector<float> ordinaryOut(world * count), ordinaryIn(count);
    float* out =
        inPool ? static_cast<float*>(pool.allocate(world * count * 4)) : ordinaryOut.data();
    float* in = inPool ? out + rank * count : ordinaryIn.data();
    for (size_t i = 0; i < count; ++i) in[i] = valueOf(rank, i);
    algo::shm::allGather(calls.next("allgather"), in, out, std::vector<size_t>(world, count * 4));
    // The caller owns its buffers again once the call returns: a peer still reading this rank's
    // pool now (a missing release step) would get these instead of the values. (This rank's own
    // part of the output is its input here, so only the peers' parts are checked.)
    std::fill(in, in + count, -1.0f);
    for (int r = 0; r < world; ++r) {
      for (size_t i = 0; i < count && r != rank; ++i) {
        ASSERT_EQ(out[r * count + i], valueOf(r, i)) << "rank " << rank << " part " << r;
      }
    }

    // reduce_scatter of world * count elements.
    std::vector<float> ordinaryRs(world * count), result(count);
    float* rsIn =
        inPool ? static_cast<float*>(pool.allocate(world * count * 4)) : ordinaryRs.data();
    for (size_t i = 0; i < world * count; ++i) rsIn[i] = valueOf(rank, i);
    algo::shm::reduceScatter(calls.next("reduce_scatter"), rsIn, result.data(), count,
                             DataType::kFloat32, ReduceOp::kSum);
    std::fill(rsIn, rsIn + world * count, -1.0f);  // as above
    for (size_t i = 0; i < count; ++i) {
      float expected = 0;
      for (int r = 0; r < world; ++r) expected += valueOf(r, rank * count + i);
      ASSERT_EQ(result[i], expected) << "rank " << rank << " element " << i;
    }

    // Pool inputs go through no slot (else all_gather stages this rank's part and reduce_scatter
    // the world - 1 blocks of its peers); every peer in the pool is read in place.
    const int directPeers = __builtin_popcount(placement) - (inPool ? 1 : 0);
    const uint64_t staged = traffic.staged - staged0, direct = traffic.direct - direct0;
    const uint64_t bytes = count * 4;
    EXPECT_EQ(staged, inPool ? 0 : world * bytes);
    EXPECT_EQ(direct, 2 * directPeers * bytes);
    if (inPool) {
      pool.release(out);
      pool.release(rsIn);
    }
  });
}

TEST(ShmPool, ZeroCopyCollectivesAreExactForEveryPlacement) {
  for (int world : {2, 3}) {
    for (unsigned placement = 0; placement < (1u << world); ++placement) {
      for (size_t count : {size_t{5}, size_t{3000}}) {  // 3000 fp32: several slots per part
        SCOPED_TRACE(::testing::Message()
                     << "world " << world << " placement " << placement << " count " << count);
        checkPlacement(world, placement, count);
      }
    }
  }
}

}  // namespace
}  // namespace xccl
