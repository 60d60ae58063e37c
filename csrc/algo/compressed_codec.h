// Internal to the compressed all_reduce (compressed_allreduce.h): the block loops that convert
// between a buffer's type S (float or double) and the wire type, and sum wire contributions in
// fp32. Written as plain loops over small blocks (the fp32 accumulator stays in L1) so the
// compiler vectorises them; the file including this is built with -O3.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "algo/reduce.h"

namespace xccl::algo::compressed {

constexpr size_t kBlock = 2048;  // elements per pass: 8 KiB of fp32 accumulator

// bfloat16: the upper half of a float. narrow rounds to nearest even and keeps NaN quiet, bit for
// bit as reduce.h's floatToBfloat16 (a test checks), inline so the loops vectorise.
struct BFloat16Wire {
  static float widen(uint16_t b) {
    const uint32_t bits = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  static uint16_t narrow(float f) {
    uint32_t x;
    std::memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);
    return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
  }
};

// IEEE half: reduce.h's portable conversions (no vector form here: the fp16 hook is the slower
// of the two on CPU; docs/training.md says to prefer bf16).
struct Float16Wire {
  static float widen(uint16_t h) { return halfToFloat(h); }
  static uint16_t narrow(float f) { return floatToHalf(f); }
};

template <typename W, typename S>
void narrow(const S* __restrict__ src, uint16_t* __restrict__ dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = W::narrow(static_cast<float>(src[i]));
}

template <typename W, typename S>
void widen(const uint16_t* __restrict__ src, S* __restrict__ dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = static_cast<S>(W::widen(src[i]));
}

// acc = srcs[0] + ... + srcs[n - 1] (widened, left to right: the same bytes on every rank),
// divided by `divisor`, then handed to out(i, value) for i < len (len <= kBlock).
template <typename W, typename Out>
void averageBlock(const uint16_t* const* srcs, int n, size_t offset, size_t len, float divisor,
                  Out out) {
  float acc[kBlock];
  const uint16_t* first = srcs[0] + offset;
  for (size_t i = 0; i < len; ++i) acc[i] = W::widen(first[i]);
  for (int r = 1; r < n; ++r) {
    const uint16_t* src = srcs[r] + offset;
    for (size_t i = 0; i < len; ++i) acc[i] += W::widen(src[i]);
  }
  for (size_t i = 0; i < len; ++i) out(i, acc[i] / divisor);
}

// The average of n wire arrays of `count` elements into dst of type S (full precision).
template <typename W, typename S>
void averageInto(const uint16_t* const* srcs, int n, size_t count, int64_t divisor, S* dst) {
  const float d = static_cast<float>(divisor);
  for (size_t base = 0; base < count; base += kBlock) {
    S* out = dst + base;
    averageBlock<W>(srcs, n, base, std::min(kBlock, count - base), d,
                    [out](size_t i, float v) { out[i] = static_cast<S>(v); });
  }
}

// The same, rounded to the wire type; dst may be one of the sources (each block is summed
// before any of it is written).
template <typename W>
void averageIntoWire(const uint16_t* const* srcs, int n, size_t count, int64_t divisor,
                     uint16_t* dst) {
  const float d = static_cast<float>(divisor);
  for (size_t base = 0; base < count; base += kBlock) {
    uint16_t* out = dst + base;
    averageBlock<W>(srcs, n, base, std::min(kBlock, count - base), d,
                    [out](size_t i, float v) { out[i] = W::narrow(v); });
  }
}

// In place: the `count` S elements at `data` become `count` wire elements at its front (block by
// block: a block is narrowed into a buffer first, and lands on bytes whose elements were read).
template <typename W, typename S>
void compact(void* data, size_t count) {
  uint16_t block[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t len = std::min(kBlock, count - base);
    narrow<W>(static_cast<const S*>(data) + base, block, len);
    std::memcpy(static_cast<uint16_t*>(data) + base, block, len * sizeof(uint16_t));
  }
}

// The inverse, from the back: a block's wire elements are copied out before its S elements
// overwrite them (and the elements written lie past every wire element still to be read).
template <typename W, typename S>
void expand(void* data, size_t count) {
  uint16_t block[kBlock];
  for (size_t end = count; end > 0;) {
    const size_t len = std::min(kBlock, end), base = end - len;
    std::memcpy(block, static_cast<const uint16_t*>(data) + base, len * sizeof(uint16_t));
    widen<W>(block, static_cast<S*>(data) + base, len);
    end = base;
  }
}

// data[i] = widen(narrow(data[i])): what a contribution keeps of its value on the wire.
template <typename W, typename S>
void roundToWire(S* data, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    data[i] = static_cast<S>(W::widen(W::narrow(static_cast<float>(data[i]))));
  }
}

}  // namespace xccl::algo::compressed
