#include "net/regions/shm/names.h"

#include <unistd.h>

#include <charconv>
#include <cinttypes>
#include <cstdio>

#include "common/error.h"
#include "net/regions/shm/segment.h"
#include "net/rendezvous/bootstrap.h"
#include "net/rendezvous/incarnation.h"

namespace xccl::net::shm {

std::string newFileName(const char* kind, const Store& store) {
  const std::string tag = incarnationTagOf(store);
  char text[96];
  std::snprintf(text, sizeof(text), "%s%s%d-%.16s%s%016" PRIx64, kNamePrefix, kind,
                static_cast<int>(::getpid()), tag.c_str(), tag.empty() ? "" : "-", randomToken());
  return text;
}

bool isFileName(const std::string& name) {
  const std::string prefix = kNamePrefix;
  if (name.size() <= prefix.size() || name.size() > kMaxNameBytes) return false;
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  // No '/': shm_open("/" + name) then names exactly one file directly in /dev/shm.
  return name.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
         std::string::npos;
}

std::string formatPublished(const std::vector<uint64_t>& sizes, const std::string& name) {
  std::string out = "+";
  for (uint64_t size : sizes) out += std::to_string(size) + " ";
  return out + name;
}

std::string formatRefusal(const std::string& why) { return "-" + why; }

Published parsePublished(const std::string& text, const std::vector<SizeBound>& bounds) {
  if (text.empty() || (text[0] != '+' && text[0] != '-'))
    XCCL_THROW(ErrorKind::kInternal, "bad shared-memory record '", text,
               "' in the store (a stale or foreign key?)");
  Published out;
  if (text[0] == '-') {
    out.why = text.substr(1);
    return out;
  }
  size_t at = 1;
  for (const SizeBound& bound : bounds) {
    const size_t space = text.find(' ', at);
    if (space == std::string::npos)
      XCCL_THROW(ErrorKind::kInternal, "shared-memory record '", text, "' in the store has no ",
                 bound.what);
    // Strict decimal: from_chars takes no sign, space or prefix and reports overflow.
    uint64_t value = 0;
    const auto [end, error] = std::from_chars(text.data() + at, text.data() + space, value);
    const bool strict = error == std::errc() && end == text.data() + space && space > at;
    if (!strict || value < bound.min || value > bound.max)
      XCCL_THROW(ErrorKind::kInternal, "shared-memory record '", text,
                 "' in the store: ", bound.what, " must be ", bound.min, " to ", bound.max);
    out.sizes.push_back(value);
    at = space + 1;
  }
  out.name = text.substr(at);
  if (!isFileName(out.name))
    XCCL_THROW(ErrorKind::kInternal, "shared-memory record '", text, "' in the store: '", out.name,
               "' is not the name of an xccl file");
  out.made = true;
  return out;
}

}  // namespace xccl::net::shm
