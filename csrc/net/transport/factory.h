// Which transport carries a group's messages to each peer: shared memory to ranks on this host,
// the network engine (XCCL_NET: libfabric or xccl's own TCP) to ranks on other hosts. The one
// place that decides; every algorithm sees the result as one Transport (net/transport/transport.h).
#pragma once

#include <memory>
#include <string>

#include "net/rendezvous/group_layout.h"
#include "net/rendezvous/store.h"
#include "net/transport/net_options.h"
#include "net/transport/transport.h"

namespace xccl::net {

// XCCL_NET: "tcp" (xccl's own), "ofi" (libfabric; an error naming why when this build or this
// machine has none), "auto" (ofi where an RDMA provider is present, else tcp).
enum class Engine { kTcp, kOfi };
Engine chooseEngine(const std::string& setting);
const char* engineName(Engine engine);

// Collective over the store: every rank of the group calls it, with the group's layout (its
// census of hosts, taken before). The network engine to every peer, or per peer shared memory
// for ranks on this host and the network for the rest.
std::unique_ptr<Transport> createTransport(Store& store, const GroupLayout& layout,
                                           const NetOptions& options);

}  // namespace xccl::net
