// The one conversion from xccl's errors (common/error.h) to the exceptions Python sees, used at
// every boundary of the backend: group creation, a Work's failure, the GPU side's calls.
//   kInvalidArgument     -> ValueError (c10::ValueError): the caller's mistake;
//   every other kind     -> DistBackendError (c10::DistBackendError): a communication failure.
// Anything that is not an xccl::Error (a torch or CUDA failure inside a collective) counts as
// kInternal, hence DistBackendError.
#pragma once

#include <exception>
#include <string>

#include "common/error.h"

namespace xccl::backend {

// The kind of an exception caught at the boundary: an xccl::Error's own, else kInternal.
ErrorKind errorKindOf(const std::exception& e);

// The torch exception for `kind` carrying `message`, for a future's error.
std::exception_ptr torchError(ErrorKind kind, const std::string& message);

// Throws torchError(kind, message).
[[noreturn]] void throwTorchError(ErrorKind kind, const std::string& message);

// Returns body(), converting an xccl::Error it throws (a failed GPU runtime call's XCCL_GPU_CHECK,
// a cuda_ipc workspace's) into the torch exception for its kind: the boundary of a room that
// throws xccl's own errors, as the GPU side's entry points and its Work's are.
template <typename Body>
decltype(auto) torchErrors(Body&& body) {
  try {
    return body();
  } catch (const Error& e) {
    throwTorchError(e.kind(), e.what());
  }
}

}  // namespace xccl::backend
