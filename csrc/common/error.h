// Typed errors for every layer below the backend.
//
// Internal code throws xccl::Error with a kind and file:line; the backend converts a kind to the
// matching Python exception exactly once, in backend/core/torch_error.h (kInvalidArgument ->
// ValueError, everything else -> DistBackendError). Nothing in xccl calls exit() or abort().
#pragma once

#include <cerrno>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace xccl {

enum class ErrorKind {
  kInternal,         // a broken invariant inside xccl
  kInvalidArgument,  // the caller passed something wrong; nothing was sent
  kTimeout,          // a bounded wait ran out
  kPeerFailure,      // a peer closed its connection, died, or sent something we cannot accept
  kSystem,           // an OS call failed
  kAborted,          // the communicator was aborted (by the user or after an earlier failure)
};

const char* errorKindName(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {

template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

[[noreturn]] void throwError(ErrorKind kind, const char* file, int line, const std::string& msg);
[[noreturn]] void throwSystemError(const char* file, int line, const std::string& what, int err);

}  // namespace detail

// Human-readable text for errno values, thread-safe.
std::string errnoText(int err);

}  // namespace xccl

#define XCCL_THROW(kind, ...) \
  ::xccl::detail::throwError((kind), __FILE__, __LINE__, ::xccl::detail::concat(__VA_ARGS__))

// Internal invariant: a failure is a bug in xccl.
#define XCCL_CHECK(cond, ...)                                                               \
  do {                                                                                      \
    if (!(cond))                                                                            \
      XCCL_THROW(::xccl::ErrorKind::kInternal, "check failed: " #cond ": ", ##__VA_ARGS__); \
  } while (0)

// Argument validation: a failure is the caller's mistake and becomes ValueError.
#define XCCL_CHECK_ARG(cond, ...)                                                \
  do {                                                                           \
    if (!(cond)) XCCL_THROW(::xccl::ErrorKind::kInvalidArgument, ##__VA_ARGS__); \
  } while (0)

// Runs a system call expression, retrying while it fails with EINTR; throws kSystem on any other
// failure (a negative result). Evaluates to the call's result.
#define XCCL_SYSCHECK(call, what)                                                              \
  ([&]() {                                                                                     \
    for (;;) {                                                                                 \
      auto xccl_rc_ = (call);                                                                  \
      if (xccl_rc_ >= 0) return xccl_rc_;                                                      \
      if (errno != EINTR) ::xccl::detail::throwSystemError(__FILE__, __LINE__, (what), errno); \
    }                                                                                          \
  }())
