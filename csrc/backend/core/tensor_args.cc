#include "backend/core/tensor_args.h"

#include <c10/util/Exception.h>

#include "backend/core/compat.h"

namespace xccl::backend {
namespace {

std::optional<DataType> mapScalarType(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return DataType::kFloat32;
    case at::kDouble: return DataType::kFloat64;
    case at::kHalf: return DataType::kFloat16;
    case at::kBFloat16: return DataType::kBFloat16;
    case at::kChar: return DataType::kInt8;
    case at::kByte: return DataType::kUInt8;
    case at::kShort: return DataType::kInt16;
    case at::kInt: return DataType::kInt32;
    case at::kLong: return DataType::kInt64;
    case at::kBool: return DataType::kBool;
    case at::kComplexFloat: return DataType::kFloat32;
    case at::kComplexDouble: return DataType::kFloat64;
    default: return std::nullopt;
  }
}

}  // namespace

void checkTensor(const at::Tensor& tensor, const char* op, const char* what, c10::Device home) {
  TORCH_CHECK_VALUE(tensor.defined(), "xccl ", op, ": ", what, " is undefined");
  if (!home.is_cpu()) {
    TORCH_CHECK_VALUE(tensor.device() == home, "xccl ", op, ": ", what, " is on ", tensor.device(),
                      " but this group's GPU collectives run on cuda:",
                      static_cast<int>(home.index()), " (one device per process group)");
    TORCH_CHECK_VALUE(tensor.layout() == at::kStrided && tensor.is_contiguous(), "xccl ", op, ": ",
                      what, " must be a dense contiguous tensor");
    return;
  }
  TORCH_CHECK_VALUE(tensor.layout() == at::kStrided, "xccl ", op, ": ", what,
                    " must be a dense tensor, got layout ", tensor.layout());
  TORCH_CHECK_VALUE(tensor.device().is_cpu(), "xccl ", op, ": ", what, " is on ", tensor.device(),
                    "; xccl moves CPU and CUDA tensors (on CUDA, every tensor of a call on the "
                    "group's device)");
  TORCH_CHECK_VALUE(tensor.is_contiguous(), "xccl ", op, ": ", what, " must be contiguous");
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* op, c10::Device home) {
  TORCH_CHECK_VALUE(tensors.size() == 1, "xccl ", op, " takes exactly one tensor per process, got ",
                    tensors.size());
  checkTensor(tensors[0], op, "tensor", home);
  return tensors[0];
}

void checkSameShapeAndType(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK_VALUE(a.scalar_type() == b.scalar_type(), "xccl ", op, ": dtype mismatch (",
                    a.scalar_type(), " vs ", b.scalar_type(), ")");
  TORCH_CHECK_VALUE(a.numel() == b.numel(), "xccl ", op, ": size mismatch (", a.numel(), " vs ",
                    b.numel(), " elements)");
}

void checkSameDtype(const at::Tensor& input, const at::Tensor& output, const char* op) {
  TORCH_CHECK_VALUE(input.scalar_type() == output.scalar_type(), "xccl ", op,
                    ": input and output dtypes differ");
}

void checkSameDtypes(const std::vector<at::Tensor>& tensors, const char* op) {
  for (const auto& t : tensors) {
    TORCH_CHECK_VALUE(t.scalar_type() == tensors[0].scalar_type(), "xccl ", op,
                      ": all tensors must have the same dtype");
  }
}

void checkFlatPair(const at::Tensor& whole, const char* wholeName, const at::Tensor& part,
                   const char* partName, int size, const char* op) {
  checkSameDtype(whole, part, op);
  TORCH_CHECK_VALUE(whole.numel() == part.numel() * size, "xccl ", op, ": ", wholeName, " has ",
                    whole.numel(), " elements, expected ", partName, " size x ", size, " = ",
                    part.numel() * size);
}

void checkRoot(int64_t root, int size, const char* op) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, "xccl ", op, ": root rank ", root,
                    " is outside the group of size ", size);
}

void checkPeer(int peer, int rank, int size, const char* op) {
  TORCH_CHECK_VALUE(peer >= 0 && peer < size, "xccl ", op, ": rank ", peer,
                    " is outside the group of size ", size);
  TORCH_CHECK_VALUE(peer != rank, "xccl ", op, ": rank ", rank, " cannot ", op, " itself");
}

std::vector<size_t> alltoallSplitBytes(const at::Tensor& t, const std::vector<int64_t>& splits,
                                       int size, const char* what) {
  TORCH_CHECK_VALUE(t.dim() >= 1 || t.numel() == 0, "xccl alltoall: ", what,
                    " must have a dimension to split");
  const int64_t rows = t.dim() >= 1 ? t.size(0) : 0;
  const size_t rowBytes = rows > 0 ? byteSize(t) / rows : 0;
  std::vector<size_t> bytes;
  if (splits.empty()) {
    TORCH_CHECK_VALUE(rows % size == 0, "xccl alltoall: ", what, " dim 0 (", rows,
                      ") is not divisible by the group size ", size);
    bytes.assign(size, static_cast<size_t>(rows / size) * rowBytes);
    return bytes;
  }
  TORCH_CHECK_VALUE(splits.size() == static_cast<size_t>(size), "xccl alltoall: ", what,
                    " split sizes have ", splits.size(), " entries for a group of ", size);
  int64_t sum = 0;
  for (int64_t s : splits) {
    TORCH_CHECK_VALUE(s >= 0, "xccl alltoall: negative split size ", s);
    sum += s;
    bytes.push_back(static_cast<size_t>(s) * rowBytes);
  }
  TORCH_CHECK_VALUE(sum == rows, "xccl alltoall: ", what, " split sizes add up to ", sum,
                    " but dim 0 is ", rows);
  return bytes;
}

ReduceOp reduceOpOf(const c10d::ReduceOp& op, const char* opName) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceOp::kSum;
    case c10d::ReduceOp::AVG: return ReduceOp::kAvg;
    case c10d::ReduceOp::PRODUCT: return ReduceOp::kProduct;
    case c10d::ReduceOp::MIN: return ReduceOp::kMin;
    case c10d::ReduceOp::MAX: return ReduceOp::kMax;
    case c10d::ReduceOp::BAND: return ReduceOp::kBand;
    case c10d::ReduceOp::BOR: return ReduceOp::kBor;
    case c10d::ReduceOp::BXOR: return ReduceOp::kBxor;
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK_VALUE(dynamic_cast<compat::PreMulSumSupplement*>(op.supplement_.get()) != nullptr,
                        "xccl ", opName, ": PREMUL_SUM without a factor");
      return ReduceOp::kPreMulSum;
    default: break;
  }
  TORCH_CHECK_VALUE(false, "xccl ", opName, ": unsupported reduce op ", static_cast<int>(op.op_));
}

ReduceSpec toReduceSpec(const c10d::ReduceOp& op, const char* opName) {
  const ReduceOp kind = reduceOpOf(op, opName);
  if (kind != ReduceOp::kPreMulSum) return {kind, std::nullopt};
  auto* supplement = dynamic_cast<compat::PreMulSumSupplement*>(op.supplement_.get());
  const double factor = supplement->tensor_factor.defined()
                            ? supplement->tensor_factor.to(at::kCPU).item<double>()
                            : supplement->double_factor;
  return {ReduceOp::kPreMulSum, factor};
}

GpuReduce toGpuReduce(const c10d::ReduceOp& op, const char* opName, int device) {
  if (op.op_ == c10d::ReduceOp::PREMUL_SUM) {
    auto* supplement = dynamic_cast<compat::PreMulSumSupplement*>(op.supplement_.get());
    if (supplement != nullptr && supplement->tensor_factor.defined() &&
        supplement->tensor_factor.is_cuda()) {
      const at::Tensor& factor = supplement->tensor_factor;
      TORCH_CHECK_VALUE(factor.numel() == 1, "xccl ", opName,
                        ": PREMUL_SUM's factor must hold "
                        "one element, got ",
                        factor.numel());
      GpuReduce reduce{{ReduceOp::kPreMulSum, std::nullopt}, {}};
      // On the caller's stream, which the comm stream waits on: capturable, no host sync.
      reduce.deviceFactor =
          factor.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)), at::kFloat)
              .reshape({});
      return reduce;
    }
  }
  // A factor that is a number or a CPU tensor: read on the host (no device sync).
  return GpuReduce{toReduceSpec(op, opName), {}};
}

ElementView reduceView(const at::Tensor& tensor, const ReduceSpec& spec, const char* op) {
  auto type = mapScalarType(tensor.scalar_type());
  TORCH_CHECK_VALUE(type.has_value(), "xccl ", op, ": cannot reduce dtype ", tensor.scalar_type());
  const bool complex = tensor.is_complex();
  TORCH_CHECK_VALUE(!complex || spec.op == ReduceOp::kSum || spec.op == ReduceOp::kAvg ||
                        spec.op == ReduceOp::kPreMulSum,
                    "xccl ", op, ": ", reduceOpName(spec.op),
                    " is not defined for complex tensors");
  TORCH_CHECK_VALUE(reduceOpSupported(spec.op, *type), "xccl ", op, ": ", reduceOpName(spec.op),
                    " is not defined for dtype ", tensor.scalar_type());
  return {*type, static_cast<size_t>(tensor.numel()) * (complex ? 2 : 1)};
}

void applyFactor(at::Tensor& tensor, const ReduceSpec& spec) {
  if (spec.factor.has_value()) tensor.mul_(*spec.factor);
}

size_t byteSize(const at::Tensor& tensor) {
  return static_cast<size_t>(tensor.numel()) * tensor.element_size();
}

}  // namespace xccl::backend
