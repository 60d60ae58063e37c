// Host CPUs and NUMA nodes from sysfs and /proc/cpuinfo.
#pragma once

#include "topo/sysfs.h"
#include "topo/topology.h"

namespace xccl::topo {

// Fills cpus, numaNodes, cpuModel and virtualMachine. A kernel without NUMA support shows no
// node folders; the machine is then described as one node holding every CPU, which is what
// every consumer would assume anyway.
void probeCpus(const Sysfs& sysfs, Topology& topology);

// Where a device with `numaNode` -1 but a known local CPU list belongs: the one node whose CPUs
// contain all of them, when that node is not the whole machine; else -1.
int numaNodeFromCpus(const Topology& topology, const std::vector<int>& cpus);

}  // namespace xccl::topo
