// Helpers shared by the algo tests: element access by DataType, exact reference reductions, and
// assertions on xccl::Error.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "algo/reduce.h"
#include "common/error.h"
#include "common/types.h"

namespace xccl::testing {

// A host buffer of `count` elements of `type`. Values go in and out as double: every value the
// tests store is exactly representable in the type it is stored in, so nothing rounds.
class TypedBuffer {
 public:
  TypedBuffer(DataType type, size_t count)
      : type_(type), count_(count), bytes_(count * elementSize(type)) {}

  DataType type() const { return type_; }
  size_t count() const { return count_; }
  void* data() { return bytes_.data(); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

  void set(size_t i, double v) {
    uint8_t* p = bytes_.data() + i * elementSize(type_);
    switch (type_) {
      case DataType::kFloat32: return store(p, static_cast<float>(v));
      case DataType::kFloat64: return store(p, v);
      case DataType::kFloat16: return store(p, algo::floatToHalf(static_cast<float>(v)));
      case DataType::kBFloat16: return store(p, algo::floatToBfloat16(static_cast<float>(v)));
      case DataType::kInt8: return store(p, static_cast<int8_t>(v));
      case DataType::kUInt8: return store(p, static_cast<uint8_t>(v));
      case DataType::kInt16: return store(p, static_cast<int16_t>(v));
      case DataType::kInt32: return store(p, static_cast<int32_t>(v));
      case DataType::kInt64: return store(p, static_cast<int64_t>(v));
      case DataType::kBool: return store(p, static_cast<uint8_t>(v != 0));
    }
  }

  // bool reads back the raw byte, so a result other than 0/1 shows up as such.
  double get(size_t i) const {
    const uint8_t* p = bytes_.data() + i * elementSize(type_);
    switch (type_) {
      case DataType::kFloat32: return load<float>(p);
      case DataType::kFloat64: return load<double>(p);
      case DataType::kFloat16: return algo::halfToFloat(load<uint16_t>(p));
      case DataType::kBFloat16: return algo::bfloat16ToFloat(load<uint16_t>(p));
      case DataType::kInt8: return load<int8_t>(p);
      case DataType::kUInt8: return load<uint8_t>(p);
      case DataType::kInt16: return load<int16_t>(p);
      case DataType::kInt32: return load<int32_t>(p);
      case DataType::kInt64: return static_cast<double>(load<int64_t>(p));
      case DataType::kBool: return load<uint8_t>(p);
    }
    return 0;
  }

 private:
  template <typename T>
  static void store(uint8_t* p, T v) {
    std::memcpy(p, &v, sizeof(T));
  }
  template <typename T>
  static T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  }

  DataType type_;
  size_t count_;
  std::vector<uint8_t> bytes_;
};

inline bool isBitwise(ReduceOp op) {
  return op == ReduceOp::kBand || op == ReduceOp::kBor || op == ReduceOp::kBxor;
}

// a (op) b computed exactly, for a combiner `op` and operands whose result is representable.
// bool follows NCCL/gloo: SUM and MAX are OR, PRODUCT and MIN are AND.
inline double combineExact(DataType type, ReduceOp op, double a, double b) {
  if (type == DataType::kBool) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMax:
      case ReduceOp::kBor: return (a != 0 || b != 0) ? 1 : 0;
      case ReduceOp::kProduct:
      case ReduceOp::kMin:
      case ReduceOp::kBand: return (a != 0 && b != 0) ? 1 : 0;
      default: return (a != 0) != (b != 0) ? 1 : 0;
    }
  }
  const auto x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
  switch (op) {
    case ReduceOp::kSum: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMin: return std::fmin(a, b);
    case ReduceOp::kMax: return std::fmax(a, b);
    case ReduceOp::kBand: return static_cast<double>(x & y);
    case ReduceOp::kBor: return static_cast<double>(x | y);
    case ReduceOp::kBxor: return static_cast<double>(x ^ y);
    default: break;
  }
  ADD_FAILURE() << reduceOpName(op) << " is not a combiner";
  return 0;
}

// Passes when buffer.get(i) == expected(i) for every i < buffer.count(); otherwise reports the
// first mismatch and how many elements differ (one message, however many there are).
template <typename Expected>
::testing::AssertionResult matches(const TypedBuffer& buffer, Expected expected) {
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < buffer.count(); ++i) {
    if (buffer.get(i) != expected(i)) {
      if (wrong++ == 0) first = i;
    }
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << wrong << " of " << buffer.count() << " " << dataTypeName(buffer.type())
         << " elements differ; first at " << first << ": got " << buffer.get(first) << ", expected "
         << expected(first);
}

// The xccl::Error `f` throws, if any.
template <typename F>
std::optional<Error> errorFrom(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  return std::nullopt;
}

// Runs `f` and expects it to throw xccl::Error of `kind` whose message contains `fragment`.
template <typename F>
::testing::AssertionResult throwsError(ErrorKind kind, F f, const std::string& fragment = "") {
  try {
    f();
  } catch (const Error& e) {
    if (e.kind() != kind) {
      return ::testing::AssertionFailure() << "threw " << errorKindName(e.kind()) << " instead of "
                                           << errorKindName(kind) << ": " << e.what();
    }
    if (std::string(e.what()).find(fragment) == std::string::npos) {
      return ::testing::AssertionFailure() << "message lacks '" << fragment << "': " << e.what();
    }
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "did not throw " << errorKindName(kind);
}

}  // namespace xccl::testing
