// AVX-512F (+F16C) reduction kernels: 64-byte vectors, 16 floats or 8 doubles, mask registers
// for the NaN and min/max selections. The kernels are reduce_simd_lanes.inc's, as in
// reduce_avx2.cc, with the same loops and exactness contract; called only when the CPU (and the
// OS, for the ZMM state) supports AVX-512F.
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized on its own _mm512_undefined_*() at -O3
// (GCC bug 105593); the warning is about the header, not this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "algo/reduce.h"
#include "algo/reduce_simd.h"
#include "algo/simd_target.h"

XCCL_SIMD_TARGET_BEGIN("avx512f,avx2,f16c")

namespace xccl::algo::simd::avx512 {

constexpr size_t kVectorBytes = 64;
#include "algo/reduce_simd_lanes.inc"

namespace {

F32x loadHalves(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
U16x narrowHalves(F32x v) {
  return reinterpret_cast<U16x>(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
bool anyNan(F32x v) { return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) != 0; }
U32x loadShorts(const uint16_t* p) {
  return reinterpret_cast<U32x>(
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
}
U16x narrowShorts(U32x lanes) {
  return reinterpret_cast<U16x>(_mm512_cvtepi32_epi16(reinterpret_cast<__m512i>(lanes)));
}
template <int kCmp>
F32x pick(F32x a, F32x b) {
  const __mmask16 take = _mm512_cmp_ps_mask(a, b, kCmp) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(take, b, a);
}
template <int kCmp>
F64x pick(F64x a, F64x b) {
  const __mmask8 take = _mm512_cmp_pd_mask(a, b, kCmp) | _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q);
  return _mm512_mask_blend_pd(take, b, a);
}

}  // namespace

}  // namespace xccl::algo::simd::avx512

XCCL_SIMD_TARGET_END()
