// AVX-512F (+F16C) reduction kernels: 16 floats or 8 doubles per register, mask registers for
// the NaN and min/max selections. Same loops and exactness contract as reduce_avx2.cc; called
// only when the CPU (and the OS, for the ZMM state) supports AVX-512F.
// GCC 12's avx512fintrin.h trips -Wmaybe-uninitialized on its own _mm512_undefined_*() at -O3
// (GCC bug 105593); the warning is about the header, not this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "algo/reduce.h"
#include "algo/reduce_simd.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,f16c")
#endif

namespace xccl::algo::simd {
namespace {

#include "algo/reduce_simd_loops.inc"

struct F32 {
  using T = float;
  using C = float;
  using Reg = __m512;
  static constexpr size_t kWidth = 16;
  static Reg load(const T* p) { return _mm512_loadu_ps(p); }
  static void store(T* p, Reg v) { _mm512_storeu_ps(p, v); }
  static C widen(T x) { return x; }
  static T narrow(C x) { return x; }
};

struct F64 {
  using T = double;
  using C = double;
  using Reg = __m512d;
  static constexpr size_t kWidth = 8;
  static Reg load(const T* p) { return _mm512_loadu_pd(p); }
  static void store(T* p, Reg v) { _mm512_storeu_pd(p, v); }
  static C widen(T x) { return x; }
  static T narrow(C x) { return x; }
};

struct BF16 {
  using T = uint16_t;
  using C = float;
  using Reg = __m512;
  static constexpr size_t kWidth = 16;
  static Reg load(const T* p) {
    const __m256i narrow = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m512i wide = _mm512_cvtepu16_epi32(narrow);
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // floatToBfloat16 lane by lane (see reduce_avx2.cc). Not VCVTNEPS2BF16 (AVX512_BF16): it
  // flushes subnormals to zero, which the scalar conversion does not.
  static void store(T* p, Reg v) {
    const __m512i x = _mm512_castps_si512(v);
    const __m512i magnitude = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
    const __m512i high = _mm512_srli_epi32(x, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                          _mm512_and_si512(high, _mm512_set1_epi32(1)));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
    const __m512i quiet = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
    const __m512i bits = _mm512_mask_blend_epi32(nan, rounded, quiet);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bits));
  }
  static C widen(T x) { return bfloat16ToFloat(x); }
  static T narrow(C x) { return floatToBfloat16(x); }
};

struct Half {
  using T = uint16_t;
  using C = float;
  using Reg = __m512;
  static constexpr size_t kWidth = 16;
  static Reg load(const T* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // Hardware rounding to nearest even, NaN lanes replaced by floatToHalf's sign | 0x7e00.
  static void store(T* p, Reg v) {
    __m256i halves = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    if (nan != 0) {
      const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 16),
                                            _mm512_set1_epi32(0x8000));
      const __m512i quiet = _mm512_or_si512(sign, _mm512_set1_epi32(0x7e00));
      halves = _mm512_cvtepi32_epi16(
          _mm512_mask_blend_epi32(nan, _mm512_cvtepu16_epi32(halves), quiet));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), halves);
  }
  static C widen(T x) { return halfToFloat(x); }
  static T narrow(C x) { return floatToHalf(x); }
};

// mask_blend(k, b, a) takes a where k is set: the scalar (a < b || isnan(a)) ? a : b.
struct Sum {
  static __m512 apply(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
  static __m512d apply(__m512d a, __m512d b) { return _mm512_add_pd(a, b); }
  template <typename C>
  static C apply(C a, C b) { return ScalarOps::sum(a, b); }
};
struct Prod {
  static __m512 apply(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
  static __m512d apply(__m512d a, __m512d b) { return _mm512_mul_pd(a, b); }
  template <typename C>
  static C apply(C a, C b) { return ScalarOps::prod(a, b); }
};
struct Min {
  static __m512 apply(__m512 a, __m512 b) {
    const __mmask16 take =
        _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(take, b, a);
  }
  static __m512d apply(__m512d a, __m512d b) {
    const __mmask8 take =
        _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ) | _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_pd(take, b, a);
  }
  template <typename C>
  static C apply(C a, C b) { return ScalarOps::min(a, b); }
};
struct Max {
  static __m512 apply(__m512 a, __m512 b) {
    const __mmask16 take =
        _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(take, b, a);
  }
  static __m512d apply(__m512d a, __m512d b) {
    const __mmask8 take =
        _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ) | _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q);
    return _mm512_mask_blend_pd(take, b, a);
  }
  template <typename C>
  static C apply(C a, C b) { return ScalarOps::max(a, b); }
};

struct Avx512 {
  using F32 = simd::F32;
  using F64 = simd::F64;
  using Half = simd::Half;
  using BF16 = simd::BF16;
  using Sum = simd::Sum;
  using Prod = simd::Prod;
  using Min = simd::Min;
  using Max = simd::Max;
};

}  // namespace

bool reduceIntoAvx512(DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  return intoAny<Avx512>(type, op, dst, src, count);
}

bool reduceManyAvx512(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                      size_t count) {
  return manyAny<Avx512>(type, op, dst, srcs, n, count);
}

}  // namespace xccl::algo::simd

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
