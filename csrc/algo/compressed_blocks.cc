// The block conversions of the compressed all_reduce (compressed_codec.h), compiled twice: for
// AVX2 + F16C, used where the CPU has them (reduce.h's bestIsa() above kScalar implies both), and
// for the baseline. bfloat16 is the same loop either way (the baseline's SSE2 lacks a cheap
// 32-to-16-bit pack, which made it the slowest step); float16 uses the F16C instructions or
// reduce.h's portable conversions, which differ only in the bits of NaN payloads. Every rank of a
// host takes the same path.
#include <cstddef>
#include <cstdint>

#include "algo/compressed_codec.h"
#include "algo/reduce.h"
#include "algo/simd_target.h"

#if XCCL_X86_SIMD
#include <immintrin.h>

XCCL_SIMD_TARGET_BEGIN("avx2,f16c")

namespace xccl::algo::compressed {
namespace {

// 8 lanes per instruction; the tail goes through the same instruction on a padded copy.
void widenF16c(const uint16_t* src, float* dst, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < count; ++i) dst[i] = _cvtsh_ss(src[i]);
}

void narrowF16c(const float* src, uint16_t* dst, size_t count) {
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < count; ++i) dst[i] = _cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT);
}

// The header's inline scalar conversions, inlined here and vectorised for AVX2.
void widenBf16Avx2(const uint16_t* __restrict__ src, float* __restrict__ dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = BFloat16Wire::widen(src[i]);
}

void narrowBf16Avx2(const float* __restrict__ src, uint16_t* __restrict__ dst, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] = BFloat16Wire::narrow(src[i]);
}

void addAvx2(float* __restrict__ acc, const float* __restrict__ term, size_t count) {
  for (size_t i = 0; i < count; ++i) acc[i] += term[i];
}

void divideAvx2(float* acc, size_t count, float divisor) {
  for (size_t i = 0; i < count; ++i) acc[i] /= divisor;
}

}  // namespace
}  // namespace xccl::algo::compressed

XCCL_SIMD_TARGET_END()
#endif  // XCCL_X86_SIMD

namespace xccl::algo::compressed {
namespace {

#if XCCL_X86_SIMD
bool hasF16c() {  // and AVX2
  static const bool has = bestIsa() != Isa::kScalar;
  return has;
}
#endif

}  // namespace

void halfToFloatBlock(const uint16_t* src, float* dst, size_t count) {
#if XCCL_X86_SIMD
  if (hasF16c()) return widenF16c(src, dst, count);
#endif
  for (size_t i = 0; i < count; ++i) dst[i] = halfToFloat(src[i]);
}

void floatToHalfBlock(const float* src, uint16_t* dst, size_t count) {
#if XCCL_X86_SIMD
  if (hasF16c()) return narrowF16c(src, dst, count);
#endif
  for (size_t i = 0; i < count; ++i) dst[i] = floatToHalf(src[i]);
}

void bfloat16ToFloatBlock(const uint16_t* __restrict__ src, float* __restrict__ dst, size_t count) {
#if XCCL_X86_SIMD
  if (hasF16c()) return widenBf16Avx2(src, dst, count);
#endif
  for (size_t i = 0; i < count; ++i) dst[i] = BFloat16Wire::widen(src[i]);
}

void floatToBfloat16Block(const float* __restrict__ src, uint16_t* __restrict__ dst, size_t count) {
#if XCCL_X86_SIMD
  if (hasF16c()) return narrowBf16Avx2(src, dst, count);
#endif
  for (size_t i = 0; i < count; ++i) dst[i] = BFloat16Wire::narrow(src[i]);
}

void addBlock(float* __restrict__ acc, const float* __restrict__ term, size_t count) {
#if XCCL_X86_SIMD
  if (hasF16c()) return addAvx2(acc, term, count);
#endif
  for (size_t i = 0; i < count; ++i) acc[i] += term[i];
}

void divideBlock(float* acc, size_t count, float divisor) {
#if XCCL_X86_SIMD
  if (hasF16c()) return divideAvx2(acc, count, divisor);
#endif
  for (size_t i = 0; i < count; ++i) acc[i] /= divisor;
}

}  // namespace xccl::algo::compressed
