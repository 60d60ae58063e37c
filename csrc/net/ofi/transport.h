// libfabric transport: reliable-datagram endpoints (FI_EP_RDM) with tagged send/recv and RMA
// writes carrying remote completion data. Declared here; built when libfabric is found
// (XCCL_HAVE_OFI), else available() says why not.
#pragma once

#include <memory>
#include <string>

#include "net/factory.h"
#include "net/store.h"
#include "net/transport.h"

namespace xccl::net::ofi {

// Whether this build has libfabric and fi_getinfo offers a usable provider; `why` receives the
// reason when not. `rdmaOnly`: count only providers with RDMA hardware (verbs, efa).
bool available(std::string* why, bool rdmaOnly = false);

// Collective over the store. XCCL_OFI_PROVIDER picks the provider (unknown: kInvalidArgument
// listing those available).
std::unique_ptr<Transport> createTransport(Store& store, int rank, int size,
                                           const NetOptions& options);

}  // namespace xccl::net::ofi
