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
