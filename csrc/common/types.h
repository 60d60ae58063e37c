// Element types and reduction operators shared by algorithms, kernels and the backend.
// Plain enums: no torch types below csrc/backend.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xccl {

enum class DataType : uint8_t {
  kFloat32,
  kFloat64,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt16,
  kInt32,
  kInt64,
  kBool,
};

enum class ReduceOp : uint8_t {
  kSum,
  kAvg,
  kPreMulSum,  // sum of (input * factor); the factor is applied by the caller-facing layer
  kProduct,
  kMin,
  kMax,
  kBand,
  kBor,
  kBxor,
};

constexpr size_t elementSize(DataType type) {
  switch (type) {
    case DataType::kFloat64:
    case DataType::kInt64: return 8;
    case DataType::kFloat32:
    case DataType::kInt32: return 4;
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kInt16: return 2;
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kBool: return 1;
  }
  return 0;
}

constexpr bool isFloating(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat64 ||
         type == DataType::kFloat16 || type == DataType::kBFloat16;
}

const char* dataTypeName(DataType type);
const char* reduceOpName(ReduceOp op);

// Whether `op` is defined for `type` (bitwise ops need integers or bool; AVG and PREMUL_SUM
// floating point; AVG works on floats and on integers, where it truncates like integer division).
bool reduceOpSupported(ReduceOp op, DataType type);

}  // namespace xccl
