// AVX2 (+F16C) reduction kernels: 8 floats or 4 doubles per register. Called only when the CPU
// has AVX2 and F16C (reduce.cc checks); every function below the pragma is compiled for them,
// and nothing here is inline in a header, so no AVX2 code can leak into other files' callers.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "algo/reduce.h"
#include "algo/reduce_simd.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#endif

namespace xccl::algo::simd {
namespace {

#include "algo/reduce_simd_loops.inc"

struct F32 {
  using T = float;
  using C = float;
  using Reg = __m256;
  static constexpr size_t kWidth = 8;
  static Reg load(const T* p) { return _mm256_loadu_ps(p); }
  static void store(T* p, Reg v) { _mm256_storeu_ps(p, v); }
  static C widen(T x) { return x; }
  static T narrow(C x) { return x; }
};

struct F64 {
  using T = double;
  using C = double;
  using Reg = __m256d;
  static constexpr size_t kWidth = 4;
  static Reg load(const T* p) { return _mm256_loadu_pd(p); }
  static void store(T* p, Reg v) { _mm256_storeu_pd(p, v); }
  static C widen(T x) { return x; }
  static T narrow(C x) { return x; }
};

// Eight 32-bit lanes, each holding a value <= 0xffff, to eight uint16 in order.
__m128i narrowLanes(__m256i lanes) {
  return _mm_packus_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
}

struct BF16 {
  using T = uint16_t;
  using C = float;
  using Reg = __m256;
  static constexpr size_t kWidth = 8;
  // bf16 is the upper half of a float: widening is a shift.
  static Reg load(const T* p) {
    const __m128i narrow = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i wide = _mm256_cvtepu16_epi32(narrow);
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // floatToBfloat16 lane by lane: NaN -> (x >> 16) | 0x40 (quiet, sign kept); otherwise
  // (x + 0x7fff + lsb) >> 16, which rounds to nearest even (and overflows to infinity).
  static void store(T* p, Reg v) {
    const __m256i x = _mm256_castps_si256(v);
    const __m256i magnitude = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
    const __m256i high = _mm256_srli_epi32(x, 16);
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                          _mm256_and_si256(high, _mm256_set1_epi32(1)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, bias), 16);
    const __m256i quiet = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
    const __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrowLanes(bits));
  }
  static C widen(T x) { return bfloat16ToFloat(x); }
  static T narrow(C x) { return floatToBfloat16(x); }
};

struct Half {
  using T = uint16_t;
  using C = float;
  using Reg = __m256;
  static constexpr size_t kWidth = 8;
  // F16C widening is exact, subnormal halves included.
  static Reg load(const T* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  // F16C narrowing rounds to nearest even like floatToHalf (overflow to infinity, subnormals);
  // only NaNs differ (F16C keeps payload bits), so NaN lanes become floatToHalf's sign | 0x7e00.
  static void store(T* p, Reg v) {
    __m128i halves = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    if (_mm256_movemask_ps(nan) != 0) {
      const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 16),
                                            _mm256_set1_epi32(0x8000));
      const __m256i quiet = _mm256_or_si256(sign, _mm256_set1_epi32(0x7e00));
      const __m256i bits = _mm256_blendv_epi8(_mm256_cvtepu16_epi32(halves), quiet,
                                              _mm256_castps_si256(nan));
      halves = narrowLanes(bits);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), halves);
  }
  static C widen(T x) { return halfToFloat(x); }
  static T narrow(C x) { return floatToHalf(x); }
};

// min/max: the scalar rule is (a < b || isnan(a)) ? a : b, i.e. a NaN in a wins, a NaN in b
// wins unless a is smaller (never), and ties (+0/-0) take b. Same as blend(b, a, lt | unord(a)).
struct Sum {
  static __m256 apply(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static __m256d apply(__m256d a, __m256d b) { return _mm256_add_pd(a, b); }
  template <typename C>
  static C apply(C a, C b) { return ScalarOps::sum(a, b); }
};
struct Prod {
  static __m256 apply(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  static __m256d apply(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }
  template <typename C>
  static C apply(C a, C b) { return ScalarOps::prod(a, b); }
};
struct Min {
  static __m256 apply(__m256 a, __m256 b) {
    const __m256 take =
        _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(b, a, take);
  }
  static __m256d apply(__m256d a, __m256d b) {
    const __m256d take =
        _mm256_or_pd(_mm256_cmp_pd(a, b, _CMP_LT_OQ), _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_pd(b, a, take);
  }
  template <typename C>
  static C apply(C a, C b) { return ScalarOps::min(a, b); }
};
struct Max {
  static __m256 apply(__m256 a, __m256 b) {
    const __m256 take =
        _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(b, a, take);
  }
  static __m256d apply(__m256d a, __m256d b) {
    const __m256d take =
        _mm256_or_pd(_mm256_cmp_pd(a, b, _CMP_GT_OQ), _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_pd(b, a, take);
  }
  template <typename C>
  static C apply(C a, C b) { return ScalarOps::max(a, b); }
};

struct Avx2 {
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

bool reduceIntoAvx2(DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  return intoAny<Avx2>(type, op, dst, src, count);
}

bool reduceManyAvx2(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                    size_t count) {
  return manyAny<Avx2>(type, op, dst, srcs, n, count);
}

}  // namespace xccl::algo::simd

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
