#include "gpu/reference.h"

#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "bits.h"
#include "common/error.h"

namespace xccl::testing {
// Decoded from the IEEE binary16 fields: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
float halfBitsToFloat(uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);  // subnormal: m * 2^-24
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return static_cast<float>(sign ? -magnitude : magnitude);
}

// Scales the value so the 11 significant bits (or the subnormal grid, 2^-24) land on integers and
// rounds with nearbyint (the default rounding mode is to nearest even). Exact in double.
uint16_t floatToHalfBits(float value) {
  const uint16_t sign = (bitCast<uint32_t>(value) >> 16) & 0x8000;
  const double magnitude = std::fabs(static_cast<double>(value));
  if (std::isnan(value)) return sign | 0x7e00;
  if (std::isinf(value)) return sign | 0x7c00;
  if (magnitude < std::ldexp(1.0, -14)) {  // below the smallest normal: subnormal grid
    const double m = std::nearbyint(std::ldexp(magnitude, 24));
    return sign | static_cast<uint16_t>(m);  // m == 1024 is exactly the smallest normal
  }
  int exponent;
  std::frexp(magnitude, &exponent);  // magnitude = f * 2^exponent, f in [0.5, 1)
  exponent -= 1;                     // magnitude in [2^exponent, 2^(exponent+1))
  double m = std::nearbyint(std::ldexp(magnitude, 10 - exponent));  // in [1024, 2048]
  if (m == 2048) {
    m = 1024;
    exponent += 1;
  }
  if (exponent + 15 >= 31) return sign | 0x7c00;  // overflow (and infinity) -> infinity
  return sign | static_cast<uint16_t>(((exponent + 15) << 10) | (static_cast<int>(m) - 1024));
}

float bf16BitsToFloat(uint16_t bits) { return bitCast<float>(static_cast<uint32_t>(bits) << 16); }

// Textbook round to nearest even on the 16 dropped bits; a carry into the exponent is correct
// (it rounds up to the next binade or to infinity).
uint16_t floatToBf16Bits(float value) {
  const uint32_t bits = bitCast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  uint32_t upper = bits >> 16;
  const uint32_t lower = bits & 0xffff;
  if (lower > 0x8000 || (lower == 0x8000 && (upper & 1))) upper += 1;
  return static_cast<uint16_t>(upper);
}

float loadFloat(DataType dtype, const Bytes& data, size_t index) {
  switch (dtype) {
    case DataType::kFloat32: {
      float v;
      std::memcpy(&v, data.data() + index * 4, 4);
      return v;
    }
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      uint16_t bits;
      std::memcpy(&bits, data.data() + index * 2, 2);
      if (dtype == DataType::kBFloat16) return bf16BitsToFloat(bits);
      // halfBitsToFloat tabulated once: the reference reads tens of millions of elements.
      static const std::vector<float> table = [] {
        std::vector<float> t(0x10000);
        for (uint32_t b = 0; b < 0x10000; ++b) t[b] = halfBitsToFloat(static_cast<uint16_t>(b));
        return t;
      }();
      return table[bits];
    }
    default: XCCL_CHECK(false, "reference: unsupported dtype ", dataTypeName(dtype));
  }
  return 0;
}

void storeFloat(DataType dtype, Bytes& data, size_t index, float value) {
  switch (dtype) {
    case DataType::kFloat32: std::memcpy(data.data() + index * 4, &value, 4); return;
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      const uint16_t bits =
          dtype == DataType::kFloat16 ? floatToHalfBits(value) : floatToBf16Bits(value);
      std::memcpy(data.data() + index * 2, &bits, 2);
      return;
    }
    default: XCCL_CHECK(false, "reference: unsupported dtype ", dataTypeName(dtype));
  }
}

Bytes randomElements(DataType dtype, size_t count, uint64_t seed) {
  Bytes data(count * elementSize(dtype));
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < count; ++i) {
    const uint64_t r = rng();
    float v;
    if (r % 61 == 0) {
      v = (r & 64) ? -0.0f : 0.0f;
    } else {
      // Multiples of 2^-12 in [-4, 4): exact in fp32, mostly rounded in fp16/bf16.
      v = static_cast<float>(static_cast<int64_t>((r >> 8) % 32768) - 16384) / 4096.0f;
    }
    storeFloat(dtype, data, i, v);
  }
  return data;
}

Bytes referenceReduce(DataType dtype, ReduceOp op, float preMul, const std::vector<Bytes>& inputs,
                      size_t offset, size_t count) {
  XCCL_CHECK(!inputs.empty(), "reference: no inputs");
  const float factor = op == ReduceOp::kPreMulSum ? preMul : 1.0f;
  const float divisor = op == ReduceOp::kAvg ? static_cast<float>(inputs.size()) : 1.0f;
  Bytes out(count * elementSize(dtype));
  for (size_t i = 0; i < count; ++i) {
    float acc = 0;
    for (size_t p = 0; p < inputs.size(); ++p) {
      const float x = loadFloat(dtype, inputs[p], offset + i);
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
        case ReduceOp::kPreMulSum: {
          const float scaled = x * factor;  // its own statement: never fused with the add
          acc = p == 0 ? scaled : acc + scaled;
          break;
        }
        case ReduceOp::kMin: acc = (p == 0 || x < acc || std::isnan(x)) ? x : acc; break;
        case ReduceOp::kMax: acc = (p == 0 || x > acc || std::isnan(x)) ? x : acc; break;
        default: XCCL_CHECK(false, "reference: unsupported op ", reduceOpName(op));
      }
    }
    storeFloat(dtype, out, i, divisor == 1.0f ? acc : acc / divisor);
  }
  return out;
}

std::string firstMismatch(DataType dtype, const Bytes& expected, const Bytes& actual) {
  if (expected.size() != actual.size()) {
    return "size " + std::to_string(actual.size()) + " != expected " +
           std::to_string(expected.size());
  }
  const size_t size = elementSize(dtype);
  for (size_t i = 0; i * size < expected.size(); ++i) {
    if (std::memcmp(expected.data() + i * size, actual.data() + i * size, size) != 0) {
      std::ostringstream text;
      text << "element " << i << " of " << expected.size() / size << ": got "
           << loadFloat(dtype, actual, i) << ", expected " << loadFloat(dtype, expected, i);
      return text.str();
    }
  }
  return "";
}

}  // namespace xccl::testing
