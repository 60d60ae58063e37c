// The CPU side's all_reduce of a sparse COO tensor (cpu_side.h): what dist.all_reduce does with
// a sparse tensor and what DDP sends for the gradient of nn.Embedding(sparse=True).
//
// Ranks hold different index sets, so there is nothing to add element-wise on the wire: every
// rank gathers every rank's (coalesced) indices and values and coalesces their concatenation,
// which sums the values of equal indices, the way gloo does it. Three gathers under one call
// (sequence numbers seq, seq+1, seq+2): a fixed header per rank (its nnz and the tensor's
// layout, so that ranks disagreeing on it all fail alike before anything else moves), then the
// indices, then the values, each rank's part sized from the headers. The result replaces the
// tensor's indices and values in place, and the tensor is the Work's result, which is what DDP's
// reducer copies into the gradient. Bytes per rank: O(total nnz over ranks), like gloo.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <c10/util/accumulate.h>

#include <array>
#include <string>
#include <vector>

#include "algo/runner.h"
#include "backend/core/group_core.h"
#include "backend/core/tensor_args.h"
#include "backend/cpu/cpu_side.h"

namespace xccl::backend {
namespace {

// What each rank tells the others first. Every field but nnz must agree across ranks.
enum Field { kNnz, kSparseDim, kDenseDim, kDtype, kShape, kFields };
using Header = std::array<int64_t, kFields>;

// A fingerprint of the tensor's full shape (sizes of sparse and dense dimensions).
int64_t shapeFingerprint(at::IntArrayRef sizes) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the dimension count and each size
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(sizes.size());
  for (int64_t s : sizes) mix(static_cast<uint64_t>(s));
  return static_cast<int64_t>(h);
}

// Every rank sees every header, so all throw here together or none does.
void checkHeadersAgree(const std::vector<Header>& headers) {
  static const char* names[kFields] = {"nnz", "sparse dimensions", "dense dimensions", "dtype",
                                       "shape"};
  for (size_t r = 1; r < headers.size(); ++r) {
    for (int f = kSparseDim; f < kFields; ++f) {
      XCCL_CHECK_ARG(headers[r][f] == headers[0][f],
                     "allreduce_sparse: the ranks' sparse tensors differ in their ", names[f],
                     " (rank 0 vs rank ", r, ")");
    }
  }
}

}  // namespace

Side::WorkPtr CpuSide::allreduceSparse(std::vector<at::Tensor>& tensors,
                                       const c10d::AllreduceOptions& opts) {
  const char* name = "allreduce_sparse";
  TORCH_CHECK_VALUE(tensors.size() == 1, "xccl ", name,
                    " takes exactly one tensor per process, got ", tensors.size());
  at::Tensor tensor = tensors[0];
  TORCH_CHECK_VALUE(tensor.defined() && tensor.layout() == at::kSparse, "xccl ", name,
                    ": expected a sparse COO tensor");
  // Refused rather than moved through host copies: no GPU-side route exists for it yet.
  TORCH_CHECK_VALUE(tensor.device().is_cpu(), "xccl ", name, ": the tensor is on ", tensor.device(),
                    "; xccl reduces sparse tensors on the CPU only (move it with .cpu())");
  TORCH_CHECK_VALUE(opts.reduceOp == c10d::ReduceOp::SUM, "xccl ", name,
                    ": only SUM is supported for sparse tensors (as with gloo)");
  TORCH_CHECK_VALUE(tensor.scalar_type() != at::kBool, "xccl ", name,
                    ": bool values cannot be summed");
  return group_.enqueue(
      c10d::OpType::ALLREDUCE, name, {tensor}, group_.sequencer().effectiveTimeout(opts.timeout),
      compat::isAsync(opts),
      [tensor, size = size_](const algo::Runner& ctx) {
        at::Tensor local = tensor.coalesce();  // one entry per index: fewer bytes to move
        // Indices as nnz x sparseDim rows, so that the ranks' parts concatenate along nnz.
        at::Tensor indices = local._indices().t().contiguous();
        at::Tensor values = local._values().contiguous();
        const Header mine{local._nnz(), local.sparse_dim(), local.dense_dim(),
                          static_cast<int64_t>(local.scalar_type()),
                          shapeFingerprint(local.sizes())};
        std::vector<Header> headers(size);
        algo::allGather(algo::subCollective(ctx, 0), mine.data(), headers.data(),
                        std::vector<size_t>(size, sizeof(Header)));
        checkHeadersAgree(headers);
        int64_t total = 0;
        std::vector<size_t> indexBytes, valueBytes;
        const size_t indexRow = static_cast<size_t>(local.sparse_dim()) * sizeof(int64_t);
        // Bytes of one value row (the dense dimensions), also when this rank has none.
        const size_t valueRow =
            static_cast<size_t>(c10::multiply_integers(values.sizes().slice(1))) *
            values.element_size();
        for (const Header& h : headers) {
          total += h[kNnz];
          indexBytes.push_back(static_cast<size_t>(h[kNnz]) * indexRow);
          valueBytes.push_back(static_cast<size_t>(h[kNnz]) * valueRow);
        }
        if (total == 0) return;  // every rank knows: all skip the other two gathers
        std::vector<int64_t> valueShape = values.sizes().vec();
        valueShape[0] = total;
        at::Tensor allIndices = at::empty({total, local.sparse_dim()}, at::kLong);
        at::Tensor allValues = at::empty(valueShape, values.options());
        algo::allGather(algo::subCollective(ctx, 1), indices.data_ptr(), allIndices.data_ptr(),
                        indexBytes);
        algo::allGather(algo::subCollective(ctx, 2), values.data_ptr(), allValues.data_ptr(),
                        valueBytes);
        at::Tensor sum =
            at::sparse_coo_tensor(allIndices.t(), allValues, tensor.sizes()).coalesce();
        tensor.copy_(sum);
      },
      /*seqCount=*/3);
}

}  // namespace xccl::backend
