// This machine's topology, discovered once per process (topo/topology.h; honours XCCL_TOPO_FILE).
#pragma once

#include "topo/topology.h"

namespace xccl::backend {

const topo::Topology& thisMachine();

}  // namespace xccl::backend
