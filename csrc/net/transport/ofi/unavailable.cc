// The libfabric engine in a build without libfabric (XCCL_WITH_OFI off or libfabric-dev
// missing): it is never available and says why.
#include "common/error.h"
#include "net/transport/ofi/transport.h"

namespace xccl::net::ofi {
namespace {
constexpr const char* kWhy =
    "this build of xccl has no libfabric (rebuild with libfabric-dev installed and "
    "XCCL_WITH_OFI=AUTO or ON)";
}

bool available(std::string* why, bool, bool* keyRefused) {
  if (why != nullptr) *why = kWhy;
  if (keyRefused != nullptr) *keyRefused = false;
  return false;
}

std::string describeChoice(const std::string&) { return kWhy; }

std::unique_ptr<Transport> createTransport(Store&, int, int, const NetOptions&) {
  XCCL_THROW(ErrorKind::kInvalidArgument, kWhy);
}

}  // namespace xccl::net::ofi
