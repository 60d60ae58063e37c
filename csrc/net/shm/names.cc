#include "net/shm/names.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>

#include "net/bootstrap.h"
#include "net/incarnation.h"
#include "net/shm/segment.h"

namespace xccl::net::shm {

std::string newFileName(const char* kind, const Store& store) {
  const std::string tag = incarnationTagOf(store);
  char text[96];
  std::snprintf(text, sizeof(text), "%s%s%d-%.16s%s%016" PRIx64, kNamePrefix, kind,
                static_cast<int>(::getpid()), tag.c_str(), tag.empty() ? "" : "-", randomToken());
  return text;
}

}  // namespace xccl::net::shm
