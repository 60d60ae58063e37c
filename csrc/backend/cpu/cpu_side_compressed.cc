// The CPU side's compressed all_reduce (cpu_side.h), the one backend call behind xccl.hooks'
// bf16/fp16 DDP communication hooks: algo/compressed_allreduce.h on the group's transports, as
// an ALLREDUCE with the group's next sequence number (it orders, fails and times out like every
// other collective).
#include <c10/util/Exception.h>

#include "algo/compressed_allreduce.h"
#include "backend/core/group_core.h"
#include "backend/core/tensor_args.h"
#include "backend/cpu/cpu_side.h"

namespace xccl::backend {

Side::WorkPtr CpuSide::compressedAllreduce(const at::Tensor& tensor, at::ScalarType wire,
                                           bool betweenHostsOnly) {
  const char* name = "compressed_allreduce";
  checkTensor(tensor, name, "tensor");
  TORCH_CHECK_VALUE(tensor.scalar_type() == at::kFloat || tensor.scalar_type() == at::kDouble,
                    "xccl ", name, ": the tensor must be float32 or float64, not ",
                    tensor.scalar_type());
  TORCH_CHECK_VALUE(wire == at::kBFloat16 || wire == at::kHalf, "xccl ", name,
                    ": the wire dtype must be bfloat16 or float16, not ", wire);
  const DataType type =
      tensor.scalar_type() == at::kFloat ? DataType::kFloat32 : DataType::kFloat64;
  const DataType wireType = wire == at::kBFloat16 ? DataType::kBFloat16 : DataType::kFloat16;
  const auto where =
      betweenHostsOnly ? algo::Compression::kBetweenHosts : algo::Compression::kEverywhere;
  const size_t count = static_cast<size_t>(tensor.numel());
  return group_.enqueue(c10d::OpType::ALLREDUCE, name, {tensor}, group_.sequencer().timeout(),
                        /*asyncOp=*/true,
                        [tensor, count, type, wireType, where](const algo::Runner& ctx) {
                          algo::compressedAllReduce(ctx, tensor.data_ptr(), count, type, wireType,
                                                    where);
                        });
}

}  // namespace xccl::backend
