// CPU reference for the GPU collective kernels: element conversions written independently of the
// device code (checked against the compiler's _Float16 in test_reference.cc) and reductions in
// the kernels' exact arithmetic: fp32 accumulation in rank order 0..W-1, one rounding to the
// element type at the end, NaN-propagating min/max. The GPU tests compare bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/types.h"

namespace xccl::testing {

using Bytes = std::vector<uint8_t>;

float halfBitsToFloat(uint16_t bits);
uint16_t floatToHalfBits(float value);  // round to nearest even, overflow to infinity
float bf16BitsToFloat(uint16_t bits);
uint16_t floatToBf16Bits(float value);  // round to nearest even

// Element i of a host buffer in the kernels' dtypes (kFloat32, kFloat16, kBFloat16).
float loadFloat(DataType dtype, const Bytes& data, size_t index);
void storeFloat(DataType dtype, Bytes& data, size_t index, float value);

// `count` elements of `dtype`, deterministic in `seed`: values in [-4, 4) on a grid that
// makes exact ties and cancellations likely, plus a few exact zeros and negative zeros.
Bytes randomElements(DataType dtype, size_t count, uint64_t seed);

// out[i] = op over p = 0..W-1 of inputs[p][offset + i], for i < count, the way the kernels define
// it: SUM/AVG/PREMUL_SUM accumulate x * preMul (factor 1 unless PREMUL_SUM) in fp32 and divide by W
// for AVG; MIN/MAX keep NaN.
Bytes referenceReduce(DataType dtype, ReduceOp op, float preMul, const std::vector<Bytes>& inputs,
                      size_t offset, size_t count);

// Empty when `actual` equals `expected` bit for bit, else a description of the first mismatch.
std::string firstMismatch(DataType dtype, const Bytes& expected, const Bytes& actual);

}  // namespace xccl::testing
