#include "algo/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "algo/reduce_simd.h"
#include "common/error.h"

namespace xccl::algo {
namespace {

// Combiners on a common "compute" type T. __restrict__ lets the compiler vectorise the loops.
template <typename T, typename F>
void combine(T* __restrict__ dst, const T* __restrict__ src, size_t count, F f) {
  for (size_t i = 0; i < count; ++i) dst[i] = f(dst[i], src[i]);
}

template <typename T>
void reduceTyped(ReduceOp op, T* dst, const T* src, size_t count) {
  switch (op) {
    case ReduceOp::kSum: return combine(dst, src, count, [](T a, T b) { return T(a + b); });
    case ReduceOp::kProduct: return combine(dst, src, count, [](T a, T b) { return T(a * b); });
    case ReduceOp::kMin: return combine(dst, src, count, [](T a, T b) { return std::min(a, b); });
    case ReduceOp::kMax: return combine(dst, src, count, [](T a, T b) { return std::max(a, b); });
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::kBand: return combine(dst, src, count, [](T a, T b) { return T(a & b); });
      case ReduceOp::kBor: return combine(dst, src, count, [](T a, T b) { return T(a | b); });
      case ReduceOp::kBxor: return combine(dst, src, count, [](T a, T b) { return T(a ^ b); });
      default: break;
    }
  }
  XCCL_THROW(ErrorKind::kInvalidArgument, reduceOpName(op), " is not a combiner for this type");
}

// Floating-point reductions propagate NaN like torch (std::min/max would drop it on one side).
template <typename T>
void reduceFloat(ReduceOp op, T* dst, const T* src, size_t count) {
  if (op == ReduceOp::kMin) {
    return combine(dst, src, count, [](T a, T b) { return (a < b || std::isnan(a)) ? a : b; });
  }
  if (op == ReduceOp::kMax) {
    return combine(dst, src, count, [](T a, T b) { return (a > b || std::isnan(a)) ? a : b; });
  }
  reduceTyped(op, dst, src, count);
}

// 16-bit floats: widen, combine in fp32, narrow. Processed in blocks so the fp32 temporaries
// stay in L1.
template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void reduce16(ReduceOp op, uint16_t* dst, const uint16_t* src, size_t count) {
  constexpr size_t kBlock = 1024;
  float a[kBlock], b[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    size_t n = std::min(kBlock, count - base);
    for (size_t i = 0; i < n; ++i) {
      a[i] = ToFloat(dst[base + i]);
      b[i] = ToFloat(src[base + i]);
    }
    reduceFloat(op, a, b, n);
    for (size_t i = 0; i < n; ++i) dst[base + i] = FromFloat(a[i]);
  }
}

// bool is stored as bytes 0/1: SUM and MAX are OR, PRODUCT and MIN are AND (as in NCCL/gloo).
void reduceBool(ReduceOp op, uint8_t* dst, const uint8_t* src, size_t count) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kBor:
      return combine(dst, src, count, [](uint8_t a, uint8_t b) { return uint8_t(a | b); });
    case ReduceOp::kProduct:
    case ReduceOp::kMin:
    case ReduceOp::kBand:
      return combine(dst, src, count, [](uint8_t a, uint8_t b) { return uint8_t(a & b); });
    case ReduceOp::kBxor:
      return combine(dst, src, count, [](uint8_t a, uint8_t b) { return uint8_t(a ^ b); });
    default: XCCL_THROW(ErrorKind::kInvalidArgument, reduceOpName(op), " is not defined for bool");
  }
}

void reduceIntoScalar(DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  switch (type) {
    case DataType::kFloat32:
      return reduceFloat(op, static_cast<float*>(dst), static_cast<const float*>(src), count);
    case DataType::kFloat64:
      return reduceFloat(op, static_cast<double*>(dst), static_cast<const double*>(src), count);
    case DataType::kFloat16:
      return reduce16<halfToFloat, floatToHalf>(op, static_cast<uint16_t*>(dst),
                                                static_cast<const uint16_t*>(src), count);
    case DataType::kBFloat16:
      return reduce16<bfloat16ToFloat, floatToBfloat16>(op, static_cast<uint16_t*>(dst),
                                                        static_cast<const uint16_t*>(src), count);
    case DataType::kInt8:
      return reduceTyped(op, static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), count);
    case DataType::kUInt8:
      return reduceTyped(op, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count);
    case DataType::kInt16:
      return reduceTyped(op, static_cast<int16_t*>(dst), static_cast<const int16_t*>(src), count);
    case DataType::kInt32:
      return reduceTyped(op, static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), count);
    case DataType::kInt64:
      return reduceTyped(op, static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), count);
    case DataType::kBool:
      return reduceBool(op, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count);
  }
}

// reduceMany's portable path: an accumulator block that stays in L1, combined left to right
// with the element-wise kernels above, then stored (so dst may alias a source).
template <typename T, typename Combine>
void manyBlocks(T* dst, const T* const* srcs, int n, size_t count, Combine combine) {
  constexpr size_t kBlock = 1024;
  T acc[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t len = std::min(kBlock, count - base);
    std::memcpy(acc, srcs[0] + base, len * sizeof(T));
    for (int k = 1; k < n; ++k) combine(acc, srcs[k] + base, len);
    std::memcpy(dst + base, acc, len * sizeof(T));
  }
}

template <float (*ToFloat)(uint16_t), uint16_t (*FromFloat)(float)>
void many16(ReduceOp op, uint16_t* dst, const uint16_t* const* srcs, int n, size_t count) {
  constexpr size_t kBlock = 1024;
  float acc[kBlock], next[kBlock];
  for (size_t base = 0; base < count; base += kBlock) {
    const size_t len = std::min(kBlock, count - base);
    for (size_t i = 0; i < len; ++i) acc[i] = ToFloat(srcs[0][base + i]);
    for (int k = 1; k < n; ++k) {
      for (size_t i = 0; i < len; ++i) next[i] = ToFloat(srcs[k][base + i]);
      reduceFloat(op, acc, next, len);
    }
    for (size_t i = 0; i < len; ++i) dst[base + i] = FromFloat(acc[i]);
  }
}

template <typename T>
void manyTyped(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
               size_t count) {
  manyBlocks(static_cast<T*>(dst), reinterpret_cast<const T* const*>(srcs), n, count,
             [&](T* acc, const T* src, size_t len) { reduceIntoScalar(type, op, acc, src, len); });
}

void reduceManyScalar(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                      size_t count) {
  auto* d16 = static_cast<uint16_t*>(dst);
  auto* s16 = reinterpret_cast<const uint16_t* const*>(srcs);
  switch (type) {
    case DataType::kFloat16: return many16<halfToFloat, floatToHalf>(op, d16, s16, n, count);
    case DataType::kBFloat16:
      return many16<bfloat16ToFloat, floatToBfloat16>(op, d16, s16, n, count);
    case DataType::kFloat32: return manyTyped<float>(type, op, dst, srcs, n, count);
    case DataType::kFloat64: return manyTyped<double>(type, op, dst, srcs, n, count);
    case DataType::kInt8: return manyTyped<int8_t>(type, op, dst, srcs, n, count);
    case DataType::kUInt8:
    case DataType::kBool: return manyTyped<uint8_t>(type, op, dst, srcs, n, count);
    case DataType::kInt16: return manyTyped<int16_t>(type, op, dst, srcs, n, count);
    case DataType::kInt32: return manyTyped<int32_t>(type, op, dst, srcs, n, count);
    case DataType::kInt64: return manyTyped<int64_t>(type, op, dst, srcs, n, count);
  }
}

Isa detectIsa() {
#if XCCL_X86_SIMD
  __builtin_cpu_init();
  // F16C for the fp16 conversions; every AVX2 CPU has it, but VMs may hide it.
  if (__builtin_cpu_supports("f16c")) {
    if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2")) return Isa::kAvx2;
  }
#endif
  return Isa::kScalar;
}

void checkIsa(Isa isa) {
  XCCL_CHECK_ARG(isaAvailable(isa), "this CPU or build has no ", isaName(isa), " reductions");
}

template <typename T>
void divideTyped(T* data, size_t count, int64_t divisor) {
  if constexpr (std::is_integral_v<T>) {
    for (size_t i = 0; i < count; ++i)
      data[i] = static_cast<T>(static_cast<int64_t>(data[i]) / divisor);
  } else {
    const T d = static_cast<T>(divisor);
    for (size_t i = 0; i < count; ++i) data[i] /= d;
  }
}

}  // namespace

ReduceOp combinerOf(ReduceOp op) {
  return (op == ReduceOp::kAvg || op == ReduceOp::kPreMulSum) ? ReduceOp::kSum : op;
}

void reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  reduceInto(bestIsa(), type, op, dst, src, count);
}

void reduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count) {
  reduceMany(bestIsa(), type, op, dst, srcs, n, count);
}

const char* isaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return "scalar";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool isaAvailable(Isa isa) { return static_cast<int>(isa) <= static_cast<int>(bestIsa()); }

Isa bestIsa() {
  static const Isa best = detectIsa();
  return best;
}

// The vector kernels return false for (type, op) pairs they do not cover.
void reduceInto(Isa isa, DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  if (isa != Isa::kScalar) checkIsa(isa);
#if XCCL_X86_SIMD
  if (isa == Isa::kAvx512 && simd::avx512::reduceInto(type, op, dst, src, count)) return;
  if (isa == Isa::kAvx2 && simd::avx2::reduceInto(type, op, dst, src, count)) return;
#endif
  reduceIntoScalar(type, op, dst, src, count);
}

void reduceMany(Isa isa, DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count) {
  XCCL_CHECK(n >= 1, "reduceMany needs a source");
  if (isa != Isa::kScalar) checkIsa(isa);
#if XCCL_X86_SIMD
  if (isa == Isa::kAvx512 && simd::avx512::reduceMany(type, op, dst, srcs, n, count)) return;
  if (isa == Isa::kAvx2 && simd::avx2::reduceMany(type, op, dst, srcs, n, count)) return;
#endif
  reduceManyScalar(type, op, dst, srcs, n, count);
}

void scale(DataType type, void* data, size_t count, double factor) {
  switch (type) {
    case DataType::kFloat32: {
      auto* p = static_cast<float*>(data);
      const float f = static_cast<float>(factor);
      for (size_t i = 0; i < count; ++i) p[i] *= f;
      return;
    }
    case DataType::kFloat64: {
      auto* p = static_cast<double*>(data);
      for (size_t i = 0; i < count; ++i) p[i] *= factor;
      return;
    }
    case DataType::kFloat16: {
      auto* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i)
        p[i] = floatToHalf(halfToFloat(p[i]) * static_cast<float>(factor));
      return;
    }
    case DataType::kBFloat16: {
      auto* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i)
        p[i] = floatToBfloat16(bfloat16ToFloat(p[i]) * static_cast<float>(factor));
      return;
    }
    default:
      XCCL_THROW(ErrorKind::kInvalidArgument, "scaling needs a floating-point type, not ",
                 dataTypeName(type));
  }
}

void divide(DataType type, void* data, size_t count, int64_t divisor) {
  switch (type) {
    case DataType::kFloat32: return divideTyped(static_cast<float*>(data), count, divisor);
    case DataType::kFloat64: return divideTyped(static_cast<double*>(data), count, divisor);
    case DataType::kFloat16: {
      auto* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i)
        p[i] = floatToHalf(halfToFloat(p[i]) / static_cast<float>(divisor));
      return;
    }
    case DataType::kBFloat16: {
      auto* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < count; ++i)
        p[i] = floatToBfloat16(bfloat16ToFloat(p[i]) / static_cast<float>(divisor));
      return;
    }
    case DataType::kInt8: return divideTyped(static_cast<int8_t*>(data), count, divisor);
    case DataType::kUInt8: return divideTyped(static_cast<uint8_t*>(data), count, divisor);
    case DataType::kInt16: return divideTyped(static_cast<int16_t*>(data), count, divisor);
    case DataType::kInt32: return divideTyped(static_cast<int32_t*>(data), count, divisor);
    case DataType::kInt64: return divideTyped(static_cast<int64_t*>(data), count, divisor);
    case DataType::kBool: XCCL_THROW(ErrorKind::kInvalidArgument, "AVG is not defined for bool");
  }
}

namespace {

// A float's IEEE-754 bits and back (std::bit_cast is C++20; these libraries are C++17).
uint32_t bitsOf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}
float floatOf(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

}  // namespace

float halfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000 | (mant << 13);  // inf / NaN
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: renormalise
    int shift = 0;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      ++shift;
    }
    bits = sign | (static_cast<uint32_t>(113 - shift) << 23) | ((mant & 0x3ff) << 13);
  }
  return floatOf(bits);
}

uint16_t floatToHalf(float f) {
  const uint32_t x = bitsOf(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000)
    return static_cast<uint16_t>(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
  if (absx >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to inf
  if (absx < 0x38800000) {  // result is subnormal or zero
    if (absx < 0x33000000) return static_cast<uint16_t>(sign);
    uint32_t mant = (absx & 0x7fffff) | 0x800000;
    int shift = 113 - static_cast<int>(absx >> 23) + 13;
    uint32_t half = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1);
    uint32_t midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t bits = absx - 0x38000000;  // rebias exponent 127 -> 15
  uint32_t half = bits >> 13;
  uint32_t rest = bits & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float bfloat16ToFloat(uint16_t b) { return floatOf(static_cast<uint32_t>(b) << 16); }

uint16_t floatToBfloat16(float f) {
  uint32_t x = bitsOf(f);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace xccl::algo
