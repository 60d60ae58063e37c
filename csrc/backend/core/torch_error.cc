#include "backend/core/torch_error.h"

#include <c10/util/Exception.h>

namespace xccl::backend {

ErrorKind errorKindOf(const std::exception& e) {
  auto* error = dynamic_cast<const Error*>(&e);
  return error != nullptr ? error->kind() : ErrorKind::kInternal;
}

std::exception_ptr torchError(ErrorKind kind, const std::string& message) {
  const c10::SourceLocation here{__func__, __FILE__, static_cast<uint32_t>(__LINE__)};
  if (kind == ErrorKind::kInvalidArgument) {
    return std::make_exception_ptr(c10::ValueError(here, message));
  }
  return std::make_exception_ptr(c10::DistBackendError(here, message));
}

void throwTorchError(ErrorKind kind, const std::string& message) {
  std::rethrow_exception(torchError(kind, message));
}

}  // namespace xccl::backend
