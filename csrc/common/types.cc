#include "common/types.h"

#include <cstdio>

namespace xccl {
namespace {

// Bits 0-7: the kind; 8-15: dtype + 1; 16-23: reduce op + 1 (0: not part of the signature).
constexpr uint32_t kKindBits = 0xff;

const char* kindName(uint32_t kind) {
  switch (static_cast<CollectiveKind>(kind)) {
    case CollectiveKind::kNone: return "point-to-point";
    case CollectiveKind::kAllReduce: return "allreduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kReduce: return "reduce";
    case CollectiveKind::kAllGather: return "allgather";
    case CollectiveKind::kGather: return "gather";
    case CollectiveKind::kScatter: return "scatter";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllToAll: return "alltoall";
    case CollectiveKind::kBarrier: return "barrier";
  }
  return nullptr;
}

}  // namespace

uint32_t opSignature(CollectiveKind kind) { return static_cast<uint32_t>(kind); }

uint32_t opSignature(CollectiveKind kind, DataType type, ReduceOp op) {
  return static_cast<uint32_t>(kind) | (static_cast<uint32_t>(type) + 1) << 8 |
         (static_cast<uint32_t>(op) + 1) << 16;
}

std::string describeOpSignature(uint32_t signature) {
  const char* kind = kindName(signature & kKindBits);
  const uint32_t type = (signature >> 8) & 0xff, op = (signature >> 16) & 0xff;
  const bool known = kind != nullptr && type <= static_cast<uint32_t>(DataType::kBool) + 1 &&
                     op <= static_cast<uint32_t>(ReduceOp::kBxor) + 1 && (signature >> 24) == 0;
  if (!known) {
    char text[40];
    std::snprintf(text, sizeof(text), "unknown collective 0x%08x", signature);
    return text;
  }
  std::string out = kind;
  if (type != 0) out += std::string(" ") + dataTypeName(static_cast<DataType>(type - 1));
  if (op != 0) out += std::string(" ") + reduceOpName(static_cast<ReduceOp>(op - 1));
  return out;
}

const char* dataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32: return "float32";
    case DataType::kFloat64: return "float64";
    case DataType::kFloat16: return "float16";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kInt8: return "int8";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kBool: return "bool";
  }
  return "?";
}

const char* reduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "SUM";
    case ReduceOp::kAvg: return "AVG";
    case ReduceOp::kPreMulSum: return "PREMUL_SUM";
    case ReduceOp::kProduct: return "PRODUCT";
    case ReduceOp::kMin: return "MIN";
    case ReduceOp::kMax: return "MAX";
    case ReduceOp::kBand: return "BAND";
    case ReduceOp::kBor: return "BOR";
    case ReduceOp::kBxor: return "BXOR";
  }
  return "?";
}

bool reduceOpSupported(ReduceOp op, DataType type) {
  switch (op) {
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor: return !isFloating(type);
    case ReduceOp::kAvg: return type != DataType::kBool;
    case ReduceOp::kPreMulSum: return isFloating(type);
    default: return true;
  }
}

}  // namespace xccl
