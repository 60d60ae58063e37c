// Internal to the compressed all_reduce (compressed_allreduce.h): the block loops that convert
// between a buffer's type S (float or double) and the wire type, and sum wire contributions in
// fp32. Each pass works on a block of kBlock elements (its fp32 temporaries stay in L1); the
// conversions are compressed_blocks.cc's vector loops.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "algo/reduce.h"

namespace xccl::algo::compressed {

constexpr size_t kBlock = 2048;  // elements per pass: 8 KiB of fp32

// Block conversions (compressed_blocks.cc): AVX2 (+F16C) where the CPU has it, else the scalar
// conversions below (bfloat16) and reduce.h's (float16).
void halfToFloatBlock(const uint16_t* src, float* dst, size_t count);
void floatToHalfBlock(const float* src, uint16_t* dst, size_t count);
void bfloat16ToFloatBlock(const uint16_t* src, float* dst, size_t count);
void floatToBfloat16Block(const float* src, uint16_t* dst, size_t count);
// acc[i] += term[i]; acc[i] /= divisor (the same bytes on either path: IEEE add and divide).
void addBlock(float* acc, const float* term, size_t count);
void divideBlock(float* acc, size_t count, float divisor);

// bfloat16: the upper half of a float. narrow rounds to nearest even and keeps NaN quiet, bit for
// bit as reduce.h's floatToBfloat16 (a test checks), inline so the block loops vectorise.
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
    // Both results, then a select: no branch, so the block loops vectorise.
    const uint32_t rounded = (x + 0x7fff + ((x >> 16) & 1)) >> 16;
    const uint32_t quietNan = (x >> 16) | 0x40;
    return static_cast<uint16_t>((x & 0x7fffffff) > 0x7f800000 ? quietNan : rounded);
  }
  static void widenBlock(const uint16_t* src, float* dst, size_t n) {
    bfloat16ToFloatBlock(src, dst, n);
  }
  static void narrowBlock(const float* src, uint16_t* dst, size_t n) {
    floatToBfloat16Block(src, dst, n);
  }
};

// IEEE half.
struct Float16Wire {
  static float widen(uint16_t h) { return halfToFloat(h); }
  static uint16_t narrow(float f) { return floatToHalf(f); }
  static void widenBlock(const uint16_t* src, float* dst, size_t n) {
    halfToFloatBlock(src, dst, n);
  }
  static void narrowBlock(const float* src, uint16_t* dst, size_t n) {
    floatToHalfBlock(src, dst, n);
  }
};

// dst = wire(src), any count; a float64 buffer goes through fp32 a block at a time.
template <typename W, typename S>
void narrow(const S* src, uint16_t* dst, size_t count) {
  if constexpr (std::is_same_v<S, float>) {
    W::narrowBlock(src, dst, count);
  } else {
    float block[kBlock];
    for (size_t base = 0; base < count; base += kBlock) {
      const size_t len = std::min(kBlock, count - base);
      for (size_t i = 0; i < len; ++i) block[i] = static_cast<float>(src[base + i]);
      W::narrowBlock(block, dst + base, len);
    }
  }
}

template <typename W, typename S>
void widen(const uint16_t* src, S* dst, size_t count) {
  if constexpr (std::is_same_v<S, float>) {
    W::widenBlock(src, dst, count);
  } else {
    float block[kBlock];
    for (size_t base = 0; base < count; base += kBlock) {
      const size_t len = std::min(kBlock, count - base);
      W::widenBlock(src + base, block, len);
      for (size_t i = 0; i < len; ++i) dst[base + i] = block[i];
    }
  }
}

// acc = (srcs[0] + ... + srcs[n - 1]) / divisor over elements [offset, offset + len), len <=
// kBlock: widened, summed left to right (the same bytes on every rank).
template <typename W>
void averageBlock(const uint16_t* const* srcs, int n, size_t offset, size_t len, float divisor,
                  float* acc) {
  float term[kBlock];
  W::widenBlock(srcs[0] + offset, acc, len);
  for (int r = 1; r < n; ++r) {
    W::widenBlock(srcs[r] + offset, term, len);
    addBlock(acc, term, len);
  }
  divideBlock(acc, len, divisor);
}

// The average of n wire arrays of `count` elements into dst of type S (full precision).
template <typename W, typename S>
void averageInto(const uint16_t* const* srcs, int n, size_t count, int64_t divisor, S* dst) {
  const float d = static_cast<float>(divisor);
  float acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t len = std::min(kBlock, count - base);
    if constexpr (std::is_same_v<S, float>) {
      averageBlock<W>(srcs, n, base, len, d, dst + base);
    } else {
      averageBlock<W>(srcs, n, base, len, d, acc);
      for (size_t i = 0; i < len; ++i) dst[base + i] = acc[i];
    }
  }
}

// The same, rounded to the wire type; dst may be one of the sources (each block is summed
// before any of it is written).
template <typename W>
void averageIntoWire(const uint16_t* const* srcs, int n, size_t count, int64_t divisor,
                     uint16_t* dst) {
  const float d = static_cast<float>(divisor);
  float acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t len = std::min(kBlock, count - base);
    averageBlock<W>(srcs, n, base, len, d, acc);
    W::narrowBlock(acc, dst + base, len);
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
  uint16_t block[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t len = std::min(kBlock, count - base);
    narrow<W>(data + base, block, len);
    widen<W>(block, data + base, len);
  }
}

}  // namespace xccl::algo::compressed
