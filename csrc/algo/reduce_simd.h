// The x86 vector kernels behind reduce.h (reduce_avx2.cc, reduce_avx512.cc), built only on x86
// and called only after the CPU was checked. Each returns false, touching nothing, for a
// (type, op) it has no kernel for; the caller then runs the portable loop.
#pragma once

#include <cstddef>

#include "common/types.h"

namespace xccl::algo::simd {

// The same two kernels per instruction set, one namespace each: reduce_simd_lanes.inc defines
// them, included by reduce_avx2.cc and reduce_avx512.cc.
namespace avx2 {
bool reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count);
bool reduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count);
}  // namespace avx2

namespace avx512 {
bool reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count);
bool reduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count);
}  // namespace avx512

}  // namespace xccl::algo::simd
