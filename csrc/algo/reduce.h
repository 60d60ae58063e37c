// Element-wise reductions on host memory. bf16/fp16 are widened to fp32 for each operation and
// rounded back (round to nearest even), so every rank computing the same sequence of
// operations gets bitwise-identical results.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/types.h"

namespace xccl::algo {

// The element-wise combiner behind `op`: AVG and PREMUL_SUM combine as SUM (the scaling is a
// separate pass, see scale/divide below).
ReduceOp combinerOf(ReduceOp op);

// dst[i] = dst[i] (op) src[i] for i < count. `op` must be a combiner (see combinerOf).
void reduceInto(DataType type, ReduceOp op, void* dst, const void* src, size_t count);

// dst[i] = srcs[0][i] (op) srcs[1][i] (op) ... (op) srcs[n - 1][i], combined left to right in
// source order, so every rank passing the same sources in the same order gets the same bytes.
// bf16/fp16 accumulate in fp32 and round once at the end: more accurate than a chain of
// reduceInto calls (which rounds after every step), and not bitwise equal to it. `dst` may be
// one of the sources, else it must not overlap them. `op` must be a combiner; n >= 1.
void reduceMany(DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count);

// Instruction sets with vector kernels for the hot cases (fp32/fp64 SUM, PRODUCT, MIN, MAX;
// bf16/fp16 the same through fp32); other types and ops always run the portable loops.
enum class Isa : uint8_t { kScalar, kAvx2, kAvx512 };
const char* isaName(Isa isa);
bool isaAvailable(Isa isa);  // the CPU has it and the build has kernels for it
Isa bestIsa();               // what reduceInto/reduceMany above use; detected once

// The same with an explicit instruction set, for tests and benchmarks: the vector kernels give
// bitwise the same results as kScalar (same element-wise operations, no reassociation, the same
// round-to-nearest-even and NaN results). Throws kInvalidArgument when !isaAvailable(isa).
void reduceInto(Isa isa, DataType type, ReduceOp op, void* dst, const void* src, size_t count);
void reduceMany(Isa isa, DataType type, ReduceOp op, void* dst, const void* const* srcs, int n,
                size_t count);

// data[i] *= factor (floating types only): PREMUL_SUM's pre-multiplication.
void scale(DataType type, void* data, size_t count, double factor);

// data[i] /= divisor: AVG's final step; integers truncate toward zero like C++ division.
void divide(DataType type, void* data, size_t count, int64_t divisor);

// IEEE half and bfloat16 conversions (round to nearest even; NaN stays NaN).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);

}  // namespace xccl::algo
