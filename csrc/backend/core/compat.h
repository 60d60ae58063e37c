// The one place that knows how torch versions 2.11-2.15 differ. Features are detected from the
// installed headers at configure time (CMakeLists.txt), never by comparing version numbers.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <type_traits>
#include <utility>

#include "backend/torch_features.h"

namespace xccl::backend::compat {

// Renamed PreMulSumSupplement in newer torch; the old name stays as an alias there.
using PreMulSumSupplement = c10d::NCCLPreMulSumSupplement;

// Options structs carry asyncOp (Python's async_op) in newer torch. Without it every
// operation is treated as asynchronous, which is always correct, only slower for small ones.
template <typename T, typename = void>
struct HasAsyncOp : std::false_type {};
template <typename T>
struct HasAsyncOp<T, std::void_t<decltype(std::declval<const T&>().asyncOp)>> : std::true_type {};

template <typename T>
bool isAsync(const T& options) {
  if constexpr (HasAsyncOp<T>::value) {
    return options.asyncOp;
  } else {
    return true;
  }
}

}  // namespace xccl::backend::compat
