// AVX2 (+F16C) reduction kernels: 32-byte vectors, 8 floats or 4 doubles. Called only when the
// CPU has AVX2 and F16C (reduce.cc checks); every function after XCCL_SIMD_TARGET_BEGIN is
// compiled for them, and nothing here is inline in a header, so no AVX2 code can leak into other
// files' callers.
// The kernels themselves are reduce_simd_lanes.inc's, shared with reduce_avx512.cc.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "algo/reduce.h"
#include "algo/reduce_simd.h"
#include "algo/simd_target.h"

XCCL_SIMD_TARGET_BEGIN("avx2,f16c")

namespace xccl::algo::simd::avx2 {

constexpr size_t kVectorBytes = 32;
#include "algo/reduce_simd_lanes.inc"

namespace {

F32x loadHalves(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
U16x narrowHalves(F32x v) {
  return reinterpret_cast<U16x>(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
bool anyNan(F32x v) { return _mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) != 0; }
U32x loadShorts(const uint16_t* p) {
  return reinterpret_cast<U32x>(
      _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
U16x narrowShorts(U32x lanes) {
  const __m256i v = reinterpret_cast<__m256i>(lanes);
  return reinterpret_cast<U16x>(
      _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}
template <int kCmp>
F32x pick(F32x a, F32x b) {
  const __m256 take = _mm256_or_ps(_mm256_cmp_ps(a, b, kCmp), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  return _mm256_blendv_ps(b, a, take);
}
template <int kCmp>
F64x pick(F64x a, F64x b) {
  const __m256d take = _mm256_or_pd(_mm256_cmp_pd(a, b, kCmp), _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  return _mm256_blendv_pd(b, a, take);
}

}  // namespace

}  // namespace xccl::algo::simd::avx2

XCCL_SIMD_TARGET_END()
