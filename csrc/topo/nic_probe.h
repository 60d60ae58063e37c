// Network interfaces: RDMA ports from /sys/class/infiniband (InfiniBand, RoCE, EFA) and netdevs
// from /sys/class/net, placed on the PCIe tree and NUMA nodes like GPUs.
#pragma once

#include <cstdint>
#include <string>

#include "topo/sysfs.h"
#include "topo/topology.h"

namespace xccl::topo {

// Fills topology.nics: one entry per RDMA port, then one per netdev that no RDMA port already
// covers. Left out: loopback, virtual netdevs that are administratively down, and veth pairs
// (one per container; never a path to another host).
void probeNics(const Sysfs& sysfs, const DiscoverOptions& options, Topology& topology);

// "200 Gb/sec (4X HDR)" -> 200000 Mb/s; -1 when unparsable.
int64_t parseRdmaRateMbps(const std::string& rate);

}  // namespace xccl::topo
