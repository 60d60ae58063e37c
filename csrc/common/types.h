// Element types and reduction operators shared by algorithms, kernels and the backend.
// Plain enums: no torch types below csrc/backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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
  return type == DataType::kFloat32 || type == DataType::kFloat64 || type == DataType::kFloat16 ||
         type == DataType::kBFloat16;
}

// Which collective a message belongs to. It travels beside the collective's sequence number
// (net::MessageTag::op), so ranks that called different collectives at the same sequence number,
// or the same reduction with another dtype or reduce op, get an error naming both instead of a
// silently mis-combined result.
enum class CollectiveKind : uint8_t {
  kNone,  // point-to-point traffic, tests
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kGather,
  kScatter,
  kReduceScatter,
  kAllToAll,
  kBarrier,
};

// Packs (kind, dtype, reduce op) into the 32-bit signature carried by messages; the data-moving
// collectives leave dtype and op out (they move bytes). 0 is the signature of kNone.
uint32_t opSignature(CollectiveKind kind);
uint32_t opSignature(CollectiveKind kind, DataType type, ReduceOp op);
// "allreduce float32 SUM", "allgather"; "unknown collective 0x..." for a foreign value.
std::string describeOpSignature(uint32_t signature);

const char* dataTypeName(DataType type);
const char* reduceOpName(ReduceOp op);

// Whether `op` is defined for `type` (bitwise ops need integers or bool; AVG and PREMUL_SUM
// floating point; AVG works on floats and on integers, where it truncates like integer division).
bool reduceOpSupported(ReduceOp op, DataType type);

}  // namespace xccl
