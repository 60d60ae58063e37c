// The x86 vector kernels behind reduce.h (reduce_avx2.cc, reduce_avx512.cc), built only on x86
// and called only after the CPU was checked. Each returns false, touching nothing, for a
// (type, op) it has no kernel for; the caller then runs the portable loop.
#pragma once

#include <cstddef>

#include "common/types.h"

namespace xccl::algo::simd {

bool reduceIntoAvx2(DataType type, ReduceOp op, void* dst, const void* src, size_t count);
bool reduceManyAvx2(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                    size_t count);
bool reduceIntoAvx512(DataType type, ReduceOp op, void* dst, const void* src, size_t count);
bool reduceManyAvx512(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                      size_t count);

}  // namespace xccl::algo::simd
