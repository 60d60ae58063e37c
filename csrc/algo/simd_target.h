// Compiles the functions between XCCL_SIMD_TARGET_BEGIN("isa,...") and XCCL_SIMD_TARGET_END() for
// those instruction sets and leaves the rest of the file baseline x86-64. Such a function may run
// only after a run-time check (reduce.h's bestIsa()), so it must never be inline in a header that
// other files include: their callers would inherit the instructions without the check.
#pragma once

#define XCCL_SIMD_PRAGMA(...) _Pragma(#__VA_ARGS__)

#if defined(__clang__)
#define XCCL_SIMD_TARGET_BEGIN(isa) \
  XCCL_SIMD_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define XCCL_SIMD_TARGET_END() XCCL_SIMD_PRAGMA(clang attribute pop)
#else
#define XCCL_SIMD_TARGET_BEGIN(isa) \
  XCCL_SIMD_PRAGMA(GCC push_options) XCCL_SIMD_PRAGMA(GCC target(isa))
#define XCCL_SIMD_TARGET_END() XCCL_SIMD_PRAGMA(GCC pop_options)
#endif
