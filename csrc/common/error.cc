#include "common/error.h"

#include <cstring>

namespace xccl {

const char* errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInternal: return "internal error";
    case ErrorKind::kInvalidArgument: return "invalid argument";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kPeerFailure: return "peer failure";
    case ErrorKind::kSystem: return "system error";
    case ErrorKind::kAborted: return "aborted";
  }
  return "error";
}

std::string errnoText(int err) {
  char buf[256];
  // GNU strerror_r may return a static string instead of filling buf.
  const char* text = strerror_r(err, buf, sizeof(buf));
  return text;
}

namespace detail {

void throwError(ErrorKind kind, const char* file, int line, const std::string& msg) {
  const char* base = std::strrchr(file, '/');
  throw Error(kind, concat("xccl: ", msg, " [", base ? base + 1 : file, ":", line, "]"));
}

void throwSystemError(const char* file, int line, const std::string& what, int err) {
  throwError(ErrorKind::kSystem, file, line,
             concat(what, ": ", errnoText(err), " (errno ", err, ")"));
}

}  // namespace detail
}  // namespace xccl
