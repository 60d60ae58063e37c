// Inputs and checks shared by the collective tests over TCP (tests/cpp/algo) and over shm
// (tests/cpp/shm): small-integer reduction inputs whose result is exact in any combination
// order, byte patterns that differ per (source, destination) pair, and all_to_all buffers.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "algo_testing.h"

namespace xccl::testing {

inline uint32_t mix(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return static_cast<uint32_t>(x);
}

// ---------------------------------------------------------------------------------------------
// Reductions: small integer inputs, so every result is exact in any combination order.

struct ReduceCase {
  DataType type;
  ReduceOp op;
};

inline std::string describe(const ReduceCase& c, size_t count, int rank) {
  return std::string(dataTypeName(c.type)) + " " + reduceOpName(c.op) + " count " +
         std::to_string(count) + " on rank " + std::to_string(rank);
}

// What `rank` contributes at element i to a reduction over `world` ranks.
inline double contribution(const ReduceCase& c, int world, int rank, size_t i) {
  const uint32_t h = mix(rank, i);
  if (c.type == DataType::kBool) return (i % 11 != 0 && h % 4 != 0) ? 1 : 0;
  if (c.op == ReduceOp::kProduct) {  // |product| <= 2^5 for five ranks
    static const double kFactors[] = {-2, -1, 1, 2};
    if (rank == 0 && i % 13 == 0) return 0;
    return c.type == DataType::kUInt8 ? 1 + h % 2 : kFactors[h % 4];
  }
  if (c.op == ReduceOp::kAvg && isFloating(c.type)) {
    // A per-element base plus per-rank offsets summing to zero: the average is exactly the base.
    const double base = static_cast<int>(mix(~0ull, i) % 17) - 8;
    return base + (rank < world - 1 ? rank : -(world - 1) * (world - 2) / 2);
  }
  if (c.type == DataType::kUInt8) return h % 17;
  return static_cast<int>(h % 17) - 8;
}

// The reduction of element i over `world` ranks.
inline double reduced(const ReduceCase& c, int world, size_t i) {
  double acc = contribution(c, world, 0, i);
  for (int r = 1; r < world; ++r) {
    acc = combineExact(c.type, algo::combinerOf(c.op), acc, contribution(c, world, r, i));
  }
  if (c.op == ReduceOp::kAvg) {  // integers truncate toward zero
    acc = isFloating(c.type) ? acc / world : static_cast<double>(static_cast<int64_t>(acc) / world);
  }
  return acc;
}

// `rank`'s input: contribution() for elements [0, count).
inline TypedBuffer contributions(const ReduceCase& c, int world, int rank, size_t count) {
  TypedBuffer buffer(c.type, count);
  for (size_t i = 0; i < count; ++i) buffer.set(i, contribution(c, world, rank, i));
  return buffer;
}

// ---------------------------------------------------------------------------------------------
// Data movement: byte patterns that differ per (source, destination) pair and along the data.

constexpr uint8_t kUntouched = 0xee;

inline uint8_t pattern(int a, int b, size_t j) {
  // (a * 8 + b) * 37 is distinct mod 256 for a, b < 8: parts from different ranks differ.
  return static_cast<uint8_t>(j * 131 + (j >> 9) * 7 + (a * 8 + b) * 37 + 1);
}

inline std::vector<uint8_t> filled(size_t bytes, int a, int b) {
  std::vector<uint8_t> data(bytes);
  for (size_t j = 0; j < bytes; ++j) data[j] = pattern(a, b, j);
  return data;
}

inline ::testing::AssertionResult hasPattern(const uint8_t* data, size_t bytes, int a, int b) {
  for (size_t j = 0; j < bytes; ++j) {
    if (data[j] != pattern(a, b, j)) {
      return ::testing::AssertionFailure()
             << "byte " << j << " of " << bytes << " is " << int(data[j]) << ", expected "
             << int(pattern(a, b, j)) << " (part " << a << "/" << b << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Per-rank byte counts for all_gather: `equal` bytes from every rank for each of `equalSizes`,
// then uneven with zero-length parts, then one rank only.
inline std::vector<std::vector<size_t>> allGatherLayouts(int world,
                                                         const std::vector<size_t>& equalSizes) {
  std::vector<std::vector<size_t>> layouts;
  for (size_t bytes : equalSizes) layouts.emplace_back(world, bytes);
  std::vector<size_t> uneven, single(world, 0);
  for (int r = 0; r < world; ++r) uneven.push_back(r % 3 == 1 ? 0 : 1 + r * 4099);
  single[world - 1] = 9001;
  layouts.push_back(uneven);
  layouts.push_back(single);
  return layouts;
}

// One rank's all_gather arguments: part r (bytesPerRank[r] bytes) holds pattern(r, 3); with
// `inPlace` the input is this rank's part of the output.
struct AllGatherBuffers {
  AllGatherBuffers(const std::vector<size_t>& bytesPerRank, int rank, bool inPlace)
      : bytes(bytesPerRank),
        offset(bytesPerRank.size()),
        input(filled(bytesPerRank[rank], rank, 3)) {
    size_t total = 0;
    for (size_t r = 0; r < bytes.size(); ++r) offset[r] = total, total += bytes[r];
    output.assign(total, kUntouched);
    in = input.data();
    if (inPlace) {
      std::copy(input.begin(), input.end(), output.begin() + offset[rank]);
      in = output.data() + offset[rank];
    }
  }

  void expectGathered(int rank, const std::string& what) const {
    for (size_t r = 0; r < bytes.size(); ++r) {
      EXPECT_TRUE(hasPattern(output.data() + offset[r], bytes[r], r, 3))
          << "part " << r << " on rank " << rank << what;
    }
  }

  std::vector<size_t> bytes, offset;
  std::vector<uint8_t> input, output;
  const void* in;
};

// One rank's all_to_all arguments, `length(src, dst)` bytes from src to dst, each part filled
// with pattern(src, dst). Parts are laid out with gaps, and received parts in reverse rank order,
// so the offsets must be honoured, not assumed contiguous.
struct AllToAllBuffers {
  template <typename Length>
  AllToAllBuffers(int world, int rank, Length length)
      : sendOffsets(world), sendLengths(world), recvOffsets(world), recvLengths(world) {
    size_t inBytes = 0, outBytes = 0;
    for (int peer = 0; peer < world; ++peer) {
      sendLengths[peer] = length(rank, peer);
      sendOffsets[peer] = inBytes;
      inBytes += sendLengths[peer] + 3;
    }
    for (int peer = world - 1; peer >= 0; --peer) {
      recvLengths[peer] = length(peer, rank);
      recvOffsets[peer] = outBytes;
      outBytes += recvLengths[peer] + 5;
    }
    input.assign(inBytes, 0);
    output.assign(outBytes, kUntouched);
    for (int peer = 0; peer < world; ++peer) {
      std::vector<uint8_t> part = filled(sendLengths[peer], rank, peer);
      std::copy(part.begin(), part.end(), input.begin() + sendOffsets[peer]);
    }
  }

  // Every received part holds its sender's pattern, and no byte outside them was written.
  void expectReceived(int rank, const std::string& what) const {
    std::vector<bool> covered(output.size(), false);
    for (size_t peer = 0; peer < recvLengths.size(); ++peer) {
      EXPECT_TRUE(hasPattern(output.data() + recvOffsets[peer], recvLengths[peer], peer, rank))
          << "from rank " << peer << " on rank " << rank << ", " << what;
      std::fill_n(covered.begin() + recvOffsets[peer], recvLengths[peer], true);
    }
    size_t clobbered = 0;
    for (size_t j = 0; j < output.size(); ++j) clobbered += !covered[j] && output[j] != kUntouched;
    EXPECT_EQ(clobbered, 0u) << "bytes written outside the receive parts on rank " << rank;
  }

  std::vector<size_t> sendOffsets, sendLengths, recvOffsets, recvLengths;
  std::vector<uint8_t> input, output;
};

}  // namespace xccl::testing
